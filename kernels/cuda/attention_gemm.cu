/* The row kernels of f32 attention on batched gemms (plugins/backend-cuda/
 * cuda_attention_gemm.c): the gemms write the scaled scores S of some heads, one row of
 * `seq` floats per (head, query i); these kernels turn a row into probabilities (forward,
 * saving its log-sum-exp), recompute them from the saved log-sum-exp (backward), and turn
 * dP into the scores' gradient. One warp per row, lanes striding it; a causal row i keeps
 * keys 0..i and writes 0 past them, so the gemms that follow see a full matrix. */
#include <math.h>

#include "fg_cuda_common.cuh"

namespace {

using namespace fgcu;

constexpr int kRowWarps = 8; /* rows per block */

struct row_at {
    size_t row; /* of all the call's rows */
    int lim;    /* keys this row sees */
    int lane, active;
};

__device__ __forceinline__ row_at where(int rows, int seq, int causal)
{
    row_at w;
    w.row = (size_t)blockIdx.x * kRowWarps + threadIdx.x / 32;
    w.lane = (int)(threadIdx.x % 32);
    w.active = w.row < (size_t)rows;
    int i = (int)(w.row % (size_t)seq);
    w.lim = causal ? i + 1 : seq;
    return w;
}

__device__ __forceinline__ float row_max(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* s (rows, seq): scores in, probabilities out; lse[row] = max + log(sum of exp). */
__global__ void attn_softmax_k(float *s, float *lse, int rows, int seq, int causal)
{
    row_at w = where(rows, seq, causal);
    if (!w.active)
        return;
    float *r = s + w.row * (size_t)seq;
    float m = -INFINITY;
    for (int j = w.lane; j < w.lim; j += 32)
        m = fmaxf(m, ld(r, (size_t)j));
    m = row_max(m);
    float l = 0.0f;
    for (int j = w.lane; j < w.lim; j += 32)
        l += expf(ld(r, (size_t)j) - m);
    l = warp_sum(l);
    float inv = 1.0f / l;
    for (int j = w.lane; j < seq; j += 32)
        st(r, (size_t)j, j < w.lim ? expf(ld(r, (size_t)j) - m) * inv : 0.0f);
    if (w.lane == 0)
        lse[w.row] = m + logf(l);
}

/* s (rows, seq): scores in, the forward's probabilities exp(s - lse) out. */
__global__ void attn_probs_k(float *s, const float *lse, int rows, int seq, int causal)
{
    row_at w = where(rows, seq, causal);
    if (!w.active)
        return;
    float *r = s + w.row * (size_t)seq;
    float l = lse[w.row];
    for (int j = w.lane; j < seq; j += 32)
        st(r, (size_t)j, j < w.lim ? expf(ld(r, (size_t)j) - l) : 0.0f);
}

/* dp (rows, seq): dP in, dS = P (dP - rowsum(P dP)) * scale out (the scores' scale folded
 * in, so the gemms that follow give dQ and dK directly). rowsum(P dP) is rowsum(dY Y). */
__global__ void attn_dsoftmax_k(const float *p, float *dp, int rows, int seq, int causal,
                                float scale)
{
    row_at w = where(rows, seq, causal);
    if (!w.active)
        return;
    const float *pr = p + w.row * (size_t)seq;
    float *dr = dp + w.row * (size_t)seq;
    float delta = 0.0f;
    for (int j = w.lane; j < w.lim; j += 32)
        delta += ld(pr, (size_t)j) * ld(dr, (size_t)j);
    delta = warp_sum(delta);
    for (int j = w.lane; j < seq; j += 32)
        st(dr, (size_t)j,
           j < w.lim ? ld(pr, (size_t)j) * (ld(dr, (size_t)j) - delta) * scale : 0.0f);
}

unsigned row_blocks(int rows)
{
    return (unsigned)((rows + kRowWarps - 1) / kRowWarps);
}

} // namespace

extern "C" {

cudaError_t fg_cu_attn_softmax(cudaStream_t s, float *scores, float *lse, int rows, int seq,
                               int causal)
{
    FGCU_LAUNCH(row_blocks(rows), 32 * kRowWarps, 0, s, attn_softmax_k)(scores, lse, rows, seq,
                                                                        causal);
    return cudaGetLastError();
}

cudaError_t fg_cu_attn_probs(cudaStream_t s, float *scores, const float *lse, int rows, int seq,
                             int causal)
{
    FGCU_LAUNCH(row_blocks(rows), 32 * kRowWarps, 0, s, attn_probs_k)(scores, lse, rows, seq,
                                                                      causal);
    return cudaGetLastError();
}

cudaError_t fg_cu_attn_dsoftmax(cudaStream_t s, const float *probs, float *dprobs, int rows,
                                int seq, int causal, float scale)
{
    FGCU_LAUNCH(row_blocks(rows), 32 * kRowWarps, 0, s, attn_dsoftmax_k)(probs, dprobs, rows,
                                                                         seq, causal, scale);
    return cudaGetLastError();
}

} // extern "C"
