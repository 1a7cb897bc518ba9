/* The Llama-family ops of ABI 1.6 (rope_forward/backward, swiglu_forward/backward) and 1.9
 * (rope_freq_forward/backward) in every dtype, behind the checked trampolines (fulgur/backend_checks.h): each enters the queue's
 * device and enqueues kernels/cuda/rope.cu or swiglu.cu on the queue's stream. */
#include "cuda_backend.h"
#include "cuda_checks.h"
#include "cuda_ops.h"

static fg_status rope(void *queue, const char *op, int backward, uint32_t dtype, int rows,
                      int seq, int pos0, int heads, int head_dim, int ld, float theta, void *x,
                      fg_error *err)
{
    FG_CUDA_BEGIN(op, dtype);
    return fg_cuda_launched(fg_cu_rope(STREAM(queue), (int)dtype, backward, rows, seq, pos0,
                                       heads, head_dim, ld, theta, x),
                            op, err);
}

fg_status fg_cuda_op_rope_forward(void *state, void *queue, uint32_t dtype, int rows, int seq,
                                  int pos0, int heads, int head_dim, int ld, float theta,
                                  void *x, fg_error *err)
{
    (void)state;
    return rope(queue, "rope_forward", 0, dtype, rows, seq, pos0, heads, head_dim, ld, theta,
                x, err);
}

fg_status fg_cuda_op_rope_backward(void *state, void *queue, uint32_t dtype, int rows, int seq,
                                   int pos0, int heads, int head_dim, int ld, float theta,
                                   void *x, fg_error *err)
{
    (void)state;
    return rope(queue, "rope_backward", 1, dtype, rows, seq, pos0, heads, head_dim, ld, theta,
                x, err);
}

/* rope with a table of inverse frequencies: the table goes by value into the kernel's
 * parameters, so it has a bound. */
static fg_status rope_freq(void *queue, const char *op, int backward, uint32_t dtype, int rows,
                           int seq, int pos0, int heads, int head_dim, int ld,
                           const double *inv_freq, void *x, fg_error *err)
{
    if (head_dim / 2 > FG_CU_ROPE_MAX_PAIRS)
        return fg_error_set(err, FG_UNAVAILABLE, "backend cuda: %s: head_dim = %d: rope "
                            "scaling takes at most %d (its table of head_dim/2 frequencies "
                            "travels in the kernel's parameters)", op, head_dim,
                            2 * FG_CU_ROPE_MAX_PAIRS);
    FG_CUDA_BEGIN(op, dtype);
    return fg_cuda_launched(fg_cu_rope_freq(STREAM(queue), (int)dtype, backward, rows, seq,
                                            pos0, heads, head_dim, ld, inv_freq, x),
                            op, err);
}

fg_status fg_cuda_op_rope_freq_forward(void *state, void *queue, uint32_t dtype, int rows,
                                       int seq, int pos0, int heads, int head_dim, int ld,
                                       const double *inv_freq, void *x, fg_error *err)
{
    (void)state;
    return rope_freq(queue, "rope_freq_forward", 0, dtype, rows, seq, pos0, heads, head_dim,
                     ld, inv_freq, x, err);
}

fg_status fg_cuda_op_rope_freq_backward(void *state, void *queue, uint32_t dtype, int rows,
                                        int seq, int pos0, int heads, int head_dim, int ld,
                                        const double *inv_freq, void *x, fg_error *err)
{
    (void)state;
    return rope_freq(queue, "rope_freq_backward", 1, dtype, rows, seq, pos0, heads, head_dim,
                     ld, inv_freq, x, err);
}

fg_status fg_cuda_op_swiglu_forward(void *state, void *queue, uint32_t dtype, const void *gate,
                                    const void *up, void *y, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("swiglu_forward", dtype);
    return fg_cuda_launched(fg_cu_swiglu_forward(STREAM(queue), (int)dtype, gate, up, y, n),
                            "swiglu_forward", err);
}

fg_status fg_cuda_op_swiglu_backward(void *state, void *queue, uint32_t dtype,
                                     const void *gate, const void *up, const void *dy,
                                     void *dgate, void *dup, size_t n, fg_error *err)
{
    (void)state;
    FG_CUDA_BEGIN("swiglu_backward", dtype);
    return fg_cuda_launched(fg_cu_swiglu_backward(STREAM(queue), (int)dtype, gate, up, dy,
                                                  dgate, dup, n),
                            "swiglu_backward", err);
}
