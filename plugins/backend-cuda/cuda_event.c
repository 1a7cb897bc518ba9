/* Events: a cudaEvent_t (timing disabled: recording is then cheap) and its device. The
 * compute stream waits for a copy with cudaStreamWaitEvent (on the device); the host waits
 * with cudaEventSynchronize. Each call makes the event's device current first, so a loader
 * thread waiting for device 3's copy does not create a context on device 0. */
#include <stdlib.h>

#include "cuda_backend.h"

typedef struct fg_cuda_event {
    int device;
    cudaEvent_t event;
} fg_cuda_event;

fg_status fg_cuda_event_create(void *state, int device, void **event, fg_error *err)
{
    fg_cuda_backend *be = state;
    if (!event)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: event_create: event is NULL");
    *event = NULL;
    if (device < 0 || device >= be->device_count)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: event_create: device %d does not exist (%d visible)",
                            device, be->device_count);
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return fg_cuda_fail(err, e, "event_create");
    fg_cuda_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "backend.cuda: event_create: out of memory");
    ev->device = device;
    e = cudaEventCreateWithFlags(&ev->event, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        free(ev);
        return fg_cuda_fail(err, e, "event_create: cudaEventCreateWithFlags");
    }
    *event = ev;
    return FG_OK;
}

/* cudaEventDestroy returns at once; a pending record is released when it completes. */
void fg_cuda_event_destroy(void *state, void *event)
{
    (void)state;
    fg_cuda_event *ev = event;
    if (!ev)
        return;
    if (cudaSetDevice(ev->device) == cudaSuccess)
        cudaEventDestroy(ev->event);
    free(ev);
}

/* The queue is entered (its device current) and the event belongs to the same device. */
static fg_status fg_cuda_event_enter(void *queue, void *event, const char *op, fg_error *err)
{
    if (!event)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: %s: event is NULL", op);
    fg_status st = fg_cuda_enter_any(queue, op, err);
    if (st != FG_OK)
        return st;
    int qd = ((fg_cuda_queue *)queue)->device, ed = ((fg_cuda_event *)event)->device;
    if (qd != ed)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "backend.cuda: %s: the queue is on device %d, the event on device %d",
                            op, qd, ed);
    return FG_OK;
}

/* event_record (the event marks the queue's work so far) or queue_wait_event (the queue's
 * later work waits for the event), both on the device. */
static fg_status fg_cuda_event_op(void *queue, void *event, int wait, fg_error *err)
{
    const char *op = wait ? "queue_wait_event" : "event_record";
    fg_status st = fg_cuda_event_enter(queue, event, op, err);
    if (st != FG_OK)
        return st;
    cudaStream_t stream = ((fg_cuda_queue *)queue)->stream;
    cudaEvent_t ev = ((fg_cuda_event *)event)->event;
    cudaError_t e = wait ? cudaStreamWaitEvent(stream, ev, cudaEventWaitDefault)
                         : cudaEventRecord(ev, stream);
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, op);
}

fg_status fg_cuda_event_record(void *state, void *queue, void *event, fg_error *err)
{
    (void)state;
    return fg_cuda_event_op(queue, event, 0, err);
}

fg_status fg_cuda_queue_wait_event(void *state, void *queue, void *event, fg_error *err)
{
    (void)state;
    return fg_cuda_event_op(queue, event, 1, err);
}

int fg_cuda_event_query(void *state, void *event)
{
    (void)state;
    fg_cuda_event *ev = event;
    if (!ev || cudaSetDevice(ev->device) != cudaSuccess)
        return 0;
    cudaError_t e = cudaEventQuery(ev->event);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        cudaGetLastError(); /* event_sync reports it */
    return e == cudaSuccess;
}

fg_status fg_cuda_event_sync(void *state, void *event, fg_error *err)
{
    (void)state;
    fg_cuda_event *ev = event;
    if (!ev)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: event_sync: event is NULL");
    cudaError_t e = cudaSetDevice(ev->device);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(ev->event);
    return e == cudaSuccess ? FG_OK
                            : fg_cuda_fail(err, e, "event_sync (the work before the event failed)");
}
