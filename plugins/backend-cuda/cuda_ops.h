/* The CUDA backend's ops: cuda_gemm.c (cuBLASLt), cuda_conv.c (cuDNN), cuda_layer_ops.c
 * (bias, activations, pooling, batch norm, dropout, softmax cross-entropy, pointwise losses),
 * cuda_ops.c (flat buffers: fill, scale, axpy, clamp, sum of squares, cast, the fused
 * optimizer updates) and cuda_lm_ops.c (layer and RMS norm, embedding, attention), each one
 * function for every dtype. */
#ifndef FG_CUDA_OPS_H
#define FG_CUDA_OPS_H

#include "cuda_backend.h"

#ifdef __cplusplus /* the .cu files of kernels/cuda/ops include it */
extern "C" {
#endif

/* Every op, PREFIX fg_cuda_op_ (fulgur/backend.h's op list); gemm and gemm_bias live in
 * cuda_gemm.c, conv2d_forward and conv2d_backward in cuda_conv.c. */
FG_BACKEND_OP_PROTOTYPES(fg_cuda_op_)

/* Dropout's draws (kernels/cpu/dropout.c): the key of a seed, the 24-bit threshold of p;
 * dropout and attention dropout share them. */
uint64_t fg_cuda_dropout_key(uint64_t seed);
uint32_t fg_cuda_dropout_threshold(float p);
size_t fg_cuda_op_attention_workspace(void *state, const fg_attention_desc *d);

#ifdef __cplusplus
}
#endif

#endif
