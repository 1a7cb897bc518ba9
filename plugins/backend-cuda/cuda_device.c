/* Devices, memory, queues (a CUDA stream each, with its library handles and scratch; a
 * copy queue is a bare stream) and copies. Only queue_create and copy_queue_create create
 * a device context; counting and naming devices never does. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_sdpa.h"

static fg_status fg_cuda_check_device(const fg_cuda_backend *be, const char *what, int device,
                                      fg_error *err)
{
    if (device < 0 || device >= be->device_count)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: %s: device %d does not exist (%d visible)", what,
                            device, be->device_count);
    if (!be->dev[device].usable)
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: %s: device %d has compute capability %d.%d; this "
                            "build has code for sm_%d and newer", what, device,
                            be->dev[device].cc_major, be->dev[device].cc_minor,
                            FG_CUDA_MIN_ARCH);
    return FG_OK;
}

static fg_status fg_cuda_set_device(int device, const char *what, fg_error *err)
{
    cudaError_t e = cudaSetDevice(device);
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, what);
}

/* The start of a call that hands out something of a device (alloc, queue_create,
 * copy_queue_create): the out pointer present (set to NULL), the device existing, usable
 * and made current. */
static fg_status fg_cuda_device_out(const fg_cuda_backend *be, const char *op,
                                    const char *name, int device, void **out, fg_error *err)
{
    if (!out)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: %s: %s is NULL", op, name);
    *out = NULL;
    fg_status st = fg_cuda_check_device(be, op, device, err);
    return st == FG_OK ? fg_cuda_set_device(device, op, err) : st;
}

fg_status fg_cuda_enter_any(void *queue, const char *op, fg_error *err)
{
    if (!queue)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: %s: queue is NULL", op);
    return fg_cuda_set_device(((fg_cuda_queue *)queue)->device, op, err);
}

fg_status fg_cuda_enter(void *queue, const char *op, fg_error *err)
{
    if (queue && ((fg_cuda_queue *)queue)->copy_only)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: %s: the queue is a copy "
                            "queue (copy_queue_create); ops run on a queue from queue_create",
                            op);
    return fg_cuda_enter_any(queue, op, err);
}

fg_status fg_cuda_device_count(void *state, int *count, fg_error *err)
{
    fg_cuda_backend *be = state;
    if (!count)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: device_count: count is NULL");
    *count = be->device_count;
    return FG_OK;
}

typedef int (*fg_cu_primary_state_fn)(int dev, unsigned *flags, int *active);
typedef int (*fg_cu_device_get_fn)(int *dev, int ordinal);

/* Whether the device's primary context exists, asked of the driver (cudart would create
 * it to answer anything about memory). */
static int fg_cuda_context_active(const fg_cuda_backend *be, int device)
{
    fg_cu_primary_state_fn get_state =
        (fg_cu_primary_state_fn)dlsym(be->libcuda, "cuDevicePrimaryCtxGetState");
    fg_cu_device_get_fn get_device = (fg_cu_device_get_fn)dlsym(be->libcuda, "cuDeviceGet");
    int dev = 0, active = 0;
    unsigned flags = 0;
    return get_state && get_device && get_device(&dev, device) == 0 &&
           get_state(dev, &flags, &active) == 0 && active;
}

/* Free bytes of a device this process already uses; 0 (unknown) for the others. */
static uint64_t fg_cuda_free_memory(const fg_cuda_backend *be, int device)
{
    if (!fg_cuda_context_active(be, device))
        return 0;
    int current = -1;
    size_t free_b = 0, total_b = 0;
    if (cudaGetDevice(&current) != cudaSuccess || cudaSetDevice(device) != cudaSuccess ||
        cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (current >= 0 && current != device && fg_cuda_context_active(be, current))
        cudaSetDevice(current);
    return free_b;
}

fg_status fg_cuda_device_info(void *state, int device, fg_device_info *info, fg_error *err)
{
    fg_cuda_backend *be = state;
    if (device < 0 || device >= be->device_count)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: device_info: device %d does not exist (%d visible)",
                            device, be->device_count);
    if (!info || info->struct_size < offsetof(fg_device_info, name) + sizeof info->name)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: device_info: info is NULL or its struct_size %u is "
                            "too small", info ? (unsigned)info->struct_size : 0u);
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, device); /* no context */
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "device_info");
    uint32_t size = info->struct_size;
    info->index = device;
    snprintf(info->name, sizeof info->name, "%.60s (sm_%d%d%s)", prop.name, prop.major,
             prop.minor, be->dev[device].usable ? "" : ", no code in this build");
    if (size >= offsetof(fg_device_info, total_memory) + sizeof info->total_memory)
        info->total_memory = prop.totalGlobalMem;
    if (size >= offsetof(fg_device_info, free_memory) + sizeof info->free_memory)
        info->free_memory = fg_cuda_free_memory(be, device);
    return FG_OK;
}

fg_status fg_cuda_alloc(void *state, int device, size_t bytes, void **ptr, fg_error *err)
{
    fg_status st = fg_cuda_device_out(state, "alloc", "ptr", device, ptr, err);
    if (st != FG_OK)
        return st;
    cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
    if (e == cudaSuccess)
        return FG_OK;
    *ptr = NULL;
    if (e != cudaErrorMemoryAllocation)
        return fg_cuda_fail(err, e, "alloc");
    (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return fg_error_set(err, FG_OUT_OF_MEMORY,
                        "backend.cuda: device %d: cannot allocate %zu bytes (%.1f MiB): out "
                        "of device memory (%.1f MiB free of %.1f MiB); use a smaller "
                        "batch_size or a half precision (precision.name = bf16-mixed)",
                        device, bytes, (double)bytes / 1048576.0, (double)free_b / 1048576.0,
                        (double)total_b / 1048576.0);
}

void fg_cuda_free(void *state, int device, void *ptr)
{
    (void)state;
    (void)device;
    if (ptr)
        cudaFree(ptr); /* the pointer knows its device (unified addressing) */
}

/* Page-locked, portable (usable by every device). The context it needs is made on the
 * device this process last made a queue for, so a rank driving device 3 does not create
 * a context on device 0. */
fg_status fg_cuda_host_alloc(void *state, size_t bytes, void **ptr, fg_error *err)
{
    fg_cuda_backend *be = state;
    if (!ptr)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: host_alloc: ptr is NULL");
    *ptr = NULL;
    pthread_mutex_lock(&be->lock);
    int device = be->last_device;
    pthread_mutex_unlock(&be->lock);
    if (device >= 0) {
        fg_status st = fg_cuda_set_device(device, "host_alloc", err);
        if (st != FG_OK)
            return st;
    }
    cudaError_t e = cudaHostAlloc(ptr, bytes ? bytes : 64, cudaHostAllocPortable);
    if (e == cudaSuccess)
        return FG_OK;
    *ptr = NULL;
    (void)cudaGetLastError();
    return fg_error_set(err, e == cudaErrorMemoryAllocation ? FG_OUT_OF_MEMORY : FG_BACKEND_ERROR,
                        "backend.cuda: host_alloc: cannot allocate %zu bytes of page-locked "
                        "host memory: %s; set data.pin_memory = false or a smaller batch_size",
                        bytes, cudaGetErrorString(e));
}

void fg_cuda_host_free(void *state, void *ptr)
{
    (void)state;
    if (ptr)
        cudaFreeHost(ptr);
}

/* ---- queues --------------------------------------------------------------------------- */

static fg_status fg_cuda_queue_setup(fg_cuda_queue *q, fg_error *err)
{
    cudaError_t e = cudaStreamCreateWithFlags(&q->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "queue_create: cudaStreamCreate");
    e = cudaMalloc((void **)&q->scratch, FG_CU_SCRATCH_DOUBLES * sizeof(double));
    if (e == cudaSuccess)
        e = cudaMalloc(&q->lt_workspace, FG_CUDA_LT_WORKSPACE);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&q->bad_host, sizeof *q->bad_host, cudaHostAllocMapped);
    if (e == cudaSuccess) {
        *q->bad_host = 0;
        e = cudaHostGetDevicePointer((void **)&q->bad_dev, q->bad_host, 0);
    }
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "queue_create: allocating the queue's scratch");
    cublasStatus_t s = cublasLtCreate(&q->lt);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceCreate(&q->lt_pref);
    if (s == CUBLAS_STATUS_SUCCESS) {
        size_t ws = FG_CUDA_LT_WORKSPACE;
        s = cublasLtMatmulPreferenceSetAttribute(q->lt_pref,
                                                 CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                 sizeof ws);
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return fg_cuda_lt_fail(err, s, "queue_create: cublasLtCreate");
    return FG_OK;
}

/* queue_create's and copy_queue_create's start (fg_cuda_device_out), then a zeroed queue
 * of that device in *q; `op` names the caller. */
static fg_status fg_cuda_queue_new(const fg_cuda_backend *be, const char *op, int device,
                                   void **queue, fg_cuda_queue **q, fg_error *err)
{
    fg_status st = fg_cuda_device_out(be, op, "queue", device, queue, err);
    if (st != FG_OK)
        return st;
    if (!(*q = calloc(1, sizeof **q)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "backend.cuda: %s: out of memory", op);
    (*q)->device = device;
    return FG_OK;
}

fg_status fg_cuda_queue_create(void *state, int device, void **queue, fg_error *err)
{
    fg_cuda_backend *be = state;
    fg_cuda_queue *q;
    fg_status st = fg_cuda_queue_new(be, "queue_create", device, queue, &q, err);
    if (st != FG_OK)
        return st;
    st = fg_cuda_queue_setup(q, err);
    if (st != FG_OK) {
        fg_cuda_queue_destroy(be, q);
        return st;
    }
    pthread_mutex_lock(&be->lock);
    be->last_device = device;
    pthread_mutex_unlock(&be->lock);
    *queue = q;
    return FG_OK;
}

/* A bare non-blocking stream: its copies run on the copy engines beside the compute
 * streams' kernels. One per call (the core makes one per compute queue that reads
 * batches). */
fg_status fg_cuda_copy_queue_create(void *state, int device, void **queue, fg_error *err)
{
    fg_cuda_queue *q;
    fg_status st = fg_cuda_queue_new(state, "copy_queue_create", device, queue, &q, err);
    if (st != FG_OK)
        return st;
    q->copy_only = 1;
    cudaError_t e = cudaStreamCreateWithFlags(&q->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(q);
        return fg_cuda_fail(err, e, "copy_queue_create: cudaStreamCreate");
    }
    *queue = q;
    return FG_OK;
}

void fg_cuda_queue_destroy(void *state, void *queue)
{
    (void)state;
    fg_cuda_queue *q = queue;
    if (!q)
        return;
    cudaSetDevice(q->device);
    if (q->stream)
        cudaStreamSynchronize(q->stream);
    fg_cuda_gemm_plans_destroy(q);
    fg_cuda_conv_plans_destroy(q);
    fg_cuda_sdpa_destroy(q);
    if (q->dnn)
        cudnnDestroy(q->dnn);
    if (q->lt_pref)
        cublasLtMatmulPreferenceDestroy(q->lt_pref);
    if (q->lt)
        cublasLtDestroy(q->lt);
    cudaFree(q->stage);
    cudaFree(q->lt_workspace);
    cudaFree(q->scratch);
    if (q->bad_host)
        cudaFreeHost(q->bad_host);
    if (q->stream)
        cudaStreamDestroy(q->stream);
    free(q);
}

/* Waits for the queue; then reports what a kernel could only flag (a bad label). */
fg_status fg_cuda_queue_sync(void *state, void *queue, fg_error *err)
{
    (void)state;
    fg_status st = fg_cuda_enter_any(queue, "queue_sync", err);
    if (st != FG_OK)
        return st;
    fg_cuda_queue *q = queue;
    cudaError_t e = cudaStreamSynchronize(q->stream);
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "queue_sync (an earlier op on this queue failed)");
    if (q->copy_only)
        return FG_OK;
    unsigned long long bad = *(volatile unsigned long long *)q->bad_host;
    if (bad) {
        *q->bad_host = 0;
        unsigned at = (unsigned)((bad >> 32) & 0x1fffffffu);
        if (((bad >> 61) & 3u) == FG_CU_BAD_EMBEDDING)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "backend.cuda: embedding: id %d at position %u is outside the "
                                "table's rows (found by a kernel, reported at the next "
                                "queue_sync)", (int)(uint32_t)bad, at);
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: softmax_xent: row %u has label %d, outside [0, "
                            "classes) (-1: ignored) (found by a kernel, reported at the next "
                            "queue_sync)",
                            at, (int)(uint32_t)bad);
    }
    return FG_OK;
}

fg_status fg_cuda_stage(fg_cuda_queue *q, size_t bytes, const char *op, fg_error *err)
{
    if (bytes <= q->stage_bytes)
        return FG_OK;
    if (q->graphs) /* a graph captured on the queue reads the old buffer */
        return fg_error_set(err, FG_UNAVAILABLE, "backend.cuda: %s: the queue's scratch must "
                            "grow to %zu bytes after a CUDA graph captured it at %zu "
                            "([backend] cuda_graphs: the captured step must come first)", op,
                            bytes, q->stage_bytes);
    cudaError_t e = cudaStreamSynchronize(q->stream); /* the old buffer may be in use */
    if (e == cudaSuccess) {
        cudaFree(q->stage);
        q->stage = NULL;
        q->stage_bytes = 0;
        e = cudaMalloc(&q->stage, bytes);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return fg_error_set(err, FG_OUT_OF_MEMORY,
                            "backend.cuda: %s: cannot allocate %zu bytes of scratch: %s", op, bytes,
                            cudaGetErrorString(e));
    }
    q->stage_bytes = bytes;
    return FG_OK;
}

/* ---- copies ---------------------------------------------------------------------------- */

/* Asynchronous on the queue's stream, as the ABI says: page-locked host memory is read by
 * the DMA engine after the call returns, so its owner keeps it unchanged until an event
 * recorded after the copy completed (the core's loader does: data/copy_fence.h), or the
 * queue was synchronised. Pageable memory is staged by the driver before the call
 * returns. */
fg_status fg_cuda_copy(void *state, void *queue, void *dst, int dst_device, const void *src,
                       int src_device, size_t bytes, fg_error *err)
{
    fg_cuda_backend *be = state;
    fg_status st = fg_cuda_enter_any(queue, "copy", err);
    if (st != FG_OK)
        return st;
    if (dst_device < -1 || dst_device >= be->device_count || src_device < -1 ||
        src_device >= be->device_count)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: copy: device %d -> %d: a side is neither host (-1) "
                            "nor a device in [0, %d)", src_device, dst_device,
                            be->device_count);
    if (bytes == 0 || dst == src)
        return FG_OK;
    if (!dst || !src)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: copy of %zu bytes: %s is NULL", bytes,
                            dst ? "src" : "dst");
    fg_cuda_queue *q = queue;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, q->stream);
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "copy");
    return FG_OK;
}

void *fg_cuda_queue_native(void *state, void *queue)
{
    (void)state;
    return queue ? (void *)((fg_cuda_queue *)queue)->stream : NULL;
}
