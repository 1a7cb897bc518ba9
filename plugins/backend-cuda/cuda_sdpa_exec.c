/* Running a cached SDPA plan: the workspace from the queue's staging buffer (backward:
 * delta, then the dQ accumulator when the plan has one, then cuDNN's own), a variant pack
 * naming every non-virtual tensor of the graph, cudnnBackendExecute on the queue's
 * stream. */
#include <math.h>
#include <string.h>

#include "cuda_sdpa.h"

#define FG_SDPA_VP_MAX 16

typedef struct fg_cuda_sdpa_pack {
    int64_t uid[FG_SDPA_VP_MAX];
    void *ptr[FG_SDPA_VP_MAX];
    int n;
} fg_cuda_sdpa_pack;

static void fg_cuda_sdpa_put(fg_cuda_sdpa_pack *p, int64_t uid, const void *ptr)
{
    p->uid[p->n] = uid;
    p->ptr[p->n] = (void *)ptr;
    p->n++;
}

static fg_cuda_sdpa_key fg_cuda_sdpa_key_of(uint32_t dtype, const fg_attention_desc *d,
                                            int backward, int aligned)
{
    fg_cuda_sdpa_key k;
    memset(&k, 0, sizeof k); /* the key is compared with memcmp */
    k.b = d->batch;
    k.h = d->heads;
    k.kv = fg_attention_kv_heads(d);
    k.t = d->seq;
    k.d = d->head_dim;
    k.dtype = dtype;
    k.causal = d->causal != 0;
    k.backward = backward;
    k.dropout = d->dropout > 0.0f;
    k.aligned = aligned;
    return k;
}

static int fg_cuda_sdpa_all_aligned(const void *const *p, int n)
{
    for (int i = 0; i < n; i++)
        if ((uintptr_t)p[i] & 15u)
            return 0;
    return 1;
}

/* Workspace, variant pack, execute. */
static fg_status fg_cuda_sdpa_run(fg_cuda_queue *q, const fg_cuda_sdpa_entry *e, const char *op,
                                  fg_cuda_sdpa_pack *pack, fg_error *err)
{
    size_t total = e->own_bytes + (size_t)e->plan.workspace;
    fg_status st = total ? fg_cuda_stage(q, total, op, err) : FG_OK;
    if (st != FG_OK)
        return st;
    char *ws = q->stage;
    if (e->shape.backward)
        fg_cuda_sdpa_put(pack, FG_SDPA_UID_DELTA, ws);
    if (e->shape.dq_accum)
        fg_cuda_sdpa_put(pack, FG_SDPA_UID_DQ_ACCUM,
                         ws + ((size_t)(e->shape.b * e->shape.h * e->shape.t) * 4 + 255) / 256 *
                                  256);
    void *cudnn_ws = e->plan.workspace ? ws + e->own_bytes : NULL;
    cudnnBackendDescriptor_t vp = NULL;
    const char *what = "creating the VARIANT_PACK descriptor";
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (s == CUDNN_STATUS_SUCCESS) {
        what = "CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS";
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                     pack->n, pack->uid);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        what = "CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS";
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                     CUDNN_TYPE_VOID_PTR, pack->n, pack->ptr);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        what = "CUDNN_ATTR_VARIANT_PACK_WORKSPACE";
        s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
                                     1, &cudnn_ws);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        what = "finalizing the VARIANT_PACK";
        s = cudnnBackendFinalize(vp);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        what = "cudnnSetStream";
        s = cudnnSetStream(q->dnn, q->stream);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        what = "cudnnBackendExecute";
        s = cudnnBackendExecute(q->dnn, e->plan.plan, vp);
    }
    if (vp)
        cudnnBackendDestroyDescriptor(vp);
    if (s == CUDNN_STATUS_SUCCESS)
        return FG_OK;
    char msg[256];
    snprintf(msg, sizeof msg, "%s (cuDNN fused SDPA, B=%d T=%d H=%d D=%d): %s", op, e->key.b,
             e->key.t, e->key.h, e->key.d, what);
    return fg_cuda_dnn_fail(err, s, msg);
}

/* qkv's Q, K and V: element offsets 0, C and 2C. */
static void fg_cuda_sdpa_qkv(fg_cuda_sdpa_pack *p, int64_t uq, int64_t uk, int64_t uv,
                             const void *qkv, const fg_attention_desc *d)
{
    size_t c = (size_t)d->heads * (size_t)d->head_dim * 2; /* bytes: f16 and bf16 only */
    fg_cuda_sdpa_put(p, uq, qkv);
    fg_cuda_sdpa_put(p, uk, (const char *)qkv + c);
    fg_cuda_sdpa_put(p, uv, (const char *)qkv + 2 * c);
}

fg_status fg_cuda_sdpa_forward(const fg_cuda_backend *be, fg_cuda_queue *q, uint32_t dtype,
                               const fg_attention_desc *d, const void *qkv, void *y, float *lse,
                               int *done, fg_error *err)
{
    *done = 0;
    if (be->attention == FG_CUDA_ATTN_KERNEL)
        return FG_OK;
    const void *ptrs[] = { qkv, y, lse };
    fg_cuda_sdpa_key key = fg_cuda_sdpa_key_of(dtype, d, 0, fg_cuda_sdpa_all_aligned(ptrs, 3));
    fg_cuda_sdpa_entry *e;
    fg_status st = fg_cuda_sdpa_choose(be, q, "attention_forward", &key, &e, err);
    if (st != FG_OK || !e)
        return st;
    float scale = 1.0f / sqrtf((float)d->head_dim), neg_inf = -INFINITY;
    fg_cuda_sdpa_pack pack = { .n = 0 };
    fg_cuda_sdpa_qkv(&pack, FG_SDPA_UID_Q, FG_SDPA_UID_K, FG_SDPA_UID_V, qkv, d);
    fg_cuda_sdpa_put(&pack, FG_SDPA_UID_O, y);
    fg_cuda_sdpa_put(&pack, FG_SDPA_UID_STATS, lse);
    fg_cuda_sdpa_put(&pack, FG_SDPA_UID_SCALE, &scale);
    if (key.causal)
        fg_cuda_sdpa_put(&pack, FG_SDPA_UID_NEG_INF, &neg_inf);
    st = fg_cuda_sdpa_run(q, e, "attention_forward", &pack, err);
    *done = st == FG_OK;
    return st;
}

fg_status fg_cuda_sdpa_backward(const fg_cuda_backend *be, fg_cuda_queue *q, uint32_t dtype,
                                const fg_attention_desc *d, const void *qkv, const void *y,
                                const float *lse, const void *dy, void *dqkv, int *done,
                                fg_error *err)
{
    *done = 0;
    if (be->attention == FG_CUDA_ATTN_KERNEL)
        return FG_OK;
    const void *ptrs[] = { qkv, y, lse, dy, dqkv };
    fg_cuda_sdpa_key key = fg_cuda_sdpa_key_of(dtype, d, 1, fg_cuda_sdpa_all_aligned(ptrs, 5));
    fg_cuda_sdpa_entry *e;
    fg_status st = fg_cuda_sdpa_choose(be, q, "attention_backward", &key, &e, err);
    if (st != FG_OK || !e)
        return st;
    float scale = 1.0f / sqrtf((float)d->head_dim), neg_inf = -INFINITY, one = 1.0f;
    fg_cuda_sdpa_pack pack = { .n = 0 };
    fg_cuda_sdpa_qkv(&pack, FG_SDPA_UID_Q, FG_SDPA_UID_K, FG_SDPA_UID_V, qkv, d);
    fg_cuda_sdpa_qkv(&pack, FG_SDPA_UID_DQ, FG_SDPA_UID_DK, FG_SDPA_UID_DV, dqkv, d);
    fg_cuda_sdpa_put(&pack, FG_SDPA_UID_O, y);
    fg_cuda_sdpa_put(&pack, FG_SDPA_UID_DO, dy);
    fg_cuda_sdpa_put(&pack, FG_SDPA_UID_STATS, lse);
    fg_cuda_sdpa_put(&pack, FG_SDPA_UID_SCALE, &scale);
    fg_cuda_sdpa_put(&pack, FG_SDPA_UID_ONE, &one);
    if (key.causal)
        fg_cuda_sdpa_put(&pack, FG_SDPA_UID_NEG_INF, &neg_inf);
    st = fg_cuda_sdpa_run(q, e, "attention_backward", &pack, err);
    *done = st == FG_OK;
    return st;
}
