/* fulgur-callback-checkpoint.so: asks the trainer for checkpoints and keeps the best k,
 * with PyTorch Lightning's ModelCheckpoint semantics.
 *
 *   [callback.checkpoint]
 *   dirpath = checkpoints              ; relative to the run folder unless absolute
 *   filename = epoch={epoch}-step={step} ; {epoch}, {step}, {any/metric} (%.4f); + .safetensors
 *   monitor =                          ; metric to rank by; empty: no ranking
 *   mode = min                         ; min: lower is better; max: higher is better
 *   save_top_k = 1                     ; keep the k best (-1: all; 0: none)
 *   save_last = false                  ; also keep last.safetensors, updated at every check
 *   every_n_train_steps = 0            ; check every n optimizer steps (0: off)
 *   every_n_epochs = 1                 ; check every n epochs (0: off)
 *
 * A check happens
 *  - at a train_step_end whose global step reached a new multiple of every_n_train_steps
 *    (the trainer sends a step event at each such step, whatever log_every_n_steps is);
 *  - for every n-th epoch, at its epoch_end when every metric the monitor and the file
 *    name need was reported during that epoch (validation before epoch_end, Lightning's
 *    order, or metrics of epoch_end itself), else at the validation_end of the same epoch
 *    that follows; an epoch without validation then has no check, as in Lightning;
 *  - for every n-th epoch, at a validation_end inside the epoch (val_check_interval:
 *    step_in_epoch < steps_per_epoch), as Lightning saves after each validation.
 * Never twice at the same global step. With a monitor, a new file enters the top k when
 * there is room or it is strictly better than the worst kept one, which is deleted; a
 * NaN ranks worst. Without one, save_top_k = 1 keeps only the latest file and -1 all.
 * A step check before any validation skips a monitor it cannot read yet (Lightning
 * warns and goes on); after one, a missing metric is an error naming the ones present.
 *
 * The trainer writes each asked-for file synchronously after on_event returns, through a
 * temporary file and a rename. For save_last at a check that also saved a top-k file, the
 * action names last.safetensors as the checkpoint's second name (checkpoint_also_path):
 * the trainer hard-links it, or copies where the file system has no hard links, again
 * through a temporary name and a rename. The plugin itself only deletes files that leave
 * the top k, and only at the next event, once the file that replaced it exists; at a
 * fit's start it removes the temporary files of writers that died (checkpoint_orphans.c). Only rank 0 touches files; every rank takes the same decisions from the same
 * reduced metrics. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "plugin_created.h"

#ifndef CHECKPOINT_VERSION
#define CHECKPOINT_VERSION "1.0.0"
#endif

#define CKPT_MAX_NEEDED 16
#define CKPT_FULL_PATH_MAX 4096

typedef enum check_kind { CHECK_STEP, CHECK_EPOCH } check_kind;

typedef struct checkpoint {
    const fg_host *host;
    /* options */
    const char *dirpath;  /* owned by the host */
    const char *filename; /* the template */
    const char *monitor;  /* NULL: no ranking */
    int save_last;
    int64_t every_n_steps, every_n_epochs;
    /* metrics a check needs: the monitor and the template's {metric}s */
    char *needed[CKPT_MAX_NEEDED];
    int needed_count;
    char last_path[CKPT_PATH_MAX];
    /* state */
    ckpt_metrics known;
    ckpt_topk topk;
    int64_t checks;             /* the score of a file when there is no monitor */
    int64_t last_saved_step;    /* -1: none */
    int64_t prev_step_reported; /* global step of the previous train_step_end */
    int64_t pending_epoch;      /* an epoch check waiting for validation_end; -1: none */
    int validation_seen;
    /* A file that left the top k, deleted only once the file that replaced it (guard) is
     * on disk: the trainer writes after on_event returns, and a crash in between must not
     * leave no checkpoint at all. */
    char *pending_delete;
    char pending_guard[CKPT_PATH_MAX];
    char run_dir[CKPT_FULL_PATH_MAX]; /* of the latest event */
} checkpoint;

static const fg_option checkpoint_options[] = {
    {.key = "dirpath", .type = FG_OPT_STRING, .default_value = "checkpoints", .min = 1, .max = 0,
     .help = "folder of the checkpoint files, relative to the run folder unless absolute"},
    {.key = "filename", .type = FG_OPT_STRING, .default_value = "epoch={epoch}-step={step}",
     .min = 1, .max = 0,
     .help = "file name template: {epoch}, {step}, {metric/name} (%.4f); .safetensors is appended"},
    {.key = "monitor", .type = FG_OPT_STRING, .default_value = "", .min = 1, .max = 0,
     .help = "metric that ranks the checkpoints (empty: none; the latest are kept)"},
    {.key = "mode", .type = FG_OPT_ENUM, .default_value = "min", .min = 1, .max = 0,
     .choices = "min|max", .help = "min: lower monitor is better; max: higher is better"},
    {.key = "save_top_k", .type = FG_OPT_INT, .default_value = "1", .min = -1, .max = 1e9,
     .help = "keep the k best files (-1: all; 0: none)"},
    {.key = "save_last", .type = FG_OPT_BOOL, .default_value = "false", .min = 1, .max = 0,
     .help = "also keep last.safetensors, the state at the latest check"},
    {.key = "every_n_train_steps", .type = FG_OPT_INT, .default_value = "0", .min = 0, .max = 1e12,
     .help = "check every n optimizer steps (0: off)"},
    {.key = "every_n_epochs", .type = FG_OPT_INT, .default_value = "1", .min = 0, .max = 1e9,
     .help = "check every n epochs (0: off)"},
};

/* ---- options ------------------------------------------------------------------------- */

static fg_status add_needed(const char *name, size_t len, void *ctx, fg_error *err)
{
    checkpoint *cp = ctx;
    for (int i = 0; i < cp->needed_count; i++)
        if (strlen(cp->needed[i]) == len && memcmp(cp->needed[i], name, len) == 0)
            return FG_OK;
    if (cp->needed_count == CKPT_MAX_NEEDED)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "monitor and filename name more than %d "
                            "metrics", CKPT_MAX_NEEDED);
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    memcpy(copy, name, len);
    copy[len] = '\0';
    cp->needed[cp->needed_count++] = copy;
    return FG_OK;
}

/* dirpath joined with a file name, without doubling a trailing '/'. */
static int join_dir(char *out, size_t cap, const char *dir, const char *name)
{
    size_t d = strlen(dir);
    while (d > 1 && dir[d - 1] == '/')
        d--;
    int n = d == 0 ? snprintf(out, cap, "%s", name)
                   : snprintf(out, cap, "%.*s%s%s", (int)d, dir, dir[d - 1] == '/' ? "" : "/", name);
    return n >= 0 && (size_t)n < cap;
}

static fg_status check_options(checkpoint *cp, const char *mode, int64_t top_k, fg_error *err)
{
    if (strcmp(mode, "min") != 0 && strcmp(mode, "max") != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "mode = '%s': expected min or max", mode);
    if (top_k < -1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "save_top_k = %lld: must be -1 (all), 0 "
                            "(none) or a count", (long long)top_k);
    if (cp->monitor == NULL && top_k > 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "save_top_k = %lld needs a monitor to rank "
                            "by; set monitor (e.g. val/loss), or save_top_k = 1 (the latest) or "
                            "-1 (all)", (long long)top_k);
    if (cp->every_n_steps < 0 || cp->every_n_epochs < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "every_n_train_steps = %lld, every_n_epochs "
                            "= %lld: must be >= 0", (long long)cp->every_n_steps,
                            (long long)cp->every_n_epochs);
    if (!join_dir(cp->last_path, sizeof cp->last_path, cp->dirpath, "last" CKPT_EXTENSION))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "dirpath = %s: longer than %d bytes",
                            cp->dirpath, CKPT_PATH_MAX - 32);
    fg_status st = ckpt_name_check(cp->filename, err);
    if (st == FG_OK && cp->monitor)
        st = add_needed(cp->monitor, strlen(cp->monitor), cp, err);
    if (st == FG_OK)
        st = ckpt_name_each_metric(cp->filename, add_needed, cp, err);
    return st;
}

static fg_status read_options(checkpoint *cp, const fg_host *host, fg_error *err)
{
    const char *mode = NULL, *monitor = NULL;
    int64_t top_k = 0;
    if (host->get_string(host, "dirpath", &cp->dirpath) != FG_OK ||
        host->get_string(host, "filename", &cp->filename) != FG_OK ||
        host->get_string(host, "monitor", &monitor) != FG_OK ||
        host->get_string(host, "mode", &mode) != FG_OK ||
        host->get_int(host, "save_top_k", &top_k) != FG_OK ||
        host->get_bool(host, "save_last", &cp->save_last) != FG_OK ||
        host->get_int(host, "every_n_train_steps", &cp->every_n_steps) != FG_OK ||
        host->get_int(host, "every_n_epochs", &cp->every_n_epochs) != FG_OK)
        return fg_error_set(err, FG_INTERNAL, "the host did not serve the declared options");
    cp->monitor = monitor && monitor[0] ? monitor : NULL;
    fg_status st = check_options(cp, mode, top_k, err);
    if (st != FG_OK)
        return st;
    cp->topk.k = top_k;
    /* Without a monitor the score is the check's number: the latest ranks best. */
    cp->topk.maximize = cp->monitor == NULL || strcmp(mode, "max") == 0;
    return FG_OK;
}

static void checkpoint_free(checkpoint *cp)
{
    free(cp->pending_delete);
    for (int i = 0; i < cp->needed_count; i++)
        free(cp->needed[i]);
    ckpt_metrics_free(&cp->known);
    ckpt_topk_free(&cp->topk);
    free(cp);
}

static fg_status checkpoint_init(const fg_host *host, void **state, fg_error *err)
{
    checkpoint *cp = calloc(1, sizeof *cp);
    if (cp == NULL)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    cp->host = host;
    cp->last_saved_step = -1;
    cp->pending_epoch = -1;
    fg_status st = read_options(cp, host, err);
    return FG_PLUGIN_CREATED(st, cp, state, checkpoint_free);
}

/* ---- files (rank 0 only) ------------------------------------------------------------- */

static int full_path(const checkpoint *cp, const char *path, char *out, size_t cap)
{
    int n = path[0] == '/' || cp->run_dir[0] == '\0'
                ? snprintf(out, cap, "%s", path)
                : snprintf(out, cap, "%s/%s", cp->run_dir, path);
    return n >= 0 && (size_t)n < cap;
}

/* A file that left the top k. One the trainer never wrote is no error; any other
 * failure leaves a stray file, which is worth a warning and not a failed run. */
static void delete_file(const checkpoint *cp, const char *path)
{
    char full[CKPT_FULL_PATH_MAX];
    struct stat sb;
    /* A sharded index with no other name (last.safetensors links the newest) was the only
     * reference to its shard folder: the folder goes with it. */
    int sole_name = full_path(cp, path, full, sizeof full) && stat(full, &sb) == 0 &&
                    sb.st_nlink == 1;
    if (sole_name && unlink(full) == 0) {
        ckpt_remove_shard_folders(full);
        return;
    }
    if (!full_path(cp, path, full, sizeof full) || (unlink(full) != 0 && errno != ENOENT)) {
        if (cp->host->log)
            cp->host->log(cp->host, FG_LOG_WARN, "cannot delete %s, which left the top %lld: %s",
                          full, (long long)cp->topk.k, strerror(errno));
    }
}

/* Deletes the file that left the top k once its replacement exists (see pending_delete);
 * when the replacement was never written the old file stays. */
static void flush_pending_delete(checkpoint *cp)
{
    if (cp->pending_delete == NULL)
        return;
    char guard[CKPT_FULL_PATH_MAX];
    struct stat sb;
    if (full_path(cp, cp->pending_guard, guard, sizeof guard) && stat(guard, &sb) == 0)
        delete_file(cp, cp->pending_delete);
    free(cp->pending_delete);
    cp->pending_delete = NULL;
}

/* ---- checks -------------------------------------------------------------------------- */

static const char *missing_needed(const checkpoint *cp)
{
    for (int i = 0; i < cp->needed_count; i++)
        if (ckpt_metrics_find(&cp->known, cp->needed[i]) == NULL)
            return cp->needed[i];
    return NULL;
}

/* Every metric the check needs was reported in this epoch (not a stale value). */
static int needed_fresh(const checkpoint *cp, int64_t epoch)
{
    for (int i = 0; i < cp->needed_count; i++)
        if (!ckpt_metrics_fresh(&cp->known, cp->needed[i], epoch))
            return 0;
    return 1;
}

static fg_status missing_error(const checkpoint *cp, const char *name, const fg_event *ev,
                               fg_error *err)
{
    char present[FG_ERROR_MESSAGE_MAX / 2];
    ckpt_metrics_list(&cp->known, present, sizeof present);
    const char *key = cp->monitor && strcmp(name, cp->monitor) == 0 ? "monitor" : "filename";
    if (ev->type == FG_EVENT_FIT_END)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s names metric %s, which no event "
                            "reported during fit (%lld steps), so no check could run; "
                            "reported: %s", key, name, (long long)ev->global_step, present);
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s names metric %s, which no event has "
                        "reported by step %lld (epoch %lld); reported: %s", key, name,
                        (long long)ev->global_step, (long long)ev->epoch + 1, present);
}

/* The path of a new top-k file: the rendered name, with -v1, -v2 ... appended while it
 * collides with a file still kept (other than the one leaving) or with last. */
static fg_status new_path(const checkpoint *cp, const fg_event *ev, const char *leaving,
                          char *out, size_t cap, fg_error *err)
{
    char base[CKPT_PATH_MAX], missing[256], name[CKPT_PATH_MAX + 32];
    fg_status st = ckpt_name_render(cp->filename, ev->epoch, ev->global_step, &cp->known, base,
                                    sizeof base, missing, sizeof missing, err);
    if (st != FG_OK)
        return st;
    for (int version = 0;; version++) {
        if (version == 0)
            snprintf(name, sizeof name, "%s" CKPT_EXTENSION, base);
        else
            snprintf(name, sizeof name, "%s-v%d" CKPT_EXTENSION, base, version);
        if (!join_dir(out, cap, cp->dirpath, name))
            return fg_error_set(err, FG_INVALID_ARGUMENT, "dirpath/filename: %s/%s is longer than "
                                "%zu bytes", cp->dirpath, name, cap - 1);
        int taken = (ckpt_topk_holds(&cp->topk, out) && !(leaving && strcmp(leaving, out) == 0)) ||
                    (cp->save_last && strcmp(out, cp->last_path) == 0);
        if (!taken)
            return FG_OK;
    }
}

static void ask_for(fg_callback_action *action, const char *path)
{
    action->save_checkpoint = 1;
    snprintf(action->checkpoint_path, sizeof action->checkpoint_path, "%s", path);
}

/* The top-k part of a check; *saved tells whether a file was asked for. */
static fg_status save_top_k(checkpoint *cp, const fg_event *ev, fg_callback_action *action,
                            int *saved, fg_error *err)
{
    *saved = 0;
    double score = cp->monitor ? ckpt_topk_score(&cp->topk, *ckpt_metrics_find(&cp->known, cp->monitor))
                               : (double)cp->checks;
    if (!ckpt_topk_accepts(&cp->topk, score))
        return FG_OK;
    const ckpt_entry *leaving = ckpt_topk_leaving(&cp->topk);
    char path[CKPT_PATH_MAX];
    fg_status st = new_path(cp, ev, leaving ? leaving->path : NULL, path, sizeof path, err);
    char *evicted = NULL;
    if (st == FG_OK)
        st = ckpt_topk_insert(&cp->topk, path, score, &evicted, err);
    if (st != FG_OK)
        return st;
    /* A file that leaves under the very name the new one takes is overwritten, not lost;
     * another is deleted at the next event, once the new file is in place. */
    if (evicted && strcmp(evicted, path) != 0 && ev->is_rank_zero) {
        cp->pending_delete = evicted;
        snprintf(cp->pending_guard, sizeof cp->pending_guard, "%s", path);
    } else {
        free(evicted);
    }
    ask_for(action, path);
    *saved = 1;
    return FG_OK;
}

static fg_status run_check(checkpoint *cp, const fg_event *ev, check_kind kind,
                           fg_callback_action *action, fg_error *err)
{
    if (ev->global_step == cp->last_saved_step)
        return FG_OK;
    const char *missing = missing_needed(cp);
    if (missing) {
        /* Before the first validation a step check cannot rank by val/... metrics yet. */
        if (kind == CHECK_STEP && !cp->validation_seen)
            return FG_OK;
        return missing_error(cp, missing, ev, err);
    }
    cp->checks++;
    int saved = 0;
    fg_status st = save_top_k(cp, ev, action, &saved, err);
    if (st != FG_OK)
        return st;
    if (cp->save_last && saved) {
        if (!FG_HAS_FIELD(action, fg_callback_action, checkpoint_also_path))
            return fg_error_set(err, FG_INCOMPATIBLE, "save_last needs a host whose checkpoint "
                                "action has checkpoint_also_path (fulgur ABI 1.x); this one's "
                                "action struct has %u bytes", (unsigned)action->struct_size);
        snprintf(action->checkpoint_also_path, sizeof action->checkpoint_also_path, "%s",
                 cp->last_path);
    } else if (cp->save_last) {
        ask_for(action, cp->last_path);
    }
    if (action->save_checkpoint)
        cp->last_saved_step = ev->global_step;
    return FG_OK;
}

/* A new multiple of every_n_train_steps was reached since the previous step report. */
static int step_due(checkpoint *cp, const fg_event *ev)
{
    int64_t n = cp->every_n_steps, prev = cp->prev_step_reported;
    cp->prev_step_reported = ev->global_step;
    return n > 0 && ev->global_step / n > prev / n;
}

static int epoch_due(const checkpoint *cp, const fg_event *ev)
{
    return cp->every_n_epochs > 0 && (ev->epoch + 1) % cp->every_n_epochs == 0;
}

/* Fit ended: a metric the checks need that never appeared means no check could run. */
static fg_status finish_fit(checkpoint *cp, const fg_event *ev, fg_error *err)
{
    const char *missing = missing_needed(cp);
    if (missing)
        return missing_error(cp, missing, ev, err);
    const ckpt_entry *best = ckpt_topk_best(&cp->topk);
    if (cp->monitor && best && ev->is_rank_zero && cp->host->log)
        cp->host->log(cp->host, FG_LOG_INFO, "best checkpoint %s (%s %.4f)", best->path,
                      cp->monitor, best->score);
    return FG_OK;
}

/* A validation inside the epoch (val_check_interval): Lightning checks after each. */
static int mid_epoch(const fg_event *ev)
{
    return ev->steps_per_epoch > 0 && ev->step_in_epoch < ev->steps_per_epoch;
}

static fg_status dispatch(checkpoint *cp, const fg_event *ev, fg_callback_action *action,
                          fg_error *err)
{
    /* An epoch check waits for the validation of its own epoch and nothing else. */
    if (cp->pending_epoch >= 0 &&
        !(ev->type == FG_EVENT_VALIDATION_END && ev->epoch == cp->pending_epoch))
        cp->pending_epoch = -1;
    switch (ev->type) {
    case FG_EVENT_TRAIN_STEP_END:
        return step_due(cp, ev) ? run_check(cp, ev, CHECK_STEP, action, err) : FG_OK;
    case FG_EVENT_EPOCH_END:
        if (!epoch_due(cp, ev))
            return FG_OK;
        /* Validated before epoch_end (Lightning's order) or nothing to wait for: now. */
        if (needed_fresh(cp, ev->epoch))
            return run_check(cp, ev, CHECK_EPOCH, action, err);
        cp->pending_epoch = ev->epoch;
        return FG_OK;
    case FG_EVENT_VALIDATION_END:
        cp->validation_seen = 1;
        if (cp->pending_epoch == ev->epoch) {
            cp->pending_epoch = -1;
            return run_check(cp, ev, CHECK_EPOCH, action, err);
        }
        if (mid_epoch(ev) && epoch_due(cp, ev))
            return run_check(cp, ev, CHECK_EPOCH, action, err);
        return FG_OK;
    case FG_EVENT_FIT_END:
        return finish_fit(cp, ev, err);
    default:
        return FG_OK;
    }
}

/* Thread rule (callback.h): the trainer's thread, every rank, in event order. */
static fg_status checkpoint_on_event(void *state, const fg_event *ev, fg_callback_action *action,
                                     fg_error *err)
{
    checkpoint *cp = state;
    if (!FG_HAS_FIELD(ev, fg_event, run_dir) ||
        !FG_HAS_FIELD(action, fg_callback_action, checkpoint_path))
        return fg_error_set(err, FG_INCOMPATIBLE, "event or action struct from an older host "
                            "is too small (%u, %u bytes)", ev ? (unsigned)ev->struct_size : 0u,
                            action ? (unsigned)action->struct_size : 0u);
    snprintf(cp->run_dir, sizeof cp->run_dir, "%s", ev->run_dir ? ev->run_dir : "");
    flush_pending_delete(cp);
    if (ev->type == FG_EVENT_FIT_START && ev->is_rank_zero && cp->run_dir[0])
        ckpt_remove_family_orphans(cp->host, cp->run_dir, cp->dirpath);
    fg_status st = ckpt_metrics_update(&cp->known, ev, err);
    if (st == FG_OK)
        st = dispatch(cp, ev, action, err);
    return st;
}

static void checkpoint_deinit(void *state)
{
    checkpoint *cp = state;
    if (cp == NULL)
        return;
    flush_pending_delete(cp);
    checkpoint_free(cp);
}

FG_CALLBACK_PLUGIN_DEFINE("checkpoint", CHECKPOINT_VERSION,
                          "asks for checkpoints every n epochs or steps and keeps the k best by a "
                          "metric",
                          FG_PLUGIN_OPTIONS(checkpoint_options), checkpoint_init, checkpoint_deinit,
                          checkpoint_on_event, NULL);
