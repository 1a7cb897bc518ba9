/* [optimizer] read from the resolved config and run on the host with kernels/cpu. */
#include "host_optimizer.h"

#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

/* The core's defaults (core/src/model/optimizer.c's schema); weight_decay's depends on the
 * kind, as PyTorch's does. */
static void defaults(fg_host_optimizer *o)
{
    memset(o, 0, sizeof *o);
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
}

static fg_status number(const char *who, const char *key, const char *value, float *out,
                        fg_error *err)
{
    char *end = NULL;
    double v = strtod(value, &end);
    if (!end || end == value || *end)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [optimizer] %s = '%s' is not a "
                            "number", who, key, value);
    *out = (float)v;
    return FG_OK;
}

static int truthy(const char *v)
{
    return strcmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcmp(v, "yes") == 0 ||
           strcmp(v, "on") == 0;
}

static fg_status read_key(fg_host_optimizer *o, const char *who, const char *key,
                          const char *value, int *wd_set, float *wd, fg_error *err)
{
    if (strcmp(key, "name") == 0) {
        o->adamw = strcmp(value, "adamw") == 0;
        return FG_OK;
    }
    if (strcmp(key, "weight_decay") == 0) {
        *wd_set = *value != 0;
        return *wd_set ? number(who, key, value, wd, err) : FG_OK;
    }
    if (strcmp(key, "momentum") == 0) return number(who, key, value, &o->momentum, err);
    if (strcmp(key, "dampening") == 0) return number(who, key, value, &o->dampening, err);
    if (strcmp(key, "beta1") == 0) return number(who, key, value, &o->beta1, err);
    if (strcmp(key, "beta2") == 0) return number(who, key, value, &o->beta2, err);
    if (strcmp(key, "eps") == 0) return number(who, key, value, &o->eps, err);
    if (strcmp(key, "nesterov") == 0) {
        o->nesterov = truthy(value);
        return FG_OK;
    }
    int groups = (strcmp(key, "weight_decay_params") == 0 && strcmp(value, "all") != 0) ||
                 (strcmp(key, "no_decay") == 0 && *value);
    if (groups)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: offload_optimizer = host with "
                            "[optimizer] %s = %s is not supported (weight-decay groups need "
                            "the tensor names, which the host update does not have); remove "
                            "the key or offload_optimizer", who, key, value);
    return FG_OK;
}

fg_status fg_host_optimizer_read(const fg_host *host, const char *who, fg_host_optimizer *out,
                                 fg_error *err)
{
    defaults(out);
    if (!FG_HAS_FIELD(host, fg_host, config_entry) || !host->config_entry)
        return fg_error_set(err, FG_INCOMPATIBLE, "%s: offload_optimizer = host needs a host "
                            "that hands out the resolved config", who);
    int wd_set = 0;
    float wd = 0;
    const char *section, *key, *value;
    for (size_t i = 0; host->config_entry(host, i, &section, &key, &value) == FG_OK; i++) {
        if (strcmp(section, "optimizer") != 0) continue;
        fg_status st = read_key(out, who, key, value, &wd_set, &wd, err);
        if (st != FG_OK) return st;
    }
    out->weight_decay = wd_set ? wd : out->adamw ? 0.01f : 0.0f;
    return FG_OK;
}

int fg_host_optimizer_slots(const fg_host_optimizer *o)
{
    return o->adamw ? 2 : o->momentum != 0.0f ? 1 : 0;
}

void fg_host_optimizer_update(const fg_host_optimizer *o, fg_cpu_pool *pool,
                              const fg_step_args *a, float *params, const float *grads,
                              float *const *state, int64_t n)
{
    if (o->adamw) {
        fg_cpu_adamw w = {a->lr, o->beta1, o->beta2, o->eps, o->weight_decay, a->step, NULL};
        fg_cpu_adamw_update(pool, &w, params, grads, state[0], state[1], (size_t)n);
        return;
    }
    fg_cpu_sgd s = {a->lr, o->momentum, o->dampening, o->weight_decay, o->nesterov,
                    a->step == 1, NULL};
    fg_cpu_sgd_update(pool, &s, params, grads, o->momentum != 0.0f ? state[0] : NULL,
                      (size_t)n);
}
