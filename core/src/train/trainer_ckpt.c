/* Checkpoints of a fit: the model's named tensors, optimizer state under optimizer.*, and
 * the trainer state as metadata (progress, loader position, epoch sums, schedule, seed).
 * Strategy-agnostic: the plain model of the primary replica. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint.h"
#include "ckpt_sharded.h"
#include "fulgur/comm.h"
#include "optimizer.h"
#include "runtime.h"
#include "run_dir.h"
#include "trainer_ckpt.h"
#include "train_services.h"
#include "trainer_internal.h"
#include "trainer_precision.h"

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
    void *queue = fg_train_stage_queue(replica);
    fg_status st = BE(t)->copy(t->backend.state, queue, dst, -1, src, fg_train_stage_device(replica),
                               n * sizeof(float), err);
    return st == FG_OK ? BE(t)->queue_sync(t->backend.state, queue, err) : st;
}

static void fill_trainer_meta(fg_trainer *t, meta_list *m, int64_t opt_step)
{
    m->count = 0;
    meta_add_str(m, "format", FORMAT_TAG);
    int done = t->progress.epoch_training_done;
    meta_add_int(m, "epoch", done ? t->progress.epoch + 1 : t->progress.epoch);
    meta_add_int(m, "batches_done", done ? 0 : t->progress.batches_done);
    meta_add_exact(m, "epoch_sum_loss", done ? 0 : t->progress.sum_loss);
    meta_add_exact(m, "epoch_sum_correct", done ? 0 : t->progress.sum_correct);
    meta_add_exact(m, "epoch_sum_n", done ? 0 : t->progress.sum_n);
    meta_add_int(m, "global_step", t->progress.global_step);
    meta_add_int(m, "micro_step", (int64_t)fg_train_services_micro_step(&t->tctx));
    meta_add_int(m, "optimizer_step", opt_step);
    meta_add_int(m, "seed", t->keys.seed);
    meta_add_int(m, "param_count", (int64_t)fg_model_param_count(t->model));
    fg_scheduler_state ss;
    fg_scheduler_get_state(t->scheduler, &ss);
    meta_add_exact(m, "scheduler_scale", ss.scale);
    meta_add_exact(m, "scheduler_best", ss.best);
    meta_add_int(m, "scheduler_bad_checks", ss.bad_checks);
    meta_add_int(m, "scheduler_cooldown_left", ss.cooldown_left);
    fg_loss_scaler_state ls;
    if (fg_trainer_scaler_state(t, &ls)) { /* restored exactly on resume (precision) */
        meta_add_exact(m, "loss_scale", ls.scale);
        meta_add_int(m, "loss_scale_growth_tracker", ls.growth_tracker);
        meta_add_int(m, "loss_scale_hysteresis_left", ls.hysteresis_left);
        meta_add_int(m, "loss_scale_skipped_steps", ls.skipped_steps);
    }
    for (int i = 0; i < t->events.metrics.count; i++) {
        char key[96];
        snprintf(key, sizeof key, "metric.%s", t->events.metrics.names[i]);
        meta_add_exact(m, key, t->events.metrics.values[i]);
    }
}

/* Optimizer state is laid out like the parameters: one slice per parameter tensor. */
static size_t optimizer_tensor_count(fg_trainer *t, size_t slots)
{
    size_t params = 0;
    for (size_t i = 0; i < fg_model_tensor_count(t->model); i++)
        params += !fg_model_tensor(t->model, i)->is_buffer;
    return params * slots;
}

/* Strategies whose primary replica does not hold the whole model (sharded state) hand it
 * over through gather_state/scatter_state: every rank calls, rank 0's buffers are used. */
static int has_gather(const fg_trainer *t)
{
    const fg_strategy_vtable *sv = STRAT(t);
    return FG_HAS_FIELD(sv, fg_strategy_vtable, scatter_state) && sv->gather_state &&
           sv->scatter_state;
}

/* Optimizer state slots and their names: the primary's optimizer, or the config's. */
static size_t state_slots(fg_trainer *t, fg_optimizer *opt, fg_optimizer_config *oc)
{
    if (opt) return fg_optimizer_state_count(opt);
    *oc = t->optim;
    return fg_optimizer_config_state_count(oc);
}

static const char *state_name(fg_optimizer *opt, const fg_optimizer_config *oc, size_t j)
{
    const char *name = NULL;
    if (opt) fg_optimizer_state(opt, j, &name);
    return opt ? name : fg_optimizer_config_state_name(oc, j);
}

/* The whole model's params, buffers and optimizer state to rank 0's host buffers (NULL:
 * skipped; other ranks pass a placeholder, never touched, so every rank asks alike). */
static fg_status gather(fg_trainer *t, float *params, float *buffers, float *state, fg_error *err)
{
    float placeholder = 0;
    float *other = &placeholder;
    int root = t->rank == 0;
    fg_error e = {0};
    fg_status st = STRAT(t)->gather_state(t->strategy.state, params ? (root ? params : other) : NULL,
                                          buffers ? (root ? buffers : other) : NULL,
                                          state ? (root ? state : other) : NULL, &e);
    if (st != FG_OK)
        return fg_error_set(err, st, "[strategy] %s: gathering the model state: %s",
                            t->strategy.inst->name, e.message);
    return FG_OK;
}

static fg_status shard_wanted(fg_trainer *t, fg_shard_desc *d, int *yes, fg_error *err);
static fg_status save_sharded(fg_trainer *t, const char *path, const fg_shard_desc *d,
                              fg_error *err);

fg_status fg_trainer_save_checkpoint(fg_trainer *t, const char *path, fg_error *err)
{
    fg_shard_desc desc;
    int per_rank = 0;
    fg_status sst = shard_wanted(t, &desc, &per_rank, err);
    if (sst != FG_OK || per_rank) return sst == FG_OK ? save_sharded(t, path, &desc, err) : sst;
    void *primary = STRAT(t)->primary_replica(t->strategy.state);
    int gathered = has_gather(t);
    if (!gathered && (!primary || t->rank != 0)) return FG_OK; /* only rank 0 writes */
    fg_replica *r = gathered ? NULL : fg_train_stage_model(primary);
    fg_optimizer *opt = gathered ? NULL : fg_train_stage_optimizer(primary);
    fg_optimizer_config oc;
    memset(&oc, 0, sizeof oc);
    size_t np = fg_model_params_size(t->model), nb = fg_model_buffers_size(t->model);
    size_t ns = state_slots(t, opt, &oc), nt = fg_model_tensor_count(t->model);
    size_t total = nt + optimizer_tensor_count(t, ns);
    size_t host_floats = gathered && t->rank != 0 ? 0 : np * (1 + ns) + nb;
    float *host = malloc((host_floats + 1) * sizeof(float));
    fg_ckpt_tensor *tensors = calloc(total + 1, sizeof *tensors);
    char (*names)[FG_TENSOR_NAME_MAX + 64] = calloc(total + 1, sizeof *names);
    meta_list *meta = calloc(1, sizeof *meta);
    fg_status st = host && tensors && names && meta ? FG_OK
                 : fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory writing the checkpoint", path);
    float *params = host, *buffers = host_floats ? host + np : host;
    float *state = host_floats ? host + np + nb : host;
    if (gathered) {
        if (st == FG_OK) st = gather(t, params, nb ? buffers : NULL, ns ? state : NULL, err);
        if (st != FG_OK || t->rank != 0) goto done; /* every rank gathered; rank 0 writes */
    }
    if (st == FG_OK && !gathered)
        st = fg_replica_download_params(r, fg_train_stage_queue(primary), params, err);
    if (st == FG_OK && nb && !gathered) st = fetch(t, primary, fg_replica_buffers(r), buffers, nb, err);
    for (size_t i = 0; st == FG_OK && !gathered && i < ns; i++)
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
            const char *sname = state_name(opt, &oc, j);
            snprintf(names[k], sizeof names[k], "optimizer.%s.%s", ti->name, sname);
            fg_ckpt_tensor *o = &tensors[k++];
            *o = *c;
            o->name = names[k - 1];
            o->data = state + j * np + ti->offset;
        }
    }
    if (st == FG_OK) {
        /* a sharded optimizer's step follows the trainer's (train services) */
        fill_trainer_meta(t, meta, opt ? fg_optimizer_get_step(opt) : t->progress.global_step);
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
        fprintf(t->out, "checkpoint: %s (epoch %lld, step %lld)\n", path, (long long)t->progress.epoch + 1,
                (long long)t->progress.global_step);
done:
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
    const char *want = t->keys.ckpt_path;
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
    if (!t->run_dir[0]) { /* ranks other than 0 make no run folder: the family from the keys */
        const char *root = fg_config_get(t->cfg, "trainer", "default_root_dir");
        const char *name = fg_config_get(t->cfg, "trainer", "name");
        snprintf(family, sizeof family, "%s/%s", root ? root : "runs", name ? name : "default");
    }
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
    if (st == FG_OK) st = fg_ckpt_open(path, &t->ckpt.loaded, err);
    if (st != FG_OK) return st;
    fg_ckpt_refuse_nonfinite(t->ckpt.loaded, !fg_config_is_true(t->cfg, "trainer", "allow_nonfinite"));
    const char *format = fg_ckpt_meta(t->ckpt.loaded, "format");
    if (format && strcmp(format, FG_SHARDED_INDEX_FORMAT) == 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: a checkpoint written one file per "
                            "rank (sharded_checkpoint = true); merge it into one file first, "
                            "then resume from that under any strategy and world size: fulgur "
                            "ckpt merge %s -o merged.safetensors", path, path);
    if (!format || strcmp(format, FORMAT_TAG) != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: not a fulgur checkpoint (metadata format "
                            "is '%s', expected '%s')", path, format ? format : "missing", FORMAT_TAG);
    for (size_t i = 0; st == FG_OK && i < fg_model_tensor_count(t->model); i++) {
        const fg_tensor_info *ti = fg_model_tensor(t->model, i);
        float *dst = (ti->is_buffer ? t->init_buffers : t->init_params) + ti->offset;
        st = fg_ckpt_read_tensor(t->ckpt.loaded, ti->name, FG_F32, ti->rank, ti->shape, dst, err);
    }
    if (st == FG_OK) fprintf(t->out, "loaded weights: %s\n", path);
    return st;
}

/* Every rank reads the file's optimizer state; the strategy scatters rank 0's. */
static fg_status scatter_optimizer_state(fg_trainer *t, fg_error *err)
{
    fg_optimizer_config oc;
    size_t np = fg_model_params_size(t->model), ns = state_slots(t, NULL, &oc);
    float *host = calloc(np * ns + 1, sizeof(float));
    if (!host) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory loading optimizer state");
    fg_status st = FG_OK;
    for (size_t j = 0; st == FG_OK && j < ns; j++) {
        for (size_t i = 0; st == FG_OK && i < fg_model_tensor_count(t->model); i++) {
            const fg_tensor_info *ti = fg_model_tensor(t->model, i);
            if (ti->is_buffer) continue;
            char name[FG_TENSOR_NAME_MAX + 64];
            snprintf(name, sizeof name, "optimizer.%s.%s", ti->name, fg_optimizer_config_state_name(&oc, j));
            st = fg_ckpt_read_tensor(t->ckpt.loaded, name, FG_F32, ti->rank, ti->shape,
                                     host + j * np + ti->offset, err);
        }
    }
    fg_error e = {0};
    if (st == FG_OK && (st = STRAT(t)->scatter_state(t->strategy.state, host, &e)) != FG_OK)
        st = fg_error_set(err, st, "[strategy] %s: restoring the optimizer state: %s",
                          t->strategy.inst->name, e.message);
    free(host);
    return st;
}

static fg_status load_optimizer_state(fg_trainer *t, fg_error *err)
{
    if (has_gather(t)) return scatter_optimizer_state(t, err);
    void *primary = STRAT(t)->primary_replica(t->strategy.state);
    fg_optimizer *opt = fg_train_stage_optimizer(primary);
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
            st = fg_ckpt_read_tensor(t->ckpt.loaded, name, FG_F32, ti->rank, ti->shape, host + ti->offset, err);
        }
        void *queue = fg_train_stage_queue(primary);
        if (st == FG_OK)
            st = BE(t)->copy(t->backend.state, queue, dev, fg_train_stage_device(primary), host, -1,
                             np * sizeof(float), err);
        if (st == FG_OK) st = BE(t)->queue_sync(t->backend.state, queue, err);
    }
    int64_t step = 0;
    if (st == FG_OK) st = meta_int(t->ckpt.loaded, "optimizer_step", &step, err);
    if (st == FG_OK) fg_optimizer_set_step(opt, step);
    free(host);
    return st;
}

fg_status fg_trainer_load_training_state(fg_trainer *t, fg_error *err)
{
    fg_ckpt *c = t->ckpt.loaded;
    int64_t epoch = 0, batches = 0, step = 0, micro = 0, seed = 0;
    fg_scheduler_state ss = {1.0, 0, 0, 0};
    fg_status st = meta_int(c, "epoch", &epoch, err);
    if (st == FG_OK) st = meta_int(c, "batches_done", &batches, err);
    if (st == FG_OK) st = meta_int(c, "global_step", &step, err);
    if (st == FG_OK) st = meta_int(c, "micro_step", &micro, err);
    if (st == FG_OK) st = meta_int(c, "seed", &seed, err);
    if (st == FG_OK) st = meta_double(c, "epoch_sum_loss", &t->progress.resume.sum_loss, err);
    if (st == FG_OK) st = meta_double(c, "epoch_sum_correct", &t->progress.resume.sum_correct, err);
    if (st == FG_OK) st = meta_double(c, "epoch_sum_n", &t->progress.resume.sum_n, err);
    if (st == FG_OK) st = meta_double(c, "scheduler_scale", &ss.scale, err);
    if (st == FG_OK) st = meta_double(c, "scheduler_best", &ss.best, err);
    if (st == FG_OK) st = meta_int(c, "scheduler_bad_checks", &ss.bad_checks, err);
    if (st == FG_OK) st = meta_int(c, "scheduler_cooldown_left", &ss.cooldown_left, err);
    if (st != FG_OK) return st;
    if (seed != t->keys.seed)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: written with trainer.seed = %lld, this run "
                            "has %lld; resume with the same seed (shuffling and dropout follow it)",
                            fg_ckpt_path(c), (long long)seed, (long long)t->keys.seed);
    st = load_optimizer_state(t, err);
    if (st == FG_OK) st = fg_trainer_restore_scaler(t, c, err);
    if (st != FG_OK) return st;
    fg_scheduler_set_state(t->scheduler, &ss);
    t->progress.resume.active = 1;
    t->progress.resume.epoch = epoch;
    t->progress.resume.batches_done = batches;
    t->progress.global_step = step;
    fg_train_services_resume_micro_step(&t->tctx, (uint64_t)micro);
    t->progress.epoch = epoch;
    fprintf(t->out, "resuming at epoch %lld, batch %lld, step %lld\n", (long long)epoch + 1,
            (long long)batches, (long long)step);
    return FG_OK;
}

void fg_trainer_close_checkpoint(fg_trainer *t)
{
    fg_ckpt_close(t->ckpt.loaded);
    t->ckpt.loaded = NULL;
}

fg_status fg_trainer_weights_digest(fg_trainer *t, uint64_t *digest, fg_error *err)
{
    void *primary = STRAT(t)->primary_replica(t->strategy.state);
    size_t n = fg_model_params_size(t->model);
    int gathered = has_gather(t);
    float *host = malloc((gathered && t->rank != 0 ? 0 : n * sizeof(float)) + 1);
    if (!host) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory reading the weights");
    fg_status st = gathered ? gather(t, host, NULL, NULL, err)
                            : fg_replica_download_params(fg_train_stage_model(primary),
                                                         fg_train_stage_queue(primary), host, err);
    if (gathered && t->rank != 0) n = 0; /* rank 0 reports the digest */
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)host;
    for (size_t i = 0; st == FG_OK && i < n * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    *digest = h;
    free(host);
    return st;
}

/* ---- one checkpoint file per rank ([strategy] sharded_checkpoint = true) ------------------
 * Layout and order of writing in ckpt_sharded.h. Every rank writes its part; rank 0 writes
 * the index once every rank reports its file written (a max all-reduce of the failures). */

static fg_status shard_wanted(fg_trainer *t, fg_shard_desc *d, int *yes, fg_error *err)
{
    const fg_strategy_vtable *sv = STRAT(t);
    *yes = 0;
    if (!FG_HAS_FIELD(sv, fg_strategy_vtable, shard_read) || !sv->shard_describe || !sv->shard_read)
        return FG_OK;
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    fg_error e = {0};
    if (sv->shard_describe(t->strategy.state, d, &e) != FG_OK)
        return fg_error_set(err, FG_INTERNAL, "[strategy] %s: %s", t->strategy.inst->name, e.message);
    *yes = d->per_rank_files;
    return FG_OK;
}

static const fg_comm_vtable *shard_comm(fg_trainer *t, void **state)
{
    *state = NULL;
    return t->world_size > 1 ? fg_runtime_comm(t->rt, state) : NULL;
}

/* Rank 0's path and a save id to every rank (other ranks have no run folder to resolve a
 * callback's relative path against), and every rank's range to every rank (one sum of the
 * offsets-and-counts block, each rank's zeros but its own). */
static fg_status shard_agree(fg_trainer *t, char *path, size_t cap, char *id, size_t id_cap,
                             const fg_shard_desc *d, fg_shard_index *ix, fg_error *err)
{
    void *cs;
    const fg_comm_vtable *comm = shard_comm(t, &cs);
    int n = t->world_size;
    int32_t msg[(8192 + 64) / 4];
    memset(msg, 0, sizeof msg);
    if (t->rank == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf((char *)msg, 64, "s%lld-%llx", (long long)t->progress.global_step,
                 (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
        snprintf((char *)msg + 64, sizeof msg - 64, "%s", path);
    }
    fg_status st = fg_shard_index_alloc_ranges(ix, n) == 0 ? FG_OK
                 : fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    if (st == FG_OK) {
        ix->offsets[t->rank] = d->offset;
        ix->counts[t->rank] = d->count;
    }
    fg_error e = {0};
    if (st == FG_OK && n > 1 && (!comm || !comm->broadcast || !comm->all_reduce))
        st = fg_error_set(err, FG_INCOMPATIBLE, "sharded_checkpoint needs a [comm] with "
                          "broadcast and all_reduce");
    if (st == FG_OK && n > 1 &&
        ((st = comm->broadcast(cs, NULL, msg, sizeof msg / 4, FG_I32, 0, &e)) != FG_OK ||
         (st = comm->all_reduce(cs, NULL, ix->offsets, 2 * (size_t)n, FG_I64, FG_REDUCE_SUM,
                                &e)) != FG_OK))
        st = fg_error_set(err, st, "%s: agreeing on the checkpoint: %s", path, e.message);
    if (st == FG_OK) {
        memcpy(id, msg, id_cap < 64 ? id_cap : 64);
        id[(id_cap < 64 ? id_cap : 64) - 1] = 0;
        snprintf(path, cap, "%s", (const char *)msg + 64);
    }
    return st;
}

/* The merged checkpoint's tensors in the gathered writer's order (rank 0). */
static fg_status shard_layout(fg_trainer *t, fg_shard_index *ix, char (**names)[FG_TENSOR_NAME_MAX + 64],
                              fg_error *err)
{
    size_t nt = fg_model_tensor_count(t->model), total = nt + optimizer_tensor_count(t, ix->slot_count);
    ix->tensors = calloc(total + 1, sizeof *ix->tensors);
    *names = calloc(total + 1, sizeof **names);
    if (!ix->tensors || !*names) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < nt; i++) {
        const fg_tensor_info *ti = fg_model_tensor(t->model, i);
        fg_shard_tensor *c = &ix->tensors[k++];
        c->name = ti->name;
        c->rank = ti->rank;
        memcpy(c->shape, ti->shape, sizeof ti->shape);
        c->source = ti->is_buffer ? FG_SHARD_SRC_BUFFERS : FG_SHARD_SRC_PARAMS;
        c->offset = (int64_t)ti->offset;
        for (size_t j = 0; j < ix->slot_count && !ti->is_buffer; j++) {
            snprintf((*names)[k], sizeof (*names)[k], "optimizer.%s.%s", ti->name, ix->slot_names[j]);
            ix->tensors[k] = *c;
            ix->tensors[k].name = (*names)[k];
            ix->tensors[k].source = (int)j;
            k++;
        }
    }
    ix->tensor_count = k;
    return FG_OK;
}

/* This rank's part to host memory and into its file. */
static fg_status shard_write_mine(fg_trainer *t, const char *path, const fg_shard_index *ix,
                                  fg_error *err)
{
    int64_t count = ix->counts[t->rank], nb = t->rank == 0 ? ix->buffer_count : 0;
    float *host = malloc(((size_t)count * (1 + ix->slot_count) + (size_t)nb + 1) * sizeof(float));
    if (!host) return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for the shard", path);
    float *buffers = host + count, *opt = buffers + nb;
    fg_error e = {0};
    fg_status st = STRAT(t)->shard_read(t->strategy.state, host, nb ? buffers : NULL, opt, &e);
    if (st != FG_OK)
        st = fg_error_set(err, st, "[strategy] %s: reading rank %d's shard: %s",
                          t->strategy.inst->name, t->rank, e.message);
    if (st == FG_OK) st = fg_shard_write_file(path, ix, t->rank, host, nb ? buffers : NULL, opt, err);
    free(host);
    return st;
}

static fg_status save_sharded(fg_trainer *t, const char *asked, const fg_shard_desc *d,
                              fg_error *err)
{
    char path[8192], id[64], dir[8192], shard_dir[1024];
    fg_shard_index ix;
    memset(&ix, 0, sizeof ix);
    fg_optimizer_config oc;
    memset(&oc, 0, sizeof oc);
    ix.slot_count = state_slots(t, NULL, &oc);
    if (ix.slot_count > FG_SHARD_MAX_SLOTS)
        return fg_error_set(err, FG_INTERNAL, "%s: %zu optimizer state slots", asked, ix.slot_count);
    for (size_t j = 0; j < ix.slot_count; j++) ix.slot_names[j] = fg_optimizer_config_state_name(&oc, j);
    snprintf(path, sizeof path, "%s", asked);
    snprintf(dir, sizeof dir, "%s", asked);
    char *slash = strrchr(dir, '/');
    fg_status st = FG_OK;
    if (t->rank == 0 && slash && slash != dir) { /* the folder exists before any rank writes */
        *slash = 0;
        st = fg_mkdirs(dir, err);
    }
    /* also before: a save_last link replaced after the previous save freed a folder */
    if (st == FG_OK && t->rank == 0) fg_shard_collect(path);
    if (st == FG_OK) st = shard_agree(t, path, sizeof path, id, sizeof id, d, &ix, err);
    ix.id = id;
    ix.strategy = t->strategy.inst->name;
    ix.layout = d->layout;
    ix.world_size = t->world_size;
    ix.param_count = (int64_t)fg_model_params_size(t->model);
    ix.buffer_count = (int64_t)fg_model_buffers_size(t->model);
    if (st == FG_OK) st = fg_shard_dir_name(path, id, shard_dir, sizeof shard_dir, err);
    ix.shard_dir = shard_dir;
    fg_status mine = st == FG_OK ? shard_write_mine(t, path, &ix, err) : st;
    /* every rank's file is on disk before the index names them */
    void *cs;
    const fg_comm_vtable *comm = shard_comm(t, &cs);
    int32_t failed = mine != FG_OK;
    fg_error e = {0};
    if (st == FG_OK && t->world_size > 1 &&
        (st = comm->all_reduce(cs, NULL, &failed, 1, FG_I32, FG_REDUCE_MAX, &e)) != FG_OK)
        st = fg_error_set(err, st, "%s: agreeing that every shard was written: %s", path, e.message);
    if (st == FG_OK && mine != FG_OK) st = mine;
    else if (st == FG_OK && failed)
        st = fg_error_set(err, FG_INTERNAL, "%s: another rank could not write its shard (its "
                          "error names it); the previous checkpoint stays", path);
    char (*names)[FG_TENSOR_NAME_MAX + 64] = NULL;
    meta_list *meta = t->rank == 0 ? calloc(1, sizeof *meta) : NULL;
    if (st == FG_OK && t->rank == 0 && !meta) st = fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    if (st == FG_OK && t->rank == 0) st = shard_layout(t, &ix, &names, err);
    if (st == FG_OK && t->rank == 0) {
        fill_trainer_meta(t, meta, t->progress.global_step);
        st = fg_shard_write_index(path, &ix, meta->keys, meta->values, meta->count, err);
        if (st == FG_OK) fg_shard_collect(path);
        if (st == FG_OK && t->rt->verbosity >= FG_LOG_INFO)
            fprintf(t->out, "checkpoint: %s (epoch %lld, step %lld; index of %d shard files in %s)\n",
                    path, (long long)t->progress.epoch + 1, (long long)t->progress.global_step, t->world_size, shard_dir);
    }
    free(meta);
    free(names);
    free(ix.offsets); /* and counts */
    free(ix.tensors);
    return st;
}
