/* The embedding API: build and drive a fulgur runtime from C. The `fulgur` command is a
 * thin client of this header; everything it does, a host program can do. */
#ifndef FULGUR_FULGUR_H
#define FULGUR_FULGUR_H

#include <stdio.h>

#include "fulgur/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FULGUR_BUILDING_LIBRARY)
#define FG_API __attribute__((visibility("default")))
#else
#define FG_API
#endif

typedef struct fg_runtime fg_runtime;

typedef struct fg_runtime_options {
    uint32_t struct_size;
    const char *const *plugin_paths; /* searched first, in order (--plugin-path) */
    int plugin_path_count;
    FILE *out;                       /* progress and reports; stdout when NULL */
    int verbosity;                   /* fg_log_level; FG_LOG_INFO by default */
} fg_runtime_options;

FG_API const char *fg_version(void);
FG_API int fg_abi_minor(void);

FG_API fg_status fg_runtime_create(const fg_runtime_options *opts, fg_runtime **out,
                                   fg_error *err);
FG_API void fg_runtime_destroy(fg_runtime *rt);

/* Parses `path`, applies "section.key=value" overrides, loads every plugin the config
 * names and validates every section and key against the core's and the plugins' schemas.
 * Nothing runs before all of it passed. FG_INVALID_ARGUMENT for a config error. */
FG_API fg_status fg_runtime_configure(fg_runtime *rt, const char *path,
                                      const char *const *overrides, int override_count,
                                      fg_error *err);

/* `fulgur plugins`: every plugin file in the search path, loaded or refused, to out. */
FG_API fg_status fg_runtime_list_plugins(fg_runtime *rt, FILE *out, fg_error *err);
/* `fulgur explain KIND.NAME`: a plugin's description and options. */
FG_API fg_status fg_runtime_explain(fg_runtime *rt, const char *kind_dot_name, FILE *out,
                                    fg_error *err);
/* `fulgur devices`: what each backend found in the search path sees. */
FG_API fg_status fg_runtime_list_devices(fg_runtime *rt, FILE *out, fg_error *err);

typedef enum fg_verb {
    FG_VERB_FIT = 1,
    FG_VERB_VALIDATE = 2,
    FG_VERB_TEST = 3,
    FG_VERB_PREDICT = 4,
    FG_VERB_CHECK = 5, /* set everything up (plugins, data, model, replicas), train nothing */
    FG_VERB_GENERATE = 6, /* a language model's continuation of [generate] prompt */
    FG_VERB_EXPORT = 7    /* the weights in Hugging Face's layout to [export] out */
} fg_verb;

/* Runs a verb on the configured runtime. Under a comm with more than one rank, a failure
 * after the comm started ends the whole job through the comm's abort (exit code as
 * fg_runtime_exit_code), so the other ranks do not wait out the timeout. */
FG_API fg_status fg_runtime_run(fg_runtime *rt, fg_verb verb, fg_error *err);

/* The exit code of a run that fg_runtime_run ended with st: 3 (peer failure) when a comm
 * call failed with FG_FATAL (a lost peer, a timed-out collective), else
 * fg_status_exit_code(st, 0). status.json's exit_code is this value. */
FG_API int fg_runtime_exit_code(const fg_runtime *rt, fg_status st);

/* The `fulgur` command's exit code for a status (README, "Exit status"): 0 ok, 2 for a bad
 * input (configuring != 0, or a status that names an input or environment fault), 1 for a
 * failure while running, 4 for a file write that failed for lack of space or an I/O fault.
 * (3: a peer rank failed or a collective timed out, the comm's abort code; 130/143: SIGINT,
 * SIGTERM.) */
FG_API int fg_status_exit_code(fg_status st, int configuring);

/* `fulgur tune batch-size`: the largest [data] batch_size whose one-batch fit (train, val
 * and test steps) does not run out of device memory: doubling from the config's batch size
 * (or halving when that one does not fit), then a binary search. Each try is a fresh
 * runtime built from opts, path and overrides, writing its run folders under a temporary
 * folder. Prints the tries and the result to out; *best is 0 when not even 1 fits. */
FG_API fg_status fg_tune_batch_size(const fg_runtime_options *opts, const char *path,
                                    const char *const *overrides, int override_count, FILE *out,
                                    int64_t *best, fg_error *err);

/* `fulgur tune lr`: a learning-rate range test. Trains from lr 1e-6, multiplying it every
 * step up to 1 over `steps` steps (stopping early when the loss diverges), and suggests the
 * lr where the smoothed loss falls fastest. Prints the curve and the suggestion to out. */
FG_API fg_status fg_tune_lr(const fg_runtime_options *opts, const char *path,
                            const char *const *overrides, int override_count, int steps,
                            FILE *out, double *suggestion, fg_error *err);

/* `fulgur runs DIR [RUN...] [--report OUT]`: every run folder under root (a root of
 * families ROOT/NAME/version_N, one family, or one run folder), a line each to out: name,
 * version, status (running, finished, failed, interrupted: killed, or stopped for a
 * requeue), steps, the best value of the metric its checkpoint or early-stopping callback
 * ranks by (val/loss otherwise), wall time and notes. A file that cannot be read (a run
 * killed while writing metrics.csv, a malformed status.json) is a note on its run, never
 * an error. Patterns (fnmatch, on NAME or NAME/version_N) choose runs; none: all. With
 * report_path, the chosen runs' curves are overlaid on one page written there by the
 * report callback plugin (found in rt's plugin search path). */
typedef struct fg_runs_options {
    uint32_t struct_size;
    const char *root;
    const char *const *patterns;
    int pattern_count;
    const char *report_path; /* NULL: list only */
} fg_runs_options;

FG_API fg_status fg_runtime_runs(fg_runtime *rt, const fg_runs_options *opts, FILE *out,
                                 fg_error *err);

/* `fulgur ckpt merge`: a checkpoint written one file per rank ([strategy] sharded_checkpoint
 * = true; its index file, or a folder holding exactly one index) into one ordinary
 * checkpoint at out_path, the file the gathered path writes. Every shard file is checked
 * against the index; a line saying what was merged goes to report (may be NULL). */
FG_API fg_status fg_ckpt_merge(const char *index_or_dir, const char *out_path, FILE *report,
                               fg_error *err);

/* `fulgur tokenize`: text files (files, folders' files, globs; each file one document)
 * encoded by a byte-level BPE tokenizer into llm.c token shards out_dir/train_NNNNNN.bin and
 * val_NNNNNN.bin (uint16 ids, an end-of-text token before each document), on `threads`
 * threads with the same output for any count. Progress and a summary line go to progress
 * (stderr when NULL). */
typedef struct fg_tokenize_options {
    uint32_t struct_size;
    const char *tokenizer;         /* tokenizer.json, or a folder with encoder.json + vocab.bpe */
    const char *out_dir;
    const char *const *inputs;
    int input_count;
    int threads;                   /* >= 1 */
    double val_fraction;           /* [0, 1): the share of chunks in the val shards */
    int64_t shard_tokens;          /* tokens per shard */
    int64_t chunk_bytes;           /* bytes a thread encodes at a time (about) */
    const char *eot;               /* the separator token's text; NULL: the tokenizer's */
} fg_tokenize_options;

FG_API fg_status fg_tokenize(const fg_tokenize_options *opts, FILE *progress, fg_error *err);

/* `fulgur estimate CONFIG`: the predicted step time, samples and tokens a second, memory per
 * rank (what `fulgur check` prints, run as child processes of `fulgur`: under mpirun for
 * sharded on nodes x devices_per_node ranks) and scaling efficiency of strategies single,
 * ddp and sharded stages 1-3, from per-layer compute times (a recorded device profile, or
 * measured here by short fits of the config) and an alpha-beta link (a preset, RATE,LATENCY
 * or fitted to a file of measured all-reduces); names the fastest that fits the device
 * memory and prints what it assumed (README, "Estimating a strategy's cost"). */
typedef struct fg_estimate_options {
    uint32_t struct_size;
    const char *config;
    const char *const *overrides;  /* section.key=value, applied as fit would */
    int override_count;
    int nodes, devices_per_node;   /* >= 1 each */
    const char *link;              /* --link SPEC; NULL: link_file, or none for one rank */
    const char *link_file;         /* --link-file FILE: "ranks = P" and "BYTES SECONDS" lines */
    const char *profile;           /* --profile FILE; NULL: measure on this machine */
    int measure_steps;             /* the shorter timed fit's steps (the longer: 3x); 0: 5 */
    int json;                      /* one JSON object instead of the table */
    int no_memory;                 /* leave the memory column out (no child `check`s) */
    const char *fulgur;            /* the fulgur executable the child processes run */
    const char *measure_link;      /* --measure-link FILE: measure the comm's all-reduces on
                                    * the ranks this runs on, write FILE (rank 0), nothing else */
} fg_estimate_options;

FG_API fg_status fg_estimate(const fg_runtime_options *opts, const fg_estimate_options *o,
                             FILE *out, fg_error *err);

#ifdef __cplusplus
}
#endif
#endif
