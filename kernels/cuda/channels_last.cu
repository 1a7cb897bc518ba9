/* Channels-first <-> channels-last: (outer, c, inner) <-> (outer, inner, c), converting the
 * element type on the way and optionally adding into the destination (f32 arithmetic, one
 * rounding into dst's type). The NHWC convolutions use it for their filters (KCRS
 * parameters <-> the KRSC cuDNN reads and writes: outer = K, inner = R*S); the same
 * transpose moves activations between NCHW and NHWC (outer = N, inner = H*W). One thread
 * per destination element, so accumulation needs no atomics. */
#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

template <typename D, typename S>
__global__ void channels_permute_k(D *__restrict__ dst, const S *__restrict__ src, size_t outer,
                                   size_t c, size_t inner, int to_last, int accumulate)
{
    size_t total = outer * c * inner;
    FGCU_FOR(o, total)
    {
        size_t plane = c * inner, b = o / plane, r = o - b * plane, ch, sp;
        if (to_last) { /* o indexes (b, sp, ch) */
            sp = r / c;
            ch = r - sp * c;
        } else { /* o indexes (b, ch, sp) */
            ch = r / inner;
            sp = r - ch * inner;
        }
        size_t from = to_last ? b * plane + ch * inner + sp : b * plane + sp * c + ch;
        float v = ld(src, from);
        st(dst, o, accumulate ? ld(dst, o) + v : v);
    }
}

template <typename D>
cudaError_t channels_permute_to(cudaStream_t s, D *dst, const void *src, int src_type,
                                size_t outer, size_t c, size_t inner, int to_last, int acc)
{
    size_t n = outer * c * inner;
    FGCU_DISPATCH(src_type, S,
                  FGCU_LAUNCH(grid_for(n), kThreads, 0, s, channels_permute_k<D, S>)(
                      dst, (const S *)src, outer, c, inner, to_last, acc));
    return cudaGetLastError();
}

} // namespace

extern "C" {

cudaError_t fg_cu_channels_permute(cudaStream_t s, void *dst, int dst_type, const void *src,
                                   int src_type, size_t outer, size_t c, size_t inner,
                                   int to_last, int accumulate)
{
    if (outer == 0 || c == 0 || inner == 0)
        return cudaSuccess;
    FGCU_DISPATCH(dst_type, D,
                  return channels_permute_to<D>(s, (D *)dst, src, src_type, outer, c, inner,
                                                to_last, accumulate));
    return cudaSuccess;
}

} // extern "C"
