/* Which attention runs a call (cuda_sdpa.h): the option, the eligibility rules, the
 * per-queue cache of decisions and plans, and the one log line per shape. Running a plan
 * is cuda_sdpa_exec.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_sdpa.h"

static const char *const fg_cuda_attn_names[] = { "auto", "cudnn", "kernel", "gemm" };
enum { FG_CUDA_ATTN_MODES = 4 };

const char *fg_cuda_sdpa_mode_name(int mode)
{
    return mode >= 0 && mode < FG_CUDA_ATTN_MODES ? fg_cuda_attn_names[mode] : "?";
}

fg_status fg_cuda_sdpa_read_option(fg_cuda_backend *be, const fg_host *host, fg_error *err)
{
    be->attention = FG_CUDA_ATTN_AUTO;
    const char *v = NULL;
    if (!host || !host->get_string)
        return FG_OK;
    fg_status st = host->get_string(host, "attention", &v);
    if (st == FG_NOT_FOUND)
        return FG_OK;
    if (st != FG_OK)
        return fg_error_set(err, st, "backend.cuda: cannot read option %s.attention (%s)",
                            host->section ? host->section : "backend", fg_status_name(st));
    for (int i = 0; i < FG_CUDA_ATTN_MODES; i++)
        if (v && strcmp(v, fg_cuda_attn_names[i]) == 0) {
            be->attention = i;
            return FG_OK;
        }
    return fg_error_set(err, FG_INVALID_ARGUMENT,
                        "backend.cuda: option attention = '%s' is not one of auto|cudnn|kernel|gemm",
                        v ? v : "");
}

/* ---- eligibility ---------------------------------------------------------------------------- */

/* NULL when cuDNN may be asked; else why not (the kernels' reason, for the log). The
 * library checks are cudnn-frontend's for the composite graph (sdpa_support_surface.h,
 * CompositeSDPABackwardNode): known-bad releases, and a backward whose sequence is not a
 * multiple of 128 on cuDNN <= 9.15, which needs a padding-mask workaround not built here. */
static const char *fg_cuda_sdpa_ineligible(const fg_cuda_sdpa_key *k, char *buf, size_t n)
{
    size_t version = cudnnGetVersion();
    if (k->dtype != FG_BF16 && k->dtype != FG_F16)
        snprintf(buf, n, "cuDNN's fused attention takes f16 and bf16, not %s",
                 fg_dtype_name((fg_dtype)k->dtype));
    else if (k->d % 8 != 0)
        snprintf(buf, n, "head_dim %d not a multiple of 8", k->d);
    else if (k->d > 128)
        snprintf(buf, n, "head_dim %d above 128", k->d);
    else if (k->dropout)
        snprintf(buf, n, "attention dropout (cuDNN's Philox draws are not fulgur's)");
    else if (k->kv != k->h)
        snprintf(buf, n, "grouped-query attention (kv_heads %d < heads %d): the cuDNN graph "
                 "here is built for equal heads", k->kv, k->h);
    else if (!k->aligned)
        snprintf(buf, n, "a tensor not 16-byte aligned");
    else if (version >= 91000 && version < 91002)
        snprintf(buf, n, "libcudnn %zu has known bugs in fused attention (9.10.0/9.10.1)",
                 version);
    else if (k->backward && k->t % 128 != 0 && version < 91600)
        snprintf(buf, n, "libcudnn %zu: a backward with T not a multiple of 128 needs 9.16 or "
                 "newer", version);
    else
        return NULL;
    return buf;
}

/* ---- the decision per shape ------------------------------------------------------------------ */

static void fg_cuda_sdpa_release(fg_cuda_sdpa_entry *e)
{
    fg_sdpa_plan_destroy(&e->plan);
    fg_sdpa_graph_destroy(&e->graph);
    memset(e, 0, sizeof *e);
}

void fg_cuda_sdpa_destroy(fg_cuda_queue *q)
{
    if (!q->sdpa)
        return;
    for (int i = 0; i < FG_CUDA_SDPA_PLANS; i++)
        fg_cuda_sdpa_release(&q->sdpa->entry[i]);
    free(q->sdpa);
    q->sdpa = NULL;
}

/* The queue's cuDNN handle, made here when no convolution made it first. */
static cudnnStatus_t fg_cuda_sdpa_handle(fg_cuda_queue *q)
{
    if (q->dnn)
        return CUDNN_STATUS_SUCCESS;
    cudnnStatus_t s = cudnnCreate(&q->dnn);
    if (s != CUDNN_STATUS_SUCCESS) {
        q->dnn = NULL;
        return s;
    }
    return cudnnSetStream(q->dnn, q->stream);
}

/* The graph and a plan for it: deterministic dQ lowering first, the accumulator one next. */
static void fg_cuda_sdpa_plan(fg_cuda_queue *q, fg_cuda_sdpa_entry *e)
{
    const fg_cuda_sdpa_key *k = &e->key;
    cudnnStatus_t s = fg_cuda_sdpa_handle(q);
    if (s != CUDNN_STATUS_SUCCESS) {
        snprintf(e->why, sizeof e->why, "cannot start cuDNN: %s", cudnnGetErrorString(s));
        e->refusal = FG_BACKEND_ERROR;
        return;
    }
    const char *what = "";
    for (int accum = 0; accum < (k->backward ? 2 : 1); accum++) {
        e->shape = (fg_sdpa_shape){ k->b, k->h, k->t, k->d,
                                    k->dtype == FG_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF,
                                    k->causal, k->backward, accum };
        fg_sdpa_graph_destroy(&e->graph);
        s = fg_sdpa_graph_build(&e->graph, &e->shape, q->dnn, &what);
        if (s == CUDNN_STATUS_SUCCESS)
            s = fg_sdpa_plan_make(&e->graph, NULL, &e->plan, &what);
        if (s == CUDNN_STATUS_SUCCESS) {
            e->cudnn = 1;
            e->own_bytes = fg_sdpa_graph_workspace(&e->shape);
            return;
        }
    }
    fg_sdpa_graph_destroy(&e->graph);
    /* NOT_SUPPORTED (any sub-code): cuDNN has no engine for it. Anything else is a graph
     * this code built wrong, or a failing library: said as such. */
    int unsupported = CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED;
    snprintf(e->why, sizeof e->why, "cuDNN %s the graph: %s at %s",
             unsupported ? "refused" : "failed on", cudnnGetErrorString(s), what);
    e->refusal = unsupported ? FG_UNAVAILABLE : FG_BACKEND_ERROR;
}

/* Info (plugins.log during a fit) for f16/bf16, where the choice is cuDNN's or a refusal;
 * debug for f32, which never goes to cuDNN (every fp32 run would say so otherwise); a
 * warning when cuDNN failed rather than refused. */
static void fg_cuda_sdpa_log(const fg_cuda_backend *be, const fg_cuda_sdpa_entry *e)
{
    if (!be->host || !be->host->log)
        return;
    const fg_cuda_sdpa_key *k = &e->key;
    char head[128];
    snprintf(head, sizeof head, "backend.cuda: attention %s B=%d T=%d H=%d D=%d %s%s",
             k->backward ? "backward" : "forward", k->b, k->t, k->h, k->d,
             fg_dtype_name((fg_dtype)k->dtype), k->causal ? " causal" : "");
    if (e->cudnn)
        be->host->log(be->host, FG_LOG_INFO,
                      "%s: cudnn fused SDPA (engine %lld, %s, %d config%s tried, workspace "
                      "%lld + %zu bytes%s)", head, (long long)e->plan.engine,
                      e->plan.deterministic ? "deterministic" : "non-deterministic",
                      e->plan.configs_tried, e->plan.configs_tried == 1 ? "" : "s",
                      (long long)e->plan.workspace, e->own_bytes,
                      e->shape.dq_accum ? ", dQ through an f32 accumulator" : "");
    else
        be->host->log(be->host,
                      e->refusal == FG_BACKEND_ERROR ? FG_LOG_WARN
                      : k->dtype == FG_F32           ? FG_LOG_DEBUG
                                                     : FG_LOG_INFO,
                      "%s: kernel: %s%s", head, e->why,
                      be->attention == FG_CUDA_ATTN_CUDNN ? " (attention = cudnn: refused)"
                                                          : "");
}

/* The queue's entry for this call's key, decided (and logged) on first use; the oldest is
 * replaced when the cache is full. */
static fg_status fg_cuda_sdpa_find(const fg_cuda_backend *be, fg_cuda_queue *q,
                                   const fg_cuda_sdpa_key *key, fg_cuda_sdpa_entry **out,
                                   fg_error *err)
{
    if (!q->sdpa && !(q->sdpa = calloc(1, sizeof *q->sdpa)))
        return fg_error_set(err, FG_OUT_OF_MEMORY,
                            "backend.cuda: attention: cannot allocate the cuDNN plan cache");
    fg_cuda_sdpa_cache *c = q->sdpa;
    for (int i = 0; i < FG_CUDA_SDPA_PLANS; i++)
        if (c->entry[i].used && memcmp(&c->entry[i].key, key, sizeof *key) == 0) {
            *out = &c->entry[i];
            return FG_OK;
        }
    fg_cuda_sdpa_entry *e = &c->entry[c->next];
    c->next = (c->next + 1) % FG_CUDA_SDPA_PLANS;
    if (e->cudnn) /* an execution of the plan may still be in flight */
        (void)cudaStreamSynchronize(q->stream);
    fg_cuda_sdpa_release(e);
    e->used = 1;
    e->key = *key;
    const char *why = fg_cuda_sdpa_ineligible(key, e->why, sizeof e->why);
    e->refusal = FG_UNAVAILABLE;
    if (!why)
        fg_cuda_sdpa_plan(q, e);
    fg_cuda_sdpa_log(be, e);
    *out = e;
    return FG_OK;
}

/* The entry that runs this call, or NULL (the kernels do); under attention = cudnn a call
 * cuDNN cannot run is an error. */
fg_status fg_cuda_sdpa_choose(const fg_cuda_backend *be, fg_cuda_queue *q, const char *op,
                              const fg_cuda_sdpa_key *key, fg_cuda_sdpa_entry **out,
                              fg_error *err)
{
    *out = NULL;
    if (be->attention == FG_CUDA_ATTN_KERNEL || be->attention == FG_CUDA_ATTN_GEMM)
        return FG_OK;
    fg_cuda_sdpa_entry *e = NULL;
    fg_status st = fg_cuda_sdpa_find(be, q, key, &e, err);
    if (st != FG_OK)
        return st;
    if (e->cudnn) {
        *out = e;
        return FG_OK;
    }
    if (be->attention != FG_CUDA_ATTN_CUDNN)
        return FG_OK;
    return fg_error_set(err, e->refusal,
                        "backend.cuda: %s: [backend] attention = cudnn, but cuDNN cannot run "
                        "B=%d T=%d H=%d D=%d %s%s: %s (attention = auto falls back to "
                        "fulgur's kernels)", op, key->b, key->t, key->h, key->d,
                        fg_dtype_name((fg_dtype)key->dtype), key->causal ? " causal" : "",
                        e->why);
}
