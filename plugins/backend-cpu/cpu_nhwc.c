/* transpose_batched (ABI 1.10) is not a CPU op: the CPU backend runs no channels-last
 * (NHWC) op (conv2d and pool2d refuse the layout with FG_UNAVAILABLE), so the transpose
 * that [model] memory_format = channels_last needs would only lead there. supports()
 * answers no (cpu_ops.c), and the run's setup refuses the key naming it and this backend;
 * the entry, reached only by a caller that skips that check, fails with the same news. */
#include "cpu_backend.h"

fg_status fg_cpu_op_transpose_batched(void *state, void *queue, uint32_t dtype, int batch,
                                      int rows, int cols, const void *x, void *y,
                                      fg_error *err)
{
    (void)state, (void)queue, (void)dtype, (void)batch, (void)rows, (void)cols, (void)x;
    (void)y;
    return fg_error_set(err, FG_UNAVAILABLE, "cpu backend: transpose_batched: the CPU backend "
                        "runs no channels-last (NHWC) op; [model] memory_format = "
                        "channels_last runs on the CUDA backend");
}
