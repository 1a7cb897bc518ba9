/* comm.mpi's exported collectives: host memory goes straight to mpi_collectives.c; with
 * staging on (mpi_staging.h) the buffers are copied to a pinned host region first, the
 * host collective runs there, and the results are copied back. A collective the host code
 * refuses (a dtype, an op, a root) is refused the same way after the copy in. */
#include "mpi_staged.h"

#include "mpi_collectives.h"

/* Bytes per element; 0 for a dtype the host code refuses (it then says why). */
static size_t element_bytes(uint32_t dtype)
{
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    int size = 0;
    if (fg_mpi_datatype(dtype, "staging", &dt, NULL) != FG_OK) return 0;
    if (MPI_Type_size(dt, &size) != MPI_SUCCESS || size <= 0) return 0;
    return (size_t)size;
}

static fg_mpi_comm *staging(void *state, uint32_t dtype, size_t *es)
{
    fg_mpi_comm *c = state;
    *es = c->stage.enabled ? element_bytes(dtype) : 0;
    return *es ? c : NULL;
}

static size_t sum(const fg_mpi_comm *c, const size_t *counts)
{
    size_t total = 0;
    for (int i = 0; i < c->topo.world_size; i++) total += counts[i];
    return total;
}

/* The host call's status, then the copy back (or the release on failure). */
static fg_status back(fg_mpi_comm *c, fg_status st, fg_mpi_stage *s, void *dst, size_t offset,
                      size_t bytes, fg_error *err)
{
    if (st != FG_OK) {
        fg_mpi_stage_release(c, s);
        return st;
    }
    return fg_mpi_stage_out(c, s, dst, offset, bytes, err);
}

fg_status fg_mpi_staged_all_reduce(void *state, void *queue, void *buf, size_t count,
                                   uint32_t dtype, uint32_t op, fg_error *err)
{
    size_t es;
    fg_mpi_comm *c = staging(state, dtype, &es);
    if (!c) return fg_mpi_all_reduce(state, queue, buf, count, dtype, op, err);
    size_t bytes = count * es;
    fg_mpi_stage s;
    fg_status st = fg_mpi_stage_in(c, queue, buf, bytes, bytes, &s, err);
    if (st != FG_OK) return st;
    st = fg_mpi_all_reduce(c, NULL, s.host, count, dtype, op, err);
    return back(c, st, &s, buf, 0, bytes, err);
}

fg_status fg_mpi_staged_reduce_scatter(void *state, void *queue, const void *send, void *recv,
                                       size_t recv_count, uint32_t dtype, uint32_t op,
                                       fg_error *err)
{
    size_t es;
    fg_mpi_comm *c = staging(state, dtype, &es);
    if (!c) return fg_mpi_reduce_scatter(state, queue, send, recv, recv_count, dtype, op, err);
    size_t in = recv_count * (size_t)c->topo.world_size * es, out = recv_count * es;
    fg_mpi_stage s;
    fg_status st = fg_mpi_stage_in(c, queue, send, in, in + out, &s, err);
    if (st != FG_OK) return st;
    st = fg_mpi_reduce_scatter(c, NULL, s.host, s.host + in, recv_count, dtype, op, err);
    return back(c, st, &s, recv, in, out, err);
}

fg_status fg_mpi_staged_all_gather(void *state, void *queue, const void *send, void *recv,
                                   size_t send_count, uint32_t dtype, fg_error *err)
{
    size_t es;
    fg_mpi_comm *c = staging(state, dtype, &es);
    if (!c) return fg_mpi_all_gather(state, queue, send, recv, send_count, dtype, err);
    size_t in = send_count * es, out = send_count * (size_t)c->topo.world_size * es;
    fg_mpi_stage s;
    fg_status st = fg_mpi_stage_in(c, queue, send, in, in + out, &s, err);
    if (st != FG_OK) return st;
    st = fg_mpi_all_gather(c, NULL, s.host, s.host + in, send_count, dtype, err);
    return back(c, st, &s, recv, in, out, err);
}

fg_status fg_mpi_staged_broadcast(void *state, void *queue, void *buf, size_t count,
                                  uint32_t dtype, int root, fg_error *err)
{
    size_t es;
    fg_mpi_comm *c = staging(state, dtype, &es);
    if (!c) return fg_mpi_broadcast(state, queue, buf, count, dtype, root, err);
    /* Only the root's buffer is read; the others' are only written. */
    size_t in = c->topo.rank == root ? count * es : 0;
    fg_mpi_stage s;
    fg_status st = fg_mpi_stage_in(c, queue, buf, in, count * es, &s, err);
    if (st != FG_OK) return st;
    st = fg_mpi_broadcast(c, NULL, s.host, count, dtype, root, err);
    if (st == FG_OK && c->topo.rank == root) {
        fg_mpi_stage_release(c, &s); /* the root's buffer is unchanged */
        return FG_OK;
    }
    return back(c, st, &s, buf, 0, count * es, err);
}

fg_status fg_mpi_staged_send(void *state, void *queue, const void *buf, size_t count,
                             uint32_t dtype, int peer, fg_error *err)
{
    size_t es;
    fg_mpi_comm *c = staging(state, dtype, &es);
    if (!c) return fg_mpi_send(state, queue, buf, count, dtype, peer, err);
    fg_mpi_stage s;
    fg_status st = fg_mpi_stage_in(c, queue, buf, count * es, count * es, &s, err);
    if (st == FG_OK) {
        st = fg_mpi_send(c, NULL, s.host, count, dtype, peer, err);
        fg_mpi_stage_release(c, &s); /* nothing comes back */
    }
    return st;
}

fg_status fg_mpi_staged_recv(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                             int peer, fg_error *err)
{
    size_t es;
    fg_mpi_comm *c = staging(state, dtype, &es);
    if (!c) return fg_mpi_recv(state, queue, buf, count, dtype, peer, err);
    fg_mpi_stage s;
    fg_status st = fg_mpi_stage_in(c, queue, NULL, 0, count * es, &s, err);
    if (st != FG_OK) return st;
    st = fg_mpi_recv(c, NULL, s.host, count, dtype, peer, err);
    return back(c, st, &s, buf, 0, count * es, err);
}

/* ---- started collectives: staged in at the start, copied back in wait() -------------- */

/* Hands the region to the started request, or releases it when the start failed. */
static fg_status keep(fg_mpi_comm *c, fg_status st, fg_mpi_stage *s, void **request, void *dst,
                      size_t offset, size_t bytes)
{
    if (st != FG_OK) {
        fg_mpi_stage_release(c, s);
        return st;
    }
    fg_mpi_request *r = *request;
    r->stage = *s;
    r->stage_dst = dst;
    r->stage_offset = offset;
    r->stage_bytes = bytes;
    return FG_OK;
}

fg_status fg_mpi_staged_all_reduce_start(void *state, void *queue, void *buf, size_t count,
                                         uint32_t dtype, uint32_t op, void **request,
                                         fg_error *err)
{
    size_t es;
    fg_mpi_comm *c = staging(state, dtype, &es);
    if (!c) return fg_mpi_all_reduce_start(state, queue, buf, count, dtype, op, request, err);
    *request = NULL;
    fg_mpi_stage s;
    fg_status st = fg_mpi_stage_in(c, queue, buf, count * es, count * es, &s, err);
    if (st != FG_OK) return st;
    st = fg_mpi_all_reduce_start(c, NULL, s.host, count, dtype, op, request, err);
    return keep(c, st, &s, request, buf, 0, count * es);
}

fg_status fg_mpi_staged_reduce_scatter_v_start(void *state, void *queue, const void *send,
                                               void *recv, const size_t *counts,
                                               uint32_t dtype, uint32_t op, void **request,
                                               fg_error *err)
{
    size_t es;
    fg_mpi_comm *c = staging(state, dtype, &es);
    if (!c || !counts)
        return fg_mpi_reduce_scatter_v_start(state, queue, send, recv, counts, dtype, op,
                                             request, err);
    *request = NULL;
    /* In place stays in place on the host copy: the result at the region's start. */
    size_t in = sum(c, counts) * es, out = counts[c->topo.rank] * es;
    size_t at = send == recv ? 0 : in;
    fg_mpi_stage s;
    fg_status st = fg_mpi_stage_in(c, queue, send, in, at + (at ? out : in), &s, err);
    if (st != FG_OK) return st;
    st = fg_mpi_reduce_scatter_v_start(c, NULL, s.host, s.host + at, counts, dtype, op,
                                       request, err);
    return keep(c, st, &s, request, recv, at, out);
}

fg_status fg_mpi_staged_all_gather_v_start(void *state, void *queue, const void *send,
                                           void *recv, const size_t *counts, uint32_t dtype,
                                           void **request, fg_error *err)
{
    size_t es;
    fg_mpi_comm *c = staging(state, dtype, &es);
    if (!c || !counts)
        return fg_mpi_all_gather_v_start(state, queue, send, recv, counts, dtype, request, err);
    *request = NULL;
    size_t in = counts[c->topo.rank] * es, out = sum(c, counts) * es;
    fg_mpi_stage s;
    fg_status st = fg_mpi_stage_in(c, queue, send, in, in + out, &s, err);
    if (st != FG_OK) return st;
    st = fg_mpi_all_gather_v_start(c, NULL, s.host, s.host + in, counts, dtype, request, err);
    return keep(c, st, &s, request, recv, in, out);
}

fg_status fg_mpi_unstage_request(fg_mpi_comm *c, fg_mpi_request *r, fg_status st, fg_error *err)
{
    if (!r->stage.host) return st;
    return back(c, st, &r->stage, r->stage_dst, r->stage_offset, r->stage_bytes, err);
}
