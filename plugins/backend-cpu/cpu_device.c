/* Virtual devices, their memory accounting, queues and copies. A virtual device is host
 * memory with its own byte counter and limit, so multi-device strategies can be tested
 * (and out-of-memory paths provoked) on one machine. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_backend.h"

/* Every device allocation carries a 64-byte header with its size, so free() can give the
 * bytes back to the device's counter and the data stays 64-byte aligned. */
#define FG_CPU_HEADER 64
#define FG_CPU_ALLOC_MAGIC 0x46474350555F4D45ull /* "FGCPU_ME" */

typedef struct fg_cpu_header {
    uint64_t magic;
    uint64_t bytes;
    int32_t device;
} fg_cpu_header;

void fg_cpu_probe_machine(fg_cpu_backend *be)
{
    snprintf(be->cpu_model, sizeof be->cpu_model, "unknown CPU model");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) != 0)
                continue;
            const char *v = strchr(line, ':');
            if (!v)
                continue;
            v++;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(be->cpu_model, sizeof be->cpu_model, "%s", v);
            be->cpu_model[strcspn(be->cpu_model, "\n")] = '\0';
            break;
        }
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    be->physical_memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static fg_status fg_cpu_check_device(const fg_cpu_backend *be, const char *what, int device,
                                     fg_error *err)
{
    if (device < 0 || device >= be->devices)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "cpu backend: %s: device %d does not exist (devices = %d)", what,
                            device, be->devices);
    return FG_OK;
}

/* The start of a call that hands out something of a device (alloc, queue_create,
 * event_create): the out pointer present (set to NULL) and the device existing. */
static fg_status fg_cpu_device_out(const fg_cpu_backend *be, const char *op, const char *name,
                                   int device, void **out, fg_error *err)
{
    if (!out)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: %s: %s is NULL", op, name);
    *out = NULL;
    return fg_cpu_check_device(be, op, device, err);
}

fg_status fg_cpu_device_count(void *state, int *count, fg_error *err)
{
    fg_cpu_backend *be = state;
    if (!count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: device_count: count is NULL");
    *count = be->devices;
    return FG_OK;
}

/* Every device is host memory, and every op and copy runs to completion in the calling
 * thread (the pool's workers are joined before an op returns). */
int fg_cpu_host_synchronous(void *state, int device)
{
    const fg_cpu_backend *be = state;
    return device >= 0 && device < be->devices;
}

fg_status fg_cpu_device_info(void *state, int device, fg_device_info *info, fg_error *err)
{
    fg_cpu_backend *be = state;
    fg_status st = fg_cpu_check_device(be, "device_info", device, err);
    if (st != FG_OK)
        return st;
    if (!info || info->struct_size < offsetof(fg_device_info, name) + sizeof info->name)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "cpu backend: device_info: info is NULL or its struct_size %u is "
                            "too small", info ? (unsigned)info->struct_size : 0u);
    uint32_t size = info->struct_size;
    fg_cpu_machine_describe(be); /* once: the CPU's features and measured FMA peak */
    info->index = device;
    snprintf(info->name, sizeof info->name, "CPU virtual device %d (%d thread%s, %.60s)", device,
             be->threads, be->threads == 1 ? "" : "s", be->cpu_model);
    uint64_t used = atomic_load(&be->in_use[device]);
    uint64_t total = be->limit_bytes ? be->limit_bytes : be->physical_memory;
    if (size >= offsetof(fg_device_info, total_memory) + sizeof info->total_memory)
        info->total_memory = total;
    if (size >= offsetof(fg_device_info, free_memory) + sizeof info->free_memory) {
        long avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        uint64_t free_bytes = be->limit_bytes ? (used < total ? total - used : 0)
                              : avail > 0 && page > 0 ? (uint64_t)avail * (uint64_t)page
                                                      : 0;
        info->free_memory = free_bytes;
    }
    return FG_OK;
}

/* Reserves bytes on the device's counter, refusing past the limit. */
static fg_status fg_cpu_reserve(fg_cpu_backend *be, int device, size_t bytes, fg_error *err)
{
    _Atomic uint64_t *counter = &be->in_use[device];
    uint64_t used = atomic_load(counter);
    for (;;) {
        if (be->limit_bytes && (bytes > be->limit_bytes || used > be->limit_bytes - bytes))
            return fg_error_set(err, FG_OUT_OF_MEMORY,
                                "cpu backend: device %d: cannot allocate %zu bytes: %llu bytes "
                                "in use, limit %llu bytes (memory_limit_mb = %lld); use a "
                                "smaller batch_size or a half precision (bf16-mixed)",
                                device, bytes, (unsigned long long)used,
                                (unsigned long long)be->limit_bytes,
                                (long long)be->memory_limit_mb);
        if (atomic_compare_exchange_weak(counter, &used, used + bytes))
            return FG_OK;
    }
}

fg_status fg_cpu_alloc(void *state, int device, size_t bytes, void **ptr, fg_error *err)
{
    fg_cpu_backend *be = state;
    fg_status st = fg_cpu_device_out(be, "alloc", "ptr", device, ptr, err);
    if (st == FG_OK)
        st = fg_cpu_reserve(be, device, bytes, err);
    if (st != FG_OK)
        return st;
    void *block = NULL;
    if (bytes > SIZE_MAX - FG_CPU_HEADER ||
        posix_memalign(&block, FG_CPU_HEADER, bytes + FG_CPU_HEADER) != 0) {
        atomic_fetch_sub(&be->in_use[device], bytes);
        return fg_error_set(err, FG_OUT_OF_MEMORY,
                            "cpu backend: device %d: cannot allocate %zu bytes: out of host "
                            "memory; use a smaller batch_size or a half precision",
                            device, bytes);
    }
    fg_cpu_header *h = block;
    h->magic = FG_CPU_ALLOC_MAGIC;
    h->bytes = bytes;
    h->device = device;
    *ptr = (char *)block + FG_CPU_HEADER;
    return FG_OK;
}

void fg_cpu_free(void *state, int device, void *ptr)
{
    fg_cpu_backend *be = state;
    if (!ptr)
        return;
    fg_cpu_header *h = (fg_cpu_header *)((char *)ptr - FG_CPU_HEADER);
    /* the header's device is the truth; a caller's wrong index must not skew a counter */
    (void)device;
    if (h->magic == FG_CPU_ALLOC_MAGIC && h->device >= 0 && h->device < be->devices) {
        atomic_fetch_sub(&be->in_use[h->device], h->bytes);
        h->magic = 0;
        free(h);
    } else if (be->host && be->host->log) {
        be->host->log(be->host, FG_LOG_ERROR,
                      "cpu backend: free: %p was not allocated by alloc (or freed twice); "
                      "leaked rather than corrupting the heap", ptr);
    }
}

fg_status fg_cpu_host_alloc(void *state, size_t bytes, void **ptr, fg_error *err)
{
    (void)state;
    if (!ptr)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: host_alloc: ptr is NULL");
    *ptr = NULL;
    if (posix_memalign(ptr, 64, bytes ? bytes : 64) != 0) {
        *ptr = NULL;
        return fg_error_set(err, FG_OUT_OF_MEMORY,
                            "cpu backend: host_alloc: cannot allocate %zu bytes", bytes);
    }
    return FG_OK;
}

void fg_cpu_host_free(void *state, void *ptr)
{
    (void)state;
    free(ptr);
}

fg_status fg_cpu_device_handle(const fg_cpu_backend *be, const char *op, const char *name,
                               int device, size_t size, void **out, fg_error *err)
{
    fg_status st = fg_cpu_device_out(be, op, name, device, out, err);
    if (st != FG_OK)
        return st;
    if (!(*out = calloc(1, size)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "cpu backend: %s: out of memory", op);
    return FG_OK;
}

fg_status fg_cpu_queue_create(void *state, int device, void **queue, fg_error *err)
{
    fg_status st = fg_cpu_device_handle(state, "queue_create", "queue", device,
                                        sizeof(fg_cpu_queue), queue, err);
    if (st == FG_OK)
        ((fg_cpu_queue *)*queue)->device = device;
    return st;
}

void fg_cpu_queue_destroy(void *state, void *queue)
{
    (void)state;
    if (queue) {
        free(((fg_cpu_queue *)queue)->scratch);
        free(((fg_cpu_queue *)queue)->fused);
        fg_cpu_bf16_queue_fini(queue);
    }
    free(queue);
}

fg_status fg_cpu_queue_sync(void *state, void *queue, fg_error *err)
{
    (void)state;
    if (!queue)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: queue_sync: queue is NULL");
    return FG_OK; /* every op has finished when it returns */
}

fg_status fg_cpu_copy(void *state, void *queue, void *dst, int dst_device, const void *src,
                      int src_device, size_t bytes, fg_error *err)
{
    fg_cpu_backend *be = state;
    if (!queue)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: copy: queue is NULL");
    if (dst_device < -1 || dst_device >= be->devices || src_device < -1 ||
        src_device >= be->devices)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "cpu backend: copy: device %d -> %d: a side is neither host (-1) "
                            "nor a device in [0, %d)", src_device, dst_device, be->devices);
    if (bytes == 0 || dst == src)
        return FG_OK;
    if (!dst || !src)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: copy of %zu bytes: %s is NULL",
                            bytes, dst ? "src" : "dst");
    memcpy(dst, src, bytes);
    return FG_OK;
}
