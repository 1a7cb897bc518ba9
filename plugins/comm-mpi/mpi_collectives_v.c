/* The started collectives with a count per rank (MPI_Ireduce_scatter, MPI_Iallgatherv):
 * sharded state meets a range of a flat buffer unevenly. Completed by fg_mpi_test and
 * fg_mpi_wait like all_reduce_start's requests. */
#include <limits.h>
#include <stdlib.h>

#include "mpi_collectives.h"
#include "mpi_half.h"

/* A request with room for the int counts and displacements MPI reads until completion. */
static fg_status new_request(fg_mpi_comm *c, const char *name, const size_t *counts,
                             uint32_t dtype, MPI_Datatype *dt, fg_mpi_request **out,
                             fg_error *err)
{
    *out = NULL;
    fg_status st = fg_mpi_datatype(dtype, name, dt, err);
    if (st != FG_OK) return st;
    size_t total = 0;
    for (int i = 0; i < c->topo.world_size; i++) total += counts[i];
    if ((st = fg_mpi_check_count(total, name, err)) != FG_OK) return st;
    fg_mpi_request *r = calloc(1, sizeof *r + 2 * (size_t)c->topo.world_size * sizeof(int));
    if (!r) return fg_error_set(err, FG_OUT_OF_MEMORY, "comm.mpi: %s: out of memory", name);
    r->counts = (int *)(r + 1);
    int at = 0;
    for (int i = 0; i < c->topo.world_size; i++) {
        r->counts[i] = (int)counts[i];
        r->counts[c->topo.world_size + i] = at;
        at += (int)counts[i];
    }
    r->op.name = name;
    r->op.count = total;
    r->op.dtype = dtype;
    r->op.seq = ++c->issued;
    r->op.peer = -1;
    *out = r;
    return FG_OK;
}

static fg_status started(fg_mpi_comm *c, fg_mpi_request *r, int rc, const char *call,
                         void **request, fg_error *err)
{
    if (rc != MPI_SUCCESS) {
        free(r);
        return fg_mpi_fail(rc, call, err);
    }
    c->in_flight++;
    *request = r;
    return FG_OK;
}

fg_status fg_mpi_reduce_scatter_v_start(void *state, void *queue, const void *send, void *recv,
                                        const size_t *counts, uint32_t dtype, uint32_t op,
                                        void **request, fg_error *err)
{
    (void)queue;
    fg_mpi_comm *c = state;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    MPI_Op mop = MPI_OP_NULL;
    fg_mpi_request *r = NULL;
    *request = NULL;
    fg_status st = fg_mpi_reduce_op_for(op, dtype, "reduce_scatter_v", &mop, err);
    if (st == FG_OK) st = new_request(c, "reduce_scatter_v", counts, dtype, &dt, &r, err);
    if (st != FG_OK) return st;
    r->buf = recv;
    r->average = op == FG_REDUCE_AVG;
    r->avg_count = counts[c->topo.rank];
    const void *in = send == recv ? MPI_IN_PLACE : send;
    int rc = MPI_Ireduce_scatter(in, recv, r->counts, dt, mop, c->world, &r->req);
    return started(c, r, rc, "MPI_Ireduce_scatter", request, err);
}

fg_status fg_mpi_all_gather_v_start(void *state, void *queue, const void *send, void *recv,
                                    const size_t *counts, uint32_t dtype, void **request,
                                    fg_error *err)
{
    (void)queue;
    fg_mpi_comm *c = state;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    fg_mpi_request *r = NULL;
    *request = NULL;
    fg_status st = new_request(c, "all_gather_v", counts, dtype, &dt, &r, err);
    if (st != FG_OK) return st;
    int rc = MPI_Iallgatherv(send, r->counts[c->topo.rank], dt, recv, r->counts,
                             r->counts + c->topo.world_size, dt, c->world, &r->req);
    return started(c, r, rc, "MPI_Iallgatherv", request, err);
}
