/* The CUDA backend plugin's instance state and functions, split by concern:
 * cuda_plugin.c (descriptor, options, init: driver and device probing), cuda_device.c
 * (devices, memory, queues, copies), cuda_event.c (events), cuda_gemm.c (cuBLASLt),
 * cuda_conv.c (cuDNN), cuda_ops.c, cuda_layer_ops.c and cuda_lm_ops.c (the kernels of
 * kernels/cuda). Every op is one function for every dtype (f32, f16, bf16), behind the
 * checked trampolines of fulgur/backend_checks.h (cuda_plugin.c). */
#ifndef FG_CUDA_BACKEND_H
#define FG_CUDA_BACKEND_H

#include <pthread.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "fg_cuda_kernels.h"
#include "fulgur/backend.h"

#ifdef __cplusplus /* the .cu files of kernels/cuda/ops include it */
extern "C" {
#endif

#define FG_CUDA_MAX_DEVICES 64
#define FG_CUDA_GEMM_PLANS 48   /* cuBLASLt descriptors + algorithm, per queue */
#define FG_CUDA_CONV_PLANS 32   /* cuDNN descriptors + algorithms, per queue */
#define FG_CUDA_LT_WORKSPACE (32u << 20)

typedef struct fg_cuda_device {
    int cc_major, cc_minor;
    int usable; /* this build has code for it */
} fg_cuda_device;

typedef struct fg_cuda_backend {
    const fg_host *host;
    void *libcuda;          /* our reference to the driver library (dlopen), kept to deinit */
    int device_count;
    int driver_version, runtime_version;
    int allow_tf32;
    int cudnn_benchmark;    /* [backend] cudnn_benchmark: conv2d algorithms timed, not guessed */
    int attention;          /* [backend] attention: FG_CUDA_ATTN_* (cuda_sdpa.h) */
    fg_cuda_device dev[FG_CUDA_MAX_DEVICES];
    pthread_mutex_t lock;   /* last_device */
    int last_device;        /* device of the last queue created; -1 before any */
} fg_cuda_backend;

/* One gemm shape on one queue: the cuBLASLt descriptors and the algorithm picked once. */
typedef struct fg_cuda_gemm_key {
    int32_t trans_a, trans_b, m, n, k, lda, ldb, ldc;
    uint32_t a_type, b_type, c_type, align;
    uint32_t bias_type; /* gemm_bias: the BIAS epilogue's vector type; 0: no epilogue */
    uint32_t epilogue;  /* gemm_epilogue: the cublasLtEpilogue_t; 0: BIAS or none, as above */
    int32_t ldaux;      /* the GELU epilogues' aux leading dimension */
    int32_t batch, stride_a, stride_b, stride_c; /* strided batches (0: one matrix) */
} fg_cuda_gemm_key;

typedef struct fg_cuda_gemm_plan {
    int valid;
    fg_cuda_gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
} fg_cuda_gemm_plan;

/* One convolution shape and element type on one queue: cuDNN descriptors and the three
 * algorithms, picked once within the workspace conv2d_workspace() promised. */
typedef struct fg_cuda_conv_key {
    int32_t n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w;
    uint32_t type;
    int32_t layout; /* fg_tensor_layout of x and y (the filter is KCRS in NCHW, KRSC in NHWC) */
} fg_cuda_conv_key;

typedef struct fg_cuda_conv_plan {
    int valid;
    int chosen[3]; /* FG_CUDA_CONV_FWD / _BWD_DATA / _BWD_FILTER's algorithm is picked */
    fg_cuda_conv_key key;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
    size_t budget; /* bytes of the workspace the algorithms may use */
} fg_cuda_conv_plan;

typedef struct fg_cuda_queue {
    int device;
    int copy_only;               /* from copy_queue_create: a stream and nothing else */
    cudaStream_t stream;
    cublasLtHandle_t lt;
    cublasLtMatmulPreference_t lt_pref;
    void *lt_workspace;          /* FG_CUDA_LT_WORKSPACE bytes */
    cudnnHandle_t dnn;           /* created at the first convolution */
    double *scratch;             /* FG_CU_SCRATCH_DOUBLES, reductions */
    unsigned long long *bad_host; /* mapped page-locked word: a bad label seen by a kernel */
    unsigned long long *bad_dev;  /* its device address */
    void *stage;                 /* scratch grown on first use, then reused: a gemm's f32 */
    size_t stage_bytes;          /* copies of mixed element types, embedding_backward's sort */
    int graphs;                  /* graphs captured on the queue (stage may then not move) */
    fg_cuda_gemm_plan gemm[FG_CUDA_GEMM_PLANS];
    int gemm_next;
    fg_cuda_conv_plan conv[FG_CUDA_CONV_PLANS];
    int conv_next;
    struct fg_cuda_sdpa_cache *sdpa; /* cuDNN attention plans (cuda_sdpa.c), first use */
} fg_cuda_queue;

/* cuda_plugin.c: errors */
fg_status fg_cuda_fail(fg_error *err, cudaError_t e, const char *what);
fg_status fg_cuda_dnn_fail(fg_error *err, cudnnStatus_t s, const char *what);
fg_status fg_cuda_lt_fail(fg_error *err, cublasStatus_t s, const char *what);

/* cuda_device.c */
fg_status fg_cuda_device_count(void *state, int *count, fg_error *err);
fg_status fg_cuda_device_info(void *state, int device, fg_device_info *info, fg_error *err);
fg_status fg_cuda_alloc(void *state, int device, size_t bytes, void **ptr, fg_error *err);
void fg_cuda_free(void *state, int device, void *ptr);
fg_status fg_cuda_host_alloc(void *state, size_t bytes, void **ptr, fg_error *err);
void fg_cuda_host_free(void *state, void *ptr);
fg_status fg_cuda_queue_create(void *state, int device, void **queue, fg_error *err);
void fg_cuda_queue_destroy(void *state, void *queue);
fg_status fg_cuda_queue_sync(void *state, void *queue, fg_error *err);
fg_status fg_cuda_copy(void *state, void *queue, void *dst, int dst_device, const void *src,
                       int src_device, size_t bytes, fg_error *err);
/* Makes the queue's device current on the calling thread (every op starts with it); a copy
 * queue is refused. */
fg_status fg_cuda_enter(void *queue, const char *op, fg_error *err);
/* The same for copy, queue_sync and the event entries, which take copy queues too. */
fg_status fg_cuda_enter_any(void *queue, const char *op, fg_error *err);
fg_status fg_cuda_copy_queue_create(void *state, int device, void **queue, fg_error *err);
/* The queue's cudaStream_t (queue_native). */
void *fg_cuda_queue_native(void *state, void *queue);

/* cuda_event.c: events (cudaEventDisableTiming) */
fg_status fg_cuda_event_create(void *state, int device, void **event, fg_error *err);
void fg_cuda_event_destroy(void *state, void *event);
fg_status fg_cuda_event_record(void *state, void *queue, void *event, fg_error *err);
fg_status fg_cuda_queue_wait_event(void *state, void *queue, void *event, fg_error *err);
fg_status fg_cuda_event_sync(void *state, void *event, fg_error *err);
/* 1 when the event completed, without waiting (event_query). */
int fg_cuda_event_query(void *state, void *event);
/* Grows the queue's staging buffer to at least `bytes`. */
fg_status fg_cuda_stage(fg_cuda_queue *q, size_t bytes, const char *op, fg_error *err);

/* cuda_gemm.c (the ops gemm and gemm_bias: cuda_ops.h) */
void fg_cuda_gemm_plans_destroy(fg_cuda_queue *q);
/* cuda_gemm_fp8.c: every usable device has fp8 tensor cores (compute capability 8.9+) */
int fg_cuda_has_fp8(const fg_cuda_backend *be);
/* The queue's cuBLASLt plan (descriptors, layouts, algorithm) for a key with no epilogue,
 * made on first use (cuda_gemm.c); gemm_fp8 sets its scale pointers on it per call. */
fg_status fg_cuda_plan_find(const fg_cuda_backend *be, fg_cuda_queue *q,
                            const fg_cuda_gemm_key *key, fg_cuda_gemm_plan **out,
                            fg_error *err);

/* `batch` f32 matmuls C_i = alpha op(A_i) op(B_i) + beta C_i, row-major as the gemm op, matrix
 * i at element offset i * stride of each operand: one cuBLASLt call (attention's heads). */
typedef struct fg_cuda_batched_gemm {
    int trans_a, trans_b, m, n, k, batch;
    float alpha, beta;
    const float *a, *b;
    float *c;
    int lda, ldb, ldc, stride_a, stride_b, stride_c;
} fg_cuda_batched_gemm;
fg_status fg_cuda_matmul_batched(const fg_cuda_backend *be, fg_cuda_queue *q,
                                 const fg_cuda_batched_gemm *g, fg_error *err);

/* cuda_conv_algo.c: a plan's algorithm for one pass, picked on first use (heuristics, or
 * timed on the operands under cudnn_benchmark: a = x / w / x, b = w / dy / dy, out = y / dx
 * / a filter-sized scratch, all in the plan's type and layout; scratch: `budget` bytes). */
enum { FG_CUDA_CONV_FWD = 0, FG_CUDA_CONV_BWD_DATA = 1, FG_CUDA_CONV_BWD_FILTER = 2 };
typedef struct fg_cuda_conv_operands {
    const void *a, *b;
    void *out, *scratch;
} fg_cuda_conv_operands;
fg_status fg_cuda_conv_choose(const fg_cuda_backend *be, fg_cuda_queue *q, fg_cuda_conv_plan *p,
                              int pass, const fg_cuda_conv_operands *o, fg_error *err);

/* cuda_conv.c (the ops conv2d_forward and conv2d_backward: cuda_ops.h) */
size_t fg_cuda_conv2d_workspace(void *state, const fg_conv2d_desc *d);
void fg_cuda_conv_plans_destroy(fg_cuda_queue *q);

/* cuda_ops.c: what every op shares (the ops themselves: cuda_ops.h) */
/* The capability query: every op runs with any mix of f32, f16 and bf16. */
int fg_cuda_supports(void *state, uint32_t op, const uint32_t *dtypes);
/* FG_UNAVAILABLE naming op and the first dtype this backend does not store. */
fg_status fg_cuda_check_types(const char *op, int count, const uint32_t *types, fg_error *err);
fg_status fg_cuda_launched(cudaError_t e, const char *op, fg_error *err);

#ifdef __cplusplus
}
#endif

#endif
