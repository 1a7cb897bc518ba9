/* The algorithm of each convolution pass (forward, backward data, backward filter), picked
 * once per plan (shape, element type, layout, queue): from cuDNN's heuristics,
 * deterministic algorithms first (the default), or under [backend] cudnn_benchmark by
 * cuDNN's own timing (cudnnFind*AlgorithmEx on the call's operands, the fastest that fits
 * the workspace, deterministic or not). FMA-only algorithms for fp32 unless allow_tf32.
 * Each choice is logged once (plugins.log). */
#include <stdio.h>

#include "cuda_backend.h"

static const char *const fg_cuda_pass_names[3] = { "forward", "backward-data",
                                                   "backward-filter" };

/* fp32 without allow_tf32 must not run on tensor cores (TF32 rounds the operands). */
static int fg_cuda_strict(const fg_cuda_backend *be, uint32_t type)
{
    return type == FG_F32 && !be->allow_tf32;
}

/* Under strict fp32 only FMA_MATH results: DEFAULT_MATH lets cuDNN use TF32 for FLOAT. */
static int fg_cuda_math_ok(int strict, cudnnMathType_t m)
{
    return !strict || m == CUDNN_FMA_MATH;
}

static cudnnMathType_t fg_cuda_run_math(int strict, cudnnMathType_t m)
{
    return strict ? CUDNN_FMA_MATH : m;
}

/* The first usable of `count` results (heuristic order, or fastest first when timed):
 * deterministic ones first unless `any` (timed: the fastest wins). Each macro use expands
 * over one perf struct type. */
#define FG_CUDA_PICK(perf, count, budget, strict, any, algo_out, math_out, pick)           \
    do {                                                                                   \
        pick = -1;                                                                         \
        for (int round_ = (any) ? 1 : 0; round_ < 2 && pick < 0; round_++)                \
            for (int i = 0; i < (count) && pick < 0; i++)                                  \
                if ((perf)[i].status == CUDNN_STATUS_SUCCESS &&                            \
                    (perf)[i].memory <= (budget) &&                                        \
                    fg_cuda_math_ok(strict, (perf)[i].mathType) &&                         \
                    (round_ == 1 || (perf)[i].determinism == CUDNN_DETERMINISTIC)) {       \
                    algo_out = (perf)[i].algo;                                             \
                    math_out = fg_cuda_run_math(strict, (perf)[i].mathType);               \
                    pick = i;                                                              \
                }                                                                          \
    } while (0)

/* No result fit and the fallback does not either (or cuDNN refused it). */
static fg_status fg_cuda_no_algo(fg_error *err, int pass, cudnnStatus_t s, size_t need,
                                 size_t budget)
{
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d: the fallback algorithm's workspace");
    return fg_error_set(err, FG_BACKEND_ERROR,
                        "backend.cuda: conv2d: no %s algorithm fits the %zu-byte workspace "
                        "budget (the fallback needs %zu bytes)", fg_cuda_pass_names[pass],
                        budget, need);
}

/* What was picked and how, once per plan and pass, at INFO. */
static void fg_cuda_conv_log(const fg_cuda_backend *be, const fg_cuda_conv_plan *p, int pass,
                             int algo, cudnnMathType_t math, int deterministic, float ms,
                             const char *how)
{
    if (!be->host || !be->host->log)
        return;
    const fg_cuda_conv_key *k = &p->key;
    char timing[48] = "";
    if (ms >= 0)
        snprintf(timing, sizeof timing, ", %.4f ms", (double)ms);
    be->host->log(be->host, FG_LOG_INFO,
                  "backend.cuda: conv2d n=%d c=%d h=%d w=%d k=%d r=%d s=%d pad=%d,%d "
                  "stride=%d,%d %s %s: %s algorithm %d (%s math, %s%s) by %s",
                  k->n, k->c, k->h, k->w, k->k, k->r, k->s, k->pad_h, k->pad_w, k->stride_h,
                  k->stride_w, fg_dtype_name(k->type),
                  k->layout == FG_LAYOUT_NHWC ? "NHWC" : "NCHW", fg_cuda_pass_names[pass], algo,
                  math == CUDNN_TENSOR_OP_MATH ? "tensor-op"
                  : math == CUDNN_FMA_MATH     ? "FMA"
                                               : "default",
                  deterministic ? "deterministic" : "non-deterministic", timing, how);
}

/* ---- the heuristics (cudnn_benchmark = false) ------------------------------------------- */

static fg_status fg_cuda_conv_heuristic_fwd(const fg_cuda_backend *be, fg_cuda_queue *q,
                                            fg_cuda_conv_plan *p, int strict, fg_error *err)
{
    int got = 0, pick;
    cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnStatus_t s = cudnnGetConvolutionForwardAlgorithm_v7(
        q->dnn, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, r);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d: choosing the forward algorithm");
    FG_CUDA_PICK(r, got, p->budget, strict, 0, p->fwd, p->fwd_math, pick);
    if (pick >= 0) {
        fg_cuda_conv_log(be, p, 0, p->fwd, p->fwd_math,
                         r[pick].determinism == CUDNN_DETERMINISTIC, -1, "heuristics");
        return FG_OK;
    }
    size_t need = 0; /* implicit GEMM: checked like any other, it must fit the budget too */
    p->fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    p->fwd_math = strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    s = cudnnGetConvolutionForwardWorkspaceSize(q->dnn, p->x, p->w, p->conv, p->y, p->fwd,
                                                &need);
    if (s != CUDNN_STATUS_SUCCESS || need > p->budget)
        return fg_cuda_no_algo(err, 0, s, need, p->budget);
    fg_cuda_conv_log(be, p, 0, p->fwd, p->fwd_math, 1, -1, "fallback");
    return FG_OK;
}

static fg_status fg_cuda_conv_heuristic_bwd_data(const fg_cuda_backend *be, fg_cuda_queue *q,
                                                 fg_cuda_conv_plan *p, int strict,
                                                 fg_error *err)
{
    int got = 0, pick;
    cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnStatus_t s = cudnnGetConvolutionBackwardDataAlgorithm_v7(
        q->dnn, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, r);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d: choosing the backward-data algorithm");
    FG_CUDA_PICK(r, got, p->budget, strict, 0, p->bwd_data, p->bwd_data_math, pick);
    if (pick >= 0) {
        fg_cuda_conv_log(be, p, 1, p->bwd_data, p->bwd_data_math,
                         r[pick].determinism == CUDNN_DETERMINISTIC, -1, "heuristics");
        return FG_OK;
    }
    size_t need = 0; /* ALGO_1 is deterministic (ALGO_0 accumulates with atomics) */
    p->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    p->bwd_data_math = strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    s = cudnnGetConvolutionBackwardDataWorkspaceSize(q->dnn, p->w, p->y, p->conv, p->x,
                                                     p->bwd_data, &need);
    if (s != CUDNN_STATUS_SUCCESS || need > p->budget)
        return fg_cuda_no_algo(err, 1, s, need, p->budget);
    fg_cuda_conv_log(be, p, 1, p->bwd_data, p->bwd_data_math, 1, -1, "fallback");
    return FG_OK;
}

static fg_status fg_cuda_conv_heuristic_bwd_filter(const fg_cuda_backend *be,
                                                   fg_cuda_queue *q, fg_cuda_conv_plan *p,
                                                   int strict, fg_error *err)
{
    int got = 0, pick;
    cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    cudnnStatus_t s = cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        q->dnn, p->x, p->y, p->conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, r);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d: choosing the backward-filter algorithm");
    FG_CUDA_PICK(r, got, p->budget, strict, 0, p->bwd_filter, p->bwd_filter_math, pick);
    if (pick >= 0) {
        fg_cuda_conv_log(be, p, 2, p->bwd_filter, p->bwd_filter_math,
                         r[pick].determinism == CUDNN_DETERMINISTIC, -1, "heuristics");
        return FG_OK;
    }
    size_t need = 0; /* ALGO_1 is deterministic (ALGO_0 accumulates with atomics) */
    p->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    p->bwd_filter_math = strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
    s = cudnnGetConvolutionBackwardFilterWorkspaceSize(q->dnn, p->x, p->y, p->conv, p->w,
                                                       p->bwd_filter, &need);
    if (s != CUDNN_STATUS_SUCCESS || need > p->budget)
        return fg_cuda_no_algo(err, 2, s, need, p->budget);
    fg_cuda_conv_log(be, p, 2, p->bwd_filter, p->bwd_filter_math, 1, -1, "fallback");
    return FG_OK;
}

/* ---- timed (cudnn_benchmark = true) ------------------------------------------------------- */

/* cuDNN runs every algorithm on the operands (out is overwritten, the caller's pass writes
 * it again after); the workspace given is the scratch budget. */
static fg_status fg_cuda_conv_timed(const fg_cuda_backend *be, fg_cuda_queue *q,
                                    fg_cuda_conv_plan *p, int pass, int strict,
                                    const fg_cuda_conv_operands *o, fg_error *err)
{
    int got = 0, pick = -1, det = 0;
    float ms = 0;
    cudnnStatus_t s;
    if (pass == FG_CUDA_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        s = cudnnFindConvolutionForwardAlgorithmEx(
            q->dnn, p->x, o->a, p->w, o->b, p->conv, p->y, o->out,
            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, r, o->scratch, p->budget);
        if (s == CUDNN_STATUS_SUCCESS) {
            FG_CUDA_PICK(r, got, p->budget, strict, 1, p->fwd, p->fwd_math, pick);
            if (pick >= 0) {
                det = r[pick].determinism == CUDNN_DETERMINISTIC;
                ms = r[pick].time;
            }
        }
    } else if (pass == FG_CUDA_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        s = cudnnFindConvolutionBackwardDataAlgorithmEx(
            q->dnn, p->w, o->a, p->y, o->b, p->conv, p->x, o->out,
            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, r, o->scratch, p->budget);
        if (s == CUDNN_STATUS_SUCCESS) {
            FG_CUDA_PICK(r, got, p->budget, strict, 1, p->bwd_data, p->bwd_data_math, pick);
            if (pick >= 0) {
                det = r[pick].determinism == CUDNN_DETERMINISTIC;
                ms = r[pick].time;
            }
        }
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        s = cudnnFindConvolutionBackwardFilterAlgorithmEx(
            q->dnn, p->x, o->a, p->y, o->b, p->conv, p->w, o->out,
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, r, o->scratch, p->budget);
        if (s == CUDNN_STATUS_SUCCESS) {
            FG_CUDA_PICK(r, got, p->budget, strict, 1, p->bwd_filter, p->bwd_filter_math,
                         pick);
            if (pick >= 0) {
                det = r[pick].determinism == CUDNN_DETERMINISTIC;
                ms = r[pick].time;
            }
        }
    }
    if (s != CUDNN_STATUS_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "conv2d: timing the %s algorithms (cudnn_benchmark)",
                 fg_cuda_pass_names[pass]);
        return fg_cuda_dnn_fail(err, s, what);
    }
    if (pick < 0)
        return fg_error_set(err, FG_BACKEND_ERROR,
                            "backend.cuda: conv2d: cudnn_benchmark: none of the %d timed %s "
                            "algorithms ran within the %zu-byte workspace budget%s", got,
                            fg_cuda_pass_names[pass], p->budget,
                            strict ? " with FMA math (allow_tf32 = false)" : "");
    cudnnMathType_t math = pass == FG_CUDA_CONV_FWD        ? p->fwd_math
                           : pass == FG_CUDA_CONV_BWD_DATA ? p->bwd_data_math
                                                           : p->bwd_filter_math;
    int algo = pass == FG_CUDA_CONV_FWD        ? (int)p->fwd
               : pass == FG_CUDA_CONV_BWD_DATA ? (int)p->bwd_data
                                               : (int)p->bwd_filter;
    fg_cuda_conv_log(be, p, pass, algo, math, det, ms, "timing (cudnn_benchmark)");
    return FG_OK;
}

fg_status fg_cuda_conv_choose(const fg_cuda_backend *be, fg_cuda_queue *q, fg_cuda_conv_plan *p,
                              int pass, const fg_cuda_conv_operands *o, fg_error *err)
{
    if (p->chosen[pass])
        return FG_OK;
    int strict = fg_cuda_strict(be, p->key.type);
    cudnnStatus_t s = cudnnSetConvolutionMathType(
        p->conv, strict ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH);
    if (s != CUDNN_STATUS_SUCCESS)
        return fg_cuda_dnn_fail(err, s, "conv2d: cudnnSetConvolutionMathType");
    fg_status st;
    if (be->cudnn_benchmark)
        st = fg_cuda_conv_timed(be, q, p, pass, strict, o, err);
    else if (pass == FG_CUDA_CONV_FWD)
        st = fg_cuda_conv_heuristic_fwd(be, q, p, strict, err);
    else if (pass == FG_CUDA_CONV_BWD_DATA)
        st = fg_cuda_conv_heuristic_bwd_data(be, q, p, strict, err);
    else
        st = fg_cuda_conv_heuristic_bwd_filter(be, q, p, strict, err);
    if (st == FG_OK)
        p->chosen[pass] = 1;
    return st;
}
