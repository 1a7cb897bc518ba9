/* The fit loop: epochs of micro-batches, optimizer steps with accumulation, clipping and
 * the schedule, validation inside or at the end of epochs, logging, callbacks. Metrics are
 * read from the device only at log points and at the end of passes. */
#include <math.h>
#include <string.h>

#include "progress.h"
#include "requeue.h"
#include "step_graph.h"
#include "step_sink.h"
#include "train_services.h"
#include "train_stage_fused.h"
#include "trainer_checks.h"
#include "trainer_ckpt.h"
#include "trainer_events.h"
#include "trainer_internal.h"
#include "trainer_keys.h"
#include "trainer_loop.h"
#include "trainer_memory.h"
#include "trainer_parts.h"
#include "trainer_precision.h"
#include "trainer_strategy.h"

#define STRAT(t) ((const fg_strategy_vtable *)(t)->strategy.vt)

/* A single process ends an evaluation pass at the batch a SIGINT or SIGTERM came in; under
 * a comm every rank finishes it (a batch may hold collectives) and the agreement after it
 * stops the run. */
static int eval_interrupted(fg_trainer *t, const char *prefix)
{
    fg_requeue_fit f = fg_trainer_requeue_fit(t);
    fg_requeue_test_eval(&t->requeue, &f, prefix);
    return t->world_size == 1 && fg_requeue_interrupt_pending(&t->requeue);
}

/* Mean loss and accuracy of a pass over an evaluation split (every rank's shard summed);
 * *n = -1 when an interrupt cut it short. */
static fg_status run_eval(fg_trainer *t, fg_data_split *s, const char *prefix,
                          int64_t max_batches, double *loss, double *acc, double *n,
                          fg_error *err)
{
    fg_step_metrics m = {sizeof m, 0, 0, 0};
    /* Training sums not yet logged (validation inside an epoch) go to the epoch's sums. */
    fg_status st = STRAT(t)->read_metrics(t->strategy.state, 1, &m, err);
    fg_progress_add(&t->progress, &m);
    if (st == FG_OK) st = fg_dataloader_start_epoch(s->loader, 0, 0, err);
    int cut = 0;
    for (int64_t b = 0; st == FG_OK && !cut && (max_batches < 0 || b < max_batches); b++) {
        const fg_batch_view *v;
        st = fg_dataloader_next(s->loader, &v, err);
        if (st != FG_OK || !v) break;
        fg_batch batch = fg_dataloader_batch(s->loader, v);
        st = STRAT(t)->eval_step(t->strategy.state, &batch, err);
        fg_dataloader_release(s->loader, v);
        if (st == FG_OK && eval_interrupted(t, prefix)) cut = 1;
    }
    if (st == FG_OK) st = STRAT(t)->read_metrics(t->strategy.state, 1, &m, err);
    if (st != FG_OK) return st;
    *n = cut ? -1 : m.count;
    *loss = m.count > 0 ? m.loss_sum / m.count : NAN;
    *acc = m.count > 0 ? m.correct / m.count : NAN;
    return FG_OK;
}

/* "acc", or "mae" under [model] loss = mse (model/loss.h). */
static const char *metric_name(const fg_trainer *t)
{
    return fg_loss_metric_name(fg_model_loss(t->model));
}

fg_status fg_trainer_evaluate_split(fg_trainer *t, fg_data_split *s, const fg_batch_limit *limit,
                                    const char *prefix, int event, fg_error *err)
{
    if (!s->dataset) return FG_OK;
    int64_t batches = fg_batch_limit_apply(limit, fg_dataloader_batches_per_epoch(s->loader));
    double loss, acc, n;
    fg_status st = run_eval(t, s, prefix, batches, &loss, &acc, &n, err);
    if (st != FG_OK || n < 0) return st; /* cut short: no metrics of a partial pass */
    char lmt[64];
    fg_lm_metrics_text(&t->lm, loss, lmt, sizeof lmt);
    if (!(t->events.progress_bar && t->verb == FG_VERB_FIT && event == FG_EVENT_VALIDATION_END))
        fprintf(t->out, "%-5s loss %.4f  %s %.4f%s  (%.0f samples, after step %lld)\n", prefix,
                loss, metric_name(t), acc, lmt, n, (long long)t->progress.global_step); /* a bar shows them in its line */
    char ln[64], an[64];
    snprintf(ln, sizeof ln, "%s/loss", prefix);
    snprintf(an, sizeof an, "%s/%s", prefix, metric_name(t));
    char sn[64]; /* under mse the loss is the mean squared error: logged by that name too */
    snprintf(sn, sizeof sn, "%s/mse", prefix);
    fg_metric metrics[3 + FG_LM_METRICS_MAX] = {{ln, loss}, {an, acc}, {sn, loss}};
    uint32_t count = fg_model_loss(t->model) == FG_LOSS_KIND_MSE ? 3 : 2;
    char lm_prefix[64], lm_names[FG_LM_METRICS_MAX][FG_LM_METRIC_NAME_MAX];
    snprintf(lm_prefix, sizeof lm_prefix, "%s/", prefix);
    count += fg_lm_metrics_add(&t->lm, lm_prefix, loss, metrics + count, lm_names);
    if (t->scheduler && event == FG_EVENT_VALIDATION_END) {
        const char *mon = fg_scheduler_monitor(t->scheduler);
        for (uint32_t i = 0; mon && i < count; i++) fg_scheduler_observe(t->scheduler, metrics[i].name, metrics[i].value);
    }
    return fg_trainer_emit(t, event, metrics, count, err);
}

/* Under a comm, what the ranks agreed (requeue.h), never one rank's own clock. */
static int time_is_up(const fg_trainer *t)
{
    fg_requeue_fit f = fg_trainer_requeue_fit(t);
    return fg_requeue_time_is_up(&t->requeue, &f);
}

static int must_stop(const fg_trainer *t)
{
    return t->stop || (t->keys.max_steps >= 0 && t->progress.global_step >= t->keys.max_steps) || time_is_up(t);
}

/* [backend] cuda_graphs: the step's values to the device, and on a replayed step the rate
 * and the step number the optimizer step would have moved. */
static fg_status graph_before(fg_trainer *t, const fg_batch *b, int *replayed, fg_error *err)
{
    /* the rate the optimizer step computes from the same progress */
    float lr = (float)fg_scheduler_lr(t->scheduler, t->progress.global_step, t->progress.epoch);
    fg_status st = fg_step_graph_before(&t->graph, &t->tctx, b, lr, t->progress.global_step + 1,
                                        replayed, err);
    if (st == FG_OK && *replayed) {
        t->lr = lr;
        t->progress.global_step++;
    }
    return st;
}

/* Interval bookkeeping between two log points. Step time is summed step by step (from
 * asking the loader for the step's first batch to the end of its optimizer update), so
 * validation and callbacks between steps do not count. */
typedef struct log_window {
    double step_time;
    double data_wait;
    int64_t steps;
} log_window;

#define STEP_METRICS_MAX (6 + FG_LM_METRICS_MAX + FG_PHASE_COUNT + FG_SINK_SLOTS)

static fg_status log_step(fg_trainer *t, log_window *w, fg_error *err)
{
    fg_step_metrics m = {sizeof m, 0, 0, 0};
    fg_status st = STRAT(t)->read_metrics(t->strategy.state, 1, &m, err);
    if (st != FG_OK || m.count <= 0) return st;
    fg_progress_add(&t->progress, &m);
    double elapsed = w->step_time, steps = w->steps > 0 ? (double)w->steps : 1;
    double loss = m.loss_sum / m.count, acc = m.correct / m.count;
    if (t->rt->step_observer &&
        t->rt->step_observer(t->rt->step_observer_user, t->progress.global_step, t->lr, loss))
        t->stop = 1;
    /* ppl and bpb stay out of this line (they are in the step metrics): tests compare these
     * lines across strategies, and two more rounded figures of one loss add nothing */
    if (t->rt->verbosity >= FG_LOG_INFO && !t->events.progress_bar)
        fprintf(t->out, "epoch %lld step %lld/%lld  loss %.4f  %s %.4f  lr %.4g\n",
                (long long)t->progress.epoch + 1, (long long)t->progress.step_in_epoch, (long long)t->progress.steps_per_epoch,
                loss, metric_name(t), acc, t->lr);
    fg_metric metrics[STEP_METRICS_MAX] = {
        {"train/step_loss", loss}, {"train/step_acc", acc}, {"lr", t->lr},
        {"time/step_s", elapsed / steps}, {"time/data_wait_s", w->data_wait / steps},
        {"throughput/samples_per_s", elapsed > 0 ? m.count / elapsed : 0}};
    if (fg_model_loss(t->model) == FG_LOSS_KIND_MSE) metrics[1].name = "train/step_mae";
    uint32_t n = 6;
    char lm_names[FG_LM_METRICS_MAX][FG_LM_METRIC_NAME_MAX];
    n += fg_lm_metrics_add(&t->lm, "train/step_", loss, metrics + n, lm_names);
    if (t->checks.sink_ready)
        n += fg_step_sink_drain(&t->checks.sink, w->steps, t->checks.timing, metrics + n, STEP_METRICS_MAX - n);
    w->step_time = 0;
    w->data_wait = 0;
    w->steps = 0;
    st = fg_trainer_emit(t, FG_EVENT_TRAIN_STEP_END, metrics, n, err);
    /* A callback (nan_guard) may have stopped the run with its own words; if none did, a
     * diverged run still ends here. */
    if (st == FG_OK && !isfinite(m.loss_sum) && !t->stop)
        return fg_error_set(err, FG_FATAL, "epoch %lld step %lld: the training loss is %g; lower "
                            "[optimizer] lr, or clip gradients (trainer.gradient_clip_val)",
                            (long long)t->progress.epoch + 1, (long long)t->progress.global_step, m.loss_sum);
    return st;
}

/* The primary stage when the strategy's gradients and update are all there
 * (fg_strategy_info.primary_grads) and it can clip on the device; else NULL. */
static void *device_clip_stage(fg_trainer *t)
{
    void *primary = fg_trainer_primary_grads_stage(t);
    return primary && fg_train_stage_can_clip_on_device(&t->tctx, primary) ? primary : NULL;
}

/* Clipping by norm without a host round trip: the factor stays on the device and the
 * step's fused update reads it. */
static fg_status clip_on_device(fg_trainer *t, void *stage, fg_error *err)
{
    const fg_strategy_vtable *sv = STRAT(t);
    fg_status st = sv->sync_grads ? sv->sync_grads(t->strategy.state, err) : FG_OK;
    if (st != FG_OK) return st;
    return fg_train_stage_clip_on_device(&t->tctx, stage, t->keys.clip_val,
                                         t->progress.global_step + 1, err);
}

static fg_status clip_gradients(fg_trainer *t, fg_error *err)
{
    void *stage = t->keys.clip_by_value ? NULL : device_clip_stage(t);
    if (stage) return clip_on_device(t, stage, err);
    const fg_strategy_vtable *sv = STRAT(t);
    if (!FG_HAS_FIELD(sv, fg_strategy_vtable, scale_grads) || !sv->grad_norm_sq || !sv->scale_grads)
        return fg_error_set(err, FG_UNAVAILABLE, "[strategy] %s cannot clip gradients "
                            "(trainer.gradient_clip_val)", t->strategy.inst->name);
    fg_status st = sv->sync_grads ? sv->sync_grads(t->strategy.state, err) : FG_OK;
    if (st != FG_OK) return st;
    if (t->keys.clip_by_value) return sv->scale_grads(t->strategy.state, 1.0f, (float)t->keys.clip_val, err);
    double sq;
    st = sv->grad_norm_sq(t->strategy.state, &sq, err);
    if (st != FG_OK) return st;
    double norm = sqrt(sq), coef = t->keys.clip_val / (norm + 1e-6); /* torch.nn.utils.clip_grad_norm_ */
    return coef < 1.0 ? sv->scale_grads(t->strategy.state, (float)coef, 0.0f, err) : FG_OK;
}

/* A step the loss scaler skips (inf/NaN gradients) still runs the strategy's
 * optimizer_step, with the services' updates switched off: no parameter, optimizer state,
 * step counter or schedule moves, and the next step's gradients overwrite these. With the
 * scaler on the device the host does not know: the step counts, its update writes nothing
 * (trainer_precision.h). */
static fg_status optimizer_step(fg_trainer *t, fg_error *err)
{
    int skip = 0;
    fg_status st = fg_trainer_unscale_grads(t, &skip, err); /* gradients unscaled before clipping */
    if (st == FG_OK && !skip && t->keys.clip_val > 0) st = clip_gradients(t, err);
    if (st != FG_OK) return st;
    t->lr = (float)fg_scheduler_lr(t->scheduler, t->progress.global_step, t->progress.epoch);
    fg_step_args args = {sizeof args, t->lr, skip, t->progress.global_step + 1};
    st = STRAT(t)->optimizer_step(t->strategy.state, &args, err);
    if (st == FG_OK && !skip) t->progress.global_step++;
    return st;
}

static int validation_due_this_epoch(const fg_trainer *t)
{
    return t->val.dataset && t->keys.check_val_every_n_epoch > 0 &&
           (t->progress.epoch + 1) % t->keys.check_val_every_n_epoch == 0;
}

static fg_status validate(fg_trainer *t, fg_error *err)
{
    return fg_trainer_evaluate_split(t, &t->val, &t->keys.limit_val, "val", FG_EVENT_VALIDATION_END, err);
}

static int64_t training_batches(const fg_trainer *t)
{
    int64_t all = fg_dataloader_batches_per_epoch(t->train.loader);
    if (t->keys.overfit.is_fraction ? t->keys.overfit.fraction > 0 : t->keys.overfit.count > 0)
        return fg_batch_limit_apply(&t->keys.overfit, all);
    return fg_batch_limit_apply(&t->keys.limit_train, all);
}

static fg_status train_epoch(fg_trainer *t, fg_error *err)
{
    fg_data_split *s = &t->train;
    int64_t batches = training_batches(t);
    t->progress.steps_per_epoch = (batches + t->keys.accumulate - 1) / t->keys.accumulate;
    int64_t first = fg_progress_start_epoch(&t->progress, batches);
    int64_t val_every = t->keys.val_check_interval.is_fraction
                            ? (int64_t)floor(t->keys.val_check_interval.fraction * (double)batches)
                            : t->keys.val_check_interval.count;
    if (val_every < 1) val_every = 1;
    fg_status st = fg_dataloader_start_epoch(s->loader, t->progress.epoch, first, err);
    double t0 = fg_now_seconds(), wait = 0, samples = 0;
    log_window w = {0, 0, 0};
    int pending_log = 0, checked = fg_trainer_step_checked(t);
    double step_start = t0;
    for (int64_t b = first; st == FG_OK && b < batches && !must_stop(t); b++) {
        const fg_batch_view *v;
        int micro = (int)(b % t->keys.accumulate), final = micro == t->keys.accumulate - 1 || b == batches - 1;
        if (micro == 0 || b == first) step_start = fg_now_seconds();
        st = fg_dataloader_next(s->loader, &v, err);
        if (st != FG_OK || !v) break;
        wait += v->wait_seconds;
        w.data_wait += v->wait_seconds;
        samples += v->count;
        fg_batch batch = fg_dataloader_batch(s->loader, v);
        if (checked && fg_batch_inputs_dtype(&batch) == FG_F32) /* token ids are finite */
            t->checks.nonfinite_inputs += fg_count_nonfinite(fg_batch_inputs(&batch), (size_t)batch.count * (size_t)batch.sample_elems);
        fg_train_services_next_micro_batch(&t->tctx, micro);
        int replayed = 0; /* [backend] cuda_graphs: the whole step was a graph launch */
        if (t->graph.stage) st = graph_before(t, &batch, &replayed, err);
        if (st == FG_OK && !replayed)
            st = STRAT(t)->train_step(t->strategy.state, &batch, micro, final, fg_trainer_grad_scale(t), err);
        if (st != FG_OK && t->graph.capturing) st = fg_step_graph_after(&t->graph, &t->tctx, st, err);
        fg_dataloader_release(s->loader, v);
        t->progress.batches_done = b + 1;
        if (st != FG_OK || !final) continue;
        if (checked && ((st = fg_trainer_finite_check(t, err)) != FG_OK || t->stop)) {
            t->progress.batches_done = b - micro; /* the step was not taken: a resume redoes it */
            break;
        }
        if (st == FG_OK && !replayed) st = fg_fp8_amax_sync_step(&t->fp8_amax, err);
        if (st == FG_OK && !replayed) st = optimizer_step(t, err);
        if (t->graph.stage && !replayed) st = fg_step_graph_after(&t->graph, &t->tctx, st, err);
        if (st == FG_OK) st = fg_trainer_requeue_poll(t, 0, err);
        checked = fg_trainer_step_checked(t);
        t->progress.step_in_epoch = (b + 1 + t->keys.accumulate - 1) / t->keys.accumulate;
        w.step_time += fg_now_seconds() - step_start;
        w.steps++;
        pending_log = 1;
        if (st == FG_OK && (t->progress.global_step % t->keys.log_every == 0 ||
                            (t->keys.ckpt_every_steps > 0 &&
                             t->progress.global_step % t->keys.ckpt_every_steps == 0))) {
            st = log_step(t, &w, err);
            pending_log = 0;
        }
        if (st == FG_OK && (b + 1) % val_every == 0 && b + 1 < batches && validation_due_this_epoch(t))
            st = validate(t, err);
    }
    if (st == FG_OK && pending_log) st = log_step(t, &w, err);
    if (st != FG_OK) return st;
    t->progress.epoch_training_done = t->progress.batches_done >= batches;
    double secs = fg_now_seconds() - t0, n = t->progress.sum_n;
    double loss = n > 0 ? t->progress.sum_loss / n : NAN, acc = n > 0 ? t->progress.sum_correct / n : NAN;
    char lmt[64];
    fg_lm_metrics_text(&t->lm, loss, lmt, sizeof lmt);
    if (!t->events.progress_bar) /* a bar leaves its own summary line at the epoch's end */
        fprintf(t->out, "epoch %lld/%lld  train loss %.4f  %s %.4f%s  (%.1f s, %.0f samples/s, data wait %.1f%%)\n",
                (long long)t->progress.epoch + 1, (long long)t->keys.max_epochs, loss, metric_name(t), acc, lmt, secs,
                samples * t->world_size / (secs > 0 ? secs : 1), 100.0 * wait / (secs > 0 ? secs : 1));
    if (validation_due_this_epoch(t) && !t->stop) st = validate(t, err);
    fg_metric metrics[2 + FG_LM_METRICS_MAX] = {{"train/loss", loss}, {"train/acc", acc}};
    if (fg_model_loss(t->model) == FG_LOSS_KIND_MSE) metrics[1].name = "train/mae";
    char lm_names[FG_LM_METRICS_MAX][FG_LM_METRIC_NAME_MAX];
    uint32_t count = 2 + fg_lm_metrics_add(&t->lm, "train/", loss, metrics + 2, lm_names);
    if (st == FG_OK) st = fg_trainer_emit(t, FG_EVENT_EPOCH_END, metrics, count, err);
    return st;
}

static fg_status sanity_check(fg_trainer *t, fg_error *err)
{
    if (!t->val.dataset || t->keys.num_sanity_val_steps == 0 || t->progress.global_step > 0) return FG_OK;
    double loss, acc, n;
    fg_status st = run_eval(t, &t->val, "sanity", t->keys.num_sanity_val_steps, &loss, &acc,
                            &n, err);
    if (st == FG_OK && n >= 0)
        fprintf(t->out, "sanity check: %lld val batch(es) ran, loss %.4f\n",
                (long long)t->keys.num_sanity_val_steps, loss);
    return st;
}

static fg_status fit_epochs(fg_trainer *t, fg_error *err);

fg_status fg_trainer_fit(fg_trainer *t, fg_error *err)
{
    fg_status st = fg_trainer_collect_requests(t, err);
    if (st == FG_OK) st = fg_trainer_scaler_to_device(t, err);
    fg_step_graph_fit graph_fit = fg_trainer_step_graph_fit(t);
    if (st == FG_OK) st = fg_step_graph_setup(&t->graph, &graph_fit, err);
    fg_requeue_fit requeue_fit = fg_trainer_requeue_fit(t);
    if (st == FG_OK) st = fg_requeue_arm(&t->requeue, &requeue_fit, err);
    if (st != FG_OK) return st;
    fg_trainer_sink_start(t);
    st = fit_epochs(t, err);
    if (st == FG_OK) fg_step_graph_report(&t->graph, t->out);
    fg_trainer_sink_stop(t);
    return st;
}

static fg_status fit_epochs(fg_trainer *t, fg_error *err)
{
    t->progress.fit_start_time = fg_now_seconds();
    fg_status st = sanity_check(t, err);
    fg_metric memory[6 * FG_MAX_REPORTED_DEVICES];
    char names[6 * FG_MAX_REPORTED_DEVICES][64];
    uint32_t n = fg_trainer_memory_metrics(t, memory, names, 6 * FG_MAX_REPORTED_DEVICES);
    if (st == FG_OK) st = fg_trainer_emit(t, FG_EVENT_FIT_START, n ? memory : NULL, n, err);
    if (t->progress.resume.active) t->progress.epoch = t->progress.resume.epoch;
    while (st == FG_OK && t->progress.epoch < t->keys.max_epochs && !must_stop(t)) {
        t->progress.step_in_epoch = 0;
        st = train_epoch(t, err);
        if (st != FG_OK || !t->progress.epoch_training_done) break; /* failed, or stopped inside */
        fg_progress_next_epoch(&t->progress);
    }
    fg_requeue_fit requeue_fit = fg_trainer_requeue_fit(t);
    const char *stop_ckpt = st == FG_OK ? fg_requeue_checkpoint(&t->requeue, &requeue_fit) : NULL;
    if (stop_ckpt) st = fg_trainer_save_checkpoint(t, stop_ckpt, err);
    if (st == FG_OK && time_is_up(t))
        fprintf(t->out, "stopping: max_time %.0f s reached\n", t->keys.max_time_s);
    if (st == FG_OK) st = fg_trainer_emit(t, FG_EVENT_FIT_END, NULL, 0, err);
    return st;
}
