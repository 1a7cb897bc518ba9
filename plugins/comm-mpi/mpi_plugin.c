/* fulgur-comm-mpi.so: the descriptor, options, init/deinit and the topology.
 *
 * init starts MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED) unless the embedding program
 * already did, in which case MPI stays the program's to finalize. */
#include <stdio.h>
#include <stdlib.h>

#include "comm_topology.h"
#include "mpi_bootstrap.h"
#include "mpi_collectives.h"
#include "mpi_half.h"
#include "mpi_launcher.h"
#include "mpi_staged.h"

static const fg_option options[] = {
    {"timeout_s", FG_OPT_FLOAT, "600", 1e-3, 1e9, NULL,
     "seconds a collective may wait for the other ranks before the job is aborted, naming "
     "the ranks that did not arrive"},
    {"stage_device_buffers", FG_OPT_ENUM, "auto", 0, 0, "auto|true|false",
     "copy buffers through pinned host memory of the backend around each collective (device "
     "memory over MPI); auto: when [backend] name is not cpu"},
    {"ordered_sums", FG_OPT_BOOL, "false", 0, 0, NULL,
     "all_reduce sums gathered and added in rank order, ((r0 + r1) + r2) + ...: the same "
     "bits whatever MPI's algorithm, and ddp on G ranks equal to one device in [model] "
     "batch_groups = G (G a power of two); world_size times the traffic and host memory"},
};

/* The world and diagnostics communicators (duplicates of MPI_COMM_WORLD, errors
 * returned), then the topology of the world. */
static fg_status find_topology(fg_mpi_comm *c, fg_error *err)
{
    int rc;
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->world)) != MPI_SUCCESS) return fg_mpi_fail(rc, "MPI_Comm_dup", err);
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->diag)) != MPI_SUCCESS) return fg_mpi_fail(rc, "MPI_Comm_dup", err);
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->diag, MPI_ERRORS_RETURN);
    c->topo.struct_size = sizeof c->topo;
    return fg_mpi_find_topology(c->world, &c->topo, "comm.mpi", err);
}

static void mpi_deinit(void *state)
{
    fg_mpi_comm *c = state;
    if (!c) return;
    /* a peer is lost and the core did not call abort(): finalizing would wait for it */
    if (c->lost[0]) MPI_Abort(MPI_COMM_WORLD, FG_MPI_ABORT_CODE);
    fg_mpi_staging_deinit(c);
    if (c->world != MPI_COMM_NULL) MPI_Comm_free(&c->world);
    if (c->diag != MPI_COMM_NULL) MPI_Comm_free(&c->diag);
    fg_mpi_half_release();
    if (c->owns_mpi) MPI_Finalize();
    free(c);
}

static fg_status mpi_init(const fg_host *host, void **state, fg_error *err)
{
    fg_mpi_comm *c = calloc(1, sizeof *c);
    if (!c) return fg_error_set(err, FG_OUT_OF_MEMORY, "comm.mpi: out of memory");
    c->host = host;
    c->world = c->diag = MPI_COMM_NULL;
    c->timeout_s = 600;
    if (host->get_float(host, "timeout_s", &c->timeout_s) != FG_OK || !(c->timeout_s > 0)) {
        free(c);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] timeout_s must be a number > 0",
                            host->section);
    }
    if (host->get_bool(host, "ordered_sums", &c->ordered_sums) != FG_OK) {
        free(c);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] ordered_sums must be true or false",
                            host->section);
    }
    char launcher[512];
    fg_status st = fg_mpi_start("comm.mpi", &c->owns_mpi, err);
    if (st == FG_OK) st = find_topology(c, err);
    if (st == FG_OK)
        st = fg_mpi_check_launcher(c->world, &c->topo, "comm.mpi", launcher, sizeof launcher, err);
    if (st == FG_OK) st = fg_mpi_staging_init(c, err);
    if (st != FG_OK) {
        mpi_deinit(c);
        return st;
    }
    const fg_comm_topology *t = &c->topo;
    host->log(host, FG_LOG_DEBUG, "rank %d of %d, local rank %d of %d, node %d of %d, "
              "timeout %g s; launcher: %s", t->rank, t->world_size, t->local_rank,
              t->local_size, t->node, t->node_count, c->timeout_s, launcher);
    *state = c;
    return FG_OK;
}

static fg_status mpi_topology(void *state, fg_comm_topology *out, fg_error *err)
{
    return fg_plugin_topology_copy(&((const fg_mpi_comm *)state)->topo, out, "comm.mpi", err);
}

static void mpi_abort(void *state, int exit_code, const char *reason)
{
    fg_mpi_comm *c = state;
    if (c->lost[0]) { /* the core's error is the timeout, already printed: exit status 3 */
        MPI_Abort(MPI_COMM_WORLD, FG_MPI_ABORT_CODE);
        return;
    }
    fprintf(stderr, "fulgur: rank %d of %d failed, ending the job: %s\n", c->topo.rank,
            c->topo.world_size, reason);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
}

FG_PLUGIN_DEFINE_VTABLE(fg_comm_vtable, FG_KIND_COMM, 0, "mpi", "1.0.0",
                        "collectives on host memory over MPI (also the bootstrap), with timeouts",
                        FG_PLUGIN_OPTIONS(options), mpi_init, mpi_deinit,
                        .topology = mpi_topology, .all_reduce = fg_mpi_staged_all_reduce,
                        .reduce_scatter = fg_mpi_staged_reduce_scatter,
                        .all_gather = fg_mpi_staged_all_gather,
                        .broadcast = fg_mpi_staged_broadcast, .send = fg_mpi_staged_send,
                        .recv = fg_mpi_staged_recv, .barrier = fg_mpi_barrier,
                        .all_reduce_start = fg_mpi_staged_all_reduce_start, .test = fg_mpi_test,
                        .wait = fg_mpi_wait,
                        .reduce_scatter_v_start = fg_mpi_staged_reduce_scatter_v_start,
                        .all_gather_v_start = fg_mpi_staged_all_gather_v_start, .abort = mpi_abort);
