/* Stream capture and CUDA graphs on the emulated device: while a stream captures, the work
 * enqueued on it (kernel launches, cudaMemcpyAsync, cudaMemsetAsync, cuBLASLt matmuls, NCCL
 * operations) is recorded instead of run; cudaStreamEndCapture makes the records a graph,
 * and each cudaGraphLaunch of its instantiation runs them in order on the launch stream.
 * Another stream that waits on an event recorded in the capture joins it (a fork: its work
 * is recorded too, in the order the host enqueued it, a valid order of the graph's
 * dependencies) and must be joined back (a capture stream waiting on an event recorded on
 * it after its last work) before the origin ends the capture: else
 * cudaErrorStreamCaptureUnjoined; ending on a forked stream is cudaErrorStreamCaptureUnmatched. What capture
 * forbids is refused with the runtime's error and invalidates the capture, as the runtime
 * does: cudaMalloc/cudaFree/cudaMallocHost (modes global and thread-local), a stream or
 * device synchronisation, a blocking cudaMemcpy, a copy with pageable host memory, a query
 * or a host wait of an event recorded during capture. The emulated library that does not
 * record (cuDNN) refuses to run on a capturing stream. Test-only. */
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

/* A stream forked into a capture (it waited on an event recorded in it): it must be
 * joined back before the capture ends, by a wait of another of the capture's streams on an
 * event recorded on it after its last work. */
struct fork_state {
    unsigned long added;  /* work items it recorded */
    unsigned long joined; /* items covered by a wait of another stream; ~0: none yet */
};

struct capture {
    cudaStreamCaptureMode mode;
    pthread_t thread;
    cudaError_t invalidated; /* the error that broke it; cudaSuccess while valid */
    work_list items;         /* every stream's work, in the order the host enqueued it */
    cudaStream_t origin;     /* the stream that began it */
    std::map<cudaStream_t, fork_state> forks;
    std::map<cudaStream_t, unsigned long> added; /* items recorded per stream */
};

pthread_mutex_t g_cap_lock = PTHREAD_MUTEX_INITIALIZER;
std::map<cudaStream_t, std::shared_ptr<capture>> g_captures; /* origin and forked streams */

capture *capture_of(cudaStream_t s)
{
    auto it = g_captures.find(s);
    return it == g_captures.end() ? NULL : it->second.get();
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
    if (c) {
        c->items.push_back(std::shared_ptr<work>(new work{ run, ctx, drop }));
        c->added[s]++;
    }
    pthread_mutex_unlock(&g_cap_lock);
    return c != NULL;
}

unsigned long fgemu_capture_mark(cudaStream_t s)
{
    pthread_mutex_lock(&g_cap_lock);
    capture *c = capture_of(s);
    unsigned long n = c ? c->added[s] : 0;
    pthread_mutex_unlock(&g_cap_lock);
    return n;
}

cudaError_t fgemu_capture_wait(cudaStream_t s, cudaStream_t recorded_on, unsigned long mark)
{
    pthread_mutex_lock(&g_cap_lock);
    auto from = g_captures.find(recorded_on);
    capture *mine = capture_of(s);
    cudaError_t e = cudaSuccess;
    if (from == g_captures.end()) {
        e = mine ? cudaErrorStreamCaptureIsolation : cudaErrorStreamCaptureUnsupported;
    } else if (mine && mine != from->second.get()) {
        e = cudaErrorStreamCaptureIsolation; /* two captures may not wait on each other */
    } else if (!mine) { /* a fork: s joins the capture, its work recorded there */
        if (from->second->invalidated != cudaSuccess)
            e = cudaErrorStreamCaptureInvalidated;
        else {
            g_captures[s] = from->second;
            from->second->forks[s] = fork_state{ from->second->added[s], ~0ul };
        }
    } else if (s != recorded_on) { /* a join: recorded_on's work up to mark is waited for */
        auto f = mine->forks.find(recorded_on);
        if (f != mine->forks.end())
            f->second.joined = mark;
    }
    pthread_mutex_unlock(&g_cap_lock);
    return e;
}

cudaError_t fgemu_capture_forbids(const char *what, cudaStream_t s, int unsafe_call)
{
    pthread_mutex_lock(&g_cap_lock);
    cudaError_t e = cudaSuccess;
    pthread_t self = pthread_self();
    for (auto &kv : g_captures) {
        capture &c = *kv.second;
        int hit = kv.first == s && s != NULL;
        if (unsafe_call && kv.first == c.origin) /* once per capture */
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
        g_captures[s] = std::make_shared<capture>(capture{ mode, pthread_self(), cudaSuccess,
                                                           {}, s, {}, {} });
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
                        : c->origin != s ? cudaErrorStreamCaptureUnmatched
                                         : c->invalidated;
    if (c && e == cudaErrorStreamCaptureUnmatched && c->invalidated == cudaSuccess) {
        fprintf(stderr, "cudaemu: cudaStreamEndCapture on stream %p, forked into the capture "
                "stream %p began (the capture is invalidated)\n", (void *)s, (void *)c->origin);
        c->invalidated = cudaErrorStreamCaptureInvalidated;
    }
    for (auto &f : c && e == cudaSuccess ? c->forks : std::map<cudaStream_t, fork_state>())
        if (f.second.joined == ~0ul || f.second.joined < c->added[f.first]) {
            fprintf(stderr, "cudaemu: cudaStreamEndCapture: stream %p was forked into the "
                    "capture and not joined back after its last work\n", (void *)f.first);
            e = cudaErrorStreamCaptureUnjoined;
        }
    if (c && e != cudaErrorStreamCaptureWrongThread && e != cudaErrorStreamCaptureUnmatched) {
        if (e == cudaSuccess)
            *graph = new CUgraph_st{ std::move(c->items) };
        std::shared_ptr<capture> keep = g_captures[s];
        for (auto &f : keep->forks)
            g_captures.erase(f.first);
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
