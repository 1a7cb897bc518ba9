/* The trainer: binds the configured plugins, opens the data, builds the model, hands it to
 * the strategy, and runs a verb (fit, validate, test, check). The loops are in
 * trainer_loop.c, checkpoints in trainer_ckpt.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf_config.h"
#include "init_from.h"
#include "io_status.h"
#include "optimizer.h"
#include "rank_agreement.h"
#include "requeue.h"
#include "output_file.h"
#include "output_paths.h"
#include "run_status.h"
#include "run_dir.h"
#include "trainer_ckpt.h"
#include "trainer_events.h"
#include "trainer_internal.h"
#include "trainer_parts.h"
#include "trainer_keys.h"
#include "trainer_loop.h"
#include "trainer_memory.h"
#include "trainer_ops.h"
#include "trainer_precision.h"
#include "trainer.h"

#define BE(t) ((const fg_backend_vtable *)(t)->backend.vt)
#define DATA(t) ((const fg_data_vtable *)(t)->data.vt)
#define STRAT(t) ((const fg_strategy_vtable *)(t)->strategy.vt)

static fg_status bind_plugin(fg_trainer *t, int kind, fg_plugin_ref *ref, fg_error *err)
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

static fg_status require(const fg_plugin_ref *ref, int present, const char *what, fg_error *err)
{
    if (present) return FG_OK;
    return fg_error_set(err, FG_INCOMPATIBLE, "%s.%s (%s) does not support %s",
                        fg_kind_name(ref->inst->kind), ref->inst->name, ref->inst->path, what);
}

/* The precision plugin's dtypes; what this core cannot run fails clearly
 * (trainer_precision.c). */
static fg_status check_precision(fg_trainer *t, fg_error *err)
{
    return fg_trainer_check_precision(t, err);
}

static fg_status check_strategy(fg_trainer *t, fg_error *err)
{
    const fg_strategy_vtable *sv = STRAT(t);
    int complete = FG_HAS_FIELD(sv, fg_strategy_vtable, primary_replica) && sv->setup &&
                   sv->train_step && sv->optimizer_step && sv->eval_step && sv->read_metrics &&
                   sv->primary_replica;
    fg_status st = require(&t->strategy, complete, "training (setup, train_step, optimizer_step, "
                           "eval_step, read_metrics, primary_replica)", err);
    if (st != FG_OK) return st;
    fg_strategy_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    info.world_size = 1;
    if (sv->info && (st = sv->info(t->strategy.state, &info, err)) != FG_OK) return st;
    t->rank = info.rank;
    t->devices = info.devices > 0 ? info.devices : 1;
    t->world_size = info.world_size > 0 ? info.world_size : 1;
    if (t->rank != 0 && !(t->out = fopen("/dev/null", "w"))) /* only rank 0 reports */
        return fg_error_set(err, FG_INTERNAL, "cannot open /dev/null");
    if (info.needs_comm && !fg_runtime_instance_of_kind(t->rt, FG_KIND_COMM))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [strategy] %s needs a [comm] section",
                            fg_config_path(t->cfg), t->strategy.inst->name);
    if (!info.needs_comm && fg_runtime_instance_of_kind(t->rt, FG_KIND_COMM))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [comm] is configured but [strategy] %s "
                            "uses no collectives; remove [comm] or pick a distributed strategy",
                            fg_config_path(t->cfg), t->strategy.inst->name);
    return FG_OK;
}

/* [model] sync_batchnorm over more than one replica needs the strategy's replica
 * all-reduce on every stage holding a batch norm: without it each replica would normalise
 * with its own batch, silently ignoring the key. */
static fg_status check_replica_allreduce(fg_trainer *t, const fg_train_ctx *c, fg_error *err)
{
    if (c->unserved_stages <= 0 || (t->devices <= 1 && t->world_size <= 1)) return FG_OK;
    return fg_error_set(err, FG_UNAVAILABLE, "%s: [model] sync_batchnorm = true: [strategy] %s "
                        "offers no replica all-reduce to %d stage(s) holding a batchnorm layer, "
                        "so their statistics cannot be summed across the run's %d devices; set "
                        "sync_batchnorm = false or use a strategy that offers one (dp, ddp, "
                        "sharded; model-parallel with chunks = 1 and dp_replicas = 1)",
                        fg_config_origin(t->cfg, "model", "sync_batchnorm"),
                        t->strategy.inst->name, c->unserved_stages,
                        t->devices * t->world_size);
}

/* [model] batch_groups = G in one process: on one device its replica runs the G groups; on
 * G devices (dp) each takes one, the loader's groups being dp's shards. */
static fg_status setup_batch_groups(fg_trainer *t, fg_train_ctx *c, fg_error *err)
{
    int g = fg_model_batch_groups(t->model);
    const char *origin = fg_config_origin(t->cfg, "model", "batch_groups");
    c->batch_groups = t->devices == 1 ? g : 1;
    if (g == 1) return FG_OK;
    if (t->world_size > 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] batch_groups = %d takes a "
                            "batch as %d ranks would in one process; [strategy] %s runs %d "
                            "processes, whose ranks are the groups already: remove the key",
                            origin, g, g, t->strategy.inst->name, t->world_size);
    if (t->devices != 1 && t->devices != g)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] batch_groups = %d with %d "
                            "devices: each device takes one group (dp), so the key must be %d "
                            "or the devices 1", origin, g, t->devices, t->devices);
    if (t->keys.batch_size % g)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [model] batch_groups = %d does not "
                            "divide [data] batch_size = %lld", origin, g,
                            (long long)t->keys.batch_size);
    if (t->keys.accumulate > 1)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: [model] batch_groups = %d with [trainer] "
                            "accumulate_grad_batches = %lld: each group's micro-batches would "
                            "add up before the groups do; not supported", origin, g,
                            (long long)t->keys.accumulate);
    return FG_OK;
}

/* What the fp8 amax reduction spans, for the fit's log */
static void log_fp8_amax(fg_trainer *t)
{
    const fg_fp8_amax_plan *a = &t->fp8_amax.plan;
    if (a->groups > 1)
        fprintf(t->out, "fp8: the amax histories (%zu floats) are max-reduced across the "
                "replicas of each of %d pipeline stages (%d replicas each) once per optimizer "
                "step (through the host, after a queue sync)\n", a->floats, a->groups,
                a->replicas);
    else if (a->groups == 1)
        fprintf(t->out, "fp8: the amax histories (%zu floats) are max-reduced across the %d "
                "replicas once per optimizer step (through the host, after a queue sync)\n",
                a->floats, a->replicas);
    else
        fprintf(t->out, "fp8: the amax histories (%zu floats) are max-reduced across the %d "
                "ranks once per optimizer step (%s)\n", a->floats, t->world_size,
                t->fp8_amax.native_queue ? "ordered on the device" : "after a queue sync");
}

/* fp8-mixed across processes or devices: the amax histories max-reduced once per step
 * (fp8_amax.h) */
static fg_status setup_fp8_amax(fg_trainer *t, fg_error *err)
{
    void *primary = STRAT(t)->primary_replica(t->strategy.state);
    fg_ranks ranks = fg_trainer_ranks(t);
    int n = fg_train_live_stages(&t->tctx, NULL, 0);
    void **stages = calloc(n > 0 ? (size_t)n : 1, sizeof *stages);
    if (!stages) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory at fp8 setup");
    fg_train_live_stages(&t->tctx, stages, n);
    fg_status st = fg_fp8_amax_sync_init(&t->fp8_amax, t->model, &ranks, t->tctx.be, t->tctx.bs,
                                         primary ? fg_train_stage_queue(primary) : NULL,
                                         primary ? fg_train_stage_model(primary) : NULL,
                                         stages, n, err);
    free(stages);
    if (st == FG_OK && t->fp8_amax.plan.runs && t->rank == 0 && t->rt->verbosity >= FG_LOG_INFO)
        log_fp8_amax(t);
    return st;
}

static fg_status open_split(fg_trainer *t, fg_data_split *s, int which, const char *name, int required,
                            fg_error *err)
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
    if (s->info.sample_dtype != FG_F32 && s->info.sample_dtype != FG_I32)
        return fg_error_set(err, FG_INCOMPATIBLE, "[data] %s: the %s split delivers %s samples; "
                            "the loader takes f32 values or i32 token ids", t->data.inst->name,
                            name, fg_dtype_name((fg_dtype)s->info.sample_dtype));
    fg_loss_kind loss;
    st = fg_loss_read(t->cfg, &loss, err);
    return st == FG_OK ? fg_loss_check_labels(loss, &s->info, t->data.inst->name, name, err) : st;
}

static fg_status check_splits_agree(fg_trainer *t, const fg_data_split *ref, const fg_data_split *s, fg_error *err)
{
    if (!s->dataset || !ref->dataset) return FG_OK;
    const fg_dataset_info *a = &ref->info, *b = &s->info;
    int same = a->rank == b->rank && a->num_classes == b->num_classes;
    for (int i = 0; same && i < a->rank; i++) same = a->shape[i] == b->shape[i];
    if (!same)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[data] %s: the %s split's samples or classes "
                            "differ from the %s split's", t->data.inst->name, s->name, ref->name);
    return FG_OK;
}

static fg_status pinned_alloc(void *ctx, size_t bytes, void **ptr, fg_error *err)
{
    fg_trainer *t = ctx;
    return BE(t)->host_alloc(t->backend.state, bytes, ptr, err);
}

static void pinned_free(void *ctx, void *ptr)
{
    fg_trainer *t = ctx;
    BE(t)->host_free(t->backend.state, ptr);
}

static int overfitting(const fg_trainer *t)
{
    return t->keys.overfit.is_fraction ? t->keys.overfit.fraction > 0 : t->keys.overfit.count > 0;
}

/* The loaders' copy fence ids, in the order make_loader creates them: the fences of the
 * splits before `upto` (all of them when upto is NULL). The val split of overfit_batches
 * is the train split's loader and takes none. */
static int split_fences(const fg_trainer *t, const fg_data_split *upto)
{
    const fg_data_split *order[] = {&t->train, &t->val, &t->test, &t->predict};
    int n = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0] && order[i] != upto; i++)
        if (order[i]->dataset && (order[i] != &t->val || t->val.dataset != t->train.dataset))
            n += fg_dataloader_slots_for((int)t->keys.num_workers, (int)t->keys.prefetch);
    return n;
}

static fg_status make_loader(fg_trainer *t, fg_data_split *s, int training, fg_error *err)
{
    if (!s->dataset) return FG_OK;
    fg_dataloader_options o;
    memset(&o, 0, sizeof o);
    o.data = DATA(t);
    o.data_state = t->data.state;
    o.dataset = s->dataset;
    o.info = s->info;
    o.name = s->name;
    o.split = training ? FG_SPLIT_TRAIN : s == &t->val ? FG_SPLIT_VAL
            : s == &t->test ? FG_SPLIT_TEST : FG_SPLIT_PREDICT;
    o.sampler.length = s->info.length;
    o.subset = s->subset;
    o.sampler.batch_size = (int)(training ? t->keys.batch_size : t->keys.eval_batch_size);
    o.sampler.shuffle = training && t->keys.shuffle && !overfitting(t);
    o.sampler.drop_last = training ? t->keys.drop_last : 0;
    o.sampler.seed = (uint64_t)t->keys.seed;
    o.sampler.rank = t->rank;
    o.sampler.world_size = t->world_size;
    o.sampler.even_shards = training;
    o.sampler.groups = training ? fg_model_batch_groups(t->model) : 1;
    o.num_workers = (int)t->keys.num_workers;
    o.prefetch = (int)t->keys.prefetch;
    o.fence_base = split_fences(t, s);
    fg_status st = fg_loss_read_ignore(t->cfg, &o.ignore_labels, &o.ignore_label, err);
    if (st != FG_OK) return st;
    if (t->keys.pin_memory && BE(t)->host_alloc && BE(t)->host_free) {
        o.alloc = pinned_alloc;
        o.free = pinned_free;
        o.alloc_ctx = t;
    }
    return fg_dataloader_create(&o, &s->loader, err);
}

/* [data] val_split: the val split becomes samples held out of the train split
 * (data/val_split.c), replacing a stand-in one; a plugin's own val split is kept. */
static fg_status hold_out_val(fg_trainer *t, fg_error *err)
{
    if (!fg_val_split_enabled(&t->keys.val_split)) {
        if (t->val.dataset && t->val.info.stand_in && t->verb == FG_VERB_FIT)
            fprintf(t->out, "note: data.%s validates on its test files; [data] val_split = 0.1 "
                    "holds a validation split out of the train files instead\n",
                    t->data.inst->name);
        return FG_OK;
    }
    /* overfit_batches validates on the very batches it trains (below) */
    if (overfitting(t) || (!t->train.dataset && t->verb != FG_VERB_VALIDATE)) return FG_OK;
    if (!t->train.dataset)
        return fg_error_set(err, FG_NOT_FOUND, "%s: [data] val_split holds samples out of the "
                            "train split, but data.%s has no train split", t->keys.val_split_origin,
                            t->data.inst->name);
    if (t->val.dataset && !t->val.info.stand_in)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [data] val_split holds samples out of "
                            "the train split, but data.%s has a validation split of its own; "
                            "remove val_split or the plugin's", t->keys.val_split_origin,
                            t->data.inst->name);
    if (t->val.dataset && DATA(t)->close) DATA(t)->close(t->data.state, t->val.dataset);
    t->val.dataset = NULL;
    fg_status st = fg_val_split_carve(DATA(t), t->data.state, &t->keys.val_split, t->keys.val_split_origin,
                                      (uint64_t)t->keys.seed, &t->train.info, &t->train.subset,
                                      &t->val.dataset, &t->val.info, &t->val.subset, err);
    if (st == FG_OK)
        fprintf(t->out, "val_split: %lld samples held out of the train split for validation, "
                "%lld left to train on\n", (long long)t->val.info.length,
                (long long)t->train.info.length);
    return st;
}

static fg_status open_data(fg_trainer *t, fg_error *err)
{
    int fit = t->verb == FG_VERB_FIT || t->verb == FG_VERB_CHECK;
    fg_status st = open_split(t, &t->train, FG_SPLIT_TRAIN, "train", fit, err);
    if (st == FG_OK) st = open_split(t, &t->val, FG_SPLIT_VAL, "val", t->verb == FG_VERB_VALIDATE &&
                                           !fg_val_split_enabled(&t->keys.val_split), err);
    if (st == FG_OK) st = open_split(t, &t->test, FG_SPLIT_TEST, "test", t->verb == FG_VERB_TEST, err);
    if (st == FG_OK && t->verb == FG_VERB_PREDICT)
        st = open_split(t, &t->predict, FG_SPLIT_PREDICT, "predict", 1, err);
    const fg_data_split *ref = t->train.dataset ? &t->train : t->val.dataset ? &t->val : &t->test;
    if (st == FG_OK) st = check_splits_agree(t, ref, &t->val, err);
    if (st == FG_OK) st = check_splits_agree(t, ref, &t->test, err);
    if (st == FG_OK) st = hold_out_val(t, err);
    if (st == FG_OK && overfitting(t) && t->train.dataset) {
        /* Lightning's overfit_batches: validate on the very batches being trained. */
        t->val = t->train;
        t->val.name = "val";
    }
    return st;
}

static const fg_data_split *shape_split(const fg_trainer *t)
{
    return t->train.dataset ? &t->train : t->val.dataset ? &t->val
         : t->test.dataset ? &t->test : &t->predict;
}

/* Token ids need an embedding first; one label per position needs (T, classes) logits. */
static fg_status check_model_fits_data(const fg_trainer *t, const fg_data_split *s,
                                       fg_error *err)
{
    uint32_t want = fg_model_input_dtype(t->model);
    const char *who = t->data.inst->name;
    if (s->info.sample_dtype != want)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[data] %s gives %s samples but the model "
                            "reads %s: %s", who, fg_dtype_name((fg_dtype)s->info.sample_dtype),
                            want == FG_I32 ? "token ids" : "f32 values",
                            want == FG_I32 ? "its first layer is an embedding"
                                           : "token ids need a first layer with type = "
                                             "embedding");
    int positions = fg_model_positions(t->model);
    if (s->info.label_elems > 0 && s->info.label_elems != positions)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[data] %s gives %d label(s) per sample but "
                            "the model's last layer scores %d position(s)%s", who,
                            s->info.label_elems, positions,
                            positions == 1 ? ": a sequence model must end in (T, classes)"
                                           : "");
    return FG_OK;
}

static fg_status build_model(fg_trainer *t, fg_error *err)
{
    const fg_data_split *s = shape_split(t);
    fg_fp8_recipe fp8 = fg_trainer_fp8_recipe(t);
    fg_status st = fg_model_build_fp8(t->cfg, s->info.shape, s->info.rank, s->info.num_classes,
                                      &fp8, &t->model, err);
    if (st != FG_OK) return st;
    const char *fp8_note = fg_model_fp8_note(t->model);
    if (fp8_note[0] && t->rank == 0 && t->rt->verbosity >= FG_LOG_INFO)
        fprintf(t->out, "%s\n", fp8_note);
    t->init_params = calloc(fg_model_params_size(t->model) + 1, sizeof(float));
    t->init_buffers = calloc(fg_model_buffers_size(t->model) + 1, sizeof(float));
    if (!t->init_params || !t->init_buffers)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for the initial parameters");
    if ((st = check_model_fits_data(t, s, err)) != FG_OK) return st;
    /* predict writes the softmax out, generate samples from it */
    int keep = t->verb == FG_VERB_PREDICT || t->verb == FG_VERB_GENERATE;
    fg_model_set_keep_probs(t->model, keep);
    int padded = fg_model_padded_classes(t->model);
    if (!keep && padded != fg_model_num_classes(t->model) && t->rank == 0 &&
        t->rt->verbosity >= FG_LOG_INFO)
        fprintf(t->out, "model: logits rows of %d for %d classes ([model] pad_vocab_to)\n",
                padded, fg_model_num_classes(t->model));
    fg_lm_metrics_init(&t->lm, t->model, t->data.inst ? t->data.inst->name : NULL);
    fg_model_init_params(t->model, (uint64_t)t->keys.seed, t->init_params, t->init_buffers);
    char note[1536];
    st = fg_model_init_from_config(t->model, t->cfg, t->init_params, t->init_buffers, note,
                                   sizeof note, err);
    if (st == FG_OK && note[0] && t->rank == 0 && t->rt->verbosity >= FG_LOG_INFO)
        fprintf(t->out, "%s\n", note);
    return st;
}

static fg_status setup_schedule(fg_trainer *t, double *base_lr, fg_error *err)
{
    *base_lr = t->optim.lr;
    int64_t per_epoch = 1;
    if (t->train.dataset) {
        /* optimizer steps per epoch, as train_epoch will take them */
        int64_t per_rank = (t->train.info.length + t->world_size - 1) / t->world_size;
        int64_t batches = t->keys.drop_last ? per_rank / t->keys.batch_size
                                       : (per_rank + t->keys.batch_size - 1) / t->keys.batch_size;
        const fg_batch_limit *limit = overfitting(t) ? &t->keys.overfit : &t->keys.limit_train;
        batches = fg_batch_limit_apply(limit, batches);
        per_epoch = (batches + t->keys.accumulate - 1) / t->keys.accumulate;
    }
    int64_t total = per_epoch * t->keys.max_epochs;
    if (t->keys.max_steps >= 0 && t->keys.max_steps < total) total = t->keys.max_steps;
    return fg_scheduler_create(t->cfg, t->optim.lr, total, t->keys.max_epochs, &t->scheduler, err);
}

static fg_status setup_strategy(fg_trainer *t, fg_error *err)
{
    fg_train_ctx *c = &t->tctx;
    c->model = t->model;
    c->cfg = t->cfg;
    c->optim = &t->optim;
    c->be = BE(t);
    c->bs = t->backend.state;
    c->init_params = t->init_params;
    c->init_buffers = t->init_buffers;
    c->seed = (uint64_t)t->keys.seed;
    c->fence_count = split_fences(t, NULL);
    int32_t ignored;
    fg_status st = fg_loss_read_ignore(t->cfg, &c->ignore_labels, &ignored, err);
    if (st == FG_OK) st = fg_decay_groups_build(t->model, &t->optim, &t->decay, err);
    if (st != FG_OK) return st;
    c->decay_runs = t->decay.runs;
    c->decay_run_count = t->decay.run_count;
    double lr;
    st = setup_schedule(t, &lr, err);
    if (st != FG_OK) return st;
    t->lr = (float)fg_scheduler_lr(t->scheduler, 0, 0);
    int64_t max_batch = t->keys.batch_size > t->keys.eval_batch_size ? t->keys.batch_size : t->keys.eval_batch_size;
    fg_train_services_init(c, (int)max_batch);
    st = setup_batch_groups(t, c, err);
    if (st != FG_OK) return st;
    t->strategy_ready = 1;
    st = STRAT(t)->setup(t->strategy.state, &c->svc, err);
    if (st == FG_OK) st = check_replica_allreduce(t, c, err);
    if (st == FG_OK && fg_model_batch_groups(t->model) > 1 && c->mapped_stages > 0)
        st = fg_error_set(err, FG_UNAVAILABLE, "%s: [model] batch_groups = %d: [strategy] %s "
                          "maps the layers' parameters and gradients (sharded), where the "
                          "groups' gradients cannot be added; not supported",
                          fg_config_origin(t->cfg, "model", "batch_groups"),
                          fg_model_batch_groups(t->model), t->strategy.inst->name);
    return st == FG_OK ? setup_fp8_amax(t, err) : st;
}

static void report_model(fg_trainer *t)
{
    const fg_data_split *s = shape_split(t);
    /* bytes by role follow on the memory line: they depend on precision and strategy */
    fprintf(t->out, "model: %zu layers, %zu parameters, input (", fg_model_layer_count(t->model),
            fg_model_param_count(t->model));
    for (int i = 0; i < s->info.rank; i++)
        fprintf(t->out, "%s%lld", i ? ", " : "", (long long)s->info.shape[i]);
    fprintf(t->out, "), %d classes; backend %s, strategy %s (%d process%s), precision %s\n",
            s->info.num_classes, t->backend.inst->name, t->strategy.inst->name, t->world_size,
            t->world_size > 1 ? "es" : "", t->precision.inst->name);
    size_t swapped = fg_model_relu_after_pool(t->model);
    if (swapped)
        fprintf(t->out, "model: %zu relu layer%s run after the max pooling that follows "
                "(the same values and gradients, a quarter of the relu's memory traffic)\n",
                swapped, swapped == 1 ? "" : "s");
    if (t->run_dir[0]) fprintf(t->out, "run folder: %s\n", t->run_dir);
}

/* In config order, the progress bar last: it draws after whatever the others print
 * (trainer_loop.c erases its line before each event). */
static void bind_callbacks(fg_trainer *t)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < t->rt->instance_count && t->callback_count < FG_MAX_CALLBACKS; i++) {
            fg_instance *inst = t->rt->instances[i];
            if (inst->kind != FG_KIND_CALLBACK || !inst->initialized) continue;
            int bar = strcmp(inst->name, "progress") == 0;
            if (bar != pass) continue;
            fg_plugin_ref *r = &t->callbacks[t->callback_count++];
            if (bar && isatty(fileno(t->out))) t->events.progress_bar = 1;
            r->vt = inst->plugin->vtable;
            r->state = inst->state;
            r->inst = inst;
        }
    }
}

/* check, generate and export leave no run behind: generate is called per prompt, like a filter. */
static fg_status make_run_dir(fg_trainer *t, fg_error *err)
{
    if (t->verb == FG_VERB_CHECK || t->verb == FG_VERB_GENERATE || t->verb == FG_VERB_EXPORT)
        return FG_OK;
    const char *root = fg_config_get(t->cfg, "trainer", "default_root_dir");
    const char *name = fg_config_get(t->cfg, "trainer", "name");
    if (t->rank != 0) return FG_OK;
    fg_status st = fg_run_dir_create(t->cfg, root ? root : "runs", name ? name : "default",
                                     t->run_dir, sizeof t->run_dir, err);
    if (st == FG_OK) st = fg_run_status_begin(t->run_dir, t->rt, t->verb, err);
    if (st != FG_OK) return st;
    /* what the plugins say from here on (a backend's algorithm choices) stays with the run */
    char path[4200];
    snprintf(path, sizeof path, "%s/plugins.log", t->run_dir);
    return fg_output_open(path, "w", &t->rt->plugin_log, err);
}

/* status.json: finished, failed, or interrupted by a requeue signal. */
static fg_status record_outcome(fg_trainer *t, fg_status st, const fg_error *why, fg_error *err)
{
    if (!t->run_dir[0]) return st;
    char stopped[160];
    snprintf(stopped, sizeof stopped, "stopped by the requeue signal after step %lld",
             (long long)t->progress.global_step);
    int requeued = st == FG_OK && t->requeue.stopped;
    int interrupted = st == FG_STATUS_SIGINT || st == FG_STATUS_SIGTERM;
    fg_run_outcome o = {interrupted ? "interrupted" : st != FG_OK ? "failed"
                        : requeued ? "interrupted" : "finished",
                        st != FG_OK ? why->message : requeued ? stopped : NULL,
                        fg_runtime_exit_code(t->rt, st), t->progress.global_step, t->progress.epoch};
    fg_error e = {0};
    fg_status wst = fg_run_status_end(t->run_dir, &o, &e);
    if (wst == FG_OK || st != FG_OK) return st; /* the run's own error comes first */
    return fg_error_set(err, wst, "%s", e.message);
}

static fg_status setup(fg_trainer *t, fg_error *err)
{
    fg_status st = bind_plugin(t, FG_KIND_BACKEND, &t->backend, err);
    if (st == FG_OK) st = bind_plugin(t, FG_KIND_DATA, &t->data, err);
    if (st == FG_OK) st = bind_plugin(t, FG_KIND_STRATEGY, &t->strategy, err);
    if (st == FG_OK) st = bind_plugin(t, FG_KIND_PRECISION, &t->precision, err);
    if (st == FG_OK) st = require(&t->data, FG_HAS_FIELD(DATA(t), fg_data_vtable, read) &&
                                  DATA(t)->open && DATA(t)->read, "open() and read()", err);
    if (st == FG_OK) st = check_precision(t, err);
    if (st == FG_OK) st = check_strategy(t, err);
    if (st == FG_OK) st = fg_trainer_read_keys(t, err);
    if (st == FG_OK && (t->verb == FG_VERB_FIT || t->verb == FG_VERB_CHECK))
        st = fg_output_paths_check(t->cfg, t->keys.final_checkpoint, err);
    if (st == FG_OK) st = open_data(t, err);
    if (st == FG_OK) st = build_model(t, err);
    if (st == FG_OK) st = fg_trainer_apply_precision(t, err);
    if (st == FG_OK) st = fg_trainer_check_backend(t, err);
    if (st == FG_OK) st = make_run_dir(t, err);
    if (st == FG_OK && t->keys.ckpt_path[0]) st = fg_trainer_load_weights(t, err);
    if (st == FG_OK) {
        fg_rank_agreement agree = fg_trainer_rank_agreement(t);
        st = fg_agree_across_ranks(&agree, err);
    }
    if (st == FG_OK) st = setup_strategy(t, err);
    if (st == FG_OK && t->keys.ckpt_path[0] && t->verb == FG_VERB_FIT) st = fg_trainer_load_training_state(t, err);
    fg_trainer_close_checkpoint(t);
    if (st == FG_OK) st = make_loader(t, &t->train, 1, err);
    if (st == FG_OK && t->val.dataset != t->train.dataset) st = make_loader(t, &t->val, 0, err);
    if (st == FG_OK && t->val.dataset == t->train.dataset) t->val.loader = t->train.loader;
    if (st == FG_OK) st = make_loader(t, &t->test, 0, err);
    if (st == FG_OK) st = make_loader(t, &t->predict, 0, err);
    if (st == FG_OK) bind_callbacks(t);
    return st;
}

static void close_split(fg_trainer *t, fg_data_split *s, const fg_data_split *alias)
{
    if (alias && s->dataset == alias->dataset) return; /* overfit: val is the train split */
    fg_dataloader_destroy(s->loader);
    if (s->dataset && DATA(t)->close) DATA(t)->close(t->data.state, s->dataset);
    free(s->subset);
}

static void teardown(fg_trainer *t)
{
    fg_trainer_close_checkpoint(t);
    fg_requeue_disarm(&t->requeue);
    if (t->strategy_ready && STRAT(t)->teardown) STRAT(t)->teardown(t->strategy.state);
    if (t->rank == 0 && t->rt->plugin_log) {
        fclose(t->rt->plugin_log);
        t->rt->plugin_log = NULL;
    }
    if (t->data.vt) {
        close_split(t, &t->val, &t->train);
        close_split(t, &t->train, NULL);
        close_split(t, &t->test, NULL);
        close_split(t, &t->predict, NULL);
    }
    fg_scheduler_destroy(t->scheduler);
    fg_decay_groups_free(&t->decay);
    fg_model_destroy(t->model);
    fg_fp8_amax_sync_free(&t->fp8_amax);
    if (t->rank != 0 && t->out) fclose(t->out);
    free(t->init_params);
    free(t->init_buffers);
}

static fg_status requeue_interrupted(fg_trainer *t, fg_error *err)
{
    fg_requeue_fit f = fg_trainer_requeue_fit(t);
    return fg_requeue_interrupted(&t->requeue, &f, err);
}

static void requeue_after_fit(fg_trainer *t)
{
    fg_requeue_fit f = fg_trainer_requeue_fit(t);
    fg_requeue_after_fit(&t->requeue, &f);
}

static fg_status requeue_submit(fg_trainer *t, fg_error *err)
{
    fg_requeue_fit f = fg_trainer_requeue_fit(t);
    return fg_requeue_submit(&t->requeue, &f, err);
}

static fg_status finish_fit(fg_trainer *t, fg_error *err)
{
    fg_status st = FG_OK;
    if (t->keys.final_checkpoint[0] && t->keys.fast_dev_run == 0) {
        char path[8192];
        if (t->keys.final_checkpoint[0] == '/' || !t->run_dir[0])
            snprintf(path, sizeof path, "%s", t->keys.final_checkpoint);
        else
            snprintf(path, sizeof path, "%s/%s", t->run_dir, t->keys.final_checkpoint);
        st = fg_trainer_save_checkpoint(t, path, err);
    }
    uint64_t digest = 0;
    if (st == FG_OK) st = fg_trainer_weights_digest(t, &digest, err);
    if (st == FG_OK)
        fprintf(t->out, "weights: %zu parameters, digest %016llx, after %lld steps\n",
                fg_model_param_count(t->model), (unsigned long long)digest, (long long)t->progress.global_step);
    if (st == FG_OK) fg_trainer_report_precision(t);
    if (st == FG_OK && t->keys.test_after_fit) {
        st = fg_trainer_requeue_poll(t, 1, err); /* an interrupt during the final checkpoint */
        if (st == FG_OK && !t->requeue.interrupt_signo)
            st = fg_trainer_evaluate_split(t, &t->test, &t->keys.limit_test, "test", FG_EVENT_TEST_END, err);
        if (st == FG_OK) st = fg_trainer_requeue_poll(t, 1, err); /* ... or during the test */
    }
    if (st == FG_OK && t->requeue.interrupt_signo) return requeue_interrupted(t, err);
    return st;
}

/* save_on_exception: the weights and state of the last completed step. */
static void save_after_failure(fg_trainer *t, const fg_error *why)
{
    fg_error e = {0};
    fg_trainer_emit(t, FG_EVENT_EXCEPTION, NULL, 0, &e);
    if (!t->keys.save_on_exception || !t->strategy_ready || !t->run_dir[0]) return;
    char path[8192];
    snprintf(path, sizeof path, "%s/checkpoints/on_exception.safetensors", t->run_dir);
    if (fg_trainer_save_checkpoint(t, path, &e) != FG_OK)
        fprintf(stderr, "fulgur: save_on_exception failed too: %s\n", e.message);
    else
        fprintf(stderr, "fulgur: after \"%s\", the last completed step is saved in %s\n", why->message, path);
}

static fg_status run_verb(fg_trainer *t, const fg_trainer_verbs *verbs, fg_error *err)
{
    switch (t->verb) {
    case FG_VERB_CHECK: return FG_OK;
    case FG_VERB_FIT: {
        fg_status st = fg_trainer_fit(t, err);
        int stopped_in_fit = t->requeue.stopped;
        /* a SIGINT or SIGTERM during the fit's last validation: agreed here, not ignored */
        if (st == FG_OK) st = fg_trainer_requeue_poll(t, 1, err);
        if (st == FG_OK && t->requeue.interrupt_signo) return requeue_interrupted(t, err);
        if (st == FG_OK && t->requeue.stopped && !stopped_in_fit)
            requeue_after_fit(t); /* no step left to checkpoint: finish, not requeue */
        if (st == FG_OK) st = t->requeue.stopped ? requeue_submit(t, err) : finish_fit(t, err);
        else save_after_failure(t, err);
        return st;
    }
    case FG_VERB_VALIDATE:
        return fg_trainer_evaluate_split(t, &t->val, &t->keys.limit_val, "val", FG_EVENT_VALIDATION_END, err);
    case FG_VERB_TEST:
        return fg_trainer_evaluate_split(t, &t->test, &t->keys.limit_test, "test", FG_EVENT_TEST_END, err);
    case FG_VERB_PREDICT:
    case FG_VERB_GENERATE:
    case FG_VERB_EXPORT: {
        fg_status (*fn)(const fg_verb_model *, fg_error *) = NULL;
        const char *name = t->verb == FG_VERB_PREDICT ? "predict" : t->verb == FG_VERB_GENERATE ? "generate" : "export";
        if (verbs)
            fn = t->verb == FG_VERB_PREDICT ? verbs->predict : t->verb == FG_VERB_GENERATE ? verbs->generate : verbs->export_weights;
        fg_verb_model vm = fg_trainer_verb_model(t);
        return fn ? fn(&vm, err) : fg_error_set(err, FG_INTERNAL, "fulgur: the %s verb was not handed to the trainer", name);
    }
    }
    return FG_INTERNAL;
}

fg_status fg_trainer_run(fg_runtime *rt, fg_verb verb, const fg_trainer_verbs *verbs, fg_error *err)
{
    fg_trainer t;
    memset(&t, 0, sizeof t);
    t.rt = rt;
    t.cfg = rt->cfg;
    t.out = rt->out ? rt->out : stdout;
    t.verb = verb;
    const char *ckpt = fg_config_get(rt->cfg, "trainer", "ckpt_path");
    if ((verb == FG_VERB_VALIDATE || verb == FG_VERB_TEST || verb == FG_VERB_PREDICT ||
         verb == FG_VERB_GENERATE) && (!ckpt || !*ckpt))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur %s evaluates a trained model: give "
                            "--ckpt-path FILE|last|best (or [trainer] ckpt_path)",
                            verb == FG_VERB_VALIDATE ? "validate" : verb == FG_VERB_TEST ? "test"
                            : verb == FG_VERB_PREDICT ? "predict" : "generate");
    /* generate's output is its text alone: what the run and the plugins say goes to stderr */
    FILE *saved_out = rt->out;
    t.text_out = t.out;
    if (verb == FG_VERB_GENERATE) t.out = rt->out = stderr;
    fg_status st = setup(&t, err);
    if (st == FG_OK) {
        report_model(&t);
        if (verb == FG_VERB_CHECK) fg_hf_config_print(t.cfg, t.out);
        if (verb == FG_VERB_FIT || verb == FG_VERB_CHECK) fg_decay_groups_report(t.model, &t.optim, t.out);
        if (verb == FG_VERB_FIT || verb == FG_VERB_CHECK) st = fg_trainer_report_memory(&t, err);
        if (st == FG_OK) st = run_verb(&t, verbs, err);
    }
    st = record_outcome(&t, st, err, err);
    teardown(&t);
    rt->out = saved_out;
    return st;
}
