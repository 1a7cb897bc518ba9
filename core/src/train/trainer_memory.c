/* What each device holds for training, by role, printed at setup and logged at fit start. */
#include <stdio.h>
#include <string.h>

#include "trainer_internal.h"
#include "trainer_memory.h"

#define STRAT(t) ((const fg_strategy_vtable *)(t)->strategy.vt)

static uint64_t report_total(const fg_memory_report *r)
{
    return r->param_bytes + r->master_bytes + r->grad_bytes + r->optimizer_bytes +
           r->activation_bytes + r->other_bytes;
}

static fg_status read_report(fg_trainer *t, int i, fg_memory_report *r, fg_error *err)
{
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
    return STRAT(t)->memory_report(t->strategy.state, i, r, err);
}

static void print_report(fg_trainer *t, int i, const fg_memory_report *r)
{
    const double mib = 1.0 / (1024.0 * 1024.0);
    fprintf(t->out, "memory (device %d): params %.2f MiB, master %.2f MiB, grads %.2f MiB, "
            "optimizer %.2f MiB, activations %.2f MiB, other %.2f MiB, total %.2f MiB\n",
            r->device >= 0 ? r->device : i, (double)r->param_bytes * mib,
            (double)r->master_bytes * mib, (double)r->grad_bytes * mib,
            (double)r->optimizer_bytes * mib, (double)r->activation_bytes * mib,
            (double)r->other_bytes * mib, (double)report_total(r) * mib);
}

static int has_reports(const fg_trainer *t)
{
    return FG_HAS_FIELD(STRAT(t), fg_strategy_vtable, memory_report) && STRAT(t)->memory_report;
}

fg_status fg_trainer_report_memory(fg_trainer *t, fg_error *err)
{
    if (!has_reports(t)) return FG_OK;
    for (int i = 0; i < t->devices && i < FG_MAX_REPORTED_DEVICES; i++) {
        fg_status st = read_report(t, i, &t->memory[i], err);
        if (st != FG_OK) return st;
        print_report(t, i, &t->memory[i]);
    }
    return FG_OK;
}

uint32_t fg_trainer_memory_metrics(const fg_trainer *t, fg_metric *out, char (*names)[64],
                                   uint32_t capacity)
{
    static const char *roles[] = {"param_bytes", "master_bytes", "grad_bytes",
                                  "optimizer_bytes", "activation_bytes", "total_bytes"};
    uint32_t n = 0;
    for (int i = 0; has_reports(t) && i < t->devices && i < FG_MAX_REPORTED_DEVICES; i++) {
        const fg_memory_report *r = &t->memory[i];
        uint64_t v[] = {r->param_bytes, r->master_bytes, r->grad_bytes, r->optimizer_bytes,
                        r->activation_bytes, report_total(r)};
        for (size_t k = 0; k < sizeof v / sizeof v[0] && n < capacity; k++, n++) {
            if (t->devices == 1) snprintf(names[n], 64, "memory/%s", roles[k]);
            else snprintf(names[n], 64, "memory/dev%d/%s", i, roles[k]);
            out[n].name = names[n];
            out[n].value = (double)v[k];
        }
    }
    return n;
}
