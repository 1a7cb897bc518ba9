/* The collectives of comm.mpi on host memory. Each one is issued non-blocking and
 * completed by fg_mpi_complete (deadline, diagnosis, abort); the blocking ones are a start
 * and a completion back to back. */
#include <limits.h>
#include <stdlib.h>

#include "mpi_collectives.h"
#include "mpi_half.h"
#include "mpi_ordered.h"
#include "mpi_staged.h"

fg_status fg_mpi_datatype(uint32_t dtype, const char *what, MPI_Datatype *out, fg_error *err)
{
    switch (dtype) {
    case FG_F32: *out = MPI_FLOAT; return FG_OK;
    case FG_F64: *out = MPI_DOUBLE; return FG_OK;
    case FG_I32: *out = MPI_INT32_T; return FG_OK;
    case FG_I64: *out = MPI_INT64_T; return FG_OK;
    case FG_F16: case FG_BF16: *out = MPI_UINT16_T; return FG_OK; /* mpi_half.c sums */
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.mpi: %s: dtype %s (%u) is not supported "
                        "(f32, f64, i32, i64, f16, bf16 are)", what,
                        fg_dtype_name((fg_dtype)dtype), dtype);
}

fg_status fg_mpi_reduce_op(uint32_t op, const char *what, MPI_Op *out, fg_error *err)
{
    switch (op) {
    case FG_REDUCE_SUM: case FG_REDUCE_AVG: *out = MPI_SUM; return FG_OK;
    case FG_REDUCE_MAX: *out = MPI_MAX; return FG_OK;
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.mpi: %s: reduce op %u is not supported "
                        "(sum = 1, avg = 2, max = 3)", what, op);
}

fg_status fg_mpi_check_count(size_t count, const char *what, fg_error *err)
{
    if (count <= (size_t)INT_MAX) return FG_OK;
    return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.mpi: %s of %zu elements: MPI counts "
                        "stop at %d; split the buffer", what, count, INT_MAX);
}

void fg_mpi_scale_average(void *buf, size_t count, uint32_t dtype, int size)
{
    switch (dtype) {
    case FG_F32: for (size_t i = 0; i < count; i++) ((float *)buf)[i] /= (float)size; break;
    case FG_F64: for (size_t i = 0; i < count; i++) ((double *)buf)[i] /= (double)size; break;
    case FG_I32: for (size_t i = 0; i < count; i++) ((int32_t *)buf)[i] /= size; break;
    case FG_I64: for (size_t i = 0; i < count; i++) ((int64_t *)buf)[i] /= size; break;
    case FG_F16: case FG_BF16: fg_mpi_half_scale_average(buf, count, dtype, size); break;
    }
}

/* The datatype and the count check every call starts with. */
static fg_status prepare(size_t count, uint32_t dtype, const char *what, MPI_Datatype *dt,
                         fg_error *err)
{
    fg_status st = fg_mpi_datatype(dtype, what, dt, err);
    if (st == FG_OK) st = fg_mpi_check_count(count, what, err);
    return st;
}

static fg_mpi_op collective(fg_mpi_comm *c, const char *name, size_t count, uint32_t dtype)
{
    fg_mpi_op op = {name, count, dtype, ++c->issued, -1};
    return op;
}

static fg_status finish(fg_mpi_comm *c, int rc, const char *call, MPI_Request *req,
                        const fg_mpi_op *op, fg_error *err)
{
    if (rc != MPI_SUCCESS) return fg_mpi_fail(rc, call, err);
    return fg_mpi_complete(c, req, op, err);
}

fg_status fg_mpi_all_reduce(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                            uint32_t op, fg_error *err)
{
    void *request = NULL;
    fg_status st = fg_mpi_all_reduce_start(state, queue, buf, count, dtype, op, &request, err);
    if (st == FG_OK) st = fg_mpi_wait(state, request, err);
    return st;
}

fg_status fg_mpi_reduce_scatter(void *state, void *queue, const void *send, void *recv,
                                size_t recv_count, uint32_t dtype, uint32_t op, fg_error *err)
{
    fg_mpi_comm *c = state;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    MPI_Op mop = MPI_OP_NULL;
    size_t total = recv_count * (size_t)c->topo.world_size;
    fg_status st = prepare(total, dtype, "reduce_scatter", &dt, err);
    if (st == FG_OK) st = fg_mpi_reduce_op_for(op, dtype, "reduce_scatter", &mop, err);
    if (st != FG_OK) return st;
    fg_mpi_op what = collective(c, "reduce_scatter", total, dtype);
    MPI_Request req;
    int rc = MPI_Ireduce_scatter_block(send, recv, (int)recv_count, dt, mop, c->world, &req);
    st = finish(c, rc, "MPI_Ireduce_scatter_block", &req, &what, err);
    if (st == FG_OK && op == FG_REDUCE_AVG)
        fg_mpi_scale_average(recv, recv_count, dtype, c->topo.world_size);
    return st;
}

fg_status fg_mpi_all_gather(void *state, void *queue, const void *send, void *recv,
                            size_t send_count, uint32_t dtype, fg_error *err)
{
    fg_mpi_comm *c = state;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    fg_status st = prepare(send_count * (size_t)c->topo.world_size, dtype, "all_gather", &dt, err);
    if (st != FG_OK) return st;
    fg_mpi_op what = collective(c, "all_gather", send_count * (size_t)c->topo.world_size, dtype);
    MPI_Request req;
    int rc = MPI_Iallgather(send, (int)send_count, dt, recv, (int)send_count, dt, c->world, &req);
    return finish(c, rc, "MPI_Iallgather", &req, &what, err);
}

fg_status fg_mpi_broadcast(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                           int root, fg_error *err)
{
    fg_mpi_comm *c = state;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    fg_status st = prepare(count, dtype, "broadcast", &dt, err);
    if (st != FG_OK) return st;
    if (root < 0 || root >= c->topo.world_size)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.mpi: broadcast: root %d is not a "
                            "rank of [0, %d)", root, c->topo.world_size);
    fg_mpi_op what = collective(c, "broadcast", count, dtype);
    MPI_Request req;
    int rc = MPI_Ibcast(buf, (int)count, dt, root, c->world, &req);
    return finish(c, rc, "MPI_Ibcast", &req, &what, err);
}

static fg_status point_to_point(fg_mpi_comm *c, const char *name, void *buf, size_t count,
                                uint32_t dtype, int peer, fg_error *err)
{
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    fg_status st = prepare(count, dtype, name, &dt, err);
    if (st != FG_OK) return st;
    if (peer < 0 || peer >= c->topo.world_size || peer == c->topo.rank)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.mpi: %s: peer %d is not another "
                            "rank of [0, %d) (this is rank %d)", name, peer, c->topo.world_size,
                            c->topo.rank);
    fg_mpi_op what = {name, count, dtype, ++c->p2p_issued, peer};
    MPI_Request req;
    int is_send = name[0] == 's';
    int rc = is_send ? MPI_Isend(buf, (int)count, dt, peer, 0, c->world, &req)
                     : MPI_Irecv(buf, (int)count, dt, peer, 0, c->world, &req);
    return finish(c, rc, is_send ? "MPI_Isend" : "MPI_Irecv", &req, &what, err);
}

fg_status fg_mpi_send(void *state, void *queue, const void *buf, size_t count, uint32_t dtype,
                      int peer, fg_error *err)
{
    return point_to_point(state, "send", (void *)buf, count, dtype, peer, err);
}

fg_status fg_mpi_recv(void *state, void *queue, void *buf, size_t count, uint32_t dtype,
                      int peer, fg_error *err)
{
    return point_to_point(state, "recv", buf, count, dtype, peer, err);
}

fg_status fg_mpi_barrier(void *state, fg_error *err)
{
    fg_mpi_comm *c = state;
    fg_mpi_op what = collective(c, "barrier", 0, FG_I32);
    MPI_Request req;
    int rc = MPI_Ibarrier(c->world, &req);
    return finish(c, rc, "MPI_Ibarrier", &req, &what, err);
}

/* ---- started collectives ---------------------------------------------------------- */

fg_status fg_mpi_all_reduce_start(void *state, void *queue, void *buf, size_t count,
                                  uint32_t dtype, uint32_t op, void **request, fg_error *err)
{
    fg_mpi_comm *c = state;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    MPI_Op mop = MPI_OP_NULL;
    *request = NULL;
    fg_status st = prepare(count, dtype, "all_reduce", &dt, err);
    if (st == FG_OK) st = fg_mpi_reduce_op_for(op, dtype, "all_reduce", &mop, err);
    if (st != FG_OK) return st;
    fg_mpi_request *r = calloc(1, sizeof *r);
    if (!r) return fg_error_set(err, FG_OUT_OF_MEMORY, "comm.mpi: all_reduce: out of memory");
    r->op = collective(c, "all_reduce", count, dtype);
    r->buf = buf;
    r->average = op == FG_REDUCE_AVG;
    if (fg_mpi_ordered_applies(c, op)) {
        st = fg_mpi_ordered_start(c, r, buf, count, dtype, err);
        if (st != FG_OK) {
            free(r);
            return st;
        }
    } else {
        int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, dt, mop, c->world, &r->req);
        if (rc != MPI_SUCCESS) {
            free(r);
            return fg_mpi_fail(rc, "MPI_Iallreduce", err);
        }
    }
    c->in_flight++;
    *request = r;
    return FG_OK;
}

fg_status fg_mpi_test(void *state, void *request, int *done, fg_error *err)
{
    fg_mpi_request *r = request;
    *done = 0;
    if (!r) return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.mpi: test: request is NULL");
    if (!r->done) {
        fg_status st = fg_mpi_poll(state, &r->req, &r->done, err);
        if (st != FG_OK) return st;
    }
    *done = r->done;
    return FG_OK;
}

fg_status fg_mpi_wait(void *state, void *request, fg_error *err)
{
    fg_mpi_comm *c = state;
    fg_mpi_request *r = request;
    if (!r) return fg_error_set(err, FG_INVALID_ARGUMENT, "comm.mpi: wait: request is NULL");
    fg_status st = r->done ? FG_OK : fg_mpi_complete(c, &r->req, &r->op, err);
    if (r->gathered)
        fg_mpi_ordered_finish(c, r, st == FG_OK);
    if (st == FG_OK && r->average)
        fg_mpi_scale_average(r->buf, r->avg_count ? r->avg_count : r->op.count, r->op.dtype,
                             c->topo.world_size);
    st = fg_mpi_unstage_request(c, r, st, err);
    c->in_flight--;
    free(r);
    return st;
}
