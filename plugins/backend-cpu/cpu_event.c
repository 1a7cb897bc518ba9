/* CPU events (cpu_event.h): complete when recorded; they only name their device. */
#include "cpu_event.h"

#include <stdlib.h>

#include "cpu_backend.h"

typedef struct fg_cpu_event {
    int device;
} fg_cpu_event;

fg_status fg_cpu_event_create(void *state, int device, void **event, fg_error *err)
{
    fg_status st = fg_cpu_device_handle(state, "event_create", "event", device,
                                        sizeof(fg_cpu_event), event, err);
    if (st == FG_OK)
        ((fg_cpu_event *)*event)->device = device;
    return st;
}

void fg_cpu_event_destroy(void *state, void *event)
{
    (void)state;
    free(event);
}

/* The queue and the event exist and belong to the same device. */
static fg_status fg_cpu_event_check(const char *op, void *queue, void *event, fg_error *err)
{
    if (!queue || !event)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: %s: %s is NULL", op,
                            queue ? "event" : "queue");
    int qd = ((fg_cpu_queue *)queue)->device, ed = ((fg_cpu_event *)event)->device;
    if (qd != ed)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "cpu backend: %s: the queue is on device %d, the event on device %d",
                            op, qd, ed);
    return FG_OK;
}

fg_status fg_cpu_event_record(void *state, void *queue, void *event, fg_error *err)
{
    (void)state;
    return fg_cpu_event_check("event_record", queue, event, err);
}

fg_status fg_cpu_queue_wait_event(void *state, void *queue, void *event, fg_error *err)
{
    (void)state;
    return fg_cpu_event_check("queue_wait_event", queue, event, err);
}

int fg_cpu_event_query(void *state, void *event)
{
    (void)state;
    (void)event;
    return 1; /* ops and copies completed when they returned */
}

fg_status fg_cpu_event_sync(void *state, void *event, fg_error *err)
{
    (void)state;
    if (!event)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: event_sync: event is NULL");
    return FG_OK;
}
