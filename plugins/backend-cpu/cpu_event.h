/* Events of the CPU backend (the "queues and events" entries of fg_backend_vtable). Every
 * copy and op has finished when it returns, so an event is complete the moment it is
 * recorded: recording remembers nothing and event_sync returns at once. They exist so that
 * the core's fenced path (a loader waiting for the copies out of its staging slots, a
 * compute queue waiting for a copy) runs under every CPU test, and they check what a GPU
 * would refuse: an event recorded on or waited for by a queue of another device. There is
 * no copy queue (copy_queue_create stays NULL): a copy is a memcpy on the calling thread,
 * and a queue of its own would overlap nothing. */
#ifndef FG_CPU_EVENT_H
#define FG_CPU_EVENT_H

#include "fulgur/backend.h"

fg_status fg_cpu_event_create(void *state, int device, void **event, fg_error *err);
void fg_cpu_event_destroy(void *state, void *event);
fg_status fg_cpu_event_record(void *state, void *queue, void *event, fg_error *err);
fg_status fg_cpu_queue_wait_event(void *state, void *queue, void *event, fg_error *err);
fg_status fg_cpu_event_sync(void *state, void *event, fg_error *err);
/* Always 1: complete (event_query). */
int fg_cpu_event_query(void *state, void *event);

#endif
