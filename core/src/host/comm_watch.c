/* fg_comm_watch: the comm plugin's calls forwarded, FG_FATAL failures remembered. */
#include "comm_watch.h"

#include <string.h>

static fg_status seen(fg_comm_watch *w, fg_status st)
{
    if (st == FG_FATAL) w->peer_failed = 1;
    return st;
}

static fg_status w_topology(void *s, fg_comm_topology *out, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->topology(w->inner_state, out, err));
}

static fg_status w_all_reduce(void *s, void *queue, void *buf, size_t count, uint32_t dtype,
                              uint32_t op, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->all_reduce(w->inner_state, queue, buf, count, dtype, op, err));
}

static fg_status w_reduce_scatter(void *s, void *queue, const void *send, void *recv,
                                  size_t recv_count, uint32_t dtype, uint32_t op, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->reduce_scatter(w->inner_state, queue, send, recv, recv_count, dtype,
                                            op, err));
}

static fg_status w_all_gather(void *s, void *queue, const void *send, void *recv,
                              size_t send_count, uint32_t dtype, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->all_gather(w->inner_state, queue, send, recv, send_count, dtype, err));
}

static fg_status w_broadcast(void *s, void *queue, void *buf, size_t count, uint32_t dtype,
                             int root, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->broadcast(w->inner_state, queue, buf, count, dtype, root, err));
}

static fg_status w_send(void *s, void *queue, const void *buf, size_t count, uint32_t dtype,
                        int peer, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->send(w->inner_state, queue, buf, count, dtype, peer, err));
}

static fg_status w_recv(void *s, void *queue, void *buf, size_t count, uint32_t dtype, int peer,
                        fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->recv(w->inner_state, queue, buf, count, dtype, peer, err));
}

static fg_status w_barrier(void *s, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->barrier(w->inner_state, err));
}

static fg_status w_all_reduce_start(void *s, void *queue, void *buf, size_t count, uint32_t dtype,
                                    uint32_t op, void **request, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->all_reduce_start(w->inner_state, queue, buf, count, dtype, op,
                                              request, err));
}

static fg_status w_test(void *s, void *request, int *done, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->test(w->inner_state, request, done, err));
}

static fg_status w_wait(void *s, void *request, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->wait(w->inner_state, request, err));
}

static fg_status w_reduce_scatter_v_start(void *s, void *queue, const void *send, void *recv,
                                          const size_t *counts, uint32_t dtype, uint32_t op,
                                          void **request, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->reduce_scatter_v_start(w->inner_state, queue, send, recv, counts,
                                                    dtype, op, request, err));
}

static fg_status w_all_gather_v_start(void *s, void *queue, const void *send, void *recv,
                                      const size_t *counts, uint32_t dtype, void **request,
                                      fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->all_gather_v_start(w->inner_state, queue, send, recv, counts, dtype,
                                                request, err));
}

static void w_abort(void *s, int exit_code, const char *reason)
{
    fg_comm_watch *w = s;
    w->inner->abort(w->inner_state, exit_code, reason);
}

static fg_status w_wait_on_queue(void *s, void *request, void *queue, fg_error *err)
{
    fg_comm_watch *w = s;
    return seen(w, w->inner->wait_on_queue(w->inner_state, request, queue, err));
}

/* The entry of the forwarding table when the plugin has a non-NULL one, else NULL. */
#define WATCH(field, fn)                                                                         \
    w->vt.field = FG_HAS_FIELD(inner, fg_comm_vtable, field) && inner->field ? fn : NULL

void fg_comm_watch_init(fg_comm_watch *w, const fg_comm_vtable *inner, void *inner_state)
{
    memset(&w->vt, 0, sizeof w->vt);
    w->inner = inner;
    w->inner_state = inner_state;
    w->peer_failed = 0;
    w->vt.struct_size = inner->struct_size < sizeof w->vt ? inner->struct_size : sizeof w->vt;
    WATCH(topology, w_topology);
    WATCH(all_reduce, w_all_reduce);
    WATCH(reduce_scatter, w_reduce_scatter);
    WATCH(all_gather, w_all_gather);
    WATCH(broadcast, w_broadcast);
    WATCH(send, w_send);
    WATCH(recv, w_recv);
    WATCH(barrier, w_barrier);
    WATCH(all_reduce_start, w_all_reduce_start);
    WATCH(test, w_test);
    WATCH(wait, w_wait);
    WATCH(reduce_scatter_v_start, w_reduce_scatter_v_start);
    WATCH(all_gather_v_start, w_all_gather_v_start);
    WATCH(abort, w_abort);
    WATCH(wait_on_queue, w_wait_on_queue);
}
