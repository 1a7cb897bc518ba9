/* transpose_batched (ABI 1.10): the NCHW <-> NHWC transpose of activations that
 * [model] memory_format = channels_last asks for at the model's input and at flatten; one
 * launch of kernels/cuda/channels_last.cu's permute, the bits unchanged. */
#include "cuda_backend.h"
#include "cuda_checks.h"
#include "cuda_ops.h"

fg_status fg_cuda_op_transpose_batched(void *state, void *queue, uint32_t dtype, int batch,
                                       int rows, int cols, const void *x, void *y,
                                       fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("transpose_batched", dtype);
    /* (batch, rows, cols) -> (batch, cols, rows) is the permute to "channels last" with
     * rows as the channels */
    cudaError_t e = fg_cu_channels_permute(STREAM(queue), y, (int)dtype, x, (int)dtype,
                                           (size_t)batch, (size_t)rows, (size_t)cols, 1, 0);
    return fg_cuda_launched(e, "transpose_batched", err);
}
