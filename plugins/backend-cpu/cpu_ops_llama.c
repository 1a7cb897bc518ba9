/* The Llama-family ops of ABI 1.6 (rope_forward/backward, swiglu_forward/backward) and 1.9
 * (rope_freq_forward/backward) in every dtype, behind the checked trampolines: f32 views of
 * the operands (cpu_stage.h), then kernels/cpu/rope.c and swiglu.c. */
#include <stdint.h>

#include "cpu_backend.h"
#include "cpu_stage.h"

/* inv_freq NULL: the angles from theta */
static fg_status rope(void *state, void *queue, const char *op, int backward, uint32_t dtype,
                      int rows, int seq, int pos0, int heads, int head_dim, int ld,
                      float theta, const double *inv_freq, void *x, fg_error *err)
{
    size_t n = (size_t)(rows - 1) * (size_t)ld + (size_t)heads * (size_t)head_dim;
    fg_cpu_operand o[] = {ARG_INOUT(x, dtype, n)};
    fg_status st = fg_cpu_stage(state, queue, op, o, NARGS(o), err);
    if (st == FG_OK && inv_freq)
        fg_cpu_rope_freq(FG_CPU_POOL(state), backward, rows, seq, pos0, heads, head_dim, ld,
                         inv_freq, o[0].f);
    else if (st == FG_OK)
        fg_cpu_rope(FG_CPU_POOL(state), backward, rows, seq, pos0, heads, head_dim, ld, theta,
                    o[0].f);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_rope_forward(void *state, void *queue, uint32_t dtype, int rows, int seq,
                                 int pos0, int heads, int head_dim, int ld, float theta,
                                 void *x, fg_error *err)
{
    return rope(state, queue, "rope_forward", 0, dtype, rows, seq, pos0, heads, head_dim, ld,
                theta, NULL, x, err);
}

fg_status fg_cpu_op_rope_backward(void *state, void *queue, uint32_t dtype, int rows, int seq,
                                  int pos0, int heads, int head_dim, int ld, float theta,
                                  void *x, fg_error *err)
{
    return rope(state, queue, "rope_backward", 1, dtype, rows, seq, pos0, heads, head_dim, ld,
                theta, NULL, x, err);
}

fg_status fg_cpu_op_rope_freq_forward(void *state, void *queue, uint32_t dtype, int rows,
                                      int seq, int pos0, int heads, int head_dim, int ld,
                                      const double *inv_freq, void *x, fg_error *err)
{
    return rope(state, queue, "rope_freq_forward", 0, dtype, rows, seq, pos0, heads, head_dim,
                ld, 0, inv_freq, x, err);
}

fg_status fg_cpu_op_rope_freq_backward(void *state, void *queue, uint32_t dtype, int rows,
                                       int seq, int pos0, int heads, int head_dim, int ld,
                                       const double *inv_freq, void *x, fg_error *err)
{
    return rope(state, queue, "rope_freq_backward", 1, dtype, rows, seq, pos0, heads, head_dim,
                ld, 0, inv_freq, x, err);
}

fg_status fg_cpu_op_swiglu_forward(void *state, void *queue, uint32_t dtype, const void *gate,
                                   const void *up, void *y, size_t n, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_IN(gate, dtype, n), ARG_IN(up, dtype, n), ARG_OUT(y, dtype, n)};
    fg_status st = fg_cpu_stage(state, queue, "swiglu_forward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_swiglu_forward(FG_CPU_POOL(state), o[0].f, o[1].f, o[2].f, n);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}

fg_status fg_cpu_op_swiglu_backward(void *state, void *queue, uint32_t dtype, const void *gate,
                                    const void *up, const void *dy, void *dgate, void *dup,
                                    size_t n, fg_error *err)
{
    fg_cpu_operand o[] = {ARG_IN(gate, dtype, n), ARG_IN(up, dtype, n), ARG_IN(dy, dtype, n),
                          ARG_OUT(dgate, dtype, n), ARG_OUT(dup, dtype, n)};
    fg_status st = fg_cpu_stage(state, queue, "swiglu_backward", o, NARGS(o), err);
    if (st == FG_OK)
        fg_cpu_swiglu_backward(FG_CPU_POOL(state), o[0].f, o[1].f, o[2].f, o[3].f, o[4].f, n);
    return fg_cpu_unstage(state, o, NARGS(o), st);
}
