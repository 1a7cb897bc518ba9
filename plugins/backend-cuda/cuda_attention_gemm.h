/* attention_forward and attention_backward in f32 on batched cuBLASLt gemms and three row
 * kernels (kernels/cuda/attention_gemm.cu): the fp32 path, where cuDNN's fused attention
 * takes only f16 and bf16 and fulgur's SIMT kernels run at a few TFLOP/s. Per sample and
 * group of heads: S = scale Q K^T (one batched gemm over the heads), a row softmax that
 * saves the log-sum-exp, Y = P V; backward recomputes P from the log-sum-exp, then
 * dV = P^T dY, dP = dY V^T, dS = P (dP - rowsum(P dP)) scale, dQ = dS K, dK = dS^T Q.
 * The causal mask is applied by the row kernels (the gemms compute the whole T x T
 * square, twice the causal FLOPs). S and dP live in the queue's staging buffer: T x T
 * floats per head, two of them in backward, as many heads at once as fit in
 * FG_CUDA_ATTN_GEMM_BUDGET bytes.
 * Chosen by [backend] attention (cuda_sdpa.h): gemm always (a call it cannot run fails),
 * auto for f32 calls it can run. It cannot: dropout (fulgur's draws live in the kernels),
 * grouped-query attention (kv_heads < heads: its batched gemms step K and V with Q's
 * heads), a head whose two T x T buffers pass FG_CUDA_ATTN_GEMM_HEAD_MAX bytes. */
#ifndef FG_CUDA_ATTENTION_GEMM_H
#define FG_CUDA_ATTENTION_GEMM_H

#include "cuda_backend.h"

/* The emulated build (tests/cudaemu) sets a small budget, so that its tests cut heads into
 * groups. */
#ifndef FG_CUDA_ATTN_GEMM_BUDGET
#define FG_CUDA_ATTN_GEMM_BUDGET ((size_t)256 << 20)
#endif
#define FG_CUDA_ATTN_GEMM_HEAD_MAX ((size_t)1 << 30)

/* Runs the op on gemms when this call goes there: *done = 1; *done = 0 (FG_OK): the
 * caller goes on to its kernels. The arguments are already checked by the op. */
fg_status fg_cuda_attn_gemm_forward(const fg_cuda_backend *be, fg_cuda_queue *q,
                                    uint32_t dtype, const fg_attention_desc *d,
                                    const void *qkv, void *y, float *lse, int *done,
                                    fg_error *err);
fg_status fg_cuda_attn_gemm_backward(const fg_cuda_backend *be, fg_cuda_queue *q,
                                     uint32_t dtype, const fg_attention_desc *d,
                                     const void *qkv, const float *lse, const void *dy,
                                     void *dqkv, int *done, fg_error *err);

#endif
