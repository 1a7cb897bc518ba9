/* strategy.model-parallel internals: the model's layers cut into stages, stage s on
 * backend device s, each holding only its layers' parameters, gradients, optimizer state
 * and activations. A batch is cut into `chunks` micro-batches that flow through the
 * stages on a GPipe schedule: every stage runs the forwards of all micro-batches, then
 * their backwards (last first), so stage s works on micro-batch m while stage s + 1 works
 * on m - 1. Activations go forward and their gradients back as device buffers, copied
 * with the backend's copy op (peer or staged, as the backend does it). One persistent
 * thread per stage beyond the first; the trainer's thread drives stage 0. With
 * dp_replicas = R, R pipelines run side by side on R x stages devices, each on its shard
 * of the batch; pipeline 0's stages sum the gradients, step, and the others copy back. */
#ifndef FULGUR_STRATEGY_MP_H
#define FULGUR_STRATEGY_MP_H

#include <pthread.h>
#include <stdint.h>

#include "fulgur/backend.h"
#include "fulgur/strategy.h"
#include "worker_gang.h"

#define MP_MAX_STAGES 64
#define MP_MAX_CHUNKS 1024

typedef enum mp_job {
    MP_JOB_TRAIN = 1,  /* forwards then backwards of every micro-batch */
    MP_JOB_EVAL = 2,   /* forwards only, training = 0 */
    MP_JOB_STEP = 3,   /* each stage's optimizer update (pipeline 0's) */
    MP_JOB_STOP = 4,
    MP_JOB_REDUCE = 5, /* pipeline 0's stages add the other pipelines' gradients */
    MP_JOB_PULL = 6    /* the other pipelines' stages copy pipeline 0's parameters */
} mp_job;

typedef struct mp mp;

typedef struct mp_stage {
    mp *d;
    int index, device;      /* stage index within its pipeline */
    int replica;            /* its pipeline (dp_replicas) */
    int first_layer, layer_count;
    void *stage, *queue;
    int64_t in_elems, out_elems;  /* floats per sample at the input and output */
    int64_t param_offset, param_count, buffer_offset, buffer_count; /* model's flat regions */
    float *recv_x;   /* (chunks, micro, in_elems) on this device; NULL on stage 0 */
    float *recv_dy;  /* (chunks, micro, out_elems) on this device; NULL on the last stage */
    float *recv_grad; /* (param_count) on pipeline 0's devices with dp_replicas > 1 */
    float *params, *grads, *buffers; /* the stage's slices on its device */
    int fwd_ready;   /* micro-batches whose input has arrived (this job) */
    int bwd_ready;   /* micro-batches whose output gradient has arrived (this job) */
    int has_grads;   /* gradients written since the last optimizer step */
    double busy_s;   /* seconds in forward/backward this step (bubble measurement) */
    double total_busy_s;
    fg_status st;
    fg_error err;
} mp_stage;

struct mp {
    const fg_host *host;
    const fg_backend_vtable *be;
    void *be_state;
    const fg_train_services *svc;
    const char *split;  /* [strategy] split: layer names that start stages ("" = balance) */
    int balance_memory; /* [strategy] balance = memory: even bytes, not FLOPs */
    int device_count;   /* the backend's */
    int stages;         /* stages of a pipeline; 0 until planned: the device count */
    int replicas;       /* pipelines (dp_replicas): stage s of pipeline r on device r*stages+s */
    int chunks;         /* micro-batches a pipeline's shard of a batch is cut into */
    int micro;          /* samples of the largest micro-batch */
    mp_stage *s;        /* (replicas * stages), pipeline by pipeline */

    /* the job: micro-batch m of pipeline r is batch samples [at[k], at[k] + rows[k]),
     * k = r * chunks + m */
    const fg_batch *batch;
    int *used;          /* (replicas): micro-batches of each pipeline in this batch */
    int *at, *rows;     /* (replicas * chunks) */
    float grad_scale;
    fg_step_args step;  /* the optimizer step being taken (MP_JOB_STEP) */
    int synced;         /* this step's gradients are summed into pipeline 0 */

    fg_plugin_gang gang;   /* the stage threads; its wake condition: an activation or
                            * gradient arrived */
    int failed;         /* a stage failed: the others stop waiting */

    int64_t steps;
    double step_s, total_step_s, total_busy_s; /* bubble: busy over stages * step time */
    double job_start, fwd_done_at; /* the last stage's forwards of this job ended then */
    double fwd_s, bwd_s, opt_s;    /* this step: pipeline wall time by phase */
};

/* mp_plan.c: the stage boundaries, from `split` or balanced by FLOPs or bytes; fills each stage's first_layer and layer_count, logs the plan. */
fg_status mp_plan(mp *d, fg_error *err);

/* mp_schedule.c */
fg_status mp_workers_start(mp *d, fg_error *err);
void mp_workers_stop(mp *d);
/* Cuts batch into micro-batches for the next job. */
void mp_split(mp *d, const fg_batch *batch, float grad_scale);
/* Runs job on every stage at once and waits; the first failure, naming its stage. */
fg_status mp_run(mp *d, mp_job job, fg_error *err);

/* mp_state.c: checkpoints and memory, stage by stage. */
fg_status mp_gather_state(void *state, float *params, float *buffers, float *opt_state,
                          fg_error *err);
fg_status mp_scatter_state(void *state, const float *opt_state, fg_error *err);
fg_status mp_memory_report(void *state, int i, fg_memory_report *out, fg_error *err);

/* Stage s of pipeline r. */
static inline mp_stage *mp_stage_at(mp *d, int r, int s) { return &d->s[r * d->stages + s]; }

double mp_now(void);

#endif
