/* The ABI 1.6 ops (rope_forward/backward, swiglu_forward/backward) are not implemented on
 * CUDA yet: supports() answers no for them (fg_cuda_lacks_op), so the core's op-needs check
 * refuses a Llama-style config at setup naming the op; their entries, reached only by a
 * caller that skips that check, fail with the same news instead of computing anything. */
#include "cuda_backend.h"
#include "cuda_ops.h"

int fg_cuda_lacks_op(uint32_t op)
{
    return op == FG_OP_ROPE_FORWARD || op == FG_OP_ROPE_BACKWARD ||
           op == FG_OP_SWIGLU_FORWARD || op == FG_OP_SWIGLU_BACKWARD;
}

static fg_status not_here(const char *op, fg_error *err)
{
    return fg_error_set(err, FG_UNAVAILABLE, "backend.cuda: %s (ABI 1.6) is not implemented "
                        "on this backend yet (the CPU backend has it)", op);
}

fg_status fg_cuda_op_rope_forward(void *state, void *queue, uint32_t dtype, int rows, int seq,
                                  int pos0, int heads, int head_dim, int ld, float theta,
                                  void *x, fg_error *err)
{
    (void)state, (void)queue, (void)dtype, (void)rows, (void)seq, (void)pos0, (void)heads;
    (void)head_dim, (void)ld, (void)theta, (void)x;
    return not_here("rope_forward", err);
}

fg_status fg_cuda_op_rope_backward(void *state, void *queue, uint32_t dtype, int rows, int seq,
                                   int pos0, int heads, int head_dim, int ld, float theta,
                                   void *x, fg_error *err)
{
    (void)state, (void)queue, (void)dtype, (void)rows, (void)seq, (void)pos0, (void)heads;
    (void)head_dim, (void)ld, (void)theta, (void)x;
    return not_here("rope_backward", err);
}

fg_status fg_cuda_op_swiglu_forward(void *state, void *queue, uint32_t dtype, const void *gate,
                                    const void *up, void *y, size_t n, fg_error *err)
{
    (void)state, (void)queue, (void)dtype, (void)gate, (void)up, (void)y, (void)n;
    return not_here("swiglu_forward", err);
}

fg_status fg_cuda_op_swiglu_backward(void *state, void *queue, uint32_t dtype,
                                     const void *gate, const void *up, const void *dy,
                                     void *dgate, void *dup, size_t n, fg_error *err)
{
    (void)state, (void)queue, (void)dtype, (void)gate, (void)up, (void)dy, (void)dgate;
    (void)dup, (void)n;
    return not_here("swiglu_backward", err);
}
