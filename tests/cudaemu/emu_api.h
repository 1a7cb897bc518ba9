/* The emulator's C interface (libfgemu.so): what cudaemu.h's inline code calls, and the
 * modes tests select. Test-only. */
#ifndef FGEMU_API_H
#define FGEMU_API_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <vector_types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a kernel reads as threadIdx, blockIdx, blockDim and gridDim. */
typedef struct fgemu_thread_view {
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
} fgemu_thread_view;

/* The calling module's fgemu_shared section (its static __shared__ variables). */
typedef struct fgemu_shared_range {
    char *begin, *end;
} fgemu_shared_range;

enum { FGEMU_SHFL_IDX, FGEMU_SHFL_UP, FGEMU_SHFL_DOWN, FGEMU_SHFL_XOR };

const fgemu_thread_view *fgemu_current(void);
void fgemu_launch(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                  const fgemu_shared_range *shared, void (*body)(void *), void *arg);
void fgemu_syncthreads(void);
void fgemu_syncwarp(unsigned mask);
void fgemu_shfl(unsigned mask, const void *in, void *out, size_t size, int kind, int arg,
                int width);
/* A point where the random mode may switch to another thread of the block. */
void fgemu_point(void);
/* The block's dynamic shared memory (extern __shared__). */
void *fgemu_dynamic_shared(void);
/* Host synchronisations so far (emu_runtime.cc; FGEMU_SYNC_LOG=path writes them by kind at
 * exit). */
unsigned long long fgemu_host_syncs(void);

/* Modes (also read from the environment at the first launch: FGEMU_RANDOM=seed switches
 * threads at random points, FGEMU_POISON=0 stops filling shared memory with 0xff bytes at
 * every block start and device allocations at cudaMalloc). */
void fgemu_set_random(uint64_t seed); /* 0: fixed order */
void fgemu_set_poison(int on);
/* Number of kernel failures (deadlocks, bad shuffles) reported so far. */
int fgemu_failures(void);
/* Checks a runtime-API stream handle: 0 or a live stream of this emulator. */
int fgemu_stream_valid(cudaStream_t s);
/* Asynchronous work on a stream (emulated NCCL operations): a ticket taken at enqueue,
 * ended by the thread that ran it; drain waits for the stream's work so far. */
uint64_t fgemu_async_begin(cudaStream_t s);
void fgemu_async_end(cudaStream_t s, uint64_t ticket);
void fgemu_stream_drain(cudaStream_t s);
/* Sets the sticky error a failed kernel leaves (cudaGetLastError and every later call). */
void fgemu_set_sticky(cudaError_t e);
void fgemu_set_last(cudaError_t e);
cudaError_t fgemu_sticky(void);
/* The device of the allocation holding p; -1 page-locked host memory, -2 none. */
int fgemu_device_of(const void *p);
int fgemu_is_device(const void *p, size_t n);
/* emu_cudnn.cc: the stream a cuDNN handle runs on; 0 when h is not a live handle. */
int fgemu_cudnn_stream(const void *h, cudaStream_t *s);
/* Stream capture (emu_capture.cc). 1 while s captures. */
int fgemu_capturing(cudaStream_t s);
/* Records work on a capturing stream: run(ctx, stream) at each launch of the graph, drop(ctx)
 * when the last graph holding it goes. 0 (nothing recorded) when s does not capture. */
int fgemu_capture_add(cudaStream_t s, void (*run)(void *, cudaStream_t), void *ctx,
                      void (*drop)(void *));
/* The count of work items s recorded in its capture so far (an event's point in it). */
unsigned long fgemu_capture_mark(cudaStream_t s);
/* cudaStreamWaitEvent(s, an event recorded on capturing stream recorded_on at mark): s not
 * capturing joins the capture (a fork); s in the same capture marks recorded_on joined up
 * to mark. cudaErrorStreamCaptureIsolation across two captures or from a capture to an
 * ended one, cudaErrorStreamCaptureUnsupported from outside to an ended one. */
cudaError_t fgemu_capture_wait(cudaStream_t s, cudaStream_t recorded_on, unsigned long mark);
/* What capture forbids (what: the call, for the message): a call on capturing stream s, or
 * with unsafe_call an API call the capture mode forbids from this thread (cudaMalloc, a
 * device synchronisation). Invalidates the captures it breaks and returns
 * cudaErrorStreamCaptureUnsupported; cudaSuccess when nothing captures. */
cudaError_t fgemu_capture_forbids(const char *what, cudaStream_t s, int unsafe_call);
/* A library call the emulator does not record on capturing stream s: the capture is
 * invalidated (cudaStreamEndCapture fails) and the call must not run. */
void fgemu_capture_invalidate(cudaStream_t s, const char *what);
/* Tests only: forget a sticky error (a real process would have to restart). */
void fgemu_clear_sticky(void);

#ifdef __cplusplus
}
#endif
#endif
