/* fulgur-backend-cpu.so: the descriptor, the option schema, init and deinit. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_backend.h"
#include "fulgur/backend_checks.h"
#include "cpu_event.h"

static const fg_option fg_cpu_options[] = {
    { "devices", FG_OPT_INT, "1", 1, FG_CPU_MAX_DEVICES, NULL,
      "number of virtual CPU devices (separate allocations, memcpy between them) for "
      "testing multi-device strategies" },
    { "threads", FG_OPT_INT, "0", 0, 1024, NULL,
      "threads for ops and gemms (OpenBLAS at one thread per block); 0 = online CPUs" },
    { "memory_limit_mb", FG_OPT_INT, "0", 0, 1 << 30, NULL,
      "per virtual device allocation limit in MiB; 0 = unlimited" },
    { "conv_algorithm", FG_OPT_ENUM, "auto", 0, 0, "auto|im2col|onednn",
      "conv2d: auto times im2col+gemm against oneDNN per layer shape at its first call and "
      "keeps the faster; im2col or onednn fixes it (reproducible)" },
    { "bf16", FG_OPT_ENUM, "auto", 1, 0, "auto|native|emulated",
      "bf16 gemms: native (oneDNN on avx512_bf16, f32 accumulation), emulated (in f32, "
      "rounded), or auto: native where the CPU and the build have it" },
    { "gemm", FG_OPT_ENUM, "default", 0, 0, "default|auto|openblas|onednn",
      "f32 gemms: openblas, or onednn (oneDNN's matmul), fixed (reproducible); default: "
      "onednn (openblas in a build without oneDNN), fixed; auto times both per shape at its "
      "first call and keeps the faster (and takes oneDNN where OpenBLAS runs generic "
      "kernels)" },
    { "tuning", FG_OPT_ENUM, "auto", 0, 0, "auto|off",
      "CPU-dependent thresholds (the stream grain): auto measures them at the first start on "
      "this CPU model and thread count (three trials, tens of ms) and caches them in "
      "$XDG_CACHE_HOME/fulgur (else ~/.cache/fulgur) when measured on a quiet machine and "
      "within bounds; off keeps the built-in values. Speed only, never results" },
};

/* An option the host does not know falls back to the schema default; any other failure
 * of the host, or a value outside the range, is an error naming the key. */
static fg_status fg_cpu_read_int(const fg_host *host, const char *key, int64_t fallback,
                                 int64_t min, int64_t max, int64_t *out, fg_error *err)
{
    *out = fallback;
    if (host && host->get_int) {
        fg_status st = host->get_int(host, key, out);
        if (st == FG_NOT_FOUND)
            *out = fallback;
        else if (st != FG_OK)
            return fg_error_set(err, st, "cpu backend: cannot read option %s.%s (%s)",
                                host->section ? host->section : "backend", key,
                                fg_status_name(st));
    }
    if (*out < min || *out > max)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "cpu backend: option %s = %lld is outside [%lld, %lld]", key,
                            (long long)*out, (long long)min, (long long)max);
    return FG_OK;
}

/* The string option key (the schema default where the host does not know it). */
static fg_status fg_cpu_read_string(const fg_host *host, const char *key, const char *fallback,
                                    const char **out, fg_error *err)
{
    *out = fallback;
    if (!host || !host->get_string)
        return FG_OK;
    fg_status st = host->get_string(host, key, out);
    if (st == FG_NOT_FOUND)
        *out = fallback;
    else if (st != FG_OK)
        return fg_error_set(err, st, "cpu backend: cannot read option %s.%s (%s)",
                            host->section ? host->section : "backend", key, fg_status_name(st));
    return FG_OK;
}

static fg_status fg_cpu_read_options(fg_cpu_backend *be, const fg_host *host, fg_error *err)
{
    int64_t devices, threads, limit;
    fg_status st = fg_cpu_read_int(host, "devices", 1, 1, FG_CPU_MAX_DEVICES, &devices, err);
    if (st == FG_OK)
        st = fg_cpu_read_int(host, "threads", 0, 0, 1024, &threads, err);
    if (st == FG_OK)
        st = fg_cpu_read_int(host, "memory_limit_mb", 0, 0, 1 << 30, &limit, err);
    if (st != FG_OK)
        return st;
    if (threads == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        threads = online > 0 ? (online < 1024 ? online : 1024) : 1;
    }
    be->devices = (int)devices;
    be->threads = (int)threads;
    be->memory_limit_mb = limit;
    be->limit_bytes = (uint64_t)limit << 20;
    const char *algorithm = "auto";
    st = fg_cpu_read_string(host, "conv_algorithm", "auto", &algorithm, err);
    return st == FG_OK ? fg_cpu_conv_init(be, algorithm, err) : st;
}

static void fg_cpu_deinit(void *state)
{
    fg_cpu_backend *be = state;
    if (!be)
        return;
    fg_cpu_gemm_teardown(be);
    fg_cpu_conv_deinit(be);
    fg_cpu_pool_destroy(be->pool);
    free(be);
}

static fg_status fg_cpu_init(const fg_host *host, void **state, fg_error *err)
{
    *state = NULL;
    fg_cpu_backend *be = calloc(1, sizeof *be);
    if (!be)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "cpu backend: cannot allocate its state");
    be->host = host;
    fg_status st = fg_cpu_read_options(be, host, err);
    if (st != FG_OK) {
        free(be);
        return st;
    }
    for (int i = 0; i < FG_CPU_MAX_DEVICES; i++)
        atomic_init(&be->in_use[i], 0);
    fg_cpu_probe_machine(be);
    const char *bf16 = "auto";
    if (host && host->get_string && host->get_string(host, "bf16", &bf16) != FG_OK)
        bf16 = "auto"; /* a host without the key: the schema default */
    st = fg_cpu_bf16_setup(be, bf16, err);
    const char *gemm = "default";
    if (st == FG_OK)
        st = fg_cpu_read_string(host, "gemm", "default", &gemm, err);
    if (st == FG_OK)
        st = fg_cpu_gemm_setup(be, gemm, err);
    if (st != FG_OK) {
        fg_cpu_gemm_teardown(be);
        fg_cpu_conv_deinit(be);
        free(be);
        return st;
    }
    int rc = fg_cpu_pool_create(be->threads, &be->pool);
    if (rc != 0) {
        int threads = be->threads;
        fg_cpu_gemm_teardown(be);
        fg_cpu_conv_deinit(be);
        free(be);
        return fg_error_set(err, FG_BACKEND_ERROR,
                            "cpu backend: cannot start %d worker threads (threads = %d): %s",
                            threads - 1, threads, strerror(rc));
    }
    /* the pool owns the cores: gemms are split across it, OpenBLAS runs single-threaded */
    fg_cpu_gemm_init();
    fg_cpu_machine_probe(be);
    fg_cpu_machine_notice(be);
    const char *tuning = "auto";
    st = fg_cpu_read_string(host, "tuning", "auto", &tuning, err);
    if (st == FG_OK)
        st = fg_cpu_tuning_setup(be, tuning, err);
    if (st != FG_OK) {
        fg_cpu_deinit(be);
        return st;
    }
    if (host && host->log)
        host->log(host, FG_LOG_DEBUG, "cpu backend: %d virtual device(s), %d threads, %s; "
                  "bf16 gemms %s%s; gemm = %s, OpenBLAS core %s", be->devices, be->threads,
                  be->cpu_model, be->bf16_native ? "native (oneDNN, avx512_bf16)" : "emulated: ",
                  be->bf16_native ? "" : be->bf16_why, gemm, be->openblas_core);
    *state = be;
    return FG_OK;
}

/* Every op behind its argument checks (fulgur/backend_checks.h). */
#define FG_BACKEND_CHECK_WHO "cpu backend"
FG_BACKEND_CHECKED_OPS(fg_cpu_op_)

static const fg_backend_vtable fg_cpu_vtable = {
    .struct_size = sizeof(fg_backend_vtable),
    .device_count = fg_cpu_device_count,
    .device_info = fg_cpu_device_info,
    .alloc = fg_cpu_alloc,
    .free = fg_cpu_free,
    .host_alloc = fg_cpu_host_alloc,
    .host_free = fg_cpu_host_free,
    .queue_create = fg_cpu_queue_create,
    .queue_destroy = fg_cpu_queue_destroy,
    .queue_sync = fg_cpu_queue_sync,
    .copy = fg_cpu_copy,
    .supports = fg_cpu_supports,
    .conv2d_workspace = fg_cpu_op_conv2d_workspace,
    .event_create = fg_cpu_event_create,
    .event_destroy = fg_cpu_event_destroy,
    .event_record = fg_cpu_event_record,
    .queue_wait_event = fg_cpu_queue_wait_event,
    .event_sync = fg_cpu_event_sync,
    .event_query = fg_cpu_event_query,
    .attention_workspace = fg_cpu_op_attention_workspace,
    .host_synchronous = fg_cpu_host_synchronous,
    FG_BACKEND_OP_INIT_CHECKED(fg_cpu_op_)
};

FG_PLUGIN_DEFINE(FG_KIND_BACKEND, 0, "cpu", "1.0.0",
                 "CPU backend: OpenBLAS or oneDNN gemm per shape, oneDNN bf16 gemm, pooled "
                 "threads, N virtual devices",
                 FG_PLUGIN_OPTIONS(fg_cpu_options), fg_cpu_init, fg_cpu_deinit, &fg_cpu_vtable);
