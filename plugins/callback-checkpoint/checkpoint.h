/* Internal pieces of the checkpoint callback: file-name templates, the table of the
 * latest metric values, and the top-k bookkeeping. None of it touches the disk. */
#ifndef CKPT_INTERNAL_H
#define CKPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <fulgur/callback.h>

/* Longest path the trainer accepts in fg_callback_action.checkpoint_path. */
#define CKPT_PATH_MAX 512
#define CKPT_EXTENSION ".safetensors"

/* ---- growing tables (checkpoint_alloc.c) --------------------------------------------- */

/* Room for item `count` in *items (doubling *cap from 8; `size` bytes an item), and a
 * malloc'd copy of text; FG_OUT_OF_MEMORY "out of memory for <what>" otherwise. */
fg_status ckpt_grow(void **items, size_t count, size_t *cap, size_t size, const char *what,
                    fg_error *err);
fg_status ckpt_copy_text(const char *text, char **copy, const char *what, fg_error *err);

/* ---- the latest value of every metric seen so far (checkpoint_metrics.c) ----------- */

typedef struct ckpt_metric {
    char *name;
    double value;
    int64_t epoch; /* of the event that reported the value */
} ckpt_metric;

typedef struct ckpt_metrics {
    ckpt_metric *items;
    size_t count, cap;
} ckpt_metrics;

/* Records every metric of the event, replacing older values of the same name. */
fg_status ckpt_metrics_update(ckpt_metrics *t, const fg_event *ev, fg_error *err);
/* NULL when the name was never seen. */
const double *ckpt_metrics_find(const ckpt_metrics *t, const char *name);
/* Was the name reported by an event of this epoch? */
int ckpt_metrics_fresh(const ckpt_metrics *t, const char *name, int64_t epoch);
/* "train/loss, train/acc, val/loss" into buf, "(none)" when empty. */
void ckpt_metrics_list(const ckpt_metrics *t, char *buf, size_t cap);
void ckpt_metrics_free(ckpt_metrics *t);

/* ---- file-name templates (checkpoint_name.c) ----------------------------------------- */

/* Checks a template: not empty, braces paired and not nested, no empty {}.
 * The message names the template and the offending position. */
fg_status ckpt_name_check(const char *tmpl, fg_error *err);

/* Calls fn with the name (len bytes, not NUL-terminated) of each {metric} placeholder, in
 * order ({epoch} and {step} are not metrics); returns fn's first non-OK status. */
fg_status ckpt_name_each_metric(const char *tmpl, fg_status (*fn)(const char *name, size_t len,
                                                                  void *ctx, fg_error *err),
                                void *ctx, fg_error *err);

/* Renders the template: {epoch} and {step} as integers, {metric} as %.4f of its latest
 * value; every '/' of the result becomes '_' (one file, never a folder). Fails with
 * FG_NOT_FOUND and the missing name in *missing (cap bytes) when a metric is unknown,
 * FG_INVALID_ARGUMENT when the result does not fit. */
fg_status ckpt_name_render(const char *tmpl, int64_t epoch, int64_t step,
                           const ckpt_metrics *metrics, char *out, size_t cap, char *missing,
                           size_t missing_cap, fg_error *err);

/* ---- the k best checkpoints (checkpoint_topk.c) -------------------------------------- */

typedef struct ckpt_entry {
    char *path;   /* as given to the trainer: relative to the run folder unless absolute */
    double score; /* NaN already replaced by the worst value */
} ckpt_entry;

typedef struct ckpt_topk {
    ckpt_entry *items; /* in insertion order */
    size_t count, cap;
    int64_t k;         /* -1: keep all; 0: keep none */
    int maximize;
} ckpt_topk;

/* The score a value ranks with: NaN ranks worst, as in Lightning. */
double ckpt_topk_score(const ckpt_topk *t, double value);
/* Would a checkpoint with this score enter the top k? Ties do not replace. */
int ckpt_topk_accepts(const ckpt_topk *t, double score);
/* The entry that leaves when one more enters (the worst, oldest first among equals);
 * NULL when the list is not full or k is -1. */
const ckpt_entry *ckpt_topk_leaving(const ckpt_topk *t);
/* Is path one of the kept files? */
int ckpt_topk_holds(const ckpt_topk *t, const char *path);
/* Adds path; when that makes k + 1 entries the worst is dropped and its path handed to
 * *evicted (caller frees), else *evicted is NULL. */
fg_status ckpt_topk_insert(ckpt_topk *t, const char *path, double score, char **evicted,
                           fg_error *err);
/* The best entry; NULL when empty. */
const ckpt_entry *ckpt_topk_best(const ckpt_topk *t);
void ckpt_topk_free(ckpt_topk *t);

/* ---- temporary files of dead writers (checkpoint_orphans.c) ------------------------ */

/* Removes NAME.tmp.PID files in dir whose writer (PID) no longer runs, logging each. */
void ckpt_remove_orphans(const fg_host *host, const char *dir);
/* The same in dirpath of every version_* folder beside run_dir (or in dirpath itself when
 * it is absolute): a resumed run starts in a new version folder. */
void ckpt_remove_family_orphans(const fg_host *host, const char *run_dir, const char *dirpath);

/* ---- shard folders of a deleted sharded index (checkpoint_shards.c) ----------------- */

/* Removes DIR/NAME.s<step>-<hex>.shards (its rank-* files) of index DIR/NAME.safetensors;
 * call it once the index is deleted and was the folder's only reference. */
void ckpt_remove_shard_folders(const char *index_path);

#endif
