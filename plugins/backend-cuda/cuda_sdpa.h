/* attention_forward and attention_backward through cuDNN's fused flash attention (SDPA),
 * chosen per call by [backend] attention:
 *   auto    (default) cuDNN where the call is eligible and cuDNN builds a plan for it,
 *           fulgur's kernels (kernels/cuda/attention.cu) otherwise;
 *   cudnn   cuDNN or nothing: a call it cannot run fails with FG_UNAVAILABLE and the
 *           reason (so a run that asked for cuDNN never silently measures the kernels);
 *   kernel  never cuDNN: fulgur's kernels;
 *   gemm    never cuDNN: f32 on batched gemms (cuda_attention_gemm.h), which auto also
 *           takes for the f32 calls it can run.
 * Eligible: f16 or bf16, head_dim a multiple of 8 and at most 128, no attention dropout
 * (cuDNN's Philox draws cannot be fulgur's), as many key/value heads as query heads (the
 * graph here has no grouped-query attention: the kernels run it), qkv, y, dy, dqkv 16-byte aligned, and a
 * libcudnn cudnn-frontend would not use for this graph (see fg_cuda_sdpa_ineligible). The
 * decision, and the engine cuDNN's heuristics gave, is logged once per shape: info
 * (plugins.log during a fit) for f16 and bf16, debug for f32 (never cuDNN's). Plans are cached per queue and shape (B, H, T, D, dtype,
 * causal, forward or backward); the workspace comes from the queue's staging buffer.
 * cuda_sdpa_graph.h describes the graph. */
#ifndef FG_CUDA_SDPA_H
#define FG_CUDA_SDPA_H

#include "cuda_backend.h"
#include "cuda_sdpa_graph.h"

enum { FG_CUDA_ATTN_AUTO = 0, FG_CUDA_ATTN_CUDNN = 1, FG_CUDA_ATTN_KERNEL = 2, FG_CUDA_ATTN_GEMM = 3 };

#define FG_CUDA_SDPA_PLANS 32

typedef struct fg_cuda_sdpa_key {
    int32_t b, h, t, d, kv; /* kv: key/value heads */
    uint32_t dtype;
    int32_t causal, backward, dropout, aligned;
} fg_cuda_sdpa_key;

/* One shape's decision: cuDNN (the graph and its plan) or the kernels, and why. */
typedef struct fg_cuda_sdpa_entry {
    int used;
    fg_cuda_sdpa_key key;
    int cudnn;          /* the plan runs it; else the kernels do */
    fg_status refusal;  /* !cudnn: what attention = cudnn answers (FG_UNAVAILABLE, ...) */
    fg_sdpa_shape shape;
    fg_sdpa_graph graph;
    fg_sdpa_plan plan;
    size_t own_bytes;   /* fulgur's part of the workspace (backward: delta, dQ accum) */
    char why[200];
} fg_cuda_sdpa_entry;

typedef struct fg_cuda_sdpa_cache {
    fg_cuda_sdpa_entry entry[FG_CUDA_SDPA_PLANS];
    int next;
} fg_cuda_sdpa_cache;

/* Reads [backend] attention into be->attention (absent: auto). */
fg_status fg_cuda_sdpa_read_option(fg_cuda_backend *be, const fg_host *host, fg_error *err);
const char *fg_cuda_sdpa_mode_name(int mode);

/* Runs the op through cuDNN when this call goes there: *done = 1. *done = 0 (FG_OK): the
 * caller runs its kernels. The arguments are already checked by the op. */
fg_status fg_cuda_sdpa_forward(const fg_cuda_backend *be, fg_cuda_queue *q, uint32_t dtype,
                               const fg_attention_desc *d, const void *qkv, void *y, float *lse,
                               int *done, fg_error *err);
fg_status fg_cuda_sdpa_backward(const fg_cuda_backend *be, fg_cuda_queue *q, uint32_t dtype,
                                const fg_attention_desc *d, const void *qkv, const void *y,
                                const float *lse, const void *dy, void *dqkv, int *done,
                                fg_error *err);
/* cuda_sdpa.c -> cuda_sdpa_exec.c: the entry whose plan runs this call, or *out = NULL
 * (the kernels run it); FG_UNAVAILABLE under attention = cudnn when cuDNN cannot. */
fg_status fg_cuda_sdpa_choose(const fg_cuda_backend *be, fg_cuda_queue *q, const char *op,
                              const fg_cuda_sdpa_key *key, fg_cuda_sdpa_entry **out,
                              fg_error *err);
/* Frees the queue's plans (before its cuDNN handle goes). */
void fg_cuda_sdpa_destroy(fg_cuda_queue *q);

#endif
