/* [strategy] offload_optimizer = host (ZeRO-Offload): the f32 master weights and the
 * optimizer state of a range of the flat parameters live in pinned host memory (the
 * backend's host_alloc), and the update runs on the host's cores (host_optimizer.h).
 *
 * A step, bucket by bucket (FG_OFFLOAD_BUCKET floats): every bucket's device-to-host copy
 * of the final gradients is enqueued at once on the stage's queue (after backward, the
 * all-reduce and clipping), each followed by an event; then for bucket i the host waits
 * for its event, widens half gradients, updates the master and state, rounds the master
 * into the working dtype and enqueues the host-to-device copy of bucket i, which runs
 * while the host updates bucket i + 1 (and the later buckets' gradients arrive while it
 * updates the earlier ones). The next step's forward is enqueued after the last copy.
 * Thread rule: the strategy's thread. */
#ifndef FG_PLUGIN_OFFLOAD_OPTIMIZER_H
#define FG_PLUGIN_OFFLOAD_OPTIMIZER_H

#include <stdint.h>

#include "fulgur/backend.h"
#include "fulgur/plugin.h"
#include "fulgur/strategy.h"

/* floats per bucket of the host update (16 MiB of f32) */
#define FG_OFFLOAD_BUCKET (4 << 20)

/* The option every strategy that offloads declares (enum none|host). */
#define FG_OFFLOAD_OPTION                                                                   \
    {"offload_optimizer", FG_OPT_ENUM, "none", 0, 0, "none|host",                           \
     "host: the f32 master weights and the optimizer state in pinned host memory, the "     \
     "update on the host's cores (ZeRO-Offload); none: on the device"}

typedef struct fg_offload fg_offload;

typedef struct fg_offload_spec {
    const fg_host *host;
    const char *who; /* "strategy.single", ... */
    const fg_backend_vtable *be;
    void *be_state;
    const fg_train_services *svc;
    void *stage;
    int device;
    int64_t lo, count; /* the flat range this process updates */
    uint32_t pdt, gdt; /* the device's working parameter and gradient dtypes */
} fg_offload_spec;

/* 1 when the section's offload_optimizer is host. */
int fg_offload_wanted(const fg_host *host);
/* Under a mixed mode the f32 master is the host's, and the device keeps half parameters and
 * half gradients (fg_strategy_info.own_master): an explicit [precision] grad_dtype = fp32
 * is refused rather than ignored; without the key an info line says so. */
fg_status fg_offload_check_grad_dtype(const fg_host *host, const char *who, uint32_t gdt,
                                      fg_error *err);
/* Allocates the host memory and reads the master from the stage's initial parameters
 * (seeded or resumed). */
fg_status fg_offload_create(const fg_offload_spec *spec, fg_offload **out, fg_error *err);
void fg_offload_destroy(fg_offload *o);
/* One optimizer step: grads (gdt) and params (pdt) are device memory at element lo. A
 * skipped step (args->skip) changes nothing. */
fg_status fg_offload_step(fg_offload *o, const fg_step_args *args, void *params,
                          const void *grads, fg_error *err);
/* The host f32 master (count floats) and state slot i (NULL past the last). */
float *fg_offload_master(const fg_offload *o);
int fg_offload_slots(const fg_offload *o);
float *fg_offload_slot(const fg_offload *o, int i);
/* Host bytes held: master, state, gradient and working copies. */
uint64_t fg_offload_host_bytes(const fg_offload *o);
/* Bytes the device no longer holds: the optimizer state and, where the device keeps half
 * working parameters, the f32 master. */
uint64_t fg_offload_device_bytes_saved(const fg_offload *o);

/* Info lines: at setup, what moved to the host (bytes on the host, bytes the device no
 * longer holds); at teardown, the steps' host update and copy wait times. */
void fg_offload_log_setup(const fg_offload *o);
void fg_offload_log_totals(const fg_offload *o);

#endif
