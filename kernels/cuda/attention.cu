/* Multi-head scaled dot-product attention over a fused QKV tensor, flash-style: a block
 * takes kWarps rows (one per warp) of one (batch, head) and walks the rows of the other
 * side in tiles of kTile, staged in shared memory. Memory grows with T, never T^2: the
 * forward keeps the online softmax's running max and sum per row and saves the
 * log-sum-exp; the backward recomputes every probability from it.
 *
 *   forward   query rows; per key tile: lane j scores key j, the warp's max and sum
 *             update the row's (m, l), the lanes (now one per head dimension) update the
 *             output accumulator. y = acc / l, lse = m + log(l).
 *   backward  1) query rows: delta = rowsum(dY * Y) (saved to the workspace) and
 *                dQ = scale * sum_j dS_ij K_j;
 *             2) key rows: dV_j = sum_i P~_ij dY_i and dK_j = scale * sum_i dS_ij Q_i,
 *             with P~ the dropped probability (P * keep / (1 - p)) and
 *             dS = P * (dP~ - delta), dP~ = (dY_i . V_j) * keep / (1 - p).
 * Each output element is written by exactly one thread: no atomics, the same bits on every
 * run. Attention dropout draws as kernels/cpu/attention.c does: probability (b, h, i, j) is
 * kept when dropout_keep(key, offset + ((b*H + h)*T + i)*T + j). Sums are f32 (the CPU's
 * gemms are too); results match the CPU backend within the parity tolerances, not bitwise.
 *
 * qkv (B, T, (H + 2 KV) D): q's H heads, then KV key heads, then KV value heads (KV = H:
 * the thirds of 3C), C = H*D; y and dy (B, T, C). Grouped-query attention (KV < H) indexes
 * the shared key/value head in place: query head h reads head h / (H / KV), no copies.
 * The key-row pass runs a block per key/value head and sums over its G = H / KV query heads
 * (head by head, in order), so dK and dV still have a single writer. */
#include <math.h>

#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

constexpr int kWarps = 4, kTile = 32, kAttnThreads = kWarps * 32;

/* What a block and its threads work on, from a 1-D grid of row tiles per (b, head): the
 * thread's warp and lane, its row (row0 + warp), the qkv row stride ld3 ((H + 2 KV) D), and
 * where the block's heads start: the query head h's columns (q0) and its output (out0;
 * row stride C), the key and value head it reads (k0, v0). A key-row block (per_kv) takes
 * key/value head h and leaves q0, out0 to the query head it is summing over (attn_group). */
struct attn_block {
    int b, h, row0, warp, lane, row, D, seq, C;
    size_t bh, ld3, q0, k0, v0, out0;
};

__device__ __forceinline__ size_t attn_q_col(const fg_cu_attn &a, int h)
{
    return (size_t)h * (size_t)a.head_dim;
}

/* Columns of key head kv (values: + KV*D more). */
__device__ __forceinline__ size_t attn_k_col(const fg_cu_attn &a, int kv)
{
    return ((size_t)a.heads + (size_t)kv) * (size_t)a.head_dim;
}

__device__ __forceinline__ attn_block attn_where(const fg_cu_attn &a, bool per_kv)
{
    int tiles = (a.seq + kWarps - 1) / kWarps;
    int heads = per_kv ? a.kv_heads : a.heads;
    attn_block w;
    w.bh = blockIdx.x / (unsigned)tiles;
    w.row0 = (int)(blockIdx.x - w.bh * (unsigned)tiles) * kWarps;
    w.b = (int)(w.bh / (size_t)heads);
    w.h = (int)(w.bh - (size_t)w.b * (size_t)heads);
    w.warp = (int)threadIdx.x / 32;
    w.lane = (int)threadIdx.x % 32;
    w.row = w.row0 + w.warp;
    w.D = a.head_dim;
    w.seq = a.seq;
    w.C = a.heads * a.head_dim;
    w.ld3 = ((size_t)a.heads + 2 * (size_t)a.kv_heads) * (size_t)w.D;
    int kv = per_kv ? w.h : w.h / (a.heads / a.kv_heads);
    size_t batch0 = (size_t)w.b * (size_t)w.seq * w.ld3;
    w.q0 = batch0 + attn_q_col(a, w.h);
    w.k0 = batch0 + attn_k_col(a, kv);
    w.v0 = w.k0 + (size_t)a.kv_heads * (size_t)w.D;
    w.out0 = (size_t)w.b * (size_t)w.seq * (size_t)w.C + (size_t)w.h * (size_t)w.D;
    return w;
}

/* A key-row block's query head h (of its key/value head's group): q0, out0 and bh. */
__device__ __forceinline__ void attn_group(const fg_cu_attn &a, attn_block &w, int h)
{
    size_t batch0 = (size_t)w.b * (size_t)w.seq * w.ld3;
    w.q0 = batch0 + attn_q_col(a, h);
    w.out0 = (size_t)w.b * (size_t)w.seq * (size_t)w.C + (size_t)h * (size_t)w.D;
    w.bh = (size_t)w.b * (size_t)a.heads + (size_t)h;
}

/* keep / (1 - p) of probability (i, j) of head bh: 0 or the dropout scale. */
__device__ __forceinline__ float attn_keep(const fg_cu_attn &a, size_t bh, int i, int j)
{
    uint64_t T = (uint64_t)a.seq;
    uint64_t draw = a.offset + ((uint64_t)bh * T + (uint64_t)i) * T + (uint64_t)j;
    return dropout_keep(a.key, draw, a.threshold) ? a.drop_scale : 0.0f;
}

/* Rows [first, first + kTile) of a head of qkv (stride ld3) or of dy (stride C) into
 * tile[kTile][D+1]; rows past T as 0. The whole block calls it. */
template <typename T>
__device__ __forceinline__ void load_tile(float *tile, const T *src, size_t stride, int first,
                                          int seq, int D)
{
    for (int e = threadIdx.x; e < kTile * D; e += kAttnThreads) {
        int r = e / D, d = e - r * D, row = first + r;
        tile[r * (D + 1) + d] = row < seq ? ld(src, (size_t)row * stride + (size_t)d) : 0.0f;
    }
}

/* The whole block: once the previous tile is used up, stages the keys and values
 * [j0, j0 + kTile) of the block's key/value head into ks and vs. */
template <typename T>
__device__ __forceinline__ void stage_kv(float *ks, float *vs, const T *qkv, const attn_block &w,
                                         int j0)
{
    __syncthreads(); /* the previous tile is used up */
    load_tile(ks, qkv + w.k0, w.ld3, j0, w.seq, w.D);
    load_tile(vs, qkv + w.v0, w.ld3, j0, w.seq, w.D);
    __syncthreads();
}

__device__ __forceinline__ float dot_row(const float *v, const float *tile_row, int D)
{
    float acc = 0.0f;
    for (int d = 0; d < D; d++)
        acc += v[d] * tile_row[d];
    return acc;
}

/* shared: K and V tiles [kTile][D+1], then per warp q[D], acc[D], p[kTile] */
template <typename T>
__global__ void attn_forward_k(fg_cu_attn a, const T *qkv, T *y, float *lse)
{
    FGCU_DYNAMIC_SHARED(float, sm);
    attn_block w = attn_where(a, false);
    int D = w.D, seq = w.seq, C = w.C, lane = w.lane, i = w.row, active = i < seq;
    int lim = a.causal ? i + 1 : seq; /* keys row i sees */
    size_t ld3 = w.ld3;
    float *ks = sm, *vs = ks + kTile * (D + 1);
    float *q = vs + kTile * (D + 1) + w.warp * (2 * D + kTile), *acc = q + D, *pw = acc + D;
    const T *qb = qkv + w.q0;
    if (active)
        for (int d = lane; d < D; d += 32) {
            q[d] = ld(qb, (size_t)i * ld3 + (size_t)d);
            acc[d] = 0.0f;
        }
    int last = w.row0 + kWarps < seq ? w.row0 + kWarps : seq;
    int kend = a.causal ? last : seq;
    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 < kend; j0 += kTile) {
        stage_kv(ks, vs, qkv, w, j0);
        if (!active)
            continue;
        int j = j0 + lane;
        float s = j < lim ? dot_row(q, ks + lane * (D + 1), D) * a.scale : -INFINITY;
        float mnew = fmaxf(m, warp_max(s)); /* finite: key 0 is in the first tile */
        float corr = expf(m - mnew);
        float p = j < lim ? expf(s - mnew) : 0.0f;
        l = l * corr + warp_sum(p);
        pw[lane] = a.dropout && j < lim ? p * attn_keep(a, w.bh, i, j) : p;
        __syncwarp();
        for (int d = lane; d < D; d += 32) {
            float v = acc[d] * corr;
            for (int jj = 0; jj < kTile; jj++)
                v += pw[jj] * vs[jj * (D + 1) + d];
            acc[d] = v;
        }
        __syncwarp();
        m = mnew;
    }
    if (!active)
        return;
    T *yr = y + w.out0 + (size_t)i * (size_t)C;
    for (int d = lane; d < D; d += 32)
        st(yr, (size_t)d, acc[d] / l);
    if (lane == 0)
        lse[w.bh * (size_t)seq + (size_t)i] = m + logf(l);
}

/* Backward over query rows: delta and dQ. shared: K and V tiles, then per warp q[D],
 * dy[D], dq[D], ds[kTile]. */
template <typename T>
__global__ void attn_dq_k(fg_cu_attn a, const T *qkv, const T *y, const float *lse,
                          const T *dy, T *dqkv, float *delta)
{
    FGCU_DYNAMIC_SHARED(float, sm);
    attn_block w = attn_where(a, false);
    int D = w.D, seq = w.seq, C = w.C, lane = w.lane, i = w.row, active = i < seq;
    int lim = a.causal ? i + 1 : seq;
    size_t ld3 = w.ld3, out_row = w.out0 + (size_t)i * (size_t)C;
    float *ks = sm, *vs = ks + kTile * (D + 1);
    float *q = vs + kTile * (D + 1) + w.warp * (3 * D + kTile), *g = q + D, *dq = g + D;
    float *dsw = dq + D;
    const T *qb = qkv + w.q0;
    float di = 0.0f, li = 0.0f;
    if (active) {
        double part = 0.0;
        for (int d = lane; d < D; d += 32) {
            q[d] = ld(qb, (size_t)i * ld3 + (size_t)d);
            g[d] = ld(dy, out_row + (size_t)d);
            dq[d] = 0.0f;
            part += (double)g[d] * (double)ld(y, out_row + (size_t)d);
        }
        di = (float)warp_sum(part);
        li = lse[w.bh * (size_t)seq + (size_t)i];
        if (lane == 0)
            delta[w.bh * (size_t)seq + (size_t)i] = di;
    }
    int last = w.row0 + kWarps < seq ? w.row0 + kWarps : seq;
    int kend = a.causal ? last : seq;
    for (int j0 = 0; j0 < kend; j0 += kTile) {
        stage_kv(ks, vs, qkv, w, j0);
        if (!active)
            continue;
        int j = j0 + lane;
        float ds = 0.0f;
        if (j < lim) {
            float p = expf(dot_row(q, ks + lane * (D + 1), D) * a.scale - li);
            float dp = dot_row(g, vs + lane * (D + 1), D);
            ds = a.dropout ? p * (dp * attn_keep(a, w.bh, i, j) - di) : p * (dp - di);
        }
        dsw[lane] = ds;
        __syncwarp();
        for (int d = lane; d < D; d += 32) {
            float v = dq[d];
            for (int jj = 0; jj < kTile; jj++)
                v += dsw[jj] * ks[jj * (D + 1) + d];
            dq[d] = v;
        }
        __syncwarp();
    }
    if (!active)
        return;
    T *dqr = dqkv + w.q0 + (size_t)i * ld3;
    for (int d = lane; d < D; d += 32)
        st(dqr, (size_t)d, a.scale * dq[d]);
}

/* Backward over key rows: dK and dV of one key/value head, summed over the query heads of
 * its group in order. shared: Q and dY tiles [kTile][D+1], lse and delta [kTile], then per
 * warp k[D], v[D], dk[D], dv[D], p[kTile], ds[kTile]. */
template <typename T>
__global__ void attn_dkv_k(fg_cu_attn a, const T *qkv, const float *lse, const T *dy,
                           T *dqkv, const float *delta)
{
    FGCU_DYNAMIC_SHARED(float, sm);
    attn_block w = attn_where(a, true);
    int D = w.D, seq = w.seq, C = w.C, lane = w.lane, j = w.row, active = j < seq;
    int group = a.heads / a.kv_heads;
    size_t ld3 = w.ld3;
    float *qs = sm, *gs = qs + kTile * (D + 1), *ls = gs + kTile * (D + 1), *ds_t = ls + kTile;
    float *k = ds_t + kTile + w.warp * (4 * D + 2 * kTile), *v = k + D, *dk = v + D;
    float *dv = dk + D, *pw = dv + D, *dsw = pw + kTile;
    if (active)
        for (int d = lane; d < D; d += 32) {
            k[d] = ld(qkv + w.k0, (size_t)j * ld3 + (size_t)d);
            v[d] = ld(qkv + w.v0, (size_t)j * ld3 + (size_t)d);
            dk[d] = dv[d] = 0.0f;
        }
    /* the queries that see the block's keys: i >= row0 when causal */
    int istart = a.causal ? w.row0 / kTile * kTile : 0;
    for (int hq = w.h * group; hq < (w.h + 1) * group; hq++) {
        attn_group(a, w, hq);
        const T *qb = qkv + w.q0, *dyb = dy + w.out0;
        const float *lse_bh = lse + w.bh * (size_t)seq, *delta_bh = delta + w.bh * (size_t)seq;
        for (int i0 = istart; i0 < seq; i0 += kTile) {
            __syncthreads();
            load_tile(qs, qb, ld3, i0, seq, D);
            load_tile(gs, dyb, (size_t)C, i0, seq, D);
            for (int r = threadIdx.x; r < kTile; r += kAttnThreads) {
                ls[r] = i0 + r < seq ? lse_bh[i0 + r] : 0.0f;
                ds_t[r] = i0 + r < seq ? delta_bh[i0 + r] : 0.0f;
            }
            __syncthreads();
            if (!active)
                continue;
            int i = i0 + lane;
            float p = 0.0f, ds = 0.0f;
            if (i < seq && (!a.causal || j <= i)) {
                float prob = expf(dot_row(k, qs + lane * (D + 1), D) * a.scale - ls[lane]);
                float dp = dot_row(v, gs + lane * (D + 1), D);
                float keep = a.dropout ? attn_keep(a, w.bh, i, j) : 1.0f;
                p = a.dropout ? prob * keep : prob;
                ds = a.dropout ? prob * (dp * keep - ds_t[lane]) : prob * (dp - ds_t[lane]);
            }
            pw[lane] = p;
            dsw[lane] = ds;
            __syncwarp();
            for (int d = lane; d < D; d += 32) {
                float gv = dv[d], gk = dk[d];
                for (int ii = 0; ii < kTile; ii++) {
                    gv += pw[ii] * gs[ii * (D + 1) + d];
                    gk += dsw[ii] * qs[ii * (D + 1) + d];
                }
                dv[d] = gv;
                dk[d] = gk;
            }
            __syncwarp();
        }
    }
    if (!active)
        return;
    for (int d = lane; d < D; d += 32) {
        st(dqkv + w.k0, (size_t)j * ld3 + (size_t)d, a.scale * dk[d]);
        st(dqkv + w.v0, (size_t)j * ld3 + (size_t)d, dv[d]);
    }
}

size_t tiles_bytes(int D)
{
    return (size_t)2 * kTile * (size_t)(D + 1) * sizeof(float);
}

/* Row tiles of every (batch, head) of `heads` heads. */
unsigned attn_blocks(const fg_cu_attn *a, int heads)
{
    return (unsigned)((size_t)a->batch * (size_t)heads *
                      (size_t)((a->seq + kWarps - 1) / kWarps));
}

} // namespace

extern "C" {

size_t fg_cu_attention_workspace(const fg_cu_attn *a)
{
    return (size_t)a->batch * (size_t)a->heads * (size_t)a->seq * sizeof(float);
}

cudaError_t fg_cu_attention_forward(cudaStream_t s, int type, const fg_cu_attn *a,
                                    const void *qkv, void *y, float *lse)
{
    int D = a->head_dim;
    size_t shmem = tiles_bytes(D) + (size_t)kWarps * (2 * D + kTile) * sizeof(float);
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(attn_blocks(a, a->heads), kAttnThreads, shmem, s, attn_forward_k<T>)(
                      *a, (const T *)qkv, (T *)y, lse));
    return cudaGetLastError();
}

cudaError_t fg_cu_attention_backward(cudaStream_t s, int type, const fg_cu_attn *a,
                                     const void *qkv, const void *y, const float *lse,
                                     const void *dy, void *dqkv, void *workspace)
{
    int D = a->head_dim;
    float *delta = (float *)workspace;
    size_t sh_q = tiles_bytes(D) + (size_t)kWarps * (3 * D + kTile) * sizeof(float);
    size_t sh_kv = tiles_bytes(D) + 2 * kTile * sizeof(float) +
                   (size_t)kWarps * (4 * D + 2 * kTile) * sizeof(float);
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(attn_blocks(a, a->heads), kAttnThreads, sh_q, s, attn_dq_k<T>)(
                      *a, (const T *)qkv, (const T *)y, lse, (const T *)dy, (T *)dqkv, delta));
    FGCU_DISPATCH(type, T,
                  FGCU_LAUNCH(attn_blocks(a, a->kv_heads), kAttnThreads, sh_kv, s,
                                                attn_dkv_k<T>)(
                      *a, (const T *)qkv, lse, (const T *)dy, (T *)dqkv, delta));
    return cudaGetLastError();
}

} // extern "C"
