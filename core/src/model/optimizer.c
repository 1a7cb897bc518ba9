/* sgd and adamw: config, device state, and the fused backend update per range. */
#include "optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#include "core_util.h"

struct fg_optimizer {
    fg_optimizer_config oc;
    const fg_backend_vtable *be;
    void *bs;
    int device;
    size_t count;
    int64_t step; /* begun steps */
    size_t state_count;
    float *state[2]; /* (count) each: momentum, or m and v */
    uint32_t param_dtype, grad_dtype; /* of the params and grads the steps update */
    int per_tensor;                   /* decay_runs set: weight decay by run */
    fg_decay_run *runs;               /* (run_count) relative to the range, in order */
    size_t run_count;
    const float *step_dev; /* NULL, or the device values a captured step reads (ABI 1.7) */
    const int64_t *skip_dev; /* NULL, or the device loss scaler's flag the fused steps read */
};

/* One backend update: the step's arguments less the range and its weight decay. */
typedef struct update_call {
    void *queue;
    float lr;
    void *params;
    const void *grads;
    int fused;
    const float *grad_scale; /* fused */
    void *work;              /* fused */
    uint32_t work_dtype;     /* fused */
} update_call;

static const fg_option optimizer_options[] = {
    {"name", FG_OPT_ENUM, "sgd", 1, 0, "sgd|adamw", "optimizer: sgd or adamw"},
    {"lr", FG_OPT_FLOAT, "0.01", 0, 1e6, NULL, "learning rate (a scheduler may change it)"},
    {"weight_decay", FG_OPT_FLOAT, "", 0, 1e6, NULL,
     "L2 penalty (sgd, default 0) or decoupled decay (adamw, default 0.01)"},
    {"momentum", FG_OPT_FLOAT, "0", 0, 1, NULL, "sgd: momentum factor"},
    {"dampening", FG_OPT_FLOAT, "0", 0, 1, NULL, "sgd: dampening of the momentum"},
    {"nesterov", FG_OPT_BOOL, "false", 1, 0, NULL, "sgd: Nesterov momentum"},
    {"beta1", FG_OPT_FLOAT, "0.9", 0, 1, NULL, "adamw: decay of the first moment"},
    {"beta2", FG_OPT_FLOAT, "0.999", 0, 1, NULL, "adamw: decay of the second moment"},
    {"eps", FG_OPT_FLOAT, "1e-8", 0, 1, NULL, "adamw: added to the denominator"},
    {"weight_decay_params", FG_OPT_ENUM, "all", 1, 0, "all|matrices",
     "which parameters weight_decay applies to: all, or matrices (rank >= 2: linear and "
     "conv weights and embeddings, not biases or norm gains: nanoGPT's rule)"},
    {"no_decay", FG_OPT_STRING, "", 1, 0, NULL,
     "comma-separated globs of parameter names exempt from weight_decay (Hugging Face's "
     "no_decay), e.g. *.bias, *ln_*"},
};

static const char *const sgd_only[] = {"momentum", "dampening", "nesterov"};
static const char *const adamw_only[] = {"beta1", "beta2", "eps"};

const fg_option *fg_optimizer_schema(size_t *count)
{
    *count = COUNT(optimizer_options);
    return optimizer_options;
}

/* A key of the other kind is a mistake worth naming, not something to ignore. */
static fg_status check_foreign_keys(const fg_config *cfg, const char *name,
                                    const char *const *keys, size_t n, const char *owner,
                                    const char *uses, fg_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (fg_config_get(cfg, "optimizer", keys[i]))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: [optimizer] %s is an %s key but name = %s; %s uses %s",
                                fg_config_origin(cfg, "optimizer", keys[i]), keys[i], owner,
                                name, name, uses);
    return FG_OK;
}

static fg_status read_float(const fg_config *cfg, const char *key, double *out, fg_error *err)
{
    return fg_section_read_float(cfg, "optimizer", optimizer_options, COUNT(optimizer_options),
                                 key, out, err);
}

static fg_status read_sgd(const fg_config *cfg, fg_optimizer_config *oc, fg_error *err)
{
    fg_status st = read_float(cfg, "momentum", &oc->momentum, err);
    if (st == FG_OK)
        st = read_float(cfg, "dampening", &oc->dampening, err);
    if (st == FG_OK)
        st = fg_section_read_bool(cfg, "optimizer", optimizer_options, COUNT(optimizer_options),
                                  "nesterov", &oc->nesterov, err);
    if (st == FG_OK && oc->nesterov && (oc->momentum <= 0 || oc->dampening != 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [optimizer] nesterov = true needs momentum > 0 and dampening = 0",
                            fg_config_origin(cfg, "optimizer", "nesterov"));
    return st;
}

static fg_status read_adamw(const fg_config *cfg, fg_optimizer_config *oc, fg_error *err)
{
    fg_status st = read_float(cfg, "beta1", &oc->beta1, err);
    if (st == FG_OK)
        st = read_float(cfg, "beta2", &oc->beta2, err);
    if (st == FG_OK)
        st = read_float(cfg, "eps", &oc->eps, err);
    if (st == FG_OK && (oc->beta1 >= 1 || oc->beta2 >= 1))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [optimizer] beta1 and beta2 must be below 1",
                            fg_config_origin(cfg, "optimizer", NULL));
    return st;
}

/* weight_decay_params and no_decay: which tensors the decay applies to (decay_groups.c). */
static fg_status read_decay_selection(const fg_config *cfg, fg_optimizer_config *oc,
                                      fg_error *err)
{
    const char *which = fg_config_get(cfg, "optimizer", "weight_decay_params");
    oc->decay_matrices_only = which && strcmp(which, "matrices") == 0;
    const char *globs = fg_config_get(cfg, "optimizer", "no_decay");
    if (globs && strlen(globs) >= sizeof oc->no_decay)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: [optimizer] no_decay is %zu "
                            "characters; at most %zu", fg_config_origin(cfg, "optimizer",
                            "no_decay"), strlen(globs), sizeof oc->no_decay - 1);
    snprintf(oc->no_decay, sizeof oc->no_decay, "%s", globs ? globs : "");
    return FG_OK;
}

fg_status fg_optimizer_read_config(const fg_config *cfg, fg_optimizer_config *oc, fg_error *err)
{
    memset(oc, 0, sizeof *oc);
    if (fg_config_has_section(cfg, "optimizer")) {
        fg_schema schema = {"core", optimizer_options, COUNT(optimizer_options),
                            sizeof(fg_option)};
        fg_status st = fg_config_validate_section(cfg, "optimizer", &schema, 1, err);
        if (st != FG_OK)
            return st;
    }
    const char *name = fg_config_get(cfg, "optimizer", "name");
    name = name ? name : "sgd";
    int adamw = strcmp(name, "adamw") == 0;
    if (!adamw && strcmp(name, "sgd") != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: [optimizer] name = %s is not an optimizer; use sgd or adamw",
                            fg_config_origin(cfg, "optimizer", "name"), name);
    oc->kind = adamw ? FG_OPTIMIZER_ADAMW : FG_OPTIMIZER_SGD;
    fg_status st = adamw ? check_foreign_keys(cfg, name, sgd_only, COUNT(sgd_only), "sgd",
                                              "beta1, beta2, eps, weight_decay", err)
                         : check_foreign_keys(cfg, name, adamw_only, COUNT(adamw_only), "adamw",
                                              "momentum, dampening, nesterov, weight_decay", err);
    if (st == FG_OK)
        st = read_float(cfg, "lr", &oc->lr, err);
    if (st != FG_OK)
        return st;
    oc->weight_decay = adamw ? 0.01 : 0.0; /* PyTorch's defaults differ by kind */
    const char *wd = fg_config_get(cfg, "optimizer", "weight_decay");
    if (wd && *wd && (st = read_float(cfg, "weight_decay", &oc->weight_decay, err)) != FG_OK)
        return st;
    st = read_decay_selection(cfg, oc, err);
    if (st != FG_OK)
        return st;
    return adamw ? read_adamw(cfg, oc, err) : read_sgd(cfg, oc, err);
}

/* The state starts at zero, so a checkpoint taken before the first step is well defined. */
static fg_status zero_state(fg_optimizer *opt, fg_error *err)
{
    if (!opt->state_count)
        return FG_OK;
    void *state[COUNT(opt->state)];
    for (size_t i = 0; i < opt->state_count; i++)
        state[i] = opt->state[i];
    return fg_backend_zero(opt->be, opt->bs, opt->device, FG_F32, state, opt->state_count,
                           opt->count, err);
}

fg_status fg_optimizer_create_with(const fg_optimizer_config *oc, const fg_backend_vtable *be,
                                   void *bs, int device, size_t count, fg_optimizer **out,
                                   fg_error *err)
{
    *out = NULL;
    if (oc->kind == FG_OPTIMIZER_SGD)
        FG_BACKEND_NEED(be, sgd_update, err);
    else
        FG_BACKEND_NEED(be, adamw_update, err);
    fg_optimizer *opt = calloc(1, sizeof *opt);
    if (!opt)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory creating the optimizer");
    opt->oc = *oc;
    opt->be = be;
    opt->bs = bs;
    opt->device = device;
    opt->count = count;
    opt->param_dtype = opt->grad_dtype = FG_F32;
    opt->state_count = oc->kind == FG_OPTIMIZER_ADAMW ? 2 : (oc->momentum != 0 ? 1 : 0);
    fg_status st = FG_OK;
    for (size_t i = 0; i < opt->state_count && count && st == FG_OK; i++) {
        fg_error e = {0};
        st = be->alloc(bs, device, count * sizeof(float), (void **)&opt->state[i], &e);
        if (st != FG_OK)
            st = fg_error_set(err, st, "allocating optimizer state (%zu floats) on device %d: %s",
                              count, device, e.message);
    }
    if (st == FG_OK && count)
        st = zero_state(opt, err);
    return FG_CREATED(st, opt, out, fg_optimizer_destroy);
}

fg_status fg_optimizer_create(const fg_config *cfg, const fg_backend_vtable *be, void *bs,
                              int device, size_t count, fg_optimizer **out, fg_error *err)
{
    fg_optimizer_config oc;
    fg_status st = fg_optimizer_read_config(cfg, &oc, err);
    if (st != FG_OK) {
        *out = NULL;
        return st;
    }
    return fg_optimizer_create_with(&oc, be, bs, device, count, out, err);
}

void fg_optimizer_destroy(fg_optimizer *opt)
{
    if (!opt)
        return;
    for (size_t i = 0; i < 2; i++)
        if (opt->state[i])
            opt->be->free(opt->bs, opt->device, opt->state[i]);
    free(opt->runs);
    free(opt);
}

const fg_optimizer_config *fg_optimizer_get_config(const fg_optimizer *opt) { return &opt->oc; }

const char *fg_optimizer_name(const fg_optimizer *opt)
{
    return opt->oc.kind == FG_OPTIMIZER_ADAMW ? "adamw" : "sgd";
}

int64_t fg_optimizer_get_step(const fg_optimizer *opt) { return opt->step; }
void fg_optimizer_set_step(fg_optimizer *opt, int64_t step) { opt->step = step; }
size_t fg_optimizer_state_count(const fg_optimizer *opt) { return opt->state_count; }

float *fg_optimizer_state(const fg_optimizer *opt, size_t i, const char **name)
{
    static const char *const sgd_names[] = {"momentum_buffer"};
    static const char *const adamw_names[] = {"exp_avg", "exp_avg_sq"};
    if (i >= opt->state_count)
        return NULL;
    if (name)
        *name = opt->oc.kind == FG_OPTIMIZER_ADAMW ? adamw_names[i] : sgd_names[i];
    return opt->state[i];
}

fg_status fg_optimizer_step(fg_optimizer *opt, void *queue, float lr, float *params,
                            const float *grads, size_t offset, size_t count, fg_error *err)
{
    if (offset > opt->count || count > opt->count - offset)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "optimizer step over [%zu, %zu) is outside its %zu values", offset,
                            offset + count, opt->count);
    char *p = (char *)params + offset * fg_dtype_size((fg_dtype)opt->param_dtype);
    const char *g = (const char *)grads + offset * fg_dtype_size((fg_dtype)opt->grad_dtype);
    return fg_optimizer_step_at(opt, queue, lr, (float *)p, (const float *)g, offset, count,
                                err);
}

fg_status fg_optimizer_set_dtypes(fg_optimizer *opt, uint32_t param, uint32_t grad,
                                  fg_error *err)
{
    const uint32_t dtypes[2] = {param, grad};
    uint32_t op = opt->oc.kind == FG_OPTIMIZER_SGD ? FG_OP_SGD_UPDATE : FG_OP_ADAMW_UPDATE;
    if (!fg_backend_can(opt->be, opt->bs, op, dtypes))
        return fg_error_set(err, FG_UNAVAILABLE, "the backend cannot run %s with %s parameters "
                            "and %s gradients", fg_backend_op_info(op)->name,
                            fg_dtype_name((fg_dtype)param), fg_dtype_name((fg_dtype)grad));
    opt->param_dtype = param;
    opt->grad_dtype = grad;
    return FG_OK;
}

size_t fg_optimizer_config_state_count(const fg_optimizer_config *oc)
{
    return oc->kind == FG_OPTIMIZER_ADAMW ? 2 : (oc->momentum != 0 ? 1 : 0);
}

const char *fg_optimizer_config_state_name(const fg_optimizer_config *oc, size_t i)
{
    if (i >= fg_optimizer_config_state_count(oc))
        return NULL;
    return oc->kind == FG_OPTIMIZER_ADAMW ? (i ? "exp_avg_sq" : "exp_avg") : "momentum_buffer";
}

/* A step over [offset, offset + count) of the parameters: inside them, after set_step.
 * `what` names the step in the message. */
static fg_status check_step(const fg_optimizer *opt, size_t offset, size_t count,
                            const char *what, fg_error *err)
{
    if (offset > opt->count || count > opt->count - offset)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s over [%zu, %zu) is outside its %zu "
                            "values", what, offset, offset + count, opt->count);
    if (opt->step < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "optimizer step before fg_optimizer_set_step");
    return FG_OK;
}

static fg_sgd_args sgd_args(const fg_optimizer *opt, float lr, float weight_decay)
{
    const fg_optimizer_config *oc = &opt->oc;
    return (fg_sgd_args){sizeof(fg_sgd_args), lr, (float)oc->momentum, (float)oc->dampening,
                         weight_decay, oc->nesterov, opt->step == 1, opt->step_dev, NULL};
}

static fg_adamw_args adamw_args(const fg_optimizer *opt, float lr, float weight_decay)
{
    const fg_optimizer_config *oc = &opt->oc;
    return (fg_adamw_args){sizeof(fg_adamw_args), lr, (float)oc->beta1, (float)oc->beta2,
                           (float)oc->eps, weight_decay, opt->step, opt->step_dev, NULL};
}

void fg_optimizer_read_step_values(fg_optimizer *opt, const float *dev)
{
    opt->step_dev = dev;
}

void fg_optimizer_read_skip_flag(fg_optimizer *opt, const int64_t *dev)
{
    opt->skip_dev = dev;
}

int fg_optimizer_step_values(const fg_optimizer *opt, float lr, int64_t step, float out[3])
{
    const fg_optimizer_config *oc = &opt->oc;
    out[0] = lr;
    out[1] = out[2] = 0.0f;
    if (oc->kind != FG_OPTIMIZER_ADAMW)
        return 1;
    /* as the backends compute them from fg_adamw_args.step (kernels/cpu/optim.c) */
    out[1] = (float)(1.0 - pow((double)(float)oc->beta1, (double)step));
    out[2] = (float)sqrt(1.0 - pow((double)(float)oc->beta2, (double)step));
    return 3;
}

static void *advance(const void *p, size_t n, uint32_t dtype)
{
    return p ? (char *)p + n * fg_dtype_size((fg_dtype)dtype) : NULL;
}

/* The update of [offset, offset + count) of the range, `skip` values after the call's
 * pointers, with one weight decay. */
static fg_status update_part(fg_optimizer *opt, const update_call *c, size_t offset,
                             size_t skip, size_t count, float weight_decay, fg_error *err)
{
    void *p = advance(c->params, skip, opt->param_dtype);
    const void *g = advance(c->grads, skip, opt->grad_dtype);
    float *s0 = opt->state_count ? opt->state[0] + offset : NULL;
    if (opt->oc.kind == FG_OPTIMIZER_SGD) {
        fg_sgd_args a = sgd_args(opt, c->lr, weight_decay);
        a.skip_dev = c->fused ? opt->skip_dev : NULL;
        return c->fused ? opt->be->sgd_fused(opt->bs, c->queue, opt->param_dtype,
                                             opt->grad_dtype, c->work_dtype, &a, p, g, s0,
                                             c->grad_scale, advance(c->work, skip, c->work_dtype),
                                             count, err)
                        : opt->be->sgd_update(opt->bs, c->queue, opt->param_dtype,
                                              opt->grad_dtype, &a, p, g, s0, count, err);
    }
    fg_adamw_args a = adamw_args(opt, c->lr, weight_decay);
    a.skip_dev = c->fused ? opt->skip_dev : NULL;
    float *s1 = opt->state[1] + offset;
    return c->fused ? opt->be->adamw_fused(opt->bs, c->queue, opt->param_dtype, opt->grad_dtype,
                                           c->work_dtype, &a, p, g, s0, s1, c->grad_scale,
                                           advance(c->work, skip, c->work_dtype), count, err)
                    : opt->be->adamw_update(opt->bs, c->queue, opt->param_dtype,
                                            opt->grad_dtype, &a, p, g, s0, s1, count, err);
}

/* [offset, offset + count) in one call, or one per decay run it overlaps. */
static fg_status update_range(fg_optimizer *opt, const update_call *c, size_t offset,
                              size_t count, fg_error *err)
{
    float wd = (float)opt->oc.weight_decay;
    if (!opt->per_tensor)
        return update_part(opt, c, offset, 0, count, wd, err);
    size_t end = offset + count;
    fg_status st = FG_OK;
    for (size_t i = 0; i < opt->run_count && st == FG_OK; i++) {
        size_t lo = opt->runs[i].lo > offset ? opt->runs[i].lo : offset;
        size_t hi = opt->runs[i].hi < end ? opt->runs[i].hi : end;
        if (lo < hi)
            st = update_part(opt, c, lo, lo - offset, hi - lo, opt->runs[i].decay ? wd : 0.0f,
                             err);
    }
    return st;
}

fg_status fg_optimizer_set_decay_runs(fg_optimizer *opt, const fg_decay_run *runs, size_t n,
                                      size_t base, fg_error *err)
{
    free(opt->runs);
    opt->runs = NULL;
    opt->run_count = 0;
    opt->per_tensor = runs != NULL;
    if (!runs || !n)
        return FG_OK;
    if (!(opt->runs = calloc(n, sizeof *opt->runs)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for the weight decay runs");
    size_t end = base + opt->count;
    for (size_t i = 0; i < n; i++) {
        size_t lo = runs[i].lo > base ? runs[i].lo : base;
        size_t hi = runs[i].hi < end ? runs[i].hi : end;
        if (lo < hi)
            opt->runs[opt->run_count++] = (fg_decay_run){lo - base, hi - base, runs[i].decay};
    }
    size_t covered = 0;
    for (size_t i = 0; i < opt->run_count; i++) covered += opt->runs[i].hi - opt->runs[i].lo;
    if (covered != opt->count)
        return fg_error_set(err, FG_INTERNAL, "the weight decay runs cover %zu of the "
                            "optimizer's %zu values from %zu", covered, opt->count, base);
    return FG_OK;
}

fg_status fg_optimizer_step_at(fg_optimizer *opt, void *queue, float lr, float *params,
                               const float *grads, size_t offset, size_t count, fg_error *err)
{
    fg_status st = check_step(opt, offset, count, "optimizer step", err);
    if (st != FG_OK || !count)
        return st;
    update_call c = {queue, lr, params, grads, 0, NULL, NULL, 0};
    return update_range(opt, &c, offset, count, err);
}

int fg_optimizer_can_fuse(const fg_optimizer *opt, uint32_t work_dtype)
{
    const uint32_t dtypes[3] = {opt->param_dtype, opt->grad_dtype, work_dtype};
    uint32_t op = opt->oc.kind == FG_OPTIMIZER_SGD ? FG_OP_SGD_FUSED : FG_OP_ADAMW_FUSED;
    return fg_backend_can(opt->be, opt->bs, op, dtypes);
}

fg_status fg_optimizer_step_fused(fg_optimizer *opt, void *queue, float lr, void *params,
                                  const void *grads, size_t offset, size_t count,
                                  const float *grad_scale, void *work, uint32_t work_dtype,
                                  fg_error *err)
{
    fg_status st = check_step(opt, offset, count, "fused optimizer step", err);
    if (st != FG_OK)
        return st;
    if (!fg_optimizer_can_fuse(opt, work ? work_dtype : opt->param_dtype))
        return fg_error_set(err, FG_UNAVAILABLE, "the backend cannot run %s_fused with %s "
                            "parameters, %s gradients and a %s working copy",
                            fg_optimizer_name(opt), fg_dtype_name((fg_dtype)opt->param_dtype),
                            fg_dtype_name((fg_dtype)opt->grad_dtype),
                            fg_dtype_name((fg_dtype)work_dtype));
    if (!count)
        return FG_OK;
    update_call c = {queue, lr, params, grads, 1, grad_scale, work, work_dtype};
    return update_range(opt, &c, offset, count, err);
}

void fg_optimizer_op_needs(const fg_optimizer_config *oc, uint32_t param, uint32_t grad,
                           fg_op_needs *n)
{
    if (oc->kind == FG_OPTIMIZER_SGD)
        FG_NEED(n, "[optimizer] name = sgd", FG_OP_SGD_UPDATE, param, grad);
    else
        FG_NEED(n, "[optimizer] name = adamw", FG_OP_ADAMW_UPDATE, param, grad);
    if (fg_optimizer_config_state_count(oc))
        FG_NEED(n, "the optimizer state", FG_OP_FILL, FG_F32);
}
