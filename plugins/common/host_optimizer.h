/* The run's [optimizer] (sgd or adamw) as an update on host memory, with fulgur's own
 * vectorised CPU kernels (kernels/cpu/optim.c): what [strategy] offload_optimizer = host
 * runs on the host's cores. The keys are read from the resolved config (fg_host.
 * config_entry) with the core's defaults, so the update is the one the core's optimizer
 * would have enqueued on the CPU backend: the same kernel, the same arguments. Per-tensor
 * decay groups (weight_decay_params = matrices, no_decay) need the tensor names, which only
 * the core has: refused with a message. */
#ifndef FG_PLUGIN_HOST_OPTIMIZER_H
#define FG_PLUGIN_HOST_OPTIMIZER_H

#include <stdint.h>

#include "fulgur/plugin.h"
#include "fulgur/strategy.h"

typedef struct fg_cpu_pool fg_cpu_pool;

typedef struct fg_host_optimizer {
    int adamw; /* 0: sgd */
    float weight_decay;
    float momentum, dampening; /* sgd */
    int nesterov;              /* sgd */
    float beta1, beta2, eps;   /* adamw */
} fg_host_optimizer;

/* Reads [optimizer] through host->config_entry; `who` names the caller in messages. */
fg_status fg_host_optimizer_read(const fg_host *host, const char *who, fg_host_optimizer *out,
                                 fg_error *err);
/* f32 state slots the update keeps per parameter: 0 (plain sgd), 1 (momentum) or 2 (m, v). */
int fg_host_optimizer_slots(const fg_host_optimizer *o);
/* One step of n parameters: params -= update(grads), state[0..slots) beside them; `a` is the
 * trainer's step (lr, 1-based step number; skip is the caller's). */
void fg_host_optimizer_update(const fg_host_optimizer *o, fg_cpu_pool *pool,
                              const fg_step_args *a, float *params, const float *grads,
                              float *const *state, int64_t n);

#endif
