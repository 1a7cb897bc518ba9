/* Weight decay per tensor: a tensor decays when weight_decay_params admits it (all, or
 * matrices: rank >= 2, nanoGPT's rule) and no glob of no_decay matches its name. */
#include "decay_groups.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

/* Nonzero when a comma-separated glob of `list` matches name. */
static int matches_any(const char *list, const char *name)
{
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        size_t n = strcspn(p, ",");
        while (n && p[n - 1] == ' ') n--;
        char glob[FG_OPTIMIZER_GLOBS_MAX];
        if (n && n < sizeof glob) {
            memcpy(glob, p, n);
            glob[n] = '\0';
            if (fnmatch(glob, name, 0) == 0) return 1;
        }
        p += strcspn(p, ",");
    }
    return 0;
}

int fg_decay_applies(const fg_optimizer_config *oc, const fg_tensor_info *t)
{
    if (oc->decay_matrices_only && t->rank < 2) return 0;
    return !matches_any(oc->no_decay, t->name);
}

static int per_tensor(const fg_optimizer_config *oc)
{
    return oc->decay_matrices_only || oc->no_decay[0];
}

static void count_tensor(fg_decay_groups *g, const fg_tensor_info *t, int decay)
{
    g->tensors[decay]++;
    g->elems[decay] += t->numel;
}

/* Appends [lo, hi) with `decay`, merged into the last run when it has the same flag. */
static void add_run(fg_decay_groups *g, size_t lo, size_t hi, int decay)
{
    fg_decay_run *last = g->run_count ? &g->runs[g->run_count - 1] : NULL;
    if (last && last->decay == decay && last->hi == lo) {
        last->hi = hi;
        return;
    }
    g->runs[g->run_count++] = (fg_decay_run){lo, hi, decay};
}

fg_status fg_decay_groups_build(const fg_model *m, const fg_optimizer_config *oc,
                                fg_decay_groups *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    size_t n = fg_model_tensor_count(m);
    if (per_tensor(oc) && n && !(out->runs = calloc(n, sizeof *out->runs)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory grouping parameters for "
                            "weight decay");
    /* a tensor's run reaches the next one's offset: the alignment padding rides along */
    const fg_tensor_info *prev = NULL;
    int prev_decay = 1;
    for (size_t i = 0; i < n; i++) {
        const fg_tensor_info *t = fg_model_tensor(m, i);
        if (t->is_buffer) continue;
        int decay = fg_decay_applies(oc, t);
        count_tensor(out, t, decay);
        if (out->runs && prev) add_run(out, prev->offset, t->offset, prev_decay);
        prev = t;
        prev_decay = decay;
    }
    if (out->runs && prev) add_run(out, prev->offset, fg_model_params_size(m), prev_decay);
    if (out->runs && out->run_count && out->runs[0].lo) out->runs[0].lo = 0;
    return FG_OK;
}

void fg_decay_groups_free(fg_decay_groups *g)
{
    free(g->runs);
    memset(g, 0, sizeof *g);
}

static void report_names(const fg_model *m, const fg_optimizer_config *oc, int decay, FILE *out)
{
    fprintf(out, "weight decay: %s:", decay ? "decayed" : "not decayed");
    size_t n = fg_model_tensor_count(m), shown = 0;
    for (size_t i = 0; i < n; i++) {
        const fg_tensor_info *t = fg_model_tensor(m, i);
        if (t->is_buffer || fg_decay_applies(oc, t) != decay) continue;
        fprintf(out, "%s %s", shown++ ? "," : "", t->name);
    }
    fprintf(out, "%s\n", shown ? "" : " none");
}

void fg_decay_groups_report(const fg_model *m, const fg_optimizer_config *oc, FILE *out)
{
    if (!per_tensor(oc)) return;
    fg_decay_groups g = {0};
    for (size_t i = 0; i < fg_model_tensor_count(m); i++) {
        const fg_tensor_info *t = fg_model_tensor(m, i);
        if (!t->is_buffer) count_tensor(&g, t, fg_decay_applies(oc, t));
    }
    fprintf(out, "weight decay %g: num decayed parameter tensors: %zu, with %zu parameters; "
            "num non-decayed parameter tensors: %zu, with %zu parameters\n", oc->weight_decay,
            g.tensors[1], g.elems[1], g.tensors[0], g.elems[0]);
    report_names(m, oc, 1, out);
    report_names(m, oc, 0, out);
}
