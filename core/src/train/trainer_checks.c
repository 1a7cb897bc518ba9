/* What callbacks ask the trainer to measure (fg_callback_vtable.requests): the split of
 * each step into phases, and a finite check of the loss, the gradients (layer by layer)
 * and the input at chosen steps. Also the per-step sink host->metric feeds during a fit. */
#include <math.h>
#include <string.h>

#include "train_services.h"
#include "trainer_checks.h"
#include "trainer_events.h"
#include "trainer_internal.h"

#define STRAT(t) ((const fg_strategy_vtable *)(t)->strategy.vt)

static int dynamic_loss_scaling(const fg_trainer *t)
{
    const fg_precision_vtable *pv = t->precision.vt;
    fg_precision_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    fg_error e = {0};
    if (!pv || !FG_HAS_FIELD(pv, fg_precision_vtable, info) || !pv->info ||
        pv->info(t->precision.state, &info, &e) != FG_OK)
        return 0;
    return info.loss_scaling != 0;
}

fg_status fg_trainer_collect_requests(fg_trainer *t, fg_error *err)
{
    t->checks.timing = 0;
    t->checks.finite_every = 0;
    for (int i = 0; i < t->callback_count; i++) {
        const fg_callback_vtable *vt = t->callbacks[i].vt;
        if (!FG_HAS_FIELD(vt, fg_callback_vtable, requests) || !vt->requests) continue;
        fg_callback_requests r;
        memset(&r, 0, sizeof r);
        r.struct_size = sizeof r;
        fg_error e = {0};
        fg_status st = vt->requests(t->callbacks[i].state, &r, &e);
        if (st != FG_OK)
            return fg_error_set(err, st, "[%s] %s", t->callbacks[i].inst->section, e.message);
        if (r.flags & FG_REQUEST_STEP_TIMING) t->checks.timing = 1;
        if (r.flags & FG_REQUEST_FINITE_CHECK) {
            int64_t every = r.finite_check_every > 0 ? r.finite_check_every : 1;
            if (t->checks.finite_every == 0 || every < t->checks.finite_every) t->checks.finite_every = every;
        }
    }
    /* Under dynamic loss scaling an overflowing gradient is expected: the scaler skips
     * that step and lowers the scale. Only the loss and the input are checked then. */
    t->checks.finite_grads = !dynamic_loss_scaling(t);
    return FG_OK;
}

static void sink_metric(void *user, const char *name, double value)
{
    fg_trainer *t = user;
    if (fg_step_sink_report(&t->checks.sink, name, value) != 0)
        fprintf(stderr, "fulgur: warning: more than %d per-step metric names; %s and later "
                "ones are not carried on step events\n", FG_SINK_SLOTS, name);
}

void fg_trainer_sink_start(fg_trainer *t)
{
    fg_step_sink_init(&t->checks.sink, t->devices);
    t->checks.sink_ready = 1;
    fg_train_services_set_sink(&t->tctx, &t->checks.sink, t->checks.timing);
    t->rt->metric_sink = sink_metric;
    t->rt->metric_sink_user = t;
}

void fg_trainer_sink_stop(fg_trainer *t)
{
    if (!t->checks.sink_ready) return;
    t->rt->metric_sink = NULL;
    t->rt->metric_sink_user = NULL;
    fg_train_services_set_sink(&t->tctx, NULL, 0);
    fg_step_sink_destroy(&t->checks.sink);
    t->checks.sink_ready = 0;
}

int fg_trainer_step_checked(const fg_trainer *t)
{
    return t->checks.finite_every > 0 && (t->progress.global_step + 1) % t->checks.finite_every == 0;
}

double fg_count_nonfinite(const float *x, size_t n)
{
    double bad = 0;
    for (size_t i = 0; i < n; i++) bad += !isfinite(x[i]);
    return bad;
}

/* The loss since the last log (every rank sees the same: metrics are reduced). */
static fg_status step_loss(fg_trainer *t, double *loss, fg_error *err)
{
    fg_step_metrics m = {sizeof m, 0, 0, 0};
    fg_status st = STRAT(t)->read_metrics(t->strategy.state, 0, &m, err);
    *loss = m.count > 0 ? m.loss_sum / m.count : 0.0;
    return st;
}

/* The primary replica's gradients cover the whole model: layers can be named. */
static void *whole_replica(fg_trainer *t)
{
    void *primary = STRAT(t)->primary_replica(t->strategy.state);
    if (!primary || !fg_replica_grads(fg_train_stage_model(primary))) return NULL;
    size_t offset = 0, size = 0;
    fg_replica_param_range(fg_train_stage_model(primary), &offset, &size);
    return offset == 0 && size == fg_model_params_size(t->model) ? primary : NULL;
}

/* Layers whose gradients are non-finite, walking tensors in backward order (last layer
 * first); *first gets the first such layer. A sum of squares is non-finite when any
 * element is (or when one exceeds ~1.8e19, whose square overflows float32). */
static fg_status nonfinite_layers(fg_trainer *t, void *replica, double *count,
                                  const char **first, fg_error *err)
{
    const fg_train_services *svc = &t->tctx.svc;
    *count = 0;
    *first = NULL;
    int last_layer = -1;
    for (size_t i = fg_model_tensor_count(t->model); i-- > 0;) {
        const fg_tensor_info *ti = fg_model_tensor(t->model, i);
        if (ti->is_buffer || ti->layer == last_layer) continue;
        double sq = 0;
        fg_status st = svc->grad_norm_sq(svc->ctx, replica, (int64_t)ti->offset,
                                         (int64_t)ti->numel, &sq, err);
        if (st != FG_OK) return st;
        if (isfinite(sq)) continue;
        last_layer = ti->layer;
        *count += 1;
        if (!*first) *first = fg_model_layer(t->model, (size_t)ti->layer)->name;
    }
    return FG_OK;
}

/* The reduced gradients of the step: one sum over the model, then layer by layer only
 * when that is not finite. *layers = -1 when the strategy cannot say which. */
static fg_status check_grads(fg_trainer *t, double *layers, const char **first, fg_error *err)
{
    const fg_strategy_vtable *sv = STRAT(t);
    *layers = 0;
    *first = NULL;
    fg_status st = sv->sync_grads ? sv->sync_grads(t->strategy.state, err) : FG_OK;
    if (st != FG_OK) return st;
    void *replica = whole_replica(t);
    double sq = 0;
    if (replica) {
        const fg_train_services *svc = &t->tctx.svc;
        st = svc->grad_norm_sq(svc->ctx, replica, 0, svc->param_count, &sq, err);
        if (st == FG_OK && !isfinite(sq)) st = nonfinite_layers(t, replica, layers, first, err);
        return st;
    }
    if (!FG_HAS_FIELD(sv, fg_strategy_vtable, grad_norm_sq) || !sv->grad_norm_sq) return FG_OK;
    st = sv->grad_norm_sq(t->strategy.state, &sq, err);
    if (st == FG_OK && !isfinite(sq)) *layers = -1;
    return st;
}

fg_status fg_trainer_finite_check(fg_trainer *t, fg_error *err)
{
    double loss = 0, layers = 0, inputs = t->checks.nonfinite_inputs;
    const char *first = NULL;
    t->checks.nonfinite_inputs = 0;
    fg_status st = step_loss(t, &loss, err);
    if (st == FG_OK && t->checks.finite_grads) st = check_grads(t, &layers, &first, err);
    if (st != FG_OK || (isfinite(loss) && layers == 0 && inputs == 0)) return st;
    int64_t step = t->progress.global_step;
    t->progress.global_step = step + 1; /* the event names the step being taken */
    fg_metric metrics[] = {{"train/step_loss", loss}, {"grad/nonfinite_layers", layers},
                           {"input/nonfinite_values", inputs}};
    t->checks.event_layer = first;
    st = fg_trainer_emit(t, FG_EVENT_NONFINITE, metrics, 3, err);
    t->checks.event_layer = NULL;
    t->progress.global_step = step;
    return st;
}
