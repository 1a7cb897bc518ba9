/* 2-D convolution through oneDNN (conv2d_dnnl.c), built only with FG_CPU_WITH_DNNL.
 *
 * One fg_cpu_dnnl_conv holds everything a convolution shape needs, created once: the
 * forward (bias fused), backward-data and backward-weights primitives, the reorders
 * between the caller's NCHW / KCRS tensors and the blocked layouts oneDNN picks, and the
 * memory objects. The batch is cut into `parts` pieces run on the pool's threads, each
 * with oneDNN at one OpenMP thread (the pool owns the cores, as with OpenBLAS); the
 * backward-weights partial sums of the pieces are added in piece order, so results
 * depend on the shape and `parts`, never on timing. Every buffer an op needs lies in the
 * caller's workspace: no allocation per call. */
#ifndef FG_CPU_CONV2D_DNNL_H
#define FG_CPU_CONV2D_DNNL_H

#include <stddef.h>

#include "cpu_kernels.h"

typedef struct fg_cpu_dnnl_conv fg_cpu_dnnl_conv;

/* 1 when oneDNN runs bf16 convolutions natively here (AVX512_BF16 or AMX). */
int fg_cpu_dnnl_bf16_native(void);

/* act_type: FG_CPU_F32 or FG_CPU_BF16 (x, y, dy, dx); param_type: FG_CPU_F32, or
 * FG_CPU_BF16 with bf16 activations (w, bias). Returns 0, or -1 with the reason in why. */
int fg_cpu_dnnl_conv_create(const fg_cpu_conv_shape *d, int act_type, int param_type, int parts,
                            fg_cpu_dnnl_conv **out, char *why, size_t why_len);
void fg_cpu_dnnl_conv_destroy(fg_cpu_dnnl_conv *c);
/* Bytes of workspace forward and backward need. */
size_t fg_cpu_dnnl_conv_workspace(const fg_cpu_dnnl_conv *c);
/* oneDNN's implementation names of forward, backward data and backward weights. */
void fg_cpu_dnnl_conv_impl(const fg_cpu_dnnl_conv *c, const char **fwd, const char **bwd_data,
                           const char **bwd_weights);

/* y = conv(x, w) + bias (bias may be NULL). Returns 0, or -1 with the reason in why. */
int fg_cpu_dnnl_conv_forward(fg_cpu_pool *pool, fg_cpu_dnnl_conv *c, const void *x,
                             const void *w, const void *bias, void *y, void *workspace,
                             char *why, size_t why_len);
/* dx (may be NULL) overwritten; dw and dbias (may be NULL) in grad_type (FG_CPU_F32,
 * FG_CPU_F16 or FG_CPU_BF16) overwritten or, when accumulate != 0, added to. */
int fg_cpu_dnnl_conv_backward(fg_cpu_pool *pool, fg_cpu_dnnl_conv *c, const void *x,
                              const void *w, const void *dy, void *dx, void *dw, void *dbias,
                              int grad_type, int accumulate, void *workspace, char *why,
                              size_t why_len);

#endif
