/* comm.mpi internals: the instance state and the completion engine every call goes through.
 *
 * Every operation is issued non-blocking (MPI_Iallreduce, ...) and completed by polling
 * MPI_Test against a deadline, so a rank that died or hangs ends the job within
 * timeout_s instead of hanging it. On a timeout the waiting rank asks every peer, over a
 * communicator of its own, which collective it is at; peers answer from their own poll
 * loops. A peer that is computing, stopped or dead does not answer: that is the rank that
 * did not arrive. The operation then fails with FG_FATAL and that reason, and so does every
 * later one at once, so that the core records the run as failed (status.json) before it
 * calls abort(), which ends the job with MPI_Abort(MPI_COMM_WORLD, 3): exit status 3, the
 * documented way to end an MPI job on every rank (a plugin never calls exit()). */
#ifndef FULGUR_COMM_MPI_H
#define FULGUR_COMM_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "fulgur/comm.h"
#include "mpi_staging.h"

/* The exit code of a job that a comm timeout ended (MPI_Abort's errorcode). */
#define FG_MPI_ABORT_CODE 3

typedef struct fg_mpi_comm {
    const fg_host *host;
    int owns_mpi;        /* this instance called MPI_Init_thread, so it finalizes */
    MPI_Comm world;      /* a duplicate of MPI_COMM_WORLD: our collectives, nobody else's */
    MPI_Comm diag;       /* a second duplicate: "which collective are you at?" on a timeout */
    fg_comm_topology topo; /* this rank's place in the job (mpi_bootstrap.h) */
    double timeout_s;
    uint64_t issued;     /* collectives issued so far; the K of "collective #K" */
    uint64_t p2p_issued; /* send/recv issued so far (their order differs between ranks) */
    int in_flight;       /* started collectives not yet waited */
    uint64_t probe_seq;  /* the buffer of the probes a timed-out rank sends (MPI_Isend) */
    fg_mpi_staging stage; /* device buffers through pinned host memory (mpi_staging.h) */
    int ordered_sums;    /* [comm] ordered_sums: all_reduce sums in rank order (mpi_ordered.h) */
    char lost[1536];     /* non-empty after a timeout: the reason, and every call fails with it */
} fg_mpi_comm;

/* What an operation is, for messages: "all_reduce of 1024 floats (collective #7)". */
typedef struct fg_mpi_op {
    const char *name;    /* "all_reduce", "broadcast", ... */
    size_t count;
    uint32_t dtype;      /* fg_dtype */
    uint64_t seq;        /* collective number, or p2p number when peer >= 0 */
    int peer;            /* send/recv: the other rank; -1 for collectives */
} fg_mpi_op;

/* A started collective (all_reduce_start): what wait() must finish. */
typedef struct fg_mpi_request {
    MPI_Request req;
    fg_mpi_op op;
    void *buf;           /* AVG: scaled by 1 / size once complete */
    int average;
    int done;
    size_t avg_count;    /* elements AVG scales when not op.count (reduce_scatter_v) */
    int *counts;         /* (2 * size) per-rank counts and displacements of the v-collectives,
                          * alive until completion as MPI requires; NULL otherwise */
    fg_mpi_stage stage;  /* staged: the host copy (stage.host != NULL), copied back by wait() */
    void *stage_dst;     /* staged: where the result goes, from stage_offset, stage_bytes */
    size_t stage_offset, stage_bytes;
    void *gathered;      /* ordered_sums: every rank's buffer, summed by wait() */
} fg_mpi_request;

double fg_mpi_now(void);

/* Maps an fg_dtype / fg_reduce_op; FG_INVALID_ARGUMENT naming the call when unsupported. */
fg_status fg_mpi_datatype(uint32_t dtype, const char *what, MPI_Datatype *out, fg_error *err);
fg_status fg_mpi_reduce_op(uint32_t op, const char *what, MPI_Op *out, fg_error *err);
/* MPI counts are int: larger buffers are refused rather than silently truncated. */
fg_status fg_mpi_check_count(size_t count, const char *what, fg_error *err);
/* An MPI error code as an fg_error naming the call. */
fg_status fg_mpi_fail(int rc, const char *call, fg_error *err);

/* Polls req until it completes or timeout_s passes; on a timeout diagnoses the lagging
 * ranks, prints one line on stderr and aborts the job (returns FG_FATAL if MPI_Abort
 * ever returns). Answers peers' probes while it waits. */
fg_status fg_mpi_complete(fg_mpi_comm *c, MPI_Request *req, const fg_mpi_op *op, fg_error *err);
/* One non-blocking progress step: *done = 1 when req has completed. */
fg_status fg_mpi_poll(fg_mpi_comm *c, MPI_Request *req, int *done, fg_error *err);

/* x[i] /= size for an AVG reduction, in the buffer's own type. */
void fg_mpi_scale_average(void *buf, size_t count, uint32_t dtype, int size);

#endif
