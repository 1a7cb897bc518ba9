/* comm.mpi's rank-ordered sums. See mpi_ordered.h. */
#include <stdlib.h>

#include "mpi_collectives.h"
#include "mpi_ordered.h"

int fg_mpi_ordered_applies(const fg_mpi_comm *c, uint32_t op)
{
    return c->ordered_sums && (op == FG_REDUCE_SUM || op == FG_REDUCE_AVG);
}

fg_status fg_mpi_ordered_start(fg_mpi_comm *c, fg_mpi_request *r, void *buf, size_t count,
                               uint32_t dtype, fg_error *err)
{
    if (dtype != FG_F32 && dtype != FG_F64 && dtype != FG_I32 && dtype != FG_I64)
        return fg_error_set(err, FG_UNAVAILABLE, "comm.mpi: ordered_sums: an all_reduce of "
                            "%s is not summed in rank order (f32, f64, i32, i64 are); a "
                            "half gradient wire (ddp grad_comm_dtype = bf16) cannot be "
                            "ordered", fg_dtype_name((fg_dtype)dtype));
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    size_t ranks = (size_t)c->topo.world_size;
    fg_status st = fg_mpi_datatype(dtype, "all_reduce", &dt, err);
    if (st == FG_OK) st = fg_mpi_check_count(count * ranks, "ordered all_reduce", err);
    if (st != FG_OK) return st;
    if (!(r->gathered = malloc(count * ranks * fg_dtype_size((fg_dtype)dtype) + 1)))
        return fg_error_set(err, FG_OUT_OF_MEMORY, "comm.mpi: ordered_sums: out of memory for "
                            "%zu ranks' %zu values", ranks, count);
    int rc = MPI_Iallgather(buf, (int)count, dt, r->gathered, (int)count, dt, c->world, &r->req);
    if (rc == MPI_SUCCESS) return FG_OK;
    free(r->gathered);
    r->gathered = NULL;
    return fg_mpi_fail(rc, "MPI_Iallgather", err);
}

#define RANK_ORDER_SUM(T)                                                                    \
    do {                                                                                     \
        const T *g = r->gathered;                                                           \
        T *out = r->buf;                                                                     \
        for (size_t i = 0; i < n; i++) {                                                     \
            T s = g[i];                                                                      \
            for (size_t k = 1; k < ranks; k++)                                               \
                s += g[k * n + i];                                                           \
            out[i] = s;                                                                      \
        }                                                                                    \
    } while (0)

void fg_mpi_ordered_finish(const fg_mpi_comm *c, fg_mpi_request *r, int done)
{
    size_t n = r->op.count, ranks = (size_t)c->topo.world_size;
    if (done) {
        switch (r->op.dtype) {
        case FG_F32: RANK_ORDER_SUM(float); break;
        case FG_F64: RANK_ORDER_SUM(double); break;
        case FG_I32: RANK_ORDER_SUM(int32_t); break;
        case FG_I64: RANK_ORDER_SUM(int64_t); break;
        }
    }
    free(r->gathered);
    r->gathered = NULL;
}
