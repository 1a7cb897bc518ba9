/* fulgur-backend-cuda.so: the descriptor, the option schema, init (driver and devices
 * probed without creating a CUDA context) and deinit.
 *
 * cudart is linked statically, so the plugin loads on a machine without a driver; init then
 * answers FG_UNAVAILABLE with one line saying what is missing (no libcuda.so.1, a driver
 * older than the CUDA this was built with, no visible device, or only devices this build
 * has no code for). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "cuda_graph.h"
#include "cuda_ops.h"
#include "fulgur/backend_checks.h"
#include "cuda_sdpa.h"

static const fg_option fg_cuda_options[] = {
    { "allow_tf32", FG_OPT_BOOL, "false", 1, 0, NULL,
      "let fp32 gemm and conv2d use TF32 tensor cores (faster, ~1e-3 relative error; "
      "PyTorch's default for convolutions)" },
    { "attention", FG_OPT_ENUM, "auto", 0, 0, "auto|cudnn|kernel|gemm",
      "attention_forward/backward: cuDNN's fused flash attention for f16/bf16 and batched "
      "gemms for f32 where they can (auto), cuDNN always (cudnn: fail where it cannot), "
      "fulgur's kernels only (kernel), or f32 gemms always (gemm: fail where they cannot)" },
    { "cudnn_benchmark", FG_OPT_BOOL, "false", 1, 0, NULL,
      "conv2d: time cuDNN's algorithms once per shape, element type and layout "
      "(cudnnFind*AlgorithmEx) and run the fastest, deterministic or not (PyTorch's "
      "cudnn.benchmark); false: cuDNN's heuristics, deterministic algorithms first" },
};

fg_status fg_cuda_fail(fg_error *err, cudaError_t e, const char *what)
{
    fg_status st = FG_BACKEND_ERROR;
    if (e == cudaErrorMemoryAllocation)
        st = FG_OUT_OF_MEMORY;
    else if (e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure ||
             e == cudaErrorHardwareStackError || e == cudaErrorIllegalInstruction ||
             e == cudaErrorMisalignedAddress || e == cudaErrorInvalidPc ||
             e == cudaErrorECCUncorrectable || e == cudaErrorAssert ||
             e == cudaErrorLaunchTimeout)
        st = FG_FATAL; /* the context is lost: nothing on this device can go on */
    /* A non-sticky error stays pending until read: clear it, or the next op's launch check
     * (cudaGetLastError) would report it against that op. */
    if (st != FG_FATAL)
        (void)cudaGetLastError();
    return fg_error_set(err, st, "backend.cuda: %s: %s (%s, CUDA error %d)", what,
                        cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
}

fg_status fg_cuda_dnn_fail(fg_error *err, cudnnStatus_t s, const char *what)
{
    fg_status st = s == CUDNN_STATUS_ALLOC_FAILED ? FG_OUT_OF_MEMORY : FG_BACKEND_ERROR;
    return fg_error_set(err, st, "backend.cuda: %s: cuDNN: %s (status %d)", what,
                        cudnnGetErrorString(s), (int)s);
}

fg_status fg_cuda_lt_fail(fg_error *err, cublasStatus_t s, const char *what)
{
    fg_status st = s == CUBLAS_STATUS_ALLOC_FAILED ? FG_OUT_OF_MEMORY : FG_BACKEND_ERROR;
    return fg_error_set(err, st, "backend.cuda: %s: cuBLASLt: %s (%s)", what,
                        cublasLtGetStatusString(s), cublasLtGetStatusName(s));
}

/* A boolean option; `off` when the key is absent. */
static fg_status fg_cuda_read_bool(const fg_host *host, const char *key, int *out, fg_error *err)
{
    *out = 0;
    if (!host || !host->get_bool)
        return FG_OK;
    fg_status st = host->get_bool(host, key, out);
    if (st == FG_NOT_FOUND) {
        *out = 0;
        return FG_OK;
    }
    if (st != FG_OK)
        return fg_error_set(err, st, "backend.cuda: cannot read option %s.%s (%s)",
                            host->section ? host->section : "backend", key, fg_status_name(st));
    return FG_OK;
}

static fg_status fg_cuda_read_options(fg_cuda_backend *be, const fg_host *host, fg_error *err)
{
    fg_status st = fg_cuda_read_bool(host, "allow_tf32", &be->allow_tf32, err);
    if (st == FG_OK)
        st = fg_cuda_read_bool(host, "cudnn_benchmark", &be->cudnn_benchmark, err);
    return st == FG_OK ? fg_cuda_sdpa_read_option(be, host, err) : st;
}

static const char *fg_cuda_visible(void)
{
    const char *v = secure_getenv("CUDA_VISIBLE_DEVICES");
    return v ? v : "(unset)";
}

/* The driver library must be loadable: cudart (static) needs it for everything. */
static fg_status fg_cuda_probe_driver(fg_cuda_backend *be, fg_error *err)
{
    be->libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!be->libcuda) {
        const char *why = dlerror();
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: no CUDA driver (libcuda.so.1 not found: %s); this "
                            "machine cannot run backend.name = cuda (use cpu)",
                            why ? why : "dlopen failed");
    }
    cudaError_t e = cudaDriverGetVersion(&be->driver_version);
    if (e == cudaSuccess)
        e = cudaRuntimeGetVersion(&be->runtime_version);
    if (e != cudaSuccess)
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: the CUDA driver does not answer: %s (%s)",
                            cudaGetErrorString(e), cudaGetErrorName(e));
    /* minor-version compatibility: any driver of the same CUDA major runs this build */
    if (be->driver_version / 1000 < be->runtime_version / 1000)
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: CUDA driver too old: it supports CUDA %d.%d, this "
                            "plugin was built with CUDA %d.%d; install an NVIDIA driver for "
                            "CUDA %d or newer",
                            be->driver_version / 1000, be->driver_version % 1000 / 10,
                            be->runtime_version / 1000, be->runtime_version % 1000 / 10,
                            be->runtime_version / 1000);
    return FG_OK;
}

/* Counts the visible devices (CUDA_VISIBLE_DEVICES applies) and reads their compute
 * capability; neither creates a context. */
static fg_status fg_cuda_probe_devices(fg_cuda_backend *be, fg_error *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0))
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: no CUDA device (CUDA_VISIBLE_DEVICES=%s)",
                            fg_cuda_visible());
    if (e == cudaErrorInsufficientDriver)
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: CUDA driver too old for this build (CUDA %d.%d): %s",
                            be->runtime_version / 1000, be->runtime_version % 1000 / 10,
                            cudaGetErrorString(e));
    if (e != cudaSuccess)
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: cannot count CUDA devices: %s (%s, "
                            "CUDA_VISIBLE_DEVICES=%s)", cudaGetErrorString(e),
                            cudaGetErrorName(e), fg_cuda_visible());
    if (count > FG_CUDA_MAX_DEVICES)
        count = FG_CUDA_MAX_DEVICES;
    int usable = 0, first_major = 0, first_minor = 0;
    for (int d = 0; d < count; d++) {
        fg_cuda_device *dv = &be->dev[d];
        e = cudaDeviceGetAttribute(&dv->cc_major, cudaDevAttrComputeCapabilityMajor, d);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&dv->cc_minor, cudaDevAttrComputeCapabilityMinor, d);
        if (e != cudaSuccess)
            return fg_cuda_fail(err, e, "reading a device's compute capability");
        /* the build carries sm_FULGUR_CUDA_ARCH code and its PTX, which newer chips JIT */
        dv->usable = dv->cc_major * 10 + dv->cc_minor >= FG_CUDA_MIN_ARCH;
        usable += dv->usable;
        if (d == 0) {
            first_major = dv->cc_major;
            first_minor = dv->cc_minor;
        }
    }
    if (!usable)
        return fg_error_set(err, FG_UNAVAILABLE,
                            "backend.cuda: no usable CUDA device: device 0 has compute "
                            "capability %d.%d, this build has code for sm_%d and newer "
                            "(FULGUR_CUDA_ARCHITECTURES)", first_major, first_minor,
                            FG_CUDA_MIN_ARCH);
    be->device_count = count;
    return FG_OK;
}

static void fg_cuda_deinit(void *state)
{
    fg_cuda_backend *be = state;
    if (!be)
        return;
    pthread_mutex_destroy(&be->lock);
    if (be->libcuda)
        dlclose(be->libcuda);
    free(be);
}

static fg_status fg_cuda_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    fg_cuda_backend *be = calloc(1, sizeof *be);
    if (!be)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "backend.cuda: cannot allocate its state");
    be->host = host;
    be->last_device = -1;
    if (pthread_mutex_init(&be->lock, NULL) != 0) {
        free(be);
        return fg_error_set(err, FG_INTERNAL, "backend.cuda: cannot create a mutex");
    }
    fg_status st = fg_cuda_read_options(be, host, err);
    if (st == FG_OK)
        st = fg_cuda_probe_driver(be, err);
    if (st == FG_OK)
        st = fg_cuda_probe_devices(be, err);
    if (st != FG_OK) {
        fg_cuda_deinit(be);
        return st;
    }
    if (host && host->log)
        host->log(host, FG_LOG_DEBUG, "backend.cuda: %d device(s), driver CUDA %d.%d, "
                  "runtime %d.%d, cuDNN %zu, allow_tf32 = %d, cudnn_benchmark = %d, "
                  "attention = %s",
                  be->device_count,
                  be->driver_version / 1000, be->driver_version % 1000 / 10,
                  be->runtime_version / 1000, be->runtime_version % 1000 / 10,
                  cudnnGetVersion(), be->allow_tf32, be->cudnn_benchmark,
                  fg_cuda_sdpa_mode_name(be->attention));
    *state = be;
    return FG_OK;
}

/* Every op behind its argument checks (fulgur/backend_checks.h). */
#define FG_BACKEND_CHECK_WHO "backend.cuda"
FG_BACKEND_CHECKED_OPS(fg_cuda_op_)

static const fg_backend_vtable fg_cuda_vtable = {
    .struct_size = sizeof(fg_backend_vtable),
    .device_count = fg_cuda_device_count,
    .device_info = fg_cuda_device_info,
    .alloc = fg_cuda_alloc,
    .free = fg_cuda_free,
    .host_alloc = fg_cuda_host_alloc,
    .host_free = fg_cuda_host_free,
    .queue_create = fg_cuda_queue_create,
    .queue_destroy = fg_cuda_queue_destroy,
    .queue_sync = fg_cuda_queue_sync,
    .copy = fg_cuda_copy,
    .supports = fg_cuda_supports,
    .conv2d_workspace = fg_cuda_conv2d_workspace,
    .copy_queue_create = fg_cuda_copy_queue_create,
    .event_create = fg_cuda_event_create,
    .event_destroy = fg_cuda_event_destroy,
    .event_record = fg_cuda_event_record,
    .queue_wait_event = fg_cuda_queue_wait_event,
    .event_sync = fg_cuda_event_sync,
    .attention_workspace = fg_cuda_op_attention_workspace,
    .queue_native = fg_cuda_queue_native,
    .event_query = fg_cuda_event_query,
    FG_BACKEND_OP_INIT_CHECKED(fg_cuda_op_)
    .graph_begin = fg_cuda_graph_begin,
    .graph_end = fg_cuda_graph_end,
    .graph_launch = fg_cuda_graph_launch,
    .graph_destroy = fg_cuda_graph_destroy,
};

FG_PLUGIN_DEFINE(FG_KIND_BACKEND, 0, "cuda", "0.1.0",
                 "CUDA backend: cuBLASLt gemm, cuDNN convolutions, own kernels (kernels/cuda); "
                 "sm_90 build",
                 FG_PLUGIN_OPTIONS(fg_cuda_options), fg_cuda_init, fg_cuda_deinit, &fg_cuda_vtable);
