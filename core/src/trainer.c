/* The trainer: fit (train, validate, test) over the configured plugins. Metrics live on
 * the device and are read only every log_every_n_steps and at the end of a pass. */
#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core_schema.h"
#include "dataloader.h"
#include "fulgur/backend.h"
#include "fulgur/callback.h"
#include "fulgur/data.h"
#include "fulgur/precision.h"
#include "fulgur/strategy.h"
#include "model.h"
#include "optimizer.h"
#include "train_services.h"

#define MAX_CALLBACKS 16

typedef struct plugin_ref {
    const void *vt;
    void *state;
    const fg_instance *inst;
} plugin_ref;

typedef struct split {
    const char *name;
    void *dataset;
    fg_dataset_info info;
    fg_dataloader *loader;
} split;

typedef struct trainer {
    fg_runtime *rt;
    const fg_config *cfg;
    FILE *out;
    plugin_ref backend, data, strategy, precision;
    plugin_ref callbacks[MAX_CALLBACKS];
    int callback_count;
    split train, val, test;
    fg_model *model;
    float *init_params, *init_buffers;
    fg_train_ctx tctx;
    int strategy_ready;
    /* [trainer] */
    int64_t max_epochs, max_steps, limit_train, limit_eval, log_every, seed, val_every;
    int test_after_fit;
    /* [data] loader keys */
    int64_t batch_size, eval_batch_size, num_workers, prefetch;
    int pin_memory, shuffle, drop_last;
    int64_t global_step;
    int64_t step_in_epoch, steps_per_epoch;
    int stop;
} trainer;

static const fg_backend_vtable *BE(const trainer *t) { return t->backend.vt; }
static const fg_data_vtable *DATA(const trainer *t) { return t->data.vt; }
static const fg_strategy_vtable *STRAT(const trainer *t) { return t->strategy.vt; }

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fg_status bind_plugin(trainer *t, int kind, plugin_ref *ref, fg_error *err)
{
    fg_instance *inst = fg_runtime_instance_of_kind(t->rt, kind);
    if (!inst || !inst->initialized)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: no [%s] plugin is configured",
                            fg_config_path(t->cfg), fg_kind_name(kind));
    ref->vt = inst->plugin->vtable;
    ref->state = inst->state;
    ref->inst = inst;
    return FG_OK;
}

/* Functions the trainer needs from a vtable that a plugin may not provide. */
static fg_status require(const plugin_ref *ref, int present, const char *what, fg_error *err)
{
    if (present) return FG_OK;
    return fg_error_set(err, FG_INCOMPATIBLE, "%s.%s (%s) does not support %s",
                        fg_kind_name(ref->inst->kind), ref->inst->name, ref->inst->path, what);
}

static fg_status read_int(trainer *t, const char *section, const char *key, int64_t *out, fg_error *err)
{
    size_t n;
    const fg_option *opts = fg_core_schema(section, &n);
    return fg_section_read_int(t->cfg, section, opts, n, key, out, err);
}

static fg_status read_bool(trainer *t, const char *section, const char *key, int *out, fg_error *err)
{
    size_t n;
    const fg_option *opts = fg_core_schema(section, &n);
    return fg_section_read_bool(t->cfg, section, opts, n, key, out, err);
}

static fg_status read_keys(trainer *t, fg_error *err)
{
    fg_status st = FG_OK;
    struct { const char *s, *k; int64_t *v; } ints[] = {
        {"trainer", "max_epochs", &t->max_epochs}, {"trainer", "max_steps", &t->max_steps},
        {"trainer", "limit_train_batches", &t->limit_train},
        {"trainer", "limit_eval_batches", &t->limit_eval},
        {"trainer", "log_every_n_steps", &t->log_every}, {"trainer", "seed", &t->seed},
        {"trainer", "validate_every_n_epochs", &t->val_every},
        {"data", "batch_size", &t->batch_size}, {"data", "eval_batch_size", &t->eval_batch_size},
        {"data", "num_workers", &t->num_workers}, {"data", "prefetch", &t->prefetch}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0] && st == FG_OK; i++)
        st = read_int(t, ints[i].s, ints[i].k, ints[i].v, err);
    if (st == FG_OK) st = read_bool(t, "trainer", "test_after_fit", &t->test_after_fit, err);
    if (st == FG_OK) st = read_bool(t, "data", "pin_memory", &t->pin_memory, err);
    if (st == FG_OK) st = read_bool(t, "data", "shuffle", &t->shuffle, err);
    if (st == FG_OK) st = read_bool(t, "data", "drop_last", &t->drop_last, err);
    if (t->eval_batch_size == 0) t->eval_batch_size = t->batch_size;
    return st;
}

/* This core computes in float32; a precision plugin asking for more fails clearly. */
static fg_status check_precision(trainer *t, fg_error *err)
{
    const fg_precision_vtable *pv = t->precision.vt;
    fg_precision_info info = {sizeof info, 0, 0, 0, 0, 0};
    fg_status st = require(&t->precision, FG_HAS_FIELD(pv, fg_precision_vtable, info) && pv->info,
                           "info()", err);
    if (st == FG_OK) st = pv->info(t->precision.state, &info, err);
    if (st != FG_OK) return st;
    if (info.param_dtype != FG_F32 || info.compute_dtype != FG_F32 || info.grad_dtype != FG_F32)
        return fg_error_set(err, FG_UNAVAILABLE,
                            "%s: [precision] %s asks for %s compute; this build of the core "
                            "trains in f32 only", fg_config_path(t->cfg), t->precision.inst->name,
                            fg_dtype_name((fg_dtype)info.compute_dtype));
    return FG_OK;
}

static fg_status check_strategy(trainer *t, fg_error *err)
{
    const fg_strategy_vtable *sv = STRAT(t);
    int complete = FG_HAS_FIELD(sv, fg_strategy_vtable, primary_replica) && sv->setup &&
                   sv->train_step && sv->optimizer_step && sv->eval_step && sv->read_metrics;
    fg_status st = require(&t->strategy, complete, "training (setup/train_step/optimizer_step/"
                           "eval_step/read_metrics)", err);
    if (st != FG_OK) return st;
    fg_strategy_info info = {sizeof info, 0, 0, 0};
    if (sv->info && (st = sv->info(t->strategy.state, &info, err)) != FG_OK) return st;
    if (info.needs_comm && !fg_runtime_instance_of_kind(t->rt, FG_KIND_COMM))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [strategy] %s needs a [comm] section",
                            fg_config_path(t->cfg), t->strategy.inst->name);
    if (!info.needs_comm && fg_runtime_instance_of_kind(t->rt, FG_KIND_COMM))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [comm] is configured but [strategy] %s uses no collectives; "
                            "remove [comm] or pick a distributed strategy",
                            fg_config_path(t->cfg), t->strategy.inst->name);
    return FG_OK;
}

static fg_status open_split(trainer *t, split *s, int which, const char *name, int required, fg_error *err)
{
    s->name = name;
    s->info.struct_size = sizeof s->info;
    fg_error e = {0};
    fg_status st = DATA(t)->open(t->data.state, which, &s->dataset, &s->info, &e);
    if (st == FG_NOT_FOUND && !required) {
        s->dataset = NULL;
        return FG_OK;
    }
    if (st != FG_OK)
        return fg_error_set(err, st, "[data] %s: %s split: %s", t->data.inst->name, name, e.message);
    if (s->info.sample_dtype != FG_F32)
        return fg_error_set(err, FG_INCOMPATIBLE, "[data] %s: %s split delivers %s samples; the "
                            "loader takes f32", t->data.inst->name, name,
                            fg_dtype_name((fg_dtype)s->info.sample_dtype));
    if (s->info.num_classes < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[data] %s: %s split has no labels; "
                            "classification needs them", t->data.inst->name, name);
    return FG_OK;
}

static fg_status pinned_alloc(void *ctx, size_t bytes, void **ptr, fg_error *err)
{
    trainer *t = ctx;
    return BE(t)->host_alloc(t->backend.state, bytes, ptr, err);
}

static void pinned_free(void *ctx, void *ptr)
{
    trainer *t = ctx;
    BE(t)->host_free(t->backend.state, ptr);
}

static fg_status make_loader(trainer *t, split *s, int training, fg_error *err)
{
    if (!s->dataset) return FG_OK;
    fg_dataloader_options o;
    memset(&o, 0, sizeof o);
    o.data = DATA(t);
    o.data_state = t->data.state;
    o.dataset = s->dataset;
    o.info = s->info;
    o.name = s->name;
    o.sampler.length = s->info.length;
    o.sampler.batch_size = (int)(training ? t->batch_size : t->eval_batch_size);
    o.sampler.shuffle = training ? t->shuffle : 0;
    o.sampler.drop_last = training ? t->drop_last : 0;
    o.sampler.seed = (uint64_t)t->seed;
    o.sampler.rank = 0;
    o.sampler.world_size = 1;
    o.sampler.even_shards = training;
    o.num_workers = (int)t->num_workers;
    o.prefetch = (int)t->prefetch;
    if (t->pin_memory && BE(t)->host_alloc && BE(t)->host_free) {
        o.alloc = pinned_alloc;
        o.free = pinned_free;
        o.alloc_ctx = t;
    }
    return fg_dataloader_create(&o, &s->loader, err);
}

static fg_status check_splits_agree(trainer *t, const split *s, fg_error *err)
{
    if (!s->dataset) return FG_OK;
    const fg_dataset_info *a = &t->train.info, *b = &s->info;
    int same = a->rank == b->rank && a->num_classes == b->num_classes;
    for (int i = 0; same && i < a->rank; i++) same = a->shape[i] == b->shape[i];
    if (!same)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[data] %s: the %s split's samples or "
                            "classes differ from the train split's", t->data.inst->name, s->name);
    return FG_OK;
}

static fg_status build_model(trainer *t, fg_error *err)
{
    fg_status st = fg_model_build(t->cfg, t->train.info.shape, t->train.info.rank,
                                  t->train.info.num_classes, &t->model, err);
    if (st != FG_OK) return st;
    t->init_params = calloc(fg_model_params_size(t->model) + 1, sizeof(float));
    t->init_buffers = calloc(fg_model_buffers_size(t->model) + 1, sizeof(float));
    if (!t->init_params || !t->init_buffers)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for the initial parameters");
    fg_model_init_params(t->model, (uint64_t)t->seed, t->init_params, t->init_buffers);
    return FG_OK;
}

static fg_status setup_strategy(trainer *t, fg_error *err)
{
    fg_train_ctx *c = &t->tctx;
    c->model = t->model;
    c->cfg = t->cfg;
    c->be = BE(t);
    c->bs = t->backend.state;
    c->init_params = t->init_params;
    c->init_buffers = t->init_buffers;
    c->seed = (uint64_t)t->seed;
    fg_optimizer_config oc;
    fg_status st = fg_optimizer_read_config(t->cfg, &oc, err);
    if (st != FG_OK) return st;
    c->lr = (float)oc.lr;
    int64_t max_batch = t->batch_size > t->eval_batch_size ? t->batch_size : t->eval_batch_size;
    fg_train_services_init(c, (int)max_batch);
    st = STRAT(t)->setup(t->strategy.state, &c->svc, err);
    t->strategy_ready = 1;
    return st;
}

static void report_model(trainer *t)
{
    size_t params = fg_model_param_count(t->model);
    double mib = 1.0 / (1024.0 * 1024.0);
    fprintf(t->out, "model: %zu layers, %zu parameters (%.2f MiB params + %.2f MiB grads), "
            "input (%lld", fg_model_layer_count(t->model), params,
            (double)fg_model_params_size(t->model) * 4 * mib,
            (double)fg_model_params_size(t->model) * 4 * mib, (long long)t->train.info.shape[0]);
    for (int i = 1; i < t->train.info.rank; i++)
        fprintf(t->out, ", %lld", (long long)t->train.info.shape[i]);
    fprintf(t->out, "), %d classes; backend %s, strategy %s, precision %s\n",
            t->train.info.num_classes, t->backend.inst->name, t->strategy.inst->name,
            t->precision.inst->name);
}

/* ---- callbacks ------------------------------------------------------------------------ */

static fg_status emit(trainer *t, int type, int64_t epoch, const fg_metric *metrics, uint32_t n,
                      fg_error *err)
{
    for (int i = 0; i < t->callback_count; i++) {
        const fg_callback_vtable *vt = t->callbacks[i].vt;
        if (!vt->on_event) continue;
        fg_event ev;
        memset(&ev, 0, sizeof ev);
        ev.struct_size = sizeof ev;
        ev.type = (uint32_t)type;
        ev.epoch = epoch;
        ev.global_step = t->global_step;
        ev.step_in_epoch = t->step_in_epoch;
        ev.steps_per_epoch = t->steps_per_epoch;
        ev.learning_rate = t->tctx.lr;
        ev.metrics = metrics;
        ev.metric_count = n;
        ev.is_rank_zero = 1;
        ev.run_dir = ".";
        fg_callback_action act;
        memset(&act, 0, sizeof act);
        act.struct_size = sizeof act;
        fg_error e = {0};
        fg_status st = vt->on_event(t->callbacks[i].state, &ev, &act, &e);
        if (st != FG_OK)
            return fg_error_set(err, st, "[%s] %s", t->callbacks[i].inst->section, e.message);
        if (act.save_checkpoint)
            return fg_error_set(err, FG_UNAVAILABLE, "[%s] asked for a checkpoint; this build "
                                "of the core does not write checkpoints yet",
                                t->callbacks[i].inst->section);
        if (act.stop) {
            fprintf(t->out, "stopping: [%s] %s\n", t->callbacks[i].inst->section,
                    act.reason[0] ? act.reason : "asked to stop");
            t->stop = 1;
        }
    }
    return FG_OK;
}

static void bind_callbacks(trainer *t)
{
    for (int i = 0; i < t->rt->instance_count && t->callback_count < MAX_CALLBACKS; i++) {
        fg_instance *inst = t->rt->instances[i];
        if (inst->kind != FG_KIND_CALLBACK || !inst->initialized) continue;
        plugin_ref *r = &t->callbacks[t->callback_count++];
        r->vt = inst->plugin->vtable;
        r->state = inst->state;
        r->inst = inst;
    }
}

/* ---- passes --------------------------------------------------------------------------- */

static fg_batch as_batch(const fg_batch_view *v, const fg_dataloader *dl)
{
    fg_batch b = {sizeof b, v->samples, v->labels, v->count,
                  (int64_t)fg_dataloader_sample_elems(dl)};
    return b;
}

/* Runs the evaluation split through the model; mean loss and accuracy out. */
static fg_status evaluate(trainer *t, split *s, int64_t epoch, double *loss, double *acc, double *n,
                          fg_error *err)
{
    fg_step_metrics m = {sizeof m, 0, 0, 0};
    fg_status st = STRAT(t)->read_metrics(t->strategy.state, 1, &m, err);
    if (st == FG_OK) st = fg_dataloader_start_epoch(s->loader, 0, 0, err);
    int64_t batches = 0;
    while (st == FG_OK && (t->limit_eval == 0 || batches < t->limit_eval)) {
        const fg_batch_view *v;
        st = fg_dataloader_next(s->loader, &v, err);
        if (st != FG_OK || !v) break;
        fg_batch b = as_batch(v, s->loader);
        st = STRAT(t)->eval_step(t->strategy.state, &b, err);
        fg_dataloader_release(s->loader, v);
        batches++;
    }
    if (st == FG_OK) st = STRAT(t)->read_metrics(t->strategy.state, 1, &m, err);
    if (st != FG_OK) return st;
    *n = m.count;
    *loss = m.count > 0 ? m.loss_sum / m.count : NAN;
    *acc = m.count > 0 ? m.correct / m.count : NAN;
    return FG_OK;
}

static int steps_exhausted(const trainer *t) { return t->max_steps >= 0 && t->global_step >= t->max_steps; }

static fg_status log_step(trainer *t, int64_t epoch, int64_t b, int64_t batches, double *sum_loss,
                          double *sum_correct, double *sum_n, fg_error *err)
{
    fg_step_metrics m = {sizeof m, 0, 0, 0};
    fg_status st = STRAT(t)->read_metrics(t->strategy.state, 1, &m, err);
    if (st != FG_OK) return st;
    if (!isfinite(m.loss_sum))
        return fg_error_set(err, FG_FATAL, "epoch %lld step %lld: the training loss "
                            "is %g; lower [optimizer] lr", (long long)epoch + 1,
                            (long long)t->global_step, m.loss_sum);
    *sum_loss += m.loss_sum;
    *sum_correct += m.correct;
    *sum_n += m.count;
    if (m.count <= 0) return FG_OK;
    double loss = m.loss_sum / m.count, acc = m.correct / m.count;
    if (t->rt->verbosity >= FG_LOG_INFO)
        fprintf(t->out, "epoch %lld step %lld/%lld  loss %.4f  acc %.4f\n", (long long)epoch + 1,
                (long long)b + 1, (long long)batches, loss, acc);
    fg_metric metrics[] = {{"train/step_loss", loss}, {"train/step_acc", acc}};
    t->step_in_epoch = b + 1;
    return emit(t, FG_EVENT_TRAIN_STEP_END, epoch, metrics, 2, err);
}

static fg_status train_epoch(trainer *t, int64_t epoch, fg_error *err)
{
    split *s = &t->train;
    fg_status st = fg_dataloader_start_epoch(s->loader, epoch, 0, err);
    int64_t batches = fg_dataloader_batches_per_epoch(s->loader);
    if (t->limit_train > 0 && t->limit_train < batches) batches = t->limit_train;
    t->steps_per_epoch = batches;
    double sum_loss = 0, sum_correct = 0, sum_n = 0, t0 = now_seconds(), wait = 0;
    int64_t b = 0;
    for (; st == FG_OK && b < batches && !steps_exhausted(t) && !t->stop; b++) {
        const fg_batch_view *v;
        st = fg_dataloader_next(s->loader, &v, err);
        if (st != FG_OK || !v) break;
        wait += v->wait_seconds;
        fg_batch batch = as_batch(v, s->loader);
        t->tctx.micro_step++;
        st = STRAT(t)->train_step(t->strategy.state, &batch, 0, 1, 1.0f, err);
        fg_dataloader_release(s->loader, v);
        t->tctx.step_number = t->global_step + 1;
        if (st == FG_OK) st = STRAT(t)->optimizer_step(t->strategy.state, err);
        if (st != FG_OK) break;
        t->global_step++;
        if (t->global_step % t->log_every == 0)
            st = log_step(t, epoch, b, batches, &sum_loss, &sum_correct, &sum_n, err);
    }
    if (st == FG_OK && t->global_step % t->log_every != 0)
        st = log_step(t, epoch, b - 1, batches, &sum_loss, &sum_correct, &sum_n, err);
    if (st != FG_OK) return st;
    double secs = now_seconds() - t0;
    double loss = sum_n > 0 ? sum_loss / sum_n : NAN, acc = sum_n > 0 ? sum_correct / sum_n : NAN;
    fprintf(t->out, "epoch %lld/%lld  train loss %.4f  acc %.4f  (%.1f s, %.0f samples/s, "
            "data wait %.1f%%)\n", (long long)epoch + 1, (long long)t->max_epochs, loss, acc, secs,
            sum_n / (secs > 0 ? secs : 1), 100.0 * wait / (secs > 0 ? secs : 1));
    fg_metric metrics[] = {{"train/loss", loss}, {"train/acc", acc}};
    return emit(t, FG_EVENT_EPOCH_END, epoch, metrics, 2, err);
}

static fg_status validate_epoch(trainer *t, int64_t epoch, fg_error *err)
{
    split *s = t->val.dataset ? &t->val : NULL;
    if (!s || t->val_every == 0 || (epoch + 1) % t->val_every != 0) return FG_OK;
    double loss, acc, n;
    fg_status st = evaluate(t, s, epoch, &loss, &acc, &n, err);
    if (st != FG_OK) return st;
    fprintf(t->out, "epoch %lld/%lld  val loss %.4f  acc %.4f  (%.0f samples)\n",
            (long long)epoch + 1, (long long)t->max_epochs, loss, acc, n);
    fg_metric metrics[] = {{"val/loss", loss}, {"val/acc", acc}};
    return emit(t, FG_EVENT_VALIDATION_END, epoch, metrics, 2, err);
}

static fg_status test_pass(trainer *t, int64_t epoch, fg_error *err)
{
    if (!t->test.dataset) return FG_OK;
    double loss, acc, n;
    fg_status st = evaluate(t, &t->test, epoch, &loss, &acc, &n, err);
    if (st != FG_OK) return st;
    fprintf(t->out, "test  loss %.4f  acc %.4f  (%.0f samples)\n", loss, acc, n);
    fg_metric metrics[] = {{"test/loss", loss}, {"test/acc", acc}};
    return emit(t, FG_EVENT_TEST_END, epoch, metrics, 2, err);
}

/* FNV-1a over the trained parameters' bytes: two runs that print the same digest ended
 * with bitwise-identical weights. */
static fg_status report_weights_digest(trainer *t, fg_error *err)
{
    const fg_train_services *svc = &t->tctx.svc;
    void *primary = STRAT(t)->primary_replica(t->strategy.state);
    if (!primary) return FG_OK;
    size_t n = fg_model_params_size(t->model);
    float *host = malloc(n * sizeof(float) + 1);
    if (!host) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory reading the weights");
    void *queue = svc->replica_queue(svc->ctx, primary);
    int device = fg_train_replica_device(primary);
    fg_status st = BE(t)->copy(t->backend.state, queue, host, -1, svc->replica_params(svc->ctx, primary),
                               device, n * sizeof(float), err);
    if (st == FG_OK) st = BE(t)->queue_sync(t->backend.state, queue, err);
    if (st == FG_OK) {
        uint64_t h = 1469598103934665603ull;
        const unsigned char *p = (const unsigned char *)host;
        for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
        fprintf(t->out, "weights: %zu parameters, digest %016llx, after %lld steps\n",
                fg_model_param_count(t->model), (unsigned long long)h, (long long)t->global_step);
    }
    free(host);
    return st;
}

static fg_status fit(trainer *t, fg_error *err)
{
    fg_status st = emit(t, FG_EVENT_FIT_START, 0, NULL, 0, err);
    int64_t epoch = 0;
    for (; st == FG_OK && epoch < t->max_epochs && !steps_exhausted(t) && !t->stop; epoch++) {
        st = train_epoch(t, epoch, err);
        if (st == FG_OK) st = validate_epoch(t, epoch, err);
    }
    if (st == FG_OK) st = emit(t, FG_EVENT_FIT_END, epoch, NULL, 0, err);
    if (st == FG_OK) st = report_weights_digest(t, err);
    if (st == FG_OK && t->test_after_fit) st = test_pass(t, epoch, err);
    return st;
}

/* ---- setup and teardown --------------------------------------------------------------- */

static fg_status setup(trainer *t, fg_error *err)
{
    fg_status st = bind_plugin(t, FG_KIND_BACKEND, &t->backend, err);
    if (st == FG_OK) st = bind_plugin(t, FG_KIND_DATA, &t->data, err);
    if (st == FG_OK) st = bind_plugin(t, FG_KIND_STRATEGY, &t->strategy, err);
    if (st == FG_OK) st = bind_plugin(t, FG_KIND_PRECISION, &t->precision, err);
    if (st == FG_OK) st = require(&t->backend, FG_HAS_FIELD(BE(t), fg_backend_vtable, adamw_update),
                                  "the training ops of backend ABI 1.0", err);
    if (st == FG_OK) st = require(&t->data, FG_HAS_FIELD(DATA(t), fg_data_vtable, read) &&
                                  DATA(t)->open && DATA(t)->read, "open()/read()", err);
    if (st == FG_OK) st = check_precision(t, err);
    if (st == FG_OK) st = check_strategy(t, err);
    if (st == FG_OK) st = read_keys(t, err);
    if (st == FG_OK) st = open_split(t, &t->train, FG_SPLIT_TRAIN, "train", 1, err);
    if (st == FG_OK) st = open_split(t, &t->val, FG_SPLIT_VAL, "val", 0, err);
    if (st == FG_OK) st = open_split(t, &t->test, FG_SPLIT_TEST, "test", 0, err);
    if (st == FG_OK) st = check_splits_agree(t, &t->val, err);
    if (st == FG_OK) st = check_splits_agree(t, &t->test, err);
    if (st == FG_OK) st = build_model(t, err);
    if (st == FG_OK) st = setup_strategy(t, err);
    if (st == FG_OK) st = make_loader(t, &t->train, 1, err);
    if (st == FG_OK) st = make_loader(t, &t->val, 0, err);
    if (st == FG_OK) st = make_loader(t, &t->test, 0, err);
    if (st == FG_OK) bind_callbacks(t);
    return st;
}

static void close_split(trainer *t, split *s)
{
    fg_dataloader_destroy(s->loader);
    if (s->dataset && DATA(t)->close) DATA(t)->close(t->data.state, s->dataset);
}

static void teardown(trainer *t)
{
    if (t->strategy_ready && STRAT(t)->teardown) STRAT(t)->teardown(t->strategy.state);
    if (t->data.vt) {
        close_split(t, &t->train);
        close_split(t, &t->val);
        close_split(t, &t->test);
    }
    fg_model_destroy(t->model);
    free(t->init_params);
    free(t->init_buffers);
}

fg_status fg_trainer_run(fg_runtime *rt, fg_verb verb, fg_error *err)
{
    if (verb != FG_VERB_FIT && verb != FG_VERB_CHECK)
        return fg_error_set(err, FG_UNAVAILABLE, "fulgur %s evaluates a trained model from a "
                            "checkpoint, and this build does not read checkpoints yet; "
                            "use `fulgur fit` (it tests at the end)",
                            verb == FG_VERB_VALIDATE ? "validate" : verb == FG_VERB_TEST ? "test" : "predict");
    trainer t;
    memset(&t, 0, sizeof t);
    t.rt = rt;
    t.cfg = rt->cfg;
    t.out = rt->out ? rt->out : stdout;
    fg_status st = setup(&t, err);
    if (st == FG_OK) {
        report_model(&t);
        if (verb == FG_VERB_FIT) st = fit(&t, err);
    }
    teardown(&t);
    return st;
}
