/* The CUDA runtime calls the backend and comm-nccl make, on the emulated device: device
 * memory is host memory (so AddressSanitizer sees a kernel's out-of-bounds access); kernels,
 * copies and library calls run at enqueue time, after the asynchronous work already on
 * their stream (emulated NCCL operations, which a communicator's thread runs) completed;
 * events complete with the work recorded before them,
 * and the runtime's rules are checked: a pointer freed must be one allocated, a copy must
 * lie inside its allocations, a stream or event handle must be live, a wait must name an
 * event that was recorded. Errors follow the runtime: the last error is returned (and
 * cleared) by cudaGetLastError, a sticky one (a failed kernel) by every call after it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <set>
#include <vector>

#include "emu_api.h"

namespace {

constexpr int kDevices = 8;
constexpr size_t kTotalMemory = (size_t)80 << 30;

struct allocation {
    size_t bytes;
    int device; /* -1: page-locked host memory */
    unsigned flags;
};

struct emu_stream {
    int device;
    uint64_t enqueued, completed; /* asynchronous work (emulated NCCL) on the stream */
};

struct emu_event {
    int device;
    unsigned flags;
    int recorded;
    emu_stream *stream; /* complete once stream->completed >= ticket */
    uint64_t ticket;
    int captured; /* last recorded on a capturing stream (a node of its graph) */
    cudaStream_t capture_stream; /* that stream, and its work items recorded before */
    unsigned long capture_mark;
};

/* The legacy default stream (0, cudaStreamLegacy, cudaStreamPerThread). */
emu_stream g_default_stream;
pthread_mutex_t g_async = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_async_done = PTHREAD_COND_INITIALIZER;

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
std::map<uintptr_t, allocation> g_allocs;
std::set<emu_stream *> g_streams;
std::set<emu_event *> g_events;
size_t g_used[kDevices];
cudaError_t g_sticky = cudaSuccess;
thread_local cudaError_t t_last = cudaSuccess;
thread_local int t_device = 0;

int device_count()
{
    const char *d = getenv("FGEMU_DEVICES");
    int n = d && *d ? atoi(d) : 1;
    return n < 1 ? 1 : n > kDevices ? kDevices : n;
}

cudaError_t ret(cudaError_t e)
{
    if (g_sticky != cudaSuccess)
        return g_sticky;
    if (e != cudaSuccess)
        t_last = e;
    return e;
}

/* The allocation holding [p, p + n), or NULL. */
const allocation *find(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin())
        return NULL;
    --it;
    if (a + n > it->first + it->second.bytes || a < it->first)
        return NULL;
    return &it->second;
}

cudaError_t alloc(void **p, size_t bytes, int device, unsigned flags)
{
    if (!p)
        return ret(cudaErrorInvalidValue);
    *p = NULL;
    if (device >= 0 && g_used[device] + bytes > kTotalMemory)
        return ret(cudaErrorMemoryAllocation);
    /* exactly `bytes` (256-byte aligned as cudaMalloc's): AddressSanitizer then reports an
     * access one element past the end */
    void *m = NULL;
    if (posix_memalign(&m, 256, bytes ? bytes : 1) != 0)
        return ret(cudaErrorMemoryAllocation);
    /* device memory is not zeroed: poisoned bytes make a read of unwritten memory show */
    memset(m, 0xff, bytes);
    pthread_mutex_lock(&g_lock);
    g_allocs[(uintptr_t)m] = allocation{ bytes, device, flags };
    if (device >= 0)
        g_used[device] += bytes;
    pthread_mutex_unlock(&g_lock);
    *p = m;
    return cudaSuccess;
}

cudaError_t release(void *p, int want_host)
{
    if (!p)
        return ret(cudaSuccess);
    pthread_mutex_lock(&g_lock);
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end() || (it->second.device < 0) != (want_host != 0)) {
        pthread_mutex_unlock(&g_lock);
        fprintf(stderr, "cudaemu: %s(%p): not a pointer from %s\n",
                want_host ? "cudaFreeHost" : "cudaFree", p,
                want_host ? "cudaHostAlloc" : "cudaMalloc");
        return ret(cudaErrorInvalidValue);
    }
    if (it->second.device >= 0)
        g_used[it->second.device] -= it->second.bytes;
    g_allocs.erase(it);
    pthread_mutex_unlock(&g_lock);
    free(p);
    return ret(cudaSuccess);
}

int stream_ok(cudaStream_t s)
{
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return 1;
    pthread_mutex_lock(&g_lock);
    int ok = g_streams.count((emu_stream *)s) != 0;
    pthread_mutex_unlock(&g_lock);
    return ok;
}

emu_stream *stream_of(cudaStream_t s)
{
    return !s || s == cudaStreamLegacy || s == cudaStreamPerThread ? &g_default_stream
                                                                    : (emu_stream *)s;
}

/* Until the stream's asynchronous work up to ticket completed. */
void wait_ticket(emu_stream *st, uint64_t ticket)
{
    pthread_mutex_lock(&g_async);
    while (st->completed < ticket)
        pthread_cond_wait(&g_async_done, &g_async);
    pthread_mutex_unlock(&g_async);
}

int event_ok(cudaEvent_t e)
{
    pthread_mutex_lock(&g_lock);
    int ok = g_events.count((emu_event *)e) != 0;
    pthread_mutex_unlock(&g_lock);
    return ok;
}

/* A copy's device side (or a mapped/pinned host side) must lie inside one allocation;
 * other host memory is pageable and not checked. */
cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    if (!n)
        return cudaSuccess;
    if (!dst || !src)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_lock);
    const allocation *d = find(dst, n), *s = find(src, n);
    int dst_known = find(dst, 1) != NULL, src_known = find(src, 1) != NULL;
    pthread_mutex_unlock(&g_lock);
    int bad = 0;
    if ((dst_known && !d) || (src_known && !s))
        bad = 1; /* starts inside an allocation, runs past its end */
    if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) &&
        !(d && d->device >= 0))
        bad = 1;
    if ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) &&
        !(s && s->device >= 0))
        bad = 1;
    if (bad) {
        fprintf(stderr, "cudaemu: cudaMemcpy of %zu bytes %p -> %p (kind %d) is outside "
                "the allocations it names\n", n, src, dst, (int)kind);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

/* Host synchronisations (FGEMU_SYNC_LOG): the calls that make the host wait for the
 * device, as a real GPU would: cudaStreamSynchronize, cudaDeviceSynchronize, a host's
 * cudaEventSynchronize, cudaMemcpy (blocking) and a cudaMemcpyAsync from the device into
 * pageable host memory (the runtime returns once it is done); and a cudaMemcpyAsync from
 * pageable host memory to the device, which the driver may stage by waiting for the stream
 * (the runtime's "API synchronization behavior": only page-locked sources are truly
 * asynchronous). Counted by kind; written to the file FGEMU_SYNC_LOG names when the
 * process exits. */
enum { SYNC_STREAM, SYNC_DEVICE, SYNC_EVENT, SYNC_COPY, SYNC_FROM_PAGEABLE, SYNC_KINDS };
const char *const kSyncNames[SYNC_KINDS] = { "cudaStreamSynchronize", "cudaDeviceSynchronize",
                                             "cudaEventSynchronize", "copy_to_pageable",
                                             "copy_from_pageable" };
unsigned long long g_syncs[SYNC_KINDS];
pthread_once_t g_sync_once = PTHREAD_ONCE_INIT;

void write_sync_log()
{
    const char *path = getenv("FGEMU_SYNC_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    unsigned long long total = 0;
    for (int k = 0; k < SYNC_KINDS; k++)
        total += __atomic_load_n(&g_syncs[k], __ATOMIC_RELAXED);
    fprintf(f, "host_syncs %llu", total);
    for (int k = 0; k < SYNC_KINDS; k++)
        fprintf(f, " %s %llu", kSyncNames[k], __atomic_load_n(&g_syncs[k], __ATOMIC_RELAXED));
    /* under mpirun the ranks append their lines as they exit, in any order: say whose */
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (rank && *rank)
        fprintf(f, " rank %s", rank);
    fprintf(f, "\n");
    fclose(f);
}

void arm_sync_log()
{
    const char *path = getenv("FGEMU_SYNC_LOG");
    if (path && *path)
        atexit(write_sync_log);
}

void count_sync(int kind)
{
    pthread_once(&g_sync_once, arm_sync_log);
    __atomic_add_fetch(&g_syncs[kind], 1, __ATOMIC_RELAXED);
}

/* A destination in host memory that is not page-locked. */
int pageable(const void *p)
{
    pthread_mutex_lock(&g_lock);
    const allocation *a = find(p, 1);
    int pinned = a != NULL;
    pthread_mutex_unlock(&g_lock);
    return !pinned;
}

void event_wait(cudaEvent_t e)
{
    emu_event *ev = (emu_event *)e;
    if (ev->stream)
        wait_ticket(ev->stream, ev->ticket);
}

/* A query or host wait of an event recorded during capture: the runtime's refusal. */
cudaError_t captured_event(const char *what, cudaEvent_t e)
{
    fprintf(stderr, "cudaemu: %s of event %p, last recorded during stream capture\n", what,
            (void *)e);
    return cudaErrorCapturedEvent;
}

/* Work recorded during capture (emu_capture.cc), run at each graph launch. */
struct copy_work {
    void *dst;
    const void *src;
    size_t n;
};

void run_copy(void *ctx, cudaStream_t s)
{
    copy_work *w = (copy_work *)ctx;
    fgemu_stream_drain(s);
    memmove(w->dst, w->src, w->n);
}

void drop_copy(void *ctx)
{
    delete (copy_work *)ctx;
}

/* A copy node: pageable host memory is refused (the runtime cannot capture it). */
cudaError_t capture_copy(void *dst, const void *src, size_t n, cudaStream_t s)
{
    if (n && (pageable(dst) || pageable(src))) {
        fprintf(stderr, "cudaemu: cudaMemcpyAsync of %zu bytes %p -> %p with pageable host "
                "memory while the stream captures\n", n, src, dst);
        fgemu_capture_invalidate(s, "cudaMemcpyAsync");
        return cudaErrorStreamCaptureUnsupported;
    }
    if (n)
        fgemu_capture_add(s, run_copy, new copy_work{ dst, src, n }, drop_copy);
    return cudaSuccess;
}

struct memset_work {
    void *p;
    int value;
    size_t n;
};

void run_memset(void *ctx, cudaStream_t s)
{
    memset_work *w = (memset_work *)ctx;
    fgemu_stream_drain(s);
    memset(w->p, w->value, w->n);
}

void drop_memset(void *ctx)
{
    delete (memset_work *)ctx;
}

} // namespace

extern "C" {

unsigned long long fgemu_host_syncs(void)
{
    unsigned long long total = 0;
    for (int k = 0; k < SYNC_KINDS; k++)
        total += __atomic_load_n(&g_syncs[k], __ATOMIC_RELAXED);
    return total;
}

int fgemu_stream_valid(cudaStream_t s)
{
    return stream_ok(s);
}

uint64_t fgemu_async_begin(cudaStream_t s)
{
    if (fgemu_capturing(s)) /* emulated NCCL work is not recorded: the capture fails */
        fgemu_capture_invalidate(s, "an emulated NCCL operation");
    emu_stream *st = stream_of(s);
    pthread_mutex_lock(&g_async);
    uint64_t ticket = ++st->enqueued;
    pthread_mutex_unlock(&g_async);
    return ticket;
}

void fgemu_async_end(cudaStream_t s, uint64_t ticket)
{
    emu_stream *st = stream_of(s);
    pthread_mutex_lock(&g_async);
    if (ticket > st->completed)
        st->completed = ticket;
    pthread_cond_broadcast(&g_async_done);
    pthread_mutex_unlock(&g_async);
}

void fgemu_stream_drain(cudaStream_t s)
{
    if (!stream_ok(s))
        return;
    emu_stream *st = stream_of(s);
    pthread_mutex_lock(&g_async);
    uint64_t ticket = st->enqueued;
    pthread_mutex_unlock(&g_async);
    wait_ticket(st, ticket);
}

static void drain_all(void)
{
    pthread_mutex_lock(&g_lock);
    std::vector<emu_stream *> all(g_streams.begin(), g_streams.end());
    pthread_mutex_unlock(&g_lock);
    all.push_back(&g_default_stream);
    for (emu_stream *st : all)
        fgemu_stream_drain((cudaStream_t)st == (cudaStream_t)&g_default_stream ? 0
                                                                               : (cudaStream_t)st);
}

void fgemu_set_sticky(cudaError_t e)
{
    g_sticky = e;
}

void fgemu_set_last(cudaError_t e)
{
    t_last = e;
}

cudaError_t fgemu_sticky(void)
{
    return g_sticky;
}

void fgemu_clear_sticky(void)
{
    g_sticky = cudaSuccess;
    t_last = cudaSuccess;
}

/* Memory that emulated libraries (cuBLASLt, cuDNN, NCCL) accept as device memory. */
int fgemu_is_device(const void *p, size_t n)
{
    pthread_mutex_lock(&g_lock);
    const allocation *a = find(p, n ? n : 1);
    int ok = a && (a->device >= 0 || (a->flags & cudaHostAllocMapped));
    pthread_mutex_unlock(&g_lock);
    return ok;
}

/* The device of an allocation holding p (-1: page-locked host memory, -2: unknown). */
int fgemu_device_of(const void *p)
{
    pthread_mutex_lock(&g_lock);
    const allocation *a = find(p, 1);
    int d = a ? a->device : -2;
    pthread_mutex_unlock(&g_lock);
    return d;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *p)
{
    if (!attr)
        return ret(cudaErrorInvalidValue);
    memset(attr, 0, sizeof *attr);
    int d = fgemu_device_of(p);
    attr->type = d >= 0 ? cudaMemoryTypeDevice : d == -1 ? cudaMemoryTypeHost
                                                           : cudaMemoryTypeUnregistered;
    attr->device = d >= 0 ? d : 0;
    attr->devicePointer = d != -2 ? (void *)p : NULL;
    attr->hostPointer = d < 0 ? (void *)p : NULL;
    return ret(cudaSuccess);
}

cudaError_t cudaGetLastError(void)
{
    if (g_sticky != cudaSuccess)
        return g_sticky;
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return g_sticky != cudaSuccess ? g_sticky : t_last;
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge: return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
    case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorNotReady: return "device not ready";
    /* the capture errors, in driver_types.h's words */
    case cudaErrorStreamCaptureUnsupported: return "the operation is not permitted when the stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "the capture sequence was invalidated by a previous error";
    case cudaErrorStreamCaptureMerge: return "the operation would merge two independent capture sequences";
    case cudaErrorStreamCaptureUnmatched: return "the capture was not initiated in this stream";
    case cudaErrorStreamCaptureUnjoined: return "the capture sequence contains a fork not joined to the primary stream";
    case cudaErrorStreamCaptureIsolation: return "a dependency would cross the capture sequence boundary";
    case cudaErrorStreamCaptureImplicit: return "an implicit dependency on a capture sequence from cudaStreamLegacy";
    case cudaErrorCapturedEvent: return "the operation is not permitted on an event last recorded in a capturing stream";
    case cudaErrorStreamCaptureWrongThread: return "a thread-local or global capture ended in another thread";
    default: return "unknown error (emulated runtime)";
    }
}

cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v)
        return ret(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (!v)
        return ret(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return ret(cudaErrorInvalidValue);
    *count = device_count();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= device_count())
        return ret(cudaErrorInvalidDevice);
    t_device = device;
    return ret(cudaSuccess);
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return ret(cudaErrorInvalidValue);
    *device = t_device;
    return ret(cudaSuccess);
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!value)
        return ret(cudaErrorInvalidValue);
    if (device < 0 || device >= device_count())
        return ret(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    default:
        return ret(cudaErrorNotSupported); /* not emulated: a call the backend does not make */
    }
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop)
        return ret(cudaErrorInvalidValue);
    if (device < 0 || device >= device_count())
        return ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "cudaemu emulated device");
    prop->totalGlobalMem = kTotalMemory;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 132;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->sharedMemPerBlock = 48 << 10;
    prop->unifiedAddressing = 1;
    prop->pciBusID = device;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    if (!free_b || !total_b)
        return ret(cudaErrorInvalidValue);
    *total_b = kTotalMemory;
    *free_b = kTotalMemory - g_used[t_device];
    return ret(cudaSuccess);
}

cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t c = fgemu_capture_forbids("cudaDeviceSynchronize", NULL, 1);
    if (c != cudaSuccess)
        return ret(c);
    count_sync(SYNC_DEVICE);
    drain_all();
    return ret(cudaSuccess);
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (g_sticky != cudaSuccess)
        return g_sticky;
    cudaError_t c = fgemu_capture_forbids("cudaMalloc", NULL, 1);
    if (c != cudaSuccess)
        return ret(c);
    return alloc(p, bytes, t_device, 0);
}

cudaError_t cudaFree(void *p)
{
    cudaError_t c = fgemu_capture_forbids("cudaFree", NULL, 1);
    if (c != cudaSuccess)
        return ret(c);
    drain_all(); /* cudaFree synchronises the device */
    return release(p, 0);
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
                            cudaHostAllocWriteCombined))
        return ret(cudaErrorInvalidValue);
    cudaError_t c = fgemu_capture_forbids("cudaHostAlloc", NULL, 1);
    if (c != cudaSuccess)
        return ret(c);
    return alloc(p, bytes, -1, flags);
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    cudaError_t c = fgemu_capture_forbids("cudaMallocHost", NULL, 1);
    if (c != cudaSuccess)
        return ret(c);
    return alloc(p, bytes, -1, 0);
}

cudaError_t cudaFreeHost(void *p)
{
    return release(p, 1);
}

cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned flags)
{
    if (!dev || flags != 0)
        return ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&g_lock);
    auto it = g_allocs.find((uintptr_t)host);
    int ok = it != g_allocs.end() && it->second.device < 0 &&
             (it->second.flags & cudaHostAllocMapped);
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        return ret(cudaErrorInvalidValue);
    *dev = host;
    return ret(cudaSuccess);
}

/* A copy's direction: the kind given, or for cudaMemcpyDefault the one the allocations
 * say (unified addressing: the backend copies with cudaMemcpyDefault). */
static cudaMemcpyKind direction(void *dst, const void *src, cudaMemcpyKind kind)
{
    if (kind != cudaMemcpyDefault)
        return kind;
    pthread_mutex_lock(&g_lock);
    const allocation *d = find(dst, 1), *s = find(src, 1);
    int dst_dev = d && d->device >= 0, src_dev = s && s->device >= 0;
    pthread_mutex_unlock(&g_lock);
    if (dst_dev)
        return src_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
    return src_dev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost;
}

/* blocking: cudaMemcpy, which counted itself as one host synchronisation. */
static cudaError_t memcpy_async(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                cudaStream_t s, int blocking)
{
    if (g_sticky != cudaSuccess)
        return g_sticky;
    if (!stream_ok(s))
        return ret(cudaErrorInvalidResourceHandle);
    cudaError_t e = check_copy(dst, src, n, kind);
    if (e != cudaSuccess)
        return ret(e);
    if (fgemu_capturing(s))
        return ret(capture_copy(dst, src, n, s));
    fgemu_stream_drain(s); /* stream order; a copy to pageable memory returns when done */
    cudaMemcpyKind dir = n ? direction(dst, src, kind) : kind;
    if (n && dir == cudaMemcpyDeviceToHost && pageable(dst))
        count_sync(SYNC_COPY);
    if (n && !blocking && dir == cudaMemcpyHostToDevice && pageable(src))
        count_sync(SYNC_FROM_PAGEABLE);
    if (n)
        memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    return memcpy_async(dst, src, n, kind, s, 0);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    cudaError_t c = fgemu_capture_forbids("a blocking cudaMemcpy", NULL, 1);
    if (c != cudaSuccess)
        return ret(cudaErrorStreamCaptureImplicit);
    if (n && !(direction(dst, src, kind) == cudaMemcpyDeviceToHost && pageable(dst)))
        count_sync(SYNC_COPY); /* blocking whatever its direction (a D2H one counts below) */
    return memcpy_async(dst, src, n, kind, 0, 1);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
    if (g_sticky != cudaSuccess)
        return g_sticky;
    if (!stream_ok(s))
        return ret(cudaErrorInvalidResourceHandle);
    if (n && !fgemu_is_device(p, n)) {
        fprintf(stderr, "cudaemu: cudaMemset of %zu bytes at %p: not device memory\n", n, p);
        return ret(cudaErrorInvalidValue);
    }
    if (fgemu_capturing(s)) {
        fgemu_capture_add(s, run_memset, new memset_work{ p, value, n }, drop_memset);
        return cudaSuccess;
    }
    fgemu_stream_drain(s);
    memset(p, value, n);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t n)
{
    return cudaMemsetAsync(p, value, n, 0);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    if (!s || flags > cudaStreamNonBlocking)
        return ret(cudaErrorInvalidValue);
    emu_stream *st = new emu_stream{ t_device, 0, 0 };
    pthread_mutex_lock(&g_lock);
    g_streams.insert(st);
    pthread_mutex_unlock(&g_lock);
    *s = (cudaStream_t)st;
    return ret(cudaSuccess);
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    fgemu_stream_drain(s); /* its work completes before its resources go */
    pthread_mutex_lock(&g_lock);
    int ok = s && g_streams.erase((emu_stream *)s);
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        return ret(cudaErrorInvalidResourceHandle);
    delete (emu_stream *)s;
    return ret(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (!stream_ok(s))
        return ret(cudaErrorInvalidResourceHandle);
    cudaError_t c = fgemu_capture_forbids("cudaStreamSynchronize", s, 0);
    if (c != cudaSuccess)
        return ret(c);
    count_sync(SYNC_STREAM);
    fgemu_stream_drain(s);
    return ret(cudaSuccess);
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    if (!stream_ok(s))
        return ret(cudaErrorInvalidResourceHandle);
    cudaError_t c = fgemu_capture_forbids("cudaStreamQuery", s, 0);
    if (c != cudaSuccess)
        return ret(c);
    emu_stream *st = stream_of(s);
    pthread_mutex_lock(&g_async);
    int done = st->completed >= st->enqueued;
    pthread_mutex_unlock(&g_async);
    return done ? ret(cudaSuccess) : cudaErrorNotReady;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    if (!e || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming |
                                   cudaEventInterprocess)))
        return ret(cudaErrorInvalidValue);
    emu_event *ev = new emu_event{ t_device, flags, 0, NULL, 0, 0, NULL, 0 };
    pthread_mutex_lock(&g_lock);
    g_events.insert(ev);
    pthread_mutex_unlock(&g_lock);
    *e = (cudaEvent_t)ev;
    return ret(cudaSuccess);
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    pthread_mutex_lock(&g_lock);
    int ok = e && g_events.erase((emu_event *)e);
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        return ret(cudaErrorInvalidResourceHandle);
    delete (emu_event *)e;
    return ret(cudaSuccess);
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!event_ok(e) || !stream_ok(s))
        return ret(cudaErrorInvalidResourceHandle);
    emu_event *ev = (emu_event *)e;
    emu_stream *st = stream_of(s);
    int captured = fgemu_capturing(s);
    unsigned long mark = captured ? fgemu_capture_mark(s) : 0;
    pthread_mutex_lock(&g_async);
    ev->recorded = 1;
    ev->captured = captured; /* a node of the graph: nothing to complete at replay */
    if (captured) {
        ev->stream = NULL;
        ev->capture_stream = s;
        ev->capture_mark = mark;
        pthread_mutex_unlock(&g_async);
        return ret(cudaSuccess);
    }
    ev->stream = st;
    ev->ticket = st->enqueued;
    pthread_mutex_unlock(&g_async);
    return ret(cudaSuccess);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (!event_ok(e))
        return ret(cudaErrorInvalidResourceHandle);
    if (((emu_event *)e)->captured)
        return ret(captured_event("cudaEventSynchronize", e));
    count_sync(SYNC_EVENT);
    event_wait(e);
    return ret(cudaSuccess);
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (!event_ok(e))
        return ret(cudaErrorInvalidResourceHandle);
    emu_event *ev = (emu_event *)e;
    if (ev->captured)
        return ret(captured_event("cudaEventQuery", e));
    pthread_mutex_lock(&g_async);
    int done = !ev->stream || ev->stream->completed >= ev->ticket;
    pthread_mutex_unlock(&g_async);
    return done ? ret(cudaSuccess) : cudaErrorNotReady;
}

/* The runtime lets a wait name a never-recorded event (it completes at once); in this
 * project such a wait is always a bug (the producer's record was skipped), so it fails. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    if (!event_ok(e) || !stream_ok(s))
        return ret(cudaErrorInvalidResourceHandle);
    if (flags & ~(unsigned)cudaEventWaitExternal)
        return ret(cudaErrorInvalidValue);
    if (!((emu_event *)e)->recorded) {
        fprintf(stderr, "cudaemu: cudaStreamWaitEvent on event %p, which was never "
                "recorded\n", (void *)e);
        return ret(cudaErrorInvalidResourceHandle);
    }
    emu_event *ev = (emu_event *)e;
    int inside = fgemu_capturing(s), captured = ev->captured;
    if (captured) { /* a fork into the event's capture, a join, or a refusal */
        cudaError_t w = fgemu_capture_wait(s, ev->capture_stream, ev->capture_mark);
        if (w != cudaSuccess) {
            fprintf(stderr, "cudaemu: cudaStreamWaitEvent: stream %p on event %p recorded in "
                    "another or an ended capture\n", (void *)s, (void *)e);
            if (inside)
                fgemu_capture_invalidate(s, "cudaStreamWaitEvent");
        }
        return ret(w);
    }
    if (inside != captured) {
        fprintf(stderr, "cudaemu: cudaStreamWaitEvent: stream %p %s, event %p %s: a wait "
                "across a capture's boundary is not emulated\n", (void *)s,
                inside ? "captures" : "does not capture", (void *)e,
                captured ? "recorded in a capture" : "recorded outside it");
        if (inside)
            fgemu_capture_invalidate(s, "cudaStreamWaitEvent");
        return ret(inside ? cudaErrorStreamCaptureIsolation : cudaErrorStreamCaptureUnsupported);
    }
    event_wait(e); /* the device-side wait, done by the host here (not a host sync) */
    return ret(cudaSuccess);
}

} // extern "C"
