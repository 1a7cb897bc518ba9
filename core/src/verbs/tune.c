/* The batch-size tuner: grow the batch until the backend runs out of memory (powers of two),
 * then binary-search the boundary. Every try is a real one-batch fit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fulgur/fulgur.h"
#include "optimizer.h"
#include "runtime.h"

#define MAX_OVERRIDES 256
#define BATCH_CAP ((int64_t)1 << 24)

typedef struct tune_job {
    const fg_runtime_options *opts;
    const char *path;
    const char *const *overrides;
    int override_count;
    char root[256];
    FILE *out;
    FILE *quiet;
} tune_job;

/* FG_OK: it fits; FG_OUT_OF_MEMORY: it does not; anything else stops the search. */
static fg_status try_batch(tune_job *j, int64_t batch, fg_error *err)
{
    char bs[64], ebs[64], root[320];
    snprintf(bs, sizeof bs, "data.batch_size=%lld", (long long)batch);
    snprintf(ebs, sizeof ebs, "data.eval_batch_size=%lld", (long long)batch);
    snprintf(root, sizeof root, "trainer.default_root_dir=%s", j->root);
    const char *over[MAX_OVERRIDES + 5];
    int n = 0;
    for (int i = 0; i < j->override_count && n < MAX_OVERRIDES; i++) over[n++] = j->overrides[i];
    over[n++] = bs;
    over[n++] = ebs;
    over[n++] = "trainer.fast_dev_run=1";
    over[n++] = root;
    fg_runtime_options o = *j->opts;
    o.out = j->quiet;
    o.verbosity = FG_LOG_ERROR;
    fg_runtime *rt = NULL;
    fg_status st = fg_runtime_create(&o, &rt, err);
    if (st == FG_OK) st = fg_runtime_configure(rt, j->path, over, n, err);
    if (st == FG_OK) st = fg_runtime_run(rt, FG_VERB_FIT, err);
    fg_runtime_destroy(rt);
    fprintf(j->out, "  batch_size %-9lld %s\n", (long long)batch,
            st == FG_OK ? "fits" : st == FG_OUT_OF_MEMORY ? "out of memory" : "failed");
    return st;
}

static fg_status config_batch_and_lr(const char *path, const char *const *overrides, int count,
                                     int64_t *batch, double *lr, fg_error *err)
{
    fg_config *cfg = NULL;
    fg_status st = fg_config_load(path, &cfg, err);
    for (int i = 0; st == FG_OK && i < count; i++) st = fg_config_override(cfg, overrides[i], err);
    fg_optimizer_config oc;
    if (st == FG_OK) st = fg_optimizer_read_config(cfg, &oc, err);
    if (st == FG_OK) {
        const char *v = fg_config_get(cfg, "data", "batch_size");
        *batch = v ? strtoll(v, NULL, 10) : 64;
        if (*batch < 1) *batch = 1;
        *lr = oc.lr;
    }
    fg_config_destroy(cfg);
    return st;
}

/* Largest fitting batch in (good, bad): good fits (0: none known), bad does not. */
static fg_status bisect(tune_job *j, int64_t good, int64_t bad, int64_t *best, fg_error *err)
{
    while (bad - good > 1) {
        int64_t mid = good + (bad - good) / 2;
        fg_status st = try_batch(j, mid, err);
        if (st == FG_OK) good = mid;
        else if (st == FG_OUT_OF_MEMORY) bad = mid;
        else return st;
    }
    *best = good;
    return FG_OK;
}

static fg_status search(tune_job *j, int64_t start, int64_t *best, fg_error *err)
{
    fg_status st = try_batch(j, start, err);
    if (st == FG_OUT_OF_MEMORY) return bisect(j, 0, start, best, err);
    if (st != FG_OK) return st;
    int64_t good = start;
    while (good < BATCH_CAP) {
        int64_t next = good * 2 < BATCH_CAP ? good * 2 : BATCH_CAP;
        st = try_batch(j, next, err);
        if (st == FG_OUT_OF_MEMORY) return bisect(j, good, next, best, err);
        if (st != FG_OK) return st;
        good = next;
    }
    *best = good;
    return FG_OK;
}

static void remove_tree(const char *dir)
{
    char cmd[512];
    /* The tries' run folders: config copies and nothing else of value. */
    if (snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) < (int)sizeof cmd && system(cmd) != 0)
        fprintf(stderr, "fulgur tune: could not remove %s\n", dir);
}

fg_status fg_tune_batch_size(const fg_runtime_options *opts, const char *path,
                             const char *const *overrides, int override_count, FILE *out,
                             int64_t *best, fg_error *err)
{
    tune_job j = {opts, path, overrides, override_count, "", out ? out : stdout, NULL};
    int64_t start;
    double lr;
    *best = 0;
    fg_status st = config_batch_and_lr(path, overrides, override_count, &start, &lr, err);
    if (st != FG_OK) return st;
    snprintf(j.root, sizeof j.root, "%s/fulgur-tune-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(j.root)) return fg_error_set(err, FG_INTERNAL, "fulgur tune: cannot create %s", j.root);
    j.quiet = fopen("/dev/null", "w");
    if (!j.quiet) st = fg_error_set(err, FG_INTERNAL, "cannot open /dev/null");
    if (st == FG_OK) {
        fprintf(j.out, "tuning batch_size of %s from %lld:\n", path, (long long)start);
        st = search(&j, start, best, err);
    }
    if (j.quiet) fclose(j.quiet);
    remove_tree(j.root);
    if (st != FG_OK) return st;
    if (*best == 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: not even batch_size 1 fits in the device "
                            "memory; lower memory use (precision, model size) or raise the limit", path);
    fprintf(j.out, "largest batch_size that fits: %lld\n", (long long)*best);
    fprintf(j.out, "with it, the linearly scaled learning rate is %.6g (lr %.6g x %lld / %lld)\n",
            lr * (double)*best / (double)start, lr, (long long)*best, (long long)start);
    return FG_OK;
}
