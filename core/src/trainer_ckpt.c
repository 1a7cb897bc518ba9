/* Checkpoints of a fit: the model's named tensors, optimizer state under optimizer.*, and
 * the trainer state as metadata (progress, loader position, epoch sums, schedule, seed).
 * Strategy-agnostic: the plain model of the primary replica. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "optimizer.h"
#include "trainer_internal.h"

#define FORMAT_TAG "fulgur-checkpoint-1"
#define MAX_META 96

#define STRAT(t) ((const fg_strategy_vtable *)(t)->strategy.vt)
#define BE(t) ((const fg_backend_vtable *)(t)->backend.vt)

typedef struct meta_list {
    const char *keys[MAX_META];
    const char *values[MAX_META];
    char store[MAX_META][2][96];
    size_t count;
} meta_list;

static char *meta_slot(meta_list *m, const char *key)
{
    if (m->count == MAX_META) return NULL;
    size_t i = m->count++;
    snprintf(m->store[i][0], sizeof m->store[i][0], "%s", key);
    m->keys[i] = m->store[i][0];
    m->values[i] = m->store[i][1];
    return m->store[i][1];
}

static void meta_add_str(meta_list *m, const char *key, const char *v)
{
    char *slot = meta_slot(m, key);
    if (slot) snprintf(slot, sizeof m->store[0][1], "%s", v);
}

static void meta_add_int(meta_list *m, const char *key, int64_t v)
{
    char *slot = meta_slot(m, key);
    if (slot) snprintf(slot, sizeof m->store[0][1], "%lld", (long long)v);
}

/* %.17g round-trips a double exactly. */
static void meta_add_exact(meta_list *m, const char *key, double v)
{
    char *slot = meta_slot(m, key);
    if (slot) snprintf(slot, sizeof m->store[0][1], "%.17g", v);
}

/* Device -> host copy of n floats from the primary replica. */
static fg_status fetch(fg_trainer *t, void *replica, const float *src, float *dst, size_t n, fg_error *err)
{
    void *queue = fg_train_replica_queue(replica);
    fg_status st = BE(t)->copy(t->backend.state, queue, dst, -1, src, fg_train_replica_device(replica),
                               n * sizeof(float), err);
    return st == FG_OK ? BE(t)->queue_sync(t->backend.state, queue, err) : st;
}

static void fill_trainer_meta(fg_trainer *t, meta_list *m, int64_t opt_step)
{
    m->count = 0;
    meta_add_str(m, "format", FORMAT_TAG);
    int done = t->epoch_training_done;
    meta_add_int(m, "epoch", done ? t->epoch + 1 : t->epoch);
    meta_add_int(m, "batches_done", done ? 0 : t->batches_done);
    meta_add_exact(m, "epoch_sum_loss", done ? 0 : t->epoch_sum_loss);
    meta_add_exact(m, "epoch_sum_correct", done ? 0 : t->epoch_sum_correct);
    meta_add_exact(m, "epoch_sum_n", done ? 0 : t->epoch_sum_n);
    meta_add_int(m, "global_step", t->global_step);
    meta_add_int(m, "micro_step", (int64_t)t->tctx.micro_step);
    meta_add_int(m, "optimizer_step", opt_step);
    meta_add_int(m, "seed", t->seed);
    meta_add_int(m, "param_count", (int64_t)fg_model_param_count(t->model));
    fg_scheduler_state ss;
    fg_scheduler_get_state(t->scheduler, &ss);
    meta_add_exact(m, "scheduler_scale", ss.scale);
    meta_add_exact(m, "scheduler_best", ss.best);
    meta_add_int(m, "scheduler_bad_checks", ss.bad_checks);
    meta_add_int(m, "scheduler_cooldown_left", ss.cooldown_left);
    for (int i = 0; i < t->metrics.count; i++) {
        char key[96];
        snprintf(key, sizeof key, "metric.%s", t->metrics.names[i]);
        meta_add_exact(m, key, t->metrics.values[i]);
    }
}

/* Optimizer state is laid out like the parameters: one slice per parameter tensor. */
static size_t optimizer_tensor_count(fg_trainer *t, fg_optimizer *opt)
{
    size_t params = 0;
    for (size_t i = 0; i < fg_model_tensor_count(t->model); i++)
        params += !fg_model_tensor(t->model, i)->is_buffer;
    return params * fg_optimizer_state_count(opt);
}

fg_status fg_trainer_save_checkpoint(fg_trainer *t, const char *path, fg_error *err)
{
    void *primary = STRAT(t)->primary_replica(t->strategy.state);
    if (!primary || t->rank != 0) return FG_OK; /* only rank 0 writes */
    fg_replica *r = fg_train_replica_model(primary);
    fg_optimizer *opt = fg_train_replica_optimizer(primary);
    size_t np = fg_model_params_size(t->model), nb = fg_model_buffers_size(t->model);
    size_t ns = fg_optimizer_state_count(opt), nt = fg_model_tensor_count(t->model);
    size_t total = nt + optimizer_tensor_count(t, opt);
    float *host = malloc((np * (1 + ns) + nb + 1) * sizeof(float));
    fg_ckpt_tensor *tensors = calloc(total + 1, sizeof *tensors);
    char (*names)[FG_TENSOR_NAME_MAX + 64] = calloc(total + 1, sizeof *names);
    meta_list *meta = calloc(1, sizeof *meta);
    fg_status st = host && tensors && names && meta ? FG_OK
                 : fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory writing the checkpoint", path);
    float *params = host, *buffers = host + np, *state = host + np + nb;
    if (st == FG_OK) st = fetch(t, primary, fg_replica_params(r), params, np, err);
    if (st == FG_OK && nb) st = fetch(t, primary, fg_replica_buffers(r), buffers, nb, err);
    for (size_t i = 0; st == FG_OK && i < ns; i++)
        st = fetch(t, primary, fg_optimizer_state(opt, i, NULL), state + i * np, np, err);
    size_t k = 0;
    for (size_t i = 0; st == FG_OK && i < nt; i++) {
        const fg_tensor_info *ti = fg_model_tensor(t->model, i);
        fg_ckpt_tensor *c = &tensors[k++];
        c->name = ti->name;
        c->dtype = FG_F32;
        c->rank = ti->rank;
        memcpy(c->shape, ti->shape, sizeof ti->shape);
        c->data = (ti->is_buffer ? buffers : params) + ti->offset;
        for (size_t j = 0; j < ns && !ti->is_buffer; j++) {
            const char *sname;
            fg_optimizer_state(opt, j, &sname);
            snprintf(names[k], sizeof names[k], "optimizer.%s.%s", ti->name, sname);
            fg_ckpt_tensor *o = &tensors[k++];
            *o = *c;
            o->name = names[k - 1];
            o->data = state + j * np + ti->offset;
        }
    }
    if (st == FG_OK) {
        fill_trainer_meta(t, meta, fg_optimizer_get_step(opt));
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = 0;
            st = fg_mkdirs(dir, err);
        }
    }
    if (st == FG_OK)
        st = fg_ckpt_write_atomic(path, tensors, k, meta->keys, meta->values, meta->count, err);
    if (st == FG_OK && t->rt->verbosity >= FG_LOG_INFO)
        fprintf(t->out, "checkpoint: %s (epoch %lld, step %lld)\n", path, (long long)t->epoch + 1,
                (long long)t->global_step);
    free(host);
    free(tensors);
    free(names);
    free(meta);
    return st;
}

/* ---- finding a checkpoint ------------------------------------------------------------ */

typedef struct candidate {
    char path[8192];
    double mtime;
    double score;
    int has_score;
} candidate;

static void consider(candidate *best, const char *path, double mtime, int want_metric,
                     const char *metric, int maximize)
{
    double score = mtime;
    int has = 1;
    if (want_metric) {
        fg_ckpt *c = NULL;
        has = 0;
        if (fg_ckpt_open(path, &c, NULL) == FG_OK) {
            char key[128];
            snprintf(key, sizeof key, "metric.%s", metric);
            const char *v = fg_ckpt_meta(c, key);
            if (v && isfinite(strtod(v, NULL))) {
                score = strtod(v, NULL);
                has = 1;
            }
            fg_ckpt_close(c);
        }
        if (has && !maximize) score = -score;
    }
    if (has && (!best->path[0] || score > best->score)) {
        if (snprintf(best->path, sizeof best->path, "%s", path) >= (int)sizeof best->path) return;
        best->score = score;
        best->mtime = mtime;
    }
}

static void scan_folder(candidate *best, const char *dir, int want_metric, const char *metric, int maximize)
{
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 12 || strcmp(e->d_name + len - 12, ".safetensors") != 0 || fg_ckpt_is_temporary(e->d_name))
            continue;
        char path[8192];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        double mtime = (double)sb.st_mtim.tv_sec + 1e-9 * (double)sb.st_mtim.tv_nsec;
        consider(best, path, mtime, want_metric, metric, maximize);
    }
    closedir(d);
}

/* last: the newest checkpoint of any earlier run of this family; best: the best by the
 * checkpoint callback's monitor. */
static fg_status resolve_path(fg_trainer *t, char *out, size_t size, fg_error *err)
{
    const char *want = t->ckpt_path;
    if (strcmp(want, "last") != 0 && strcmp(want, "best") != 0) {
        snprintf(out, size, "%s", want);
        return FG_OK;
    }
    int best_mode = strcmp(want, "best") == 0;
    const char *metric = fg_config_get(t->cfg, "callback.checkpoint", "monitor");
    const char *mode = fg_config_get(t->cfg, "callback.checkpoint", "mode");
    if (best_mode && (!metric || !*metric))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: ckpt_path = best needs [callback.checkpoint] "
                            "monitor to rank checkpoints by", fg_config_path(t->cfg));
    const char *dirpath = fg_config_get(t->cfg, "callback.checkpoint", "dirpath");
    char family[4096];
    memcpy(family, t->run_dir, sizeof family);
    char *slash = strrchr(family, '/');
    if (slash) *slash = 0;
    candidate best;
    memset(&best, 0, sizeof best);
    DIR *d = opendir(family);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "version_", 8) != 0) continue;
        char dir[8192];
        if (snprintf(dir, sizeof dir, "%s/%s/%s", family, e->d_name,
                     dirpath && *dirpath ? dirpath : "checkpoints") >= (int)sizeof dir)
            continue;
        scan_folder(&best, dir, best_mode, metric, mode && strcmp(mode, "max") == 0);
    }
    if (d) closedir(d);
    if (!best.path[0])
        return fg_error_set(err, FG_NOT_FOUND, "ckpt_path = %s: no checkpoint found under %s/version_*/%s",
                            want, family, dirpath && *dirpath ? dirpath : "checkpoints");
    if (snprintf(out, size, "%s", best.path) >= (int)size)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "checkpoint path too long: %s", best.path);
    return FG_OK;
}

/* ---- loading ------------------------------------------------------------------------- */

static fg_status meta_int(fg_ckpt *c, const char *key, int64_t *out, fg_error *err)
{
    const char *v = fg_ckpt_meta(c, key);
    char *end;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || *end || end == v)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: metadata '%s' is %s", fg_ckpt_path(c), key,
                            v ? "not an integer" : "missing");
    *out = x;
    return FG_OK;
}

static fg_status meta_double(fg_ckpt *c, const char *key, double *out, fg_error *err)
{
    const char *v = fg_ckpt_meta(c, key);
    char *end;
    double x = v ? strtod(v, &end) : 0;
    if (!v || *end || end == v)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: metadata '%s' is %s", fg_ckpt_path(c), key,
                            v ? "not a number" : "missing");
    *out = x;
    return FG_OK;
}

fg_status fg_trainer_load_weights(fg_trainer *t, fg_error *err)
{
    char path[4096];
    fg_status st = resolve_path(t, path, sizeof path, err);
    if (st == FG_OK) st = fg_ckpt_open(path, &t->loaded, err);
    if (st != FG_OK) return st;
    const char *format = fg_ckpt_meta(t->loaded, "format");
    if (!format || strcmp(format, FORMAT_TAG) != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: not a fulgur checkpoint (metadata format "
                            "is '%s', expected '%s')", path, format ? format : "missing", FORMAT_TAG);
    for (size_t i = 0; st == FG_OK && i < fg_model_tensor_count(t->model); i++) {
        const fg_tensor_info *ti = fg_model_tensor(t->model, i);
        float *dst = (ti->is_buffer ? t->init_buffers : t->init_params) + ti->offset;
        st = fg_ckpt_read_tensor(t->loaded, ti->name, FG_F32, ti->rank, ti->shape, dst, err);
    }
    if (st == FG_OK) fprintf(t->out, "loaded weights: %s\n", path);
    return st;
}

static fg_status load_optimizer_state(fg_trainer *t, fg_error *err)
{
    void *primary = STRAT(t)->primary_replica(t->strategy.state);
    fg_optimizer *opt = fg_train_replica_optimizer(primary);
    size_t np = fg_model_params_size(t->model), ns = fg_optimizer_state_count(opt);
    float *host = calloc(np + 1, sizeof(float));
    if (!host) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory loading optimizer state");
    fg_status st = FG_OK;
    for (size_t j = 0; st == FG_OK && j < ns; j++) {
        const char *sname;
        float *dev = fg_optimizer_state(opt, j, &sname);
        for (size_t i = 0; st == FG_OK && i < fg_model_tensor_count(t->model); i++) {
            const fg_tensor_info *ti = fg_model_tensor(t->model, i);
            if (ti->is_buffer) continue;
            char name[FG_TENSOR_NAME_MAX + 64];
            snprintf(name, sizeof name, "optimizer.%s.%s", ti->name, sname);
            st = fg_ckpt_read_tensor(t->loaded, name, FG_F32, ti->rank, ti->shape, host + ti->offset, err);
        }
        void *queue = fg_train_replica_queue(primary);
        if (st == FG_OK)
            st = BE(t)->copy(t->backend.state, queue, dev, fg_train_replica_device(primary), host, -1,
                             np * sizeof(float), err);
        if (st == FG_OK) st = BE(t)->queue_sync(t->backend.state, queue, err);
    }
    int64_t step = 0;
    if (st == FG_OK) st = meta_int(t->loaded, "optimizer_step", &step, err);
    if (st == FG_OK) fg_optimizer_set_step(opt, step);
    free(host);
    return st;
}

fg_status fg_trainer_load_training_state(fg_trainer *t, fg_error *err)
{
    fg_ckpt *c = t->loaded;
    int64_t epoch = 0, batches = 0, step = 0, micro = 0, seed = 0;
    fg_scheduler_state ss = {1.0, 0, 0, 0};
    fg_status st = meta_int(c, "epoch", &epoch, err);
    if (st == FG_OK) st = meta_int(c, "batches_done", &batches, err);
    if (st == FG_OK) st = meta_int(c, "global_step", &step, err);
    if (st == FG_OK) st = meta_int(c, "micro_step", &micro, err);
    if (st == FG_OK) st = meta_int(c, "seed", &seed, err);
    if (st == FG_OK) st = meta_double(c, "epoch_sum_loss", &t->resume.sum_loss, err);
    if (st == FG_OK) st = meta_double(c, "epoch_sum_correct", &t->resume.sum_correct, err);
    if (st == FG_OK) st = meta_double(c, "epoch_sum_n", &t->resume.sum_n, err);
    if (st == FG_OK) st = meta_double(c, "scheduler_scale", &ss.scale, err);
    if (st == FG_OK) st = meta_double(c, "scheduler_best", &ss.best, err);
    if (st == FG_OK) st = meta_int(c, "scheduler_bad_checks", &ss.bad_checks, err);
    if (st == FG_OK) st = meta_int(c, "scheduler_cooldown_left", &ss.cooldown_left, err);
    if (st != FG_OK) return st;
    if (seed != t->seed)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: written with trainer.seed = %lld, this run "
                            "has %lld; resume with the same seed (shuffling and dropout follow it)",
                            fg_ckpt_path(c), (long long)seed, (long long)t->seed);
    st = load_optimizer_state(t, err);
    if (st != FG_OK) return st;
    fg_scheduler_set_state(t->scheduler, &ss);
    t->resume.active = 1;
    t->resume.epoch = epoch;
    t->resume.batches_done = batches;
    t->global_step = step;
    t->tctx.micro_step = (uint64_t)micro;
    t->epoch = epoch;
    fprintf(t->out, "resuming at epoch %lld, batch %lld, step %lld\n", (long long)epoch + 1,
            (long long)batches, (long long)step);
    return FG_OK;
}

void fg_trainer_close_checkpoint(fg_trainer *t)
{
    fg_ckpt_close(t->loaded);
    t->loaded = NULL;
}

fg_status fg_trainer_weights_digest(fg_trainer *t, uint64_t *digest, fg_error *err)
{
    void *primary = STRAT(t)->primary_replica(t->strategy.state);
    size_t n = fg_model_params_size(t->model);
    float *host = malloc(n * sizeof(float) + 1);
    if (!host) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory reading the weights");
    fg_status st = fetch(t, primary, fg_replica_params(fg_train_replica_model(primary)), host, n, err);
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)host;
    for (size_t i = 0; st == FG_OK && i < n * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    *digest = h;
    free(host);
    return st;
}
