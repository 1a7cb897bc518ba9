/* strategy.model-parallel: where the stages begin. `split = fc2, fc3` names the layers that
 * start stages 2, 3, ...; without it the layers are cut into `stages` contiguous groups
 * that minimise the largest group's cost, the linear-partition dynamic programme: forward
 * FLOPs (balance = flops: a pipeline runs at its slowest stage's pace) or bytes (balance =
 * memory: parameters with their gradients and optimizer state, plus activations of a whole
 * batch). A transformer_block repetition is one layer, so stages cut between blocks. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp.h"

/* A layer's cost on its stage: its forward FLOPs per sample, or its bytes: parameters
 * three times (with gradients and one optimizer slot), activations for every micro-batch
 * in flight. */
static double layer_cost(mp *d, int i, fg_error *err, fg_status *st)
{
    fg_layer_desc l = {sizeof l, NULL, 0, 0, 0, 0, 0, 0};
    *st = d->svc->layer_info(d->svc->ctx, i, &l, err);
    if (!d->balance_memory)
        return (double)l.flops;
    return 3.0 * (double)l.param_bytes +
           (double)l.activation_bytes * (double)d->micro * (double)d->chunks;
}

static int layer_index(mp *d, const char *want)
{
    for (int i = 0; i < d->svc->layer_count; i++) {
        fg_layer_desc l = {sizeof l, NULL, 0, 0, 0, 0, 0, 0};
        if (d->svc->layer_info(d->svc->ctx, i, &l, NULL) == FG_OK && strcmp(l.name, want) == 0)
            return i;
    }
    return -1;
}

/* "fc2, fc3" -> starts[1..] = their layer indices, strictly increasing. */
static fg_status parse_split(mp *d, int *starts, int *count, fg_error *err)
{
    const fg_host *h = d->host;
    char buf[1024];
    if (strlen(d->split) >= sizeof buf)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] split is too long", h->section);
    snprintf(buf, sizeof buf, "%s", d->split);
    int n = 1;
    starts[0] = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t') tok++;
        size_t len = strlen(tok);
        while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t')) tok[--len] = '\0';
        int at = layer_index(d, tok);
        if (at < 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] split = %s: the model has no "
                                "layer '%s' (give the NAME of a [layer.NAME] section)",
                                h->section, d->split, tok);
        if (at <= starts[n - 1])
            return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] split = %s: '%s' does not "
                                "come after the previous stage's first layer; name layers "
                                "in model order, not the first one", h->section, d->split, tok);
        if (n == MP_MAX_STAGES)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] split = %s: more than %d "
                                "stages", h->section, d->split, MP_MAX_STAGES);
        starts[n++] = at;
    }
    *count = n;
    return FG_OK;
}

/* best[k][j]: the smallest largest-group cost of layers [0, j) in k groups. */
static fg_status balance(mp *d, int *starts, fg_error *err)
{
    int n = d->svc->layer_count, S = d->stages;
    double *cost = calloc((size_t)n + 1, sizeof *cost);     /* prefix sums */
    double *best = calloc((size_t)(S + 1) * (size_t)(n + 1), sizeof *best);
    int *cut = calloc((size_t)(S + 1) * (size_t)(n + 1), sizeof *cut);
    fg_status st = cost && best && cut ? FG_OK
                 : fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.model-parallel: out of memory");
    for (int i = 0; st == FG_OK && i < n; i++) cost[i + 1] = cost[i] + layer_cost(d, i, err, &st);
#define AT(a, k, j) (a)[(size_t)(k) * (size_t)(n + 1) + (size_t)(j)]
    for (int j = 1; st == FG_OK && j <= n; j++) AT(best, 1, j) = cost[j];
    for (int k = 2; st == FG_OK && k <= S; k++)
        for (int j = k; j <= n; j++) {
            AT(best, k, j) = -1;
            for (int i = k - 1; i < j; i++) { /* the last group is [i, j) */
                double last = cost[j] - cost[i];
                double worst = AT(best, k - 1, i) > last ? AT(best, k - 1, i) : last;
                if (AT(best, k, j) < 0 || worst < AT(best, k, j)) {
                    AT(best, k, j) = worst;
                    AT(cut, k, j) = i;
                }
            }
        }
    for (int k = S, j = n; st == FG_OK && k >= 1; k--) {
        starts[k - 1] = k > 1 ? AT(cut, k, j) : 0;
        j = starts[k - 1];
    }
#undef AT
    free(cost);
    free(best);
    free(cut);
    return st;
}

static void log_plan(mp *d)
{
    char line[1024];
    size_t used = 0;
    for (int s = 0; s < d->stages && used < sizeof line; s++) {
        const mp_stage *g = &d->s[s];
        const char *a = "", *b = "";
        int64_t bytes = 0, flops = 0;
        for (int i = g->first_layer; i < g->first_layer + g->layer_count; i++) {
            fg_layer_desc l = {sizeof l, "?", 0, 0, 0, 0, 0, 0};
            d->svc->layer_info(d->svc->ctx, i, &l, NULL);
            if (i == g->first_layer) a = l.name;
            b = l.name;
            bytes += l.param_bytes;
            flops += l.flops;
        }
        used += (size_t)snprintf(line + used, sizeof line - used, "%sstage %d (device %d): %s..%s, "
                                 "%.2f MiB params, %.3g MFLOP/sample", s ? "; " : "", s,
                                 g->device, a, b, (double)bytes / (1024.0 * 1024.0),
                                 (double)flops / 1e6);
    }
    d->host->log(d->host, FG_LOG_INFO, "%s; %d micro-batch%s of up to %d samples%s", line,
                 d->chunks, d->chunks == 1 ? "" : "es", d->micro,
                 d->replicas > 1 ? "; the same stages on the next devices for each further "
                 "pipeline (dp_replicas)" : "");
}

fg_status mp_plan(mp *d, fg_error *err)
{
    const fg_host *h = d->host;
    int n = d->svc->layer_count, starts[MP_MAX_STAGES];
    fg_status st = FG_OK;
    if (d->split && *d->split) {
        int count = 0;
        if ((st = parse_split(d, starts, &count, err)) != FG_OK) return st;
        if (d->stages && d->stages != count)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] split = %s makes %d stages but "
                                "stages = %d; drop one of the two keys", h->section, d->split,
                                count, d->stages);
        d->stages = count;
    } else {
        int per = d->device_count / d->replicas;
        if (d->stages == 0) d->stages = per > 0 ? per : 1; /* as info() announced */
        if (d->stages > n)
            return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] %d stages (%s), but the model "
                                "has only %d layers; set stages = %d or fewer, or name the "
                                "stage boundaries with split", h->section, d->stages,
                                d->stages == per ? "one per device: stages = 0" : "stages",
                                n, n);
        if (!d->balance_memory && h->abi_minor < 1)
            return fg_error_set(err, FG_INCOMPATIBLE, "[%s] balance = flops needs a host of ABI "
                                "1.1 (layer FLOPs), this one is 1.%d; set balance = memory",
                                h->section, (int)h->abi_minor);
        if ((st = balance(d, starts, err)) != FG_OK) return st;
    }
    if (d->stages * d->replicas > d->device_count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] %d stages x %d pipeline%s need "
                            "%d devices, the backend has %d (the cpu backend makes more with "
                            "[backend] devices = N)", h->section, d->stages, d->replicas,
                            d->replicas == 1 ? "" : "s", d->stages * d->replicas,
                            d->device_count);
    if (!(d->s = calloc((size_t)d->stages * (size_t)d->replicas, sizeof *d->s)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "strategy.model-parallel: out of memory");
    for (int r = 0; r < d->replicas; r++)
        for (int s = 0; s < d->stages; s++) {
            mp_stage *g = mp_stage_at(d, r, s);
            g->d = d;
            g->index = s;
            g->replica = r;
            g->device = r * d->stages + s;
            g->first_layer = starts[s];
            g->layer_count = (s + 1 < d->stages ? starts[s + 1] : n) - starts[s];
        }
    log_plan(d);
    return FG_OK;
}
