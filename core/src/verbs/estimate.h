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
    double fwd_s, bwd_s;
} fg_est_layer;

typedef struct fg_est_model {
    fg_est_layer layer[FG_EST_MAX_LAYERS];
    int count;
    int64_t params;
    int64_t batch;     /* [data] batch_size: samples a rank a step */
    int64_t positions; /* tokens a sample (1 for a classifier) */
    int grad_bytes;    /* bytes of a parameter gradient on the wire (4: f32) */
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
    char note[512]; /* why not known */
} fg_est_memory;

/* strategy: the [strategy] section's lines written in place of the config's; ranks > 1
 * runs check under mpirun -n ranks. */
fg_status fg_est_check_memory(const fg_est_runner *r, const char *strategy, int ranks,
                              fg_est_memory *out, fg_error *err);
/* The seconds one training step of the config takes under strategy single on this
 * machine's backend: fits of steps_a and steps_b steps (each twice, the faster kept), the
 * difference over steps_b - steps_a (setup and data loading cancel). */
fg_status fg_est_measure_step(const fg_est_runner *r, int steps_a, int steps_b, double *step_s,
                              fg_error *err);

/* The strategies. */
enum { FG_EST_SINGLE, FG_EST_DDP, FG_EST_SHARDED1, FG_EST_SHARDED2, FG_EST_SHARDED3,
       FG_EST_STRATEGIES };

typedef struct fg_est_prediction {
    const char *name;
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

#endif
