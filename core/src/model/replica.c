/* A replica: the model's memory on one backend device (flat params, grads, buffers and an
 * activation arena sized once) and forward and backward through its layers. */
#include "model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_groups.h"
#include "init.h"

#define ARENA_ALIGN 64 /* bytes between arena regions */

/* ---- replica ------------------------------------------------------------------------ */

struct fg_replica {
    const fg_model *m;
    const fg_backend_vtable *be;
    void *bs;
    int device;
    int max_batch;
    float *params, *grads, *buffers; /* flat regions, fg_model_*_size floats */
    char *arena;
    size_t arena_bytes;
    /* arena offsets (bytes), laid out for max_batch; a smaller batch uses a prefix */
    size_t *y_off;   /* per layer; unused for ALIAS layers */
    size_t *aux_off; /* per layer */
    /* d(loss)/d(activation), the largest activation each: ping-pong 0 and 1, or a graph's
     * slots (graph.h) */
    size_t grad_off[FG_GRAPH_MAX_SLOTS];
    size_t probs_off;   /* (batch, positions, classes) softmax kept for backward; only
                         * without the fused loss, or when the model keeps probabilities */
    int has_probs;
    size_t seq_off;     /* 2 f32: a sequence batch's loss and hits before the 1/T */
    size_t ws_off;      /* shared workspace */
    const void **out;   /* per layer: where this forward left its output (act dtype) */
    int first_param_layer;

    /* the last forward, for backward */
    const void *x;
    const int32_t *labels;
    int fwd_batch;
    int fwd_ready; /* a training forward succeeded and no backward failed since */
    /* The fused classifier (ABI 1.4) runs the xent loss: a training forward leaves the
     * logits' gradient in the output gradient slot (dlogits_ready until a backward uses it),
     * and no probabilities are kept for backward. */
    int fused_loss;
    int dlogits_ready;
    int logits_ld; /* the logits' row stride: num_classes, or padded ([model] pad_vocab_to) */
    /* NULL, or the loss scaler's state on the device: the xent backward multiplies by the
     * scale it holds (softmax_xent_backward_scaled) instead of by loss_scale alone */
    const fg_loss_scale_dev *loss_scale_dev;

    uint64_t step, seed;
    int seed_set;
    fg_grad_ready_fn hook;
    void *hook_user;
    fg_replica_allreduce_hook allreduce; /* the strategy's replica all-reduce; NULL: none */
    void *allreduce_user;
    int need_input_grad;
    int fp8_hold; /* fg_replica_set_fp8_hold */
    const void *input_grad;
    /* sharded memory: where the running layer's params and grads are (model_hooks) */
    fg_layer_memory_fn mem_hook;
    void *mem_user;
    int mapped;
    size_t map_offset;
    float *map_params, *map_grads;
    /* A pipeline stage runs layers [first, end) only and holds just their slices of the
     * flat regions: [param_lo, param_hi) and [buffer_lo, buffer_hi) floats. A replica
     * that shares another's parameters (a micro-batch in flight) owns none of them. */
    size_t first, end;
    size_t param_lo, param_hi, buffer_lo, buffer_hi;
    int shares;
    uint64_t sample_offset; /* dropout: this batch starts at that sample of the full one */
    /* [backend] cuda_graphs: (layer_count) device counters, each a layer's step << 32,
     * uploaded at the first training forward from counters_host and from then on advanced
     * on the device by the layer's own dropout; NULL: the step is passed by value */
    uint64_t *dropout_counters, *counters_host;
    int counters_set;
    int64_t counted; /* labels of the batch the loss counts; < 0: all of them */
    /* precision: activations in dt->act (act_size bytes each); the layers read the working
     * parameters `work` (dt->param), a copy of params made by fg_replica_cast_params */
    const fg_role_dtypes *dt; /* NULL: every tensor f32 */
    size_t act_size;
    void *work;
    size_t work_bytes;
    /* bytes per element of `params` (f32, or the half param dtype of a "true" mode) and of
     * `grads` (f32 or the half grad dtype) */
    size_t param_size, grad_size;
    /* [model] batch_groups (batch_groups.h): groups per training batch (1: none), and the
     * scratch of a grouped layer: one layer's gradients (device), a batchnorm's sums (host) */
    int groups;
    void *group_grads;
    double *group_host;
};

static size_t arena_take(size_t *top, size_t bytes)
{
    size_t at = align_up(*top, ARENA_ALIGN);
    *top = at + bytes;
    return at;
}

/* Lays the arena out for max_batch; returns its size in bytes. */
static size_t plan_arena(fg_replica *r)
{
    const fg_model *m = r->m;
    size_t b = (size_t)r->max_batch, top = 0, ws = 0;
    size_t widest = fg_shape_numel(&m->layers[r->first].in);
    for (size_t i = r->first; i < r->end; i++) {
        const fg_layer *l = &m->layers[i];
        size_t out = fg_shape_numel(&l->out);
        if (i + 1 == m->layer_count) /* the logits, rows maybe padded */
            out = (size_t)fg_model_positions(m) * (size_t)r->logits_ld;
        if (out > widest)
            widest = out;
        if (!(l->ops->flags & FG_LAYER_ALIAS))
            r->y_off[i] = arena_take(&top, b * out * r->act_size);
        r->aux_off[i] = arena_take(&top, l->aux_fixed + b * l->aux_per_sample);
        if (l->ops->workspace_bytes) {
            size_t w = l->ops->workspace_bytes(l, r->be, r->bs, r->max_batch);
            if (w > ws)
                ws = w;
        }
    }
    for (int s = 0; s < fg_model_grad_slots(m); s++)
        r->grad_off[s] = arena_take(&top, b * widest * r->act_size);
    r->has_probs = r->end == m->layer_count && (!r->fused_loss || m->keep_probs);
    if (r->has_probs)
        r->probs_off = arena_take(&top, b * (size_t)fg_model_positions(m) *
                                            (size_t)m->num_classes * sizeof(float));
    r->seq_off = arena_take(&top, 2 * sizeof(float));
    r->ws_off = arena_take(&top, ws);
    return align_up(top, ARENA_ALIGN);
}

static fg_status device_alloc(fg_replica *r, size_t bytes, void **p, const char *what,
                              fg_error *err)
{
    *p = NULL;
    if (!bytes)
        return FG_OK;
    fg_status st = r->be->alloc(r->bs, r->device, bytes, p, err);
    if (st != FG_OK) {
        char why[FG_ERROR_MESSAGE_MAX];
        snprintf(why, sizeof why, "%s", err ? err->message : "");
        return fg_error_set(err, st, "allocating the %s (%zu bytes) on device %d: %s", what,
                            bytes, r->device, why);
    }
    return FG_OK;
}

/* The grads start at zero, padding included, so whole-region reductions are exact. */
static fg_status zero_grads(fg_replica *r, fg_error *err)
{
    size_t n = r->param_hi - r->param_lo;
    if (!n || !r->grads)
        return FG_OK;
    void *grads = r->grads;
    return fg_backend_zero(r->be, r->bs, r->device, fg_replica_grad_dtype(r), &grads, 1, n, err);
}

static int first_param_layer(const fg_model *m, size_t first, size_t end)
{
    for (size_t i = first; i < end; i++)
        if (m->layers[i].param_count)
            return (int)i;
    return (int)end;
}

/* The slices of the flat regions that layers [first, end) use: tensors are laid out in
 * layer order, so a range of layers is a range of each region. */
static void tensor_slices(fg_replica *r)
{
    const fg_model *m = r->m;
    int whole = r->first == 0 && r->end == m->layer_count;
    r->param_lo = r->buffer_lo = SIZE_MAX;
    r->param_hi = whole ? m->params_size : 0;
    r->buffer_hi = whole ? m->buffers_size : 0;
    for (size_t i = 0; i < m->tensor_count; i++) {
        const fg_tensor_info *t = &m->tensors[i];
        if ((size_t)t->layer < r->first || (size_t)t->layer >= r->end)
            continue;
        size_t *lo = t->is_buffer ? &r->buffer_lo : &r->param_lo;
        size_t *hi = t->is_buffer ? &r->buffer_hi : &r->param_hi;
        if (t->offset < *lo)
            *lo = t->offset;
        if (t->offset + t->numel > *hi)
            *hi = t->offset + t->numel;
    }
    if (whole)
        r->param_lo = r->buffer_lo = 0;
    if (r->param_lo == SIZE_MAX)
        r->param_lo = r->param_hi = 0;
    if (r->buffer_lo == SIZE_MAX)
        r->buffer_lo = r->buffer_hi = 0;
}

static fg_status create_replica(const fg_model *m, const fg_backend_vtable *be, void *bs,
                                int device, int max_batch, unsigned flags, size_t first,
                                size_t end, fg_replica *share, fg_replica **out,
                                fg_error *err);
static fg_status replica_dtypes(fg_replica *r, unsigned flags, fg_error *err);

/* The row stride of the logits: padded ([model] pad_vocab_to) where the fused classifier
 * reads them; a replica that keeps probabilities (predict, generate) runs unpadded. */
static fg_status logits_stride(const fg_replica *r, int *ld, fg_error *err)
{
    const fg_model *m = r->m;
    *ld = m->num_classes;
    if (m->pad_vocab_to <= 1 || r->end != m->layer_count || m->keep_probs)
        return FG_OK;
    if (!r->fused_loss)
        return fg_error_set(err, FG_UNAVAILABLE, "[model] pad_vocab_to needs the backend's "
                            "fused classifier (ABI 1.4) for %s activations, which %s",
                            fg_dtype_name((fg_dtype)fg_replica_act_dtype(r)),
                            fg_replica_act_dtype(r) == FG_F16
                                ? "f16 does not use (its loss scaling needs the softmax)"
                                : "this backend lacks");
    *ld = fg_model_padded_classes(m);
    return FG_OK;
}

/* The fused classifier runs the loss: an xent replica of the model's last layer, on a
 * backend with the op for the activations' dtype, and not in f16 (whose loss scaling must
 * reach the softmax's small probabilities before they are rounded into f16). */
static int fused_loss_usable(const fg_replica *r)
{
    uint32_t act = fg_replica_act_dtype(r);
    return r->end == r->m->layer_count && r->m->loss == FG_LOSS_KIND_XENT && act != FG_F16 &&
           fg_backend_can(r->be, r->bs, FG_OP_CLASSIFIER, &act);
}

fg_status fg_replica_create_range(const fg_model *m, const fg_backend_vtable *be, void *bs,
                                  int device, int max_batch, size_t first, size_t count,
                                  fg_replica *share, fg_replica **out, fg_error *err)
{
    *out = NULL;
    if (m->is_graph && (first != 0 || count != m->layer_count))
        return fg_error_set(err, FG_UNAVAILABLE, "a model whose layers name their inputs "
                            "(input = ...) runs as a whole on each device; pipeline stages of "
                            "it are not supported yet");
    if (count < 1 || first >= m->layer_count || count > m->layer_count - first)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "layers [%zu, %zu) are not a range of "
                            "the model's %zu layers", first, first + count, m->layer_count);
    if (share && (share->m != m || share->first != first || share->end != first + count ||
                  share->device != device || share->shares))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "a replica shares the parameters of "
                            "one that owns them, of the same model, layers and device");
    for (size_t i = first; i < first + count; i++) {
        const fg_layer *l = &m->layers[i];
        if (l->tied && m->tensors[l->param_tensor[0]].layer < (int)first)
            return fg_error_set(err, FG_UNAVAILABLE, "%s: [%s] ties its weight to layer %s, "
                                "which another stage holds: weight tying across pipeline "
                                "stages is not supported; untie, or keep both in one stage",
                                l->origin, l->section, l->tie);
    }
    return create_replica(m, be, bs, device, max_batch, 0, first, first + count, share, out,
                          err);
}

fg_status fg_replica_create(const fg_model *m, const fg_backend_vtable *be, void *bs,
                            int device, int max_batch, fg_replica **out, fg_error *err)
{
    return fg_replica_create_flags(m, be, bs, device, max_batch, 0, out, err);
}

fg_status fg_replica_create_flags(const fg_model *m, const fg_backend_vtable *be, void *bs,
                                  int device, int max_batch, unsigned flags, fg_replica **out,
                                  fg_error *err)
{
    return create_replica(m, be, bs, device, max_batch, flags, 0, m->layer_count, NULL, out,
                          err);
}

static fg_status create_replica(const fg_model *m, const fg_backend_vtable *be, void *bs,
                                int device, int max_batch, unsigned flags, size_t first,
                                size_t end, fg_replica *share, fg_replica **out, fg_error *err)
{
    *out = NULL;
    if (max_batch < 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "max_batch must be at least 1, not %d",
                            max_batch);
    FG_BACKEND_NEED(be, alloc, err);
    FG_BACKEND_NEED(be, free, err);
    FG_BACKEND_NEED(be, queue_sync, err);
    FG_BACKEND_NEED(be, queue_destroy, err);
    fg_replica *r = calloc(1, sizeof *r);
    if (r)
        r->counted = -1;
    size_t n = m->layer_count;
    if (!r || !(r->y_off = calloc(n, sizeof *r->y_off)) ||
        !(r->aux_off = calloc(n, sizeof *r->aux_off)) || !(r->out = calloc(n, sizeof *r->out))) {
        fg_replica_destroy(r);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory creating a replica");
    }
    r->m = m;
    r->be = be;
    r->bs = bs;
    r->device = device;
    r->max_batch = max_batch;
    r->first = first;
    r->end = end;
    r->first_param_layer = first_param_layer(m, first, end);
    tensor_slices(r);
    fg_status dst = replica_dtypes(r, flags, err);
    if (dst != FG_OK) {
        fg_replica_destroy(r);
        return dst;
    }
    r->fused_loss = fused_loss_usable(r);
    dst = logits_stride(r, &r->logits_ld, err);
    if (dst != FG_OK) {
        fg_replica_destroy(r);
        return dst;
    }
    r->arena_bytes = plan_arena(r);
    if (share) { /* another arena over the same parameters: a micro-batch in flight */
        r->params = share->params;
        r->grads = share->grads;
        r->buffers = share->buffers;
        r->shares = 1;
    }
    size_t pn = r->param_hi - r->param_lo;
    fg_status st = flags & FG_REPLICA_NO_PARAMS || share ? FG_OK
                 : device_alloc(r, pn * r->param_size, (void **)&r->params, "parameters", err);
    if (st == FG_OK && !(flags & FG_REPLICA_NO_GRADS) && !share)
        st = device_alloc(r, pn * r->grad_size, (void **)&r->grads, "gradients", err);
    if (st == FG_OK && !share)
        st = device_alloc(r, (r->buffer_hi - r->buffer_lo) * sizeof(float),
                          (void **)&r->buffers, "buffers", err);
    if (st == FG_OK && r->work_bytes)
        st = device_alloc(r, r->work_bytes, &r->work, "working parameters", err);
    if (st == FG_OK)
        st = device_alloc(r, r->arena_bytes, (void **)&r->arena, "activation arena", err);
    if (st == FG_OK && !share)
        st = zero_grads(r, err);
    return FG_CREATED(st, r, out, fg_replica_destroy);
}

void fg_replica_destroy(fg_replica *r)
{
    if (!r)
        return;
    void *blocks[] = {r->arena, r->params, r->grads, r->buffers};
    for (size_t i = 0; i < (r->shares ? 1 : COUNT(blocks)); i++)
        if (blocks[i])
            r->be->free(r->bs, r->device, blocks[i]);
    if (r->work)
        r->be->free(r->bs, r->device, r->work);
    if (r->dropout_counters)
        r->be->free(r->bs, r->device, r->dropout_counters);
    if (r->group_grads)
        r->be->free(r->bs, r->device, r->group_grads);
    free(r->group_host);
    free(r->counters_host);
    free(r->y_off);
    free(r->aux_off);
    free(r->out);
    free(r);
}

fg_status fg_replica_set_batch_groups(fg_replica *r, int groups, fg_error *err)
{
    if (groups <= 1 || r->groups == groups)
        return FG_OK;
    if (r->groups > 1 || r->shares)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "batch groups: set once, on a replica "
                            "that owns its gradients");
    size_t bytes = fg_batch_groups_grad_bytes(r->m, r->first, r->end, r->grad_size);
    size_t doubles = fg_batch_groups_host_doubles(r->m, r->first, r->end);
    fg_status st = bytes ? device_alloc(r, bytes, &r->group_grads, "batch groups' gradients",
                                        err)
                         : FG_OK;
    if (st == FG_OK && doubles && !(r->group_host = malloc(doubles * sizeof(double))))
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for the batch groups' sums");
    if (st == FG_OK)
        r->groups = groups;
    return st;
}

float *fg_replica_params(const fg_replica *r) { return r->params; }
float *fg_replica_grads(const fg_replica *r) { return r->grads; }
float *fg_replica_buffers(const fg_replica *r) { return r->buffers; }
size_t fg_replica_arena_bytes(const fg_replica *r) { return r->arena_bytes; }
int fg_replica_max_batch(const fg_replica *r) { return r->max_batch; }
int fg_replica_device(const fg_replica *r) { return r->device; }
const fg_model *fg_replica_model(const fg_replica *r) { return r->m; }
void fg_replica_set_step(fg_replica *r, uint64_t step) { r->step = step; }
void fg_replica_set_fp8_hold(fg_replica *r, int hold) { r->fp8_hold = hold != 0; }
const void *fg_replica_input_grad(const fg_replica *r) { return r->input_grad; }
const float *fg_replica_probs(const fg_replica *r)
{
    return r->has_probs ? (const float *)(r->arena + r->probs_off) : NULL;
}
void fg_replica_set_need_input_grad(fg_replica *r, int on) { r->need_input_grad = on != 0; }

void fg_replica_set_seed(fg_replica *r, uint64_t seed)
{
    r->seed = seed;
    r->seed_set = 1;
}

void fg_replica_set_layer_memory_hook(fg_replica *r, fg_layer_memory_fn fn, void *user)
{
    r->mem_hook = fn;
    r->mem_user = user;
    r->mapped = 0;
}

/* Asks the memory hook where layer l's params and grads are (sharded strategies). */
fg_status fg_replica_map_layer(fg_replica *r, const fg_layer *l, int phase, fg_error *err)
{
    r->mapped = 0;
    if (!r->mem_hook || !l->param_count)
        return FG_OK;
    if (l->tied || l->weight_shared)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: [%s]: weight tying is not supported when "
                            "the strategy places each layer's parameters (sharded stages 2 and "
                            "3); use stage 1, ddp or untie", l->origin, l->section);
    const fg_tensor_info *first = &r->m->tensors[l->param_tensor[0]];
    const fg_tensor_info *last = &r->m->tensors[l->param_tensor[l->param_count - 1]];
    size_t count = last->offset + last->numel - first->offset;
    r->map_params = r->map_grads = NULL;
    fg_status st = r->mem_hook(r->mem_user, l->index, phase, first->offset, count,
                               &r->map_params, &r->map_grads, err);
    if (st != FG_OK)
        return st;
    if (!r->map_params)
        return fg_error_set(err, FG_INTERNAL, "the layer memory hook gave no parameters");
    r->map_offset = first->offset;
    r->mapped = 1;
    return FG_OK;
}

void fg_replica_set_grad_ready_hook(fg_replica *r, fg_grad_ready_fn fn, void *user)
{
    r->hook = fn;
    r->hook_user = user;
}

void fg_replica_set_allreduce(fg_replica *r, fg_replica_allreduce_hook fn, void *user)
{
    r->allreduce = fn;
    r->allreduce_user = user;
}

/* Half parameters ("true" modes) to or from f32 host values, through a temporary f32
 * device buffer (setup and checkpoints only, never in a step); waits for the queue. */
static fg_status half_params_io(fg_replica *r, void *queue, float *host, int up, fg_error *err)
{
    size_t n = r->param_hi - r->param_lo;
    float *tmp = NULL;
    fg_status st = r->be->alloc(r->bs, r->device, n * sizeof(float), (void **)&tmp, err);
    if (st != FG_OK) return st;
    if (up) {
        st = r->be->copy(r->bs, queue, tmp, r->device, host, -1, n * sizeof(float), err);
        if (st == FG_OK)
            st = r->be->cast(r->bs, queue, r->dt->param, FG_F32, r->params, tmp, n, err);
    } else {
        st = r->be->cast(r->bs, queue, FG_F32, r->dt->param, tmp, r->params, n, err);
        if (st == FG_OK)
            st = r->be->copy(r->bs, queue, host, -1, tmp, r->device, n * sizeof(float), err);
    }
    fg_status sst = r->be->queue_sync(r->bs, queue, st == FG_OK ? err : NULL);
    r->be->free(r->bs, r->device, tmp);
    return st == FG_OK ? sst : st;
}

fg_status fg_replica_download_params(fg_replica *r, void *queue, float *host, fg_error *err)
{
    size_t n = r->param_hi - r->param_lo;
    if (!n || !r->params) return FG_OK;
    if (r->param_size != sizeof(float)) return half_params_io(r, queue, host, 0, err);
    FG_BACKEND_NEED(r->be, copy, err);
    fg_status st = r->be->copy(r->bs, queue, host, -1, r->params, r->device, n * sizeof(float),
                               err);
    return st == FG_OK ? r->be->queue_sync(r->bs, queue, err) : st;
}

fg_status fg_replica_upload(fg_replica *r, void *queue, const float *params,
                            const float *buffers, fg_error *err)
{
    FG_BACKEND_NEED(r->be, copy, err);
    fg_status st = FG_OK;
    size_t pn = r->param_hi - r->param_lo, bn = r->buffer_hi - r->buffer_lo;
    if (params && pn && r->params && r->param_size != sizeof(float))
        st = half_params_io(r, queue, (float *)(uintptr_t)(params + r->param_lo), 1, err);
    else if (params && pn && r->params)
        st = r->be->copy(r->bs, queue, r->params, r->device, params + r->param_lo, -1,
                         pn * sizeof(float), err);
    if (st == FG_OK && buffers && bn)
        st = r->be->copy(r->bs, queue, r->buffers, r->device, buffers + r->buffer_lo, -1,
                         bn * sizeof(float), err);
    return st;
}

/* The per-layer part of a context: dtypes, tensor pointers and arena regions. */
static void layer_ctx(const fg_replica *r, const fg_layer *l, fg_layer_ctx *c)
{
    c->dt = r->dt ? *r->dt : (fg_role_dtypes){FG_F32, FG_F32, FG_F32};
    size_t work_size = fg_dtype_size((fg_dtype)c->dt.param);
    for (int j = 0; j < l->param_count; j++) {
        size_t off = r->m->tensors[l->param_tensor[j]].offset;
        if (r->mapped) { /* the hook's memory holds working params and grads, maybe half */
            c->param[j] = (char *)r->map_params + (off - r->map_offset) * work_size;
            c->grad[j] = r->map_grads ? (char *)r->map_grads + (off - r->map_offset) * r->grad_size
                                      : NULL;
            continue;
        }
        c->param[j] = (char *)r->params + (off - r->param_lo) * r->param_size;
        c->grad[j] = (char *)r->grads + (off - r->param_lo) * r->grad_size;
        if (r->work) /* the half working copy */
            c->param[j] = (char *)r->work + (off - r->param_lo) * work_size;
    }
    for (int j = 0; j < l->buffer_count; j++)
        c->buffer[j] = r->buffers + (r->m->tensors[l->buffer_tensor[j]].offset - r->buffer_lo);
    c->aux = r->arena + r->aux_off[l->index];
    c->groups = c->training ? r->groups : 1;
    c->device = r->device;
    c->group_grads = r->group_grads;
    c->group_host = r->group_host;
    c->replica_allreduce = r->allreduce;
    c->replica_allreduce_user = r->allreduce_user;
    c->fp8 = &r->m->fp8;
    c->fp8_hold = r->fp8_hold;
    c->y_ld = (size_t)l->index + 1 == r->m->layer_count && r->logits_ld != r->m->num_classes
                  ? r->logits_ld
                  : 0;
    c->workspace = r->arena + r->ws_off;
    uint64_t seed = r->seed_set ? r->seed : r->m->seed;
    /* One dropout stream per layer; steps are 2^32 draws apart along it. */
    c->dropout_seed = fg_rng_key(seed, 0x64726f706f7574ull + (uint64_t)l->index);
    c->dropout_offset = (r->step << 32) + r->sample_offset * fg_shape_numel(&l->in);
    if (r->dropout_counters) { /* the step's part is the layer's counter on the device */
        c->dropout_offset_dev = &r->dropout_counters[l->index];
        c->dropout_offset = r->sample_offset * fg_shape_numel(&l->in);
    }
}

fg_status fg_replica_dropout_on_device(fg_replica *r, fg_error *err)
{
    int draws = 0;
    for (size_t i = r->first; i < r->end; i++)
        draws |= r->m->layers[i].ops == &fg_layer_dropout;
    if (!draws || r->dropout_counters)
        return FG_OK;
    if (!FG_HAS_FIELD(r->be, fg_backend_vtable, dropout_forward_dev) ||
        !r->be->dropout_forward_dev)
        return fg_error_set(err, FG_UNAVAILABLE, "a dropout layer under [backend] cuda_graphs "
                            "needs the backend's dropout_forward_dev (ABI 1.10)");
    size_t n = r->m->layer_count;
    r->counters_host = malloc(n * sizeof *r->counters_host);
    if (!r->counters_host)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for dropout counters");
    r->counters_set = 0;
    return r->be->alloc(r->bs, r->device, n * sizeof *r->dropout_counters,
                        (void **)&r->dropout_counters, err);
}

/* The counters start at the first training step's value, once; a step's dropouts then
 * advance their own (dropout_forward_dev), so a replayed step draws the next step's mask. */
static fg_status dropout_counters_start(fg_replica *r, void *queue, fg_error *err)
{
    if (!r->dropout_counters || r->counters_set)
        return FG_OK;
    for (size_t i = 0; i < r->m->layer_count; i++)
        r->counters_host[i] = r->step << 32;
    r->counters_set = 1;
    return r->be->copy(r->bs, queue, r->dropout_counters, r->device, r->counters_host, -1,
                       r->m->layer_count * sizeof *r->counters_host, err);
}

void fg_replica_decode_ctx(const fg_replica *r, const fg_layer *l, void *queue,
                           fg_layer_ctx *c)
{
    *c = (fg_layer_ctx){.be = r->be, .bs = r->bs, .queue = queue, .batch = 1};
    layer_ctx(r, l, c);
    c->y = r->arena + r->y_off[l->index];
}

static fg_status layer_failed(const fg_layer *l, const char *pass, fg_status st, fg_error *err)
{
    char why[FG_ERROR_MESSAGE_MAX];
    snprintf(why, sizeof why, "%s", err ? err->message : "");
    return fg_error_set(err, st, "[%s] (%s) %s: %s", l->section, l->ops->type, pass, why);
}

/* What backward needs of a forward that succeeded. */
static fg_status forward_done(fg_replica *r, const void *x_dev, const int32_t *labels_dev,
                              int batch, int training)
{
    r->x = x_dev;
    r->labels = labels_dev;
    r->fwd_batch = batch;
    r->fwd_ready = training != 0;
    return FG_OK;
}

/* The loss's rows of a batch: all batch * positions, or those ignore_index leaves. */
static int64_t counted_rows(const fg_replica *r, int batch)
{
    int64_t rows = (int64_t)batch * fg_model_positions(r->m);
    return r->counted >= 0 && r->counted < rows ? r->counted : rows;
}

/* [model] label_smoothing: classifier_smoothed (ABI 1.11) sums the smoothed loss and the
 * hits, and on the fused path of a training forward leaves the gradient of the mean over the
 * counted rows in the output gradient slot (fused_loss_backward scales it); without the
 * fused path backward computes the gradient from the logits (smoothed_backward). A replica
 * that keeps probabilities (predict, generate) gets them from softmax_xent_forward. */
static fg_status smoothed_loss_sums(fg_replica *r, void *queue, const void *logits,
                                    const int32_t *labels, int rows, int64_t counted,
                                    int training, float *loss_sum, float *correct,
                                    fg_error *err)
{
    const fg_model *m = r->m;
    uint32_t act = fg_replica_act_dtype(r);
    fg_status st = FG_OK;
    if (m->keep_probs)
        st = fg_xent_forward(r->be, r->bs, queue, act, logits, labels, rows, m->num_classes,
                             (float *)(r->arena + r->probs_off), NULL, NULL, err);
    if (st != FG_OK)
        return st;
    FG_BACKEND_NEED(r->be, classifier_smoothed, err);
    int fused_grad = training && r->fused_loss;
    void *dlogits = fused_grad ? r->arena + r->grad_off[fg_model_output_grad_slot(m)] : NULL;
    float scale = counted ? 1.0f / (float)counted : 0.0f;
    st = r->be->classifier_smoothed(r->bs, queue, act, logits, r->logits_ld, labels, rows,
                                    m->num_classes, m->label_smoothing, loss_sum, correct,
                                    scale, 0.0f, NULL, dlogits, err);
    r->dlogits_ready = st == FG_OK && fused_grad;
    return st;
}

/* The smoothed loss's gradient without the fused path (f16 activations, a backend without
 * the classifier): from the logits, times loss_scale / counted, or with the loss scaler on
 * the device its scale / counted read there. */
static fg_status smoothed_backward(fg_replica *r, void *queue, int batch, float loss_scale,
                                   void *dlogits, fg_error *err)
{
    FG_BACKEND_NEED(r->be, classifier_smoothed, err);
    const fg_model *m = r->m;
    int64_t counted = counted_rows(r, batch);
    const fg_loss_scale_dev *dev = r->loss_scale_dev;
    float scale = dev ? loss_scale : counted ? loss_scale / (float)counted : 0.0f;
    float divisor = dev ? (float)counted : 0.0f;
    return r->be->classifier_smoothed(r->bs, queue, fg_replica_act_dtype(r), r->out[r->end - 1],
                                      r->logits_ld, r->labels,
                                      batch * fg_model_positions(m), m->num_classes,
                                      m->label_smoothing, NULL, NULL, scale, divisor, dev,
                                      dlogits, err);
}

/* The loss's sums over `rows` rows: the fused classifier (with the gradient of the mean over
 * the counted rows into the output gradient slot when training), or the loss op keeping the
 * probabilities for backward (and for predict and generate). */
static fg_status loss_sums(fg_replica *r, void *queue, const void *logits,
                           const int32_t *labels, int rows, int64_t counted, int training,
                           float *loss_sum, float *correct, fg_error *err)
{
    const fg_model *m = r->m;
    uint32_t act = fg_replica_act_dtype(r);
    r->dlogits_ready = 0;
    if (m->label_smoothing > 0.0f)
        return smoothed_loss_sums(r, queue, logits, labels, rows, counted, training, loss_sum,
                                  correct, err);
    if (!r->fused_loss || (!training && m->keep_probs))
        return fg_loss_forward(m->loss, r->be, r->bs, queue, act, logits, labels, rows,
                               m->num_classes, (float *)(r->arena + r->probs_off), loss_sum,
                               correct, err);
    void *dlogits = training ? r->arena + r->grad_off[fg_model_output_grad_slot(m)] : NULL;
    /* the scale softmax_xent_backward gets from fg_xent_backward with loss_scale 1 */
    float scale = counted ? 1.0f / (float)counted : 0.0f;
    fg_status st = r->be->classifier(r->bs, queue, act, logits, r->logits_ld, labels, rows,
                                     m->num_classes, loss_sum, correct, scale, dlogits, err);
    r->dlogits_ready = st == FG_OK && training;
    return st;
}

/* The loss over (batch * positions) rows; a sequence's per-sample figures are the means
 * over its positions, summed through a scratch pair then scaled by 1/T. */
static fg_status loss_forward(fg_replica *r, void *queue, const void *logits,
                              const int32_t *labels, int batch, int training, float *loss_sum,
                              float *correct, fg_error *err)
{
    const fg_model *m = r->m;
    int positions = fg_model_positions(m);
    int64_t counted = counted_rows(r, batch);
    int all = counted == (int64_t)batch * positions;
    if ((positions == 1 && all) || !loss_sum || !correct)
        return loss_sums(r, queue, logits, labels, batch * positions, counted, training,
                         loss_sum, correct, err);
    float *pair = (float *)(r->arena + r->seq_off);
    /* batch / counted: 1/T when every label counts (the same float: division rounds once) */
    float inv = counted ? (float)batch / (float)counted : 0.0f;
    fg_status st = r->be->fill(r->bs, queue, FG_F32, pair, 0.0f, 2, err);
    if (st == FG_OK)
        st = loss_sums(r, queue, logits, labels, batch * positions, counted, training, pair,
                       pair + 1, err);
    if (st == FG_OK)
        st = r->be->axpy(r->bs, queue, FG_F32, FG_F32, inv, pair, loss_sum, 1, err);
    if (st == FG_OK)
        st = r->be->axpy(r->bs, queue, FG_F32, FG_F32, inv, pair + 1, correct, 1, err);
    return st;
}

fg_status fg_replica_forward(fg_replica *r, void *queue, const void *x_dev,
                             const int32_t *labels_dev, int batch, int training,
                             float *loss_sum_dev, float *correct_dev, fg_error *err)
{
    r->fwd_ready = 0;
    if (batch < 1 || batch > r->max_batch)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "forward: batch %d is outside 1..%d (the replica's max batch)",
                            batch, r->max_batch);
    /* without a master copy (the strategy keeps it) the hook's memory is the half params */
    if (r->dt && r->mem_hook && r->m->master == FG_MASTER_REPLICA)
        return fg_error_set(err, FG_UNAVAILABLE, "forward: parameters mapped by the strategy "
                            "(sharded layers) are f32; %s working parameters are not supported "
                            "with them", fg_dtype_name((fg_dtype)r->dt->param));
    if (training && r->groups > 1 && r->mem_hook)
        return fg_error_set(err, FG_UNAVAILABLE, "forward: [model] batch_groups needs the "
                            "replica's own gradients, not a strategy's mapped (sharded) ones");
    fg_status cst = training ? dropout_counters_start(r, queue, err) : FG_OK;
    if (cst != FG_OK)
        return cst;
    const fg_model *m = r->m;
    const void *cur = x_dev;
    for (size_t i = r->first; i < r->end; i++) {
        const fg_layer *l = &m->layers[i];
        unsigned flags = l->ops->flags;
        if (m->is_graph) /* named inputs (graph.h) */
            cur = fg_graph_input(l, 0, r->out, x_dev);
        if ((flags & FG_LAYER_ALIAS) || (!training && (flags & FG_LAYER_EVAL_IDENTITY))) {
            r->out[i] = cur;
            continue;
        }
        fg_layer_ctx c = {.be = r->be, .bs = r->bs, .queue = queue, .batch = batch,
                          .training = training, .x = cur};
        if (l->input_count > 1)
            c.x2 = fg_graph_input(l, 1, r->out, x_dev);
        fg_status mst = fg_replica_map_layer(r, l, FG_LAYER_PHASE_FORWARD, err);
        if (mst != FG_OK)
            return layer_failed(l, "forward", mst, err);
        layer_ctx(r, l, &c);
        c.y = r->arena + r->y_off[i];
        fg_status st = fg_layer_forward_grouped(l, &c, err);
        if (st != FG_OK)
            return layer_failed(l, "forward", st, err);
        r->out[i] = cur = c.y;
    }
    if (r->end < m->layer_count) /* a stage before the last: no loss here */
        return forward_done(r, x_dev, labels_dev, batch, training);
    fg_status st = loss_forward(r, queue, cur, labels_dev, batch, training, loss_sum_dev,
                                correct_dev, err);
    if (st != FG_OK)
        return st;
    return forward_done(r, x_dev, labels_dev, batch, training);
}

/* Backward through layer i: dy in, dx out (NULL when not wanted and allowed). */
static fg_status layer_backward(fg_replica *r, void *queue, size_t i, const void *dy,
                                void *dx, void *dx2, int accumulate, fg_error *err)
{
    const fg_layer *l = &r->m->layers[i];
    /* a tied weight's gradient: the later layer wrote it first in this pass, this one adds */
    fg_layer_ctx c = {.be = r->be, .bs = r->bs, .queue = queue, .batch = r->fwd_batch,
                      .training = 1, .accumulate = accumulate || l->weight_shared, .dy = dy,
                      .dx = dx, .dx2 = dx2};
    fg_status mst = fg_replica_map_layer(r, l, FG_LAYER_PHASE_BACKWARD, err);
    if (mst != FG_OK)
        return layer_failed(l, "backward", mst, err);
    layer_ctx(r, l, &c);
    c.x = i > r->first ? r->out[i - 1] : r->x;
    if (r->m->is_graph) {
        c.x = fg_graph_input(l, 0, r->out, r->x);
        if (l->input_count > 1)
            c.x2 = fg_graph_input(l, 1, r->out, r->x);
    }
    c.y = (void *)(uintptr_t)r->out[i];
    fg_status st = fg_layer_backward_grouped(r->m, l, &c, err);
    if (st != FG_OK)
        return layer_failed(l, "backward", st, err);
    if (r->hook && l->param_count && !l->tied) { /* a tied weight is ready with its owner */
        const fg_tensor_info *first = &r->m->tensors[l->param_tensor[0]];
        const fg_tensor_info *last = &r->m->tensors[l->param_tensor[l->param_count - 1]];
        r->hook(r->hook_user, first->offset, last->offset + last->numel - first->offset);
    }
    return FG_OK;
}

typedef struct graph_step_ctx {
    fg_replica *r;
    void *queue;
    int accumulate;
} graph_step_ctx;

static fg_status graph_step(void *user, size_t i, const void *dy, void *dx, void *dx2,
                            fg_error *err)
{
    graph_step_ctx *g = user;
    return layer_backward(g->r, g->queue, i, dy, dx, dx2, g->accumulate, err);
}

/* A graph model (whole replicas only): graph.c walks it, this replica runs each layer. */
static fg_status backward_graph(fg_replica *r, void *queue, int accumulate, fg_error *err)
{
    void *slots[FG_GRAPH_MAX_SLOTS];
    for (int s = 0; s < fg_model_grad_slots(r->m); s++)
        slots[s] = r->arena + r->grad_off[s];
    graph_step_ctx g = {r, queue, accumulate};
    fg_graph_backward_args a = {r->be, r->bs, queue, fg_replica_act_dtype(r), r->fwd_batch,
                                r->need_input_grad ? 0 : r->first_param_layer,
                                r->need_input_grad, slots, graph_step, &g};
    fg_status st = fg_graph_backward(r->m, &a, &r->input_grad, err);
    if (st == FG_OK)
        r->fwd_ready = 1; /* backward may run again (another loss_scale or accumulate) */
    return st;
}

/* Back through layers [first, end) from dy, the gradient at the range's output. */
static fg_status backward_layers(fg_replica *r, void *queue, const void *dy, int accumulate,
                                 fg_error *err)
{
    if (r->m->is_graph)
        return backward_graph(r, queue, accumulate, err);
    const fg_model *m = r->m;
    void *g[2] = {r->arena + r->grad_off[0], r->arena + r->grad_off[1]};
    int next = dy == g[0]; /* dx goes to the ping-pong buffer dy is not in */
    /* Layers before the first one with parameters need no backward, unless asked. */
    int stop = r->need_input_grad ? (int)r->first : r->first_param_layer;
    for (int i = (int)r->end - 1; i >= stop; i--) {
        const fg_layer *l = &m->layers[i];
        if (l->ops->flags & FG_LAYER_ALIAS)
            continue; /* a reshape: the gradient is the same memory */
        int want_dx = i > stop || r->need_input_grad;
        void *dx = g[next];
        if (!want_dx && (l->ops->flags & FG_LAYER_DX_OPTIONAL))
            dx = NULL;
        fg_status st = layer_backward(r, queue, (size_t)i, dy, dx, NULL, accumulate, err);
        if (st != FG_OK)
            return st;
        dy = dx;
        next = 1 - next;
    }
    if (r->need_input_grad)
        r->input_grad = dy;
    r->fwd_ready = 1; /* backward may run again (another loss_scale or accumulate) */
    return FG_OK;
}

static fg_status backward_check(fg_replica *r, int batch, fg_error *err)
{
    if (!r->fwd_ready)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backward: there is no training forward to go back through (the last "
                            "forward had training = 0, failed, or was already used)");
    if (batch != r->fwd_batch)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backward: batch %d differs from the forward's batch %d", batch,
                            r->fwd_batch);
    r->input_grad = NULL;
    r->fwd_ready = 0; /* a failure part-way leaves grads half written: forward again */
    return FG_OK;
}

/* The fused classifier left the logits' gradient (for loss scale 1) in the slot at forward:
 * used once, scaled by loss_scale when another (bf16 and f32 share f32's exponent range, so
 * the scale loses nothing; f16 never takes this path). */
static fg_status fused_loss_backward(fg_replica *r, void *queue, int batch, float loss_scale,
                                     void *dlogits, fg_error *err)
{
    if (!r->dlogits_ready)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backward: the fused classifier's "
                            "gradient of the last forward was used by an earlier backward; "
                            "run the forward again");
    r->dlogits_ready = 0;
    if (loss_scale == 1.0f)
        return FG_OK;
    size_t n = (size_t)batch * (size_t)fg_model_positions(r->m) * (size_t)r->logits_ld;
    return r->be->scale(r->bs, queue, fg_replica_act_dtype(r), dlogits, loss_scale, n, err);
}

fg_status fg_replica_backward(fg_replica *r, void *queue, int batch, float loss_scale,
                              int accumulate, fg_error *err)
{
    fg_status st = backward_check(r, batch, err);
    if (st == FG_OK && r->end < r->m->layer_count)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "backward: this replica ends at layer %zu "
                          "of %zu and has no loss; go back from its output gradient",
                          r->end, r->m->layer_count);
    if (st != FG_OK)
        return st;
    void *dlogits = r->arena + r->grad_off[fg_model_output_grad_slot(r->m)];
    if (r->fused_loss)
        st = fused_loss_backward(r, queue, batch, loss_scale, dlogits, err);
    else if (r->m->label_smoothing > 0.0f)
        st = smoothed_backward(r, queue, batch, loss_scale, dlogits, err);
    else if (r->loss_scale_dev)
        st = fg_xent_backward_scaled(r->be, r->bs, queue, fg_replica_act_dtype(r),
                                     (const float *)(r->arena + r->probs_off), r->labels,
                                     batch * fg_model_positions(r->m), counted_rows(r, batch),
                                     r->m->num_classes, loss_scale, r->loss_scale_dev, dlogits,
                                     err);
    else
        st = fg_loss_backward(r->m->loss, r->be, r->bs, queue, fg_replica_act_dtype(r),
                              r->out[r->end - 1], (const float *)(r->arena + r->probs_off),
                              r->labels, batch * fg_model_positions(r->m),
                              counted_rows(r, batch), r->m->num_classes, loss_scale, dlogits,
                              err);
    return st == FG_OK ? backward_layers(r, queue, dlogits, accumulate, err) : st;
}

fg_status fg_replica_backward_from(fg_replica *r, void *queue, const void *dy, int batch,
                                   int accumulate, fg_error *err)
{
    fg_status st = backward_check(r, batch, err);
    return st == FG_OK ? backward_layers(r, queue, dy, accumulate, err) : st;
}

void fg_replica_param_range(const fg_replica *r, size_t *offset, size_t *size)
{
    *offset = r->param_lo;
    *size = r->param_hi - r->param_lo;
}

void fg_replica_buffer_range(const fg_replica *r, size_t *offset, size_t *size)
{
    *offset = r->buffer_lo;
    *size = r->buffer_hi - r->buffer_lo;
}

const void *fg_replica_output(const fg_replica *r) { return r->out[r->end - 1]; }
void fg_replica_set_sample_offset(fg_replica *r, uint64_t first) { r->sample_offset = first; }

void fg_replica_set_counted_labels(fg_replica *r, int64_t counted) { r->counted = counted; }

int fg_replica_takes_loss_scale_dev(const fg_replica *r)
{
    return !r->fused_loss && r->end == r->m->layer_count &&
           r->m->loss == FG_LOSS_KIND_XENT;
}

void fg_replica_set_loss_scale_dev(fg_replica *r, const fg_loss_scale_dev *dev)
{
    r->loss_scale_dev = dev && fg_replica_takes_loss_scale_dev(r) ? dev : NULL;
}


/* The replica's dtypes, from its model; a half model needs a whole replica that holds its
 * parameters. */
static fg_status replica_dtypes(fg_replica *r, unsigned flags, fg_error *err)
{
    r->dt = fg_model_dtypes(r->m);
    r->act_size = r->dt ? fg_dtype_size((fg_dtype)r->dt->act) : sizeof(float);
    r->param_size = r->grad_size = sizeof(float);
    if (!r->dt)
        return FG_OK;
    r->grad_size = fg_dtype_size((fg_dtype)r->dt->grad);
    if (r->m->master != FG_MASTER_REPLICA)
        r->param_size = fg_dtype_size((fg_dtype)r->dt->param);
    /* no params (sharded): the layer memory hook gives half ones when the strategy keeps
     * the master (fg_master_owner); a core master copy needs the whole flat buffer */
    if (r->first != 0 || r->end != r->m->layer_count ||
        ((flags & FG_REPLICA_NO_PARAMS) && r->m->master == FG_MASTER_REPLICA))
        return fg_error_set(err, FG_UNAVAILABLE, "%s activations are not supported for a "
                            "replica of part of the model (pipeline stages, sharded "
                            "parameters): only whole replicas run in half precision",
                            fg_dtype_name((fg_dtype)r->dt->act));
    if (r->dt->param != FG_F32 && r->m->master == FG_MASTER_REPLICA)
        r->work_bytes = (r->param_hi - r->param_lo) * fg_dtype_size((fg_dtype)r->dt->param);
    return FG_OK;
}

fg_status fg_replica_cast_params(fg_replica *r, void *queue, fg_error *err)
{
    if (!r->work)
        return FG_OK;
    return r->be->cast(r->bs, queue, r->dt->param, FG_F32, r->work, r->params,
                       r->param_hi - r->param_lo, err);
}

size_t fg_replica_work_bytes(const fg_replica *r) { return r->work_bytes; }
void *fg_replica_work(const fg_replica *r, uint32_t *dtype)
{
    *dtype = r->work ? r->dt->param : FG_F32;
    return r->work;
}
uint32_t fg_replica_act_dtype(const fg_replica *r) { return r->dt ? r->dt->act : FG_F32; }
uint32_t fg_replica_param_dtype(const fg_replica *r)
{
    return r->param_size != sizeof(float) ? r->dt->param : FG_F32;
}

uint32_t fg_replica_grad_dtype(const fg_replica *r)
{
    return r->grad_size != sizeof(float) ? r->dt->grad : FG_F32;
}
