/* Stream capture and CUDA graphs on the emulated device: while a stream captures, the work
 * enqueued on it (kernel launches, cudaMemcpyAsync, cudaMemsetAsync, cuBLASLt matmuls) is
 * recorded instead of run; cudaStreamEndCapture makes the records a graph, and each
 * cudaGraphLaunch of its instantiation runs them in order on the launch stream. What capture
 * forbids is refused with the runtime's error and invalidates the capture, as the runtime
 * does: cudaMalloc/cudaFree/cudaMallocHost (modes global and thread-local), a stream or
 * device synchronisation, a blocking cudaMemcpy, a copy with pageable host memory, a query
 * or a host wait of an event recorded during capture. The emulated libraries that do not
 * record (cuDNN, NCCL) refuse to run on a capturing stream. Test-only. */
#include <pthread.h>
#include <stdio.h>

#include <map>
#include <memory>
#include <vector>

#include "emu_api.h"

namespace {

struct work {
    void (*run)(void *ctx, cudaStream_t s);
    void *ctx;
    void (*drop)(void *ctx);
    ~work()
    {
        if (drop)
            drop(ctx);
    }
};

typedef std::vector<std::shared_ptr<work>> work_list;

struct capture {
    cudaStreamCaptureMode mode;
    pthread_t thread;
    cudaError_t invalidated; /* the error that broke it; cudaSuccess while valid */
    work_list items;
};

pthread_mutex_t g_cap_lock = PTHREAD_MUTEX_INITIALIZER;
std::map<cudaStream_t, capture> g_captures;

capture *capture_of(cudaStream_t s)
{
    auto it = g_captures.find(s);
    return it == g_captures.end() ? NULL : &it->second;
}

} // namespace

struct CUgraph_st {
    work_list items;
};

struct CUgraphExec_st {
    work_list items;
};

extern "C" {

int fgemu_capturing(cudaStream_t s)
{
    pthread_mutex_lock(&g_cap_lock);
    int on = capture_of(s) != NULL;
    pthread_mutex_unlock(&g_cap_lock);
    return on;
}

int fgemu_capture_add(cudaStream_t s, void (*run)(void *, cudaStream_t), void *ctx,
                      void (*drop)(void *))
{
    pthread_mutex_lock(&g_cap_lock);
    capture *c = capture_of(s);
    if (c)
        c->items.push_back(std::shared_ptr<work>(new work{ run, ctx, drop }));
    pthread_mutex_unlock(&g_cap_lock);
    return c != NULL;
}

cudaError_t fgemu_capture_forbids(const char *what, cudaStream_t s, int unsafe_call)
{
    pthread_mutex_lock(&g_cap_lock);
    cudaError_t e = cudaSuccess;
    pthread_t self = pthread_self();
    for (auto &kv : g_captures) {
        capture &c = kv.second;
        int hit = kv.first == s && s != NULL;
        if (unsafe_call)
            hit = hit || c.mode == cudaStreamCaptureModeGlobal ||
                  (c.mode == cudaStreamCaptureModeThreadLocal && pthread_equal(c.thread, self));
        if (!hit)
            continue;
        e = cudaErrorStreamCaptureUnsupported;
        if (c.invalidated == cudaSuccess)
            c.invalidated = cudaErrorStreamCaptureInvalidated;
        fprintf(stderr, "cudaemu: %s while stream %p captures: not permitted (the capture is "
                "invalidated)\n", what, (void *)kv.first);
    }
    pthread_mutex_unlock(&g_cap_lock);
    return e;
}

void fgemu_capture_invalidate(cudaStream_t s, const char *what)
{
    pthread_mutex_lock(&g_cap_lock);
    capture *c = capture_of(s);
    if (c && c->invalidated == cudaSuccess) {
        c->invalidated = cudaErrorStreamCaptureInvalidated;
        fprintf(stderr, "cudaemu: %s on capturing stream %p: not capturable here (the "
                "capture is invalidated)\n", what, (void *)s);
    }
    pthread_mutex_unlock(&g_cap_lock);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return cudaErrorStreamCaptureUnsupported; /* the legacy stream cannot capture */
    if (!fgemu_stream_valid(s))
        return cudaErrorInvalidResourceHandle;
    if (mode > cudaStreamCaptureModeRelaxed)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_cap_lock);
    int busy = capture_of(s) != NULL;
    if (!busy)
        g_captures[s] = capture{ mode, pthread_self(), cudaSuccess, {} };
    pthread_mutex_unlock(&g_cap_lock);
    return busy ? cudaErrorIllegalState : cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    if (!graph)
        return cudaErrorInvalidValue;
    *graph = NULL;
    pthread_mutex_lock(&g_cap_lock);
    capture *c = capture_of(s);
    cudaError_t e = !c ? cudaErrorIllegalState
                    : !pthread_equal(c->thread, pthread_self()) &&
                              c->mode != cudaStreamCaptureModeRelaxed
                        ? cudaErrorStreamCaptureWrongThread
                        : c->invalidated;
    if (c && e != cudaErrorStreamCaptureWrongThread) {
        if (e == cudaSuccess)
            *graph = new CUgraph_st{ std::move(c->items) };
        g_captures.erase(s);
    }
    pthread_mutex_unlock(&g_cap_lock);
    return e;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    if (!status)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_cap_lock);
    capture *c = capture_of(s);
    *status = !c ? cudaStreamCaptureStatusNone
              : c->invalidated != cudaSuccess ? cudaStreamCaptureStatusInvalidated
                                              : cudaStreamCaptureStatusActive;
    pthread_mutex_unlock(&g_cap_lock);
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags)
{
    if (!exec || !graph || flags)
        return cudaErrorInvalidValue;
    *exec = new CUgraphExec_st{ graph->items };
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    if (!exec)
        return cudaErrorInvalidValue;
    if (!fgemu_stream_valid(s))
        return cudaErrorInvalidResourceHandle;
    if (fgemu_capturing(s)) /* a graph launched into a capture: not emulated */
        return cudaErrorStreamCaptureUnsupported;
    if (fgemu_sticky() != cudaSuccess)
        return fgemu_sticky();
    fgemu_stream_drain(s);
    for (auto &w : exec->items)
        w->run(w->ctx, s);
    return fgemu_sticky();
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    if (!exec)
        return cudaErrorInvalidValue;
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    if (!graph)
        return cudaErrorInvalidValue;
    delete graph;
    return cudaSuccess;
}

} // extern "C"
