/* fulgur estimate: the parts of a step-time prediction, each in its own file
 * (estimate_link.c: the alpha-beta collectives; estimate_profile.c: a recorded device
 * profile; estimate_layers.c: the config's layers; estimate_run.c: what child fulgur
 * processes measure; estimate_predict.c: the strategies; estimate.c: the verb). */
#ifndef FG_ESTIMATE_H
#define FG_ESTIMATE_H

#include <stdint.h>
#include <stdio.h>

#include "fulgur/plugin.h"

#define FG_EST_MAX_LAYERS 512
#define FG_EST_NAME_MAX 64

/* A link: latency alpha (seconds a message) and bandwidth (bytes a second) of one ring hop. */
typedef struct fg_est_link {
    double alpha_s;
    double bytes_per_s;
    char source[256]; /* "--link 1gbit,50us", "preset nvlink (...)", "fitted from FILE (...)" */
} fg_est_link;

fg_status fg_est_link_parse(const char *spec, fg_est_link *out, fg_error *err);
/* A measured link file: "ranks = P" and lines "BYTES SECONDS" (one all-reduce of BYTES on
 * P ranks took SECONDS); alpha and beta by least squares of the ring all-reduce formula. */
fg_status fg_est_link_fit_file(const char *path, fg_est_link *out, fg_error *err);

/* --measure-link FILE: all-reduces of 64 KiB to 16 MiB over the configured comm plugin,
 * run on every rank; rank 0 writes what fg_est_link_fit_file reads (*wrote: 1 there). */
struct fg_runtime;
fg_status fg_est_measure_link(struct fg_runtime *rt, const char *path, int *wrote, fg_error *err);

/* Ring collectives on p ranks over bytes (the whole buffer), in seconds: all-reduce
 * 2(p-1) alpha + 2(p-1)/p bytes/bw; reduce-scatter and all-gather (p-1) alpha + (p-1)/p
 * bytes/bw; point to point alpha + bytes/bw. 0 for p = 1. */
double fg_est_all_reduce_s(const fg_est_link *l, int p, double bytes);
double fg_est_reduce_scatter_s(const fg_est_link *l, int p, double bytes);
double fg_est_all_gather_s(const fg_est_link *l, int p, double bytes);
double fg_est_p2p_s(const fg_est_link *l, double bytes);

/* One layer of the config: its name, its trained parameters and its forward and backward
 * time at the config's batch on one device. */
typedef struct fg_est_layer {
    char name[FG_EST_NAME_MAX];
    int64_t params;
    int64_t flops;
    int64_t out_elems; /* its output's elements a sample (what a pipeline stage sends on) */
    /* what strategy.model-parallel's plan weighs it by (fg_layer_desc): flops, or its
     * output elements when it counts none; activation bytes a sample */
    int64_t plan_flops, plan_act_bytes;
    double fwd_s, bwd_s;
} fg_est_layer;

typedef struct fg_est_model {
    fg_est_layer layer[FG_EST_MAX_LAYERS];
    int count;
    int64_t params;
    int64_t batch;     /* [data] batch_size: samples a rank a step */
    int64_t positions; /* tokens a sample (1 for a classifier) */
    int grad_bytes;    /* bytes of a parameter gradient on the wire (4: f32) */
    int act_bytes;     /* bytes of an activation element (4: f32, 2: a 16-bit precision) */
    double other_s;    /* a step's time beside the layers (optimizer, loss, data) */
    char compute_source[512];
} fg_est_model;

/* A recorded device profile (file format in core/src/verbs/README.md). */
typedef struct fg_est_profile {
    char device[128];
    double memory_mb; /* 0: not given */
    int64_t samples;  /* the batch the times were taken at */
    double optimizer_ms;
    int count;
    char name[FG_EST_MAX_LAYERS][FG_EST_NAME_MAX];
    double fwd_ms[FG_EST_MAX_LAYERS], bwd_ms[FG_EST_MAX_LAYERS];
} fg_est_profile;

fg_status fg_est_profile_read(const char *path, fg_est_profile *out, fg_error *err);
/* Every layer of m gets its profile time, scaled by m's batch / the profile's samples; a
 * layer the profile lacks fails naming the file and the layer. */
fg_status fg_est_profile_apply(const fg_est_profile *p, const char *path, fg_est_model *m,
                               fg_error *err);

/* The config's layers (names, parameters, flops) and batch, the model built as the trainer
 * builds it from the data plugin's sample shape. */
struct fg_runtime;
fg_status fg_est_layers(struct fg_runtime *rt, fg_est_model *m, fg_error *err);

/* What the child processes measure. */
typedef struct fg_est_runner {
    const char *fulgur;         /* this executable */
    const char *const *paths;   /* --plugin-path folders */
    int path_count;
    const char *config;         /* the user's config */
    const char *const *overrides;
    int override_count;
    char work[256];             /* a temporary folder */
} fg_est_runner;

/* Per-rank bytes by role as `fulgur check` prints them for rank 0 ("memory (device 0):
 * ... total X MiB"): the same accounting, not a second formula. */
typedef struct fg_est_memory {
    double mib[7]; /* params, master, grads, optimizer, activations, other, total */
    int known;
    int device;     /* the device whose line it is (a pipeline's fullest stage) */
    char note[512]; /* why not known */
} fg_est_memory;

/* strategy: the [strategy] section's lines written in place of the config's; ranks > 1
 * runs check under mpirun -n ranks. devices: NULL, or an override ("backend.devices=4") for
 * a one-process strategy on several devices, whose fullest device's line is taken. */
fg_status fg_est_check_memory(const fg_est_runner *r, const char *strategy, int ranks,
                              const char *devices, fg_est_memory *out, fg_error *err);
/* The seconds one training step of the config takes under strategy single on this
 * machine's backend: fits of steps_a and steps_b steps (each twice, the faster kept), the
 * difference over steps_b - steps_a (setup and data loading cancel). */
fg_status fg_est_measure_step(const fg_est_runner *r, int steps_a, int steps_b, double *step_s,
                              fg_error *err);

/* The strategies. */
enum { FG_EST_SINGLE, FG_EST_DDP, FG_EST_SHARDED1, FG_EST_SHARDED2, FG_EST_SHARDED3,
       FG_EST_PIPELINE, FG_EST_STRATEGIES };

typedef struct fg_est_prediction {
    const char *name;
    int skipped; /* not predicted: note says why */
    char note[512];
    int ranks;
    double step_s, compute_s, comm_s, exposed_comm_s;
    double samples_per_s, tokens_per_s, efficiency;
    fg_est_memory memory;
    int fits; /* -1: no limit known */
} fg_est_prediction;

/* ddp's buckets: bucket_bytes of gradients, cut in backward (reverse layer) order; bucket
 * i's all-reduce starts when the backward of its layers is done and the link is free. */
void fg_est_predict(const fg_est_model *m, const fg_est_link *l, int ranks, double bucket_bytes,
                    fg_est_prediction out[FG_EST_STRATEGIES]);

/* strategy.model-parallel's pipeline on `stages` devices of one process: where each stage
 * starts (the config's `split`, else the plugin's linear partition of forward flops or,
 * balance = memory, of bytes) and the GPipe schedule of `chunks` micro-batches. */
#define FG_EST_MAX_STAGES 64
typedef struct fg_est_pipeline {
    int stages, chunks;
    int balance_memory;          /* balance = memory */
    const char *split;           /* the config's split, or NULL */
    int first[FG_EST_MAX_STAGES]; /* each stage's first layer */
    char source[256];            /* where stages and chunks came from */
} fg_est_pipeline;

/* Cuts m's layers into p->stages groups (p->first); fails naming a split layer the model
 * lacks or a split that does not give p->stages stages. */
fg_status fg_est_pipeline_plan(const fg_est_model *m, fg_est_pipeline *p, fg_error *err);
/* The GPipe step: a stage runs its layers on a micro-batch in 1/chunks of their batch time,
 * forwards in order, then (a flush) backwards; a micro-batch's activation goes to the next
 * stage (and its gradient back) point to point over l, one transfer at a time a boundary;
 * each stage then takes its parameters' share of the other time (the optimizer). */
void fg_est_predict_pipeline(const fg_est_model *m, const fg_est_link *l, const fg_est_pipeline *p,
                             fg_est_prediction *out);

#endif
