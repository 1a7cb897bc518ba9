/* One query against the KV cache (fulgur generate): row pos of every (batch, head) attends
 * to keys [0, pos] of the same qkv tensor (B, T, (H + 2 KV) D), the cache's layout; query
 * head h reads key/value head h / (H / KV) in place (grouped-query attention). A block per
 * (batch, head), kDecodeThreads threads:
 *   1) each warp scores keys warp, warp + kWarps, ...: lanes split the head dimension,
 *      warp_sum joins them; scores go to the workspace row (B*H*T floats, the forward's);
 *   2) the block's max, then p = exp(s - max) in place and their sum in double, in a
 *      fixed tree order (as the CPU's rows sum in double);
 *   3) thread d accumulates y[d] = sum_j p_j v_j[d], then divides by the sum.
 * Decoding never drops (the desc's dropout is not read). Same bits on every run: every
 * value is written by one thread and every sum has a fixed order. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kDecodeWarps = 4, kDecodeThreads = kDecodeWarps * 32;

template <typename T>
__global__ void attn_decode_k(fg_cu_attn a, int pos, const T *qkv, T *y, float *scores)
{
    __shared__ float q[FG_CU_ATTN_MAX_HEAD_DIM];
    __shared__ float red[kDecodeWarps];
    __shared__ double sums[kDecodeThreads];
    int bh = (int)blockIdx.x, b = bh / a.heads, h = bh - b * a.heads;
    int D = a.head_dim, C = a.heads * D, n = pos + 1;
    int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    int kv = h / (a.heads / a.kv_heads);
    size_t ld3 = ((size_t)a.heads + 2 * (size_t)a.kv_heads) * (size_t)D;
    const T *batch = qkv + (size_t)b * (size_t)a.seq * ld3;
    const T *base = batch + (size_t)h * (size_t)D;
    const T *kb = batch + ((size_t)a.heads + (size_t)kv) * (size_t)D;
    const T *vb = kb + (size_t)a.kv_heads * (size_t)D;
    float *s = scores + (size_t)bh * (size_t)a.seq;
    for (int d = (int)threadIdx.x; d < D; d += kDecodeThreads)
        q[d] = ld(base, (size_t)pos * ld3 + (size_t)d);
    __syncthreads();

    float mx = -INFINITY;
    for (int j = warp; j < n; j += kDecodeWarps) {
        float dot = 0.0f;
        for (int d = lane; d < D; d += 32)
            dot += q[d] * ld(kb, (size_t)j * ld3 + (size_t)d);
        dot = warp_sum(dot) * a.scale;
        if (lane == 0)
            s[j] = dot;
        mx = fmaxf(mx, dot);
    }
    if (lane == 0)
        red[warp] = mx;
    __syncthreads(); /* the scores and the warps' maxima are written */
    mx = red[0];
    for (int w = 1; w < kDecodeWarps; w++)
        mx = fmaxf(mx, red[w]);

    double part = 0.0;
    for (int j = (int)threadIdx.x; j < n; j += kDecodeThreads) {
        float p = expf(s[j] - mx);
        s[j] = p;
        part += p;
    }
    float inv = (float)(1.0 / block_sum<kDecodeThreads>(part, sums)); /* syncs: p is written */

    for (int d = (int)threadIdx.x; d < D; d += kDecodeThreads) {
        float acc = 0.0f;
        for (int j = 0; j < n; j++)
            acc += s[j] * inv * ld(vb, (size_t)j * ld3 + (size_t)d);
        st(y + (size_t)b * (size_t)C + (size_t)h * (size_t)D, (size_t)d, acc);
    }
}

} // namespace

extern "C" {

cudaError_t fg_cu_attention_decode(cudaStream_t s, int type, const fg_cu_attn *a, int pos,
                                   const void *qkv, void *y, void *workspace)
{
    unsigned blocks = (unsigned)((size_t)a->batch * (size_t)a->heads);
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(blocks, kDecodeThreads, 0, s, attn_decode_k<T>)(
                      *a, pos, (const T *)qkv, (T *)y, (float *)workspace));
    return cudaGetLastError();
}

} // extern "C"
