/* cuDNN fused flash attention (SDPA) as a cuDNN backend-API operation graph, and the
 * execution plan cuDNN's heuristics give for it. Plain C against cudnn.h only (no fulgur
 * types), so tests/cuda/sdpa_aot.c can finalize the same plans against the real libcudnn
 * and a device-properties JSON, without a GPU.
 *
 * The graph is the composite one cudnn-frontend lowers its SDPA node to on cuDNN < 9.21
 * (CompositeSDPANode / CompositeSDPABackwardNode): the pattern cuDNN's fused flash engines
 * match. fulgur's qkv (B, T, 3, H, D) is read in place: Q, K and V are {B, H, T, D} views
 * with strides {3CT, D, 3C, 1} (C = H*D) at element offsets 0, C and 2C of qkv; y and dy
 * (B, T, C) are {B, H, T, D} with strides {CT, D, C, 1}; lse (B, H, T) f32 is the stats
 * tensor {B, H, T, 1}; dqkv is written in place with qkv's strides.
 *
 *   forward:  S = Q K^T * scale; causal: S = (row >= col) ? S : -inf (GEN_INDEX, CMP_GE,
 *             BINARY_SELECT); M = rowmax S; E = exp(S - M); L = rowsum E;
 *             lse = M + log L (stats); P = E / L, stored in the I/O type (cuDNN takes the
 *             second matmul's A operand in the I/O type); O = P V.
 *   backward: delta = rowsum(dO * O) (f32, in the workspace: softmax_sum); S as above;
 *             P = exp(S - lse); dV = P^T dO (P^T in the I/O type); dP = dO V^T;
 *             dS = P (dP - delta) scale; dK = dS^T Q (dS^T in the I/O type);
 *             dQ = dS K, straight into dQ, the lowering cudnn-frontend uses for
 *             set_deterministic_algorithm(true) on Hopper, or (dq_accum) through an f32
 *             accumulator in the workspace and an IDENTITY copy, its default lowering.
 * Intermediates are virtual f32 tensors; every tensor is 16-byte aligned. */
#ifndef FG_CUDA_SDPA_GRAPH_H
#define FG_CUDA_SDPA_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include <cudnn.h>

/* The non-virtual tensors' unique ids (the variant pack names them). */
enum {
    FG_SDPA_UID_Q = 1,
    FG_SDPA_UID_K,
    FG_SDPA_UID_V,
    FG_SDPA_UID_O,
    FG_SDPA_UID_STATS,
    FG_SDPA_UID_SCALE,   /* by value: attention scale, f32 */
    FG_SDPA_UID_NEG_INF, /* by value: -inf, f32 (causal mask) */
    FG_SDPA_UID_ONE,     /* by value: 1.0f (backward: delta * 1, no dropout) */
    FG_SDPA_UID_DO,
    FG_SDPA_UID_DQ,
    FG_SDPA_UID_DK,
    FG_SDPA_UID_DV,
    FG_SDPA_UID_DELTA,    /* backward: rowsum(dO * O), f32 (B, H, T, 1), workspace */
    FG_SDPA_UID_DQ_ACCUM, /* backward, dq_accum lowering: f32 (B, H, T, D), workspace */
    FG_SDPA_UID_VIRTUAL = 100 /* the intermediates: 100, 101, ... */
};

/* Up to: 16 non-virtual tensors, ~32 virtual ones, ~40 operations and their descs. */
#define FG_SDPA_MAX_DESCRIPTORS 160

typedef struct fg_sdpa_shape {
    int64_t b, h, t, d;
    cudnnDataType_t io;   /* CUDNN_DATA_BFLOAT16 or CUDNN_DATA_HALF */
    int causal;
    int backward;
    int dq_accum;         /* backward: dQ through an f32 accumulator (see above) */
} fg_sdpa_shape;

/* Every descriptor the graph is made of (destroyed together) and the graph itself. */
typedef struct fg_sdpa_graph {
    cudnnBackendDescriptor_t graph;
    cudnnBackendDescriptor_t made[FG_SDPA_MAX_DESCRIPTORS];
    int count;
    cudnnBackendDescriptor_t ops[64];
    int op_count;
    int64_t next_uid;
} fg_sdpa_graph;

/* Builds and finalizes the operation graph; handle may be NULL (deviceless: the plan then
 * takes its device from a device-properties descriptor). On failure *what names the
 * descriptor or attribute cuDNN refused, and the graph holds what was made (destroy it). */
cudnnStatus_t fg_sdpa_graph_build(fg_sdpa_graph *g, const fg_sdpa_shape *s,
                                  cudnnHandle_t handle, const char **what);
void fg_sdpa_graph_destroy(fg_sdpa_graph *g);

/* Bytes of the fulgur-owned part of the backward workspace (delta, and the dQ accumulator
 * when dq_accum), 256-byte rounded; cuDNN's own workspace follows it. 0 for forward. */
size_t fg_sdpa_graph_workspace(const fg_sdpa_shape *s);

/* ---- execution plans (cuda_sdpa_plan.c) ---------------------------------------------------- */

typedef struct fg_sdpa_plan {
    cudnnBackendDescriptor_t plan;
    cudnnBackendDescriptor_t config; /* the engine config it was made from */
    int64_t workspace;     /* cuDNN's, bytes */
    int64_t engine;        /* the engine's global index */
    int deterministic;     /* no CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC on the engine */
    int configs_tried;
} fg_sdpa_plan;

/* ENGINEHEUR (MODE_A; deviceprop NULL or a finalized DEVICEPROP descriptor) -> engine
 * configs in the heuristic's order, those without a NONDETERMINISTIC note first -> the
 * first whose EXECUTION_PLAN finalizes. On failure the status is the last refusal (the
 * heuristic's, or the last plan's) and *what says which step. */
cudnnStatus_t fg_sdpa_plan_make(const fg_sdpa_graph *g, cudnnBackendDescriptor_t deviceprop,
                                fg_sdpa_plan *p, const char **what);
void fg_sdpa_plan_destroy(fg_sdpa_plan *p);

#endif
