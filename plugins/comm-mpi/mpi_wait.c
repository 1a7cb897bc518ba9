/* The completion engine: poll MPI_Test against a deadline, answer peers' probes while
 * waiting, and on a timeout name the ranks that did not arrive and fail with FG_FATAL (the
 * core records the run as failed, then calls abort(): mpi_plugin.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_bootstrap.h"
#include "mpi_comm.h"

enum { TAG_PROBE = 1, TAG_ANSWER = 2 };

/* Pure MPI_Test spinning for the first millisecond: a non-blocking collective advances
 * only inside MPI calls, round by round, so a nap between tests delays every round (a
 * 1 ms cap made a 1 MiB all-reduce between two ranks 2-3 times slower). After that the
 * poll naps, doubling up to MAX_NAP, so a rank waiting for a slow peer leaves the core to
 * the ranks (and loader threads) that still compute. */
#define SPIN_SECONDS 1e-3
#define FIRST_NAP_NS 5000L
#define MAX_NAP_NS 50000L
/* How long a timed-out rank waits for peers to say where they are. */
#define PROBE_GRACE_SECONDS 1.0

double fg_mpi_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

fg_status fg_mpi_fail(int rc, const char *call, fg_error *err)
{
    return fg_mpi_error(FG_FATAL, "comm.mpi", call, rc, err);
}

/* Answers every probe that has arrived with this rank's collective counter. The answer
 * is 16 bytes, always sent eagerly, so MPI_Send does not wait for the asker. */
static void answer_probes(fg_mpi_comm *c)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_PROBE, c->diag, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        uint64_t asked = 0, answer[2] = {c->issued, 1};
        MPI_Recv(&asked, 1, MPI_UINT64_T, st.MPI_SOURCE, TAG_PROBE, c->diag, MPI_STATUS_IGNORE);
        MPI_Send(answer, 2, MPI_UINT64_T, st.MPI_SOURCE, TAG_ANSWER, c->diag);
    }
}

/* Asks every peer which collective it is at; writes the ones short of seq into out,
 * e.g. "1 (no answer), 3 (at collective #6)". */
static void find_laggards(fg_mpi_comm *c, uint64_t seq, char *out, size_t cap)
{
    int n = c->topo.world_size;
    uint64_t *at = calloc((size_t)n, sizeof *at);
    char *answered = calloc((size_t)n, 1);
    MPI_Request *sent = calloc((size_t)n, sizeof *sent);
    snprintf(out, cap, "a peer rank did not arrive");
    if (!at || !answered || !sent) goto done;
    c->probe_seq = seq;
    int waiting_for = 0;
    for (int p = 0; p < n; p++) {
        sent[p] = MPI_REQUEST_NULL;
        if (p == c->topo.rank) continue;
        if (MPI_Isend(&c->probe_seq, 1, MPI_UINT64_T, p, TAG_PROBE, c->diag, &sent[p]) == MPI_SUCCESS)
            waiting_for++;
    }
    double deadline = fg_mpi_now() + PROBE_GRACE_SECONDS;
    while (waiting_for > 0 && fg_mpi_now() < deadline) {
        answer_probes(c);
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_ANSWER, c->diag, &flag, &st) == MPI_SUCCESS && flag) {
            uint64_t answer[2];
            MPI_Recv(answer, 2, MPI_UINT64_T, st.MPI_SOURCE, TAG_ANSWER, c->diag, MPI_STATUS_IGNORE);
            if (!answered[st.MPI_SOURCE]) waiting_for--;
            answered[st.MPI_SOURCE] = 1;
            at[st.MPI_SOURCE] = answer[0];
            continue;
        }
        nap(MAX_NAP_NS);
    }
    size_t used = 0;
    out[0] = '\0';
    for (int p = 0; p < n && used + 1 < cap; p++) {
        if (p == c->topo.rank || (answered[p] && at[p] >= seq)) continue;
        int w = answered[p]
                    ? snprintf(out + used, cap - used, "%s%d (at collective #%llu)",
                               used ? ", " : "", p, (unsigned long long)at[p])
                    : snprintf(out + used, cap - used, "%s%d (no answer: stopped, dead or "
                               "busy outside collectives)", used ? ", " : "", p);
        if (w > 0) used += (size_t)w < cap - used ? (size_t)w : cap - used - 1;
    }
    if (!used) snprintf(out, cap, "none, every peer reports it arrived (a stuck transport?)");
done:
    free(at);
    free(answered);
    free(sent); /* the probes are left in flight: the job is about to be aborted */
}

static const char *dtype_noun(uint32_t dtype)
{
    switch (dtype) {
    case FG_F32: return "floats";
    case FG_F64: return "doubles";
    case FG_I32: return "int32 values";
    case FG_I64: return "int64 values";
    }
    return "elements";
}

static fg_status timed_out(fg_mpi_comm *c, const fg_mpi_op *op, fg_error *err)
{
    char who[1024];
    char what[160];
    if (op->peer >= 0) {
        snprintf(what, sizeof what, "%s of %zu %s %s rank %d (message #%llu)", op->name,
                 op->count, dtype_noun(op->dtype), strcmp(op->name, "send") == 0 ? "to" : "from",
                 op->peer, (unsigned long long)op->seq);
        snprintf(who, sizeof who, "rank %d did not %s", op->peer,
                 strcmp(op->name, "send") == 0 ? "receive" : "send");
    } else {
        snprintf(what, sizeof what, "%s of %zu %s (collective #%llu)", op->name, op->count,
                 dtype_noun(op->dtype), (unsigned long long)op->seq);
        char laggards[900];
        find_laggards(c, op->seq, laggards, sizeof laggards);
        snprintf(who, sizeof who, "ranks that did not arrive: %s", laggards);
    }
    snprintf(c->lost, sizeof c->lost, "comm.mpi: rank %d: %s timed out after %g s; %s",
             c->topo.rank, what, c->timeout_s, who);
    fprintf(stderr, "fulgur: %s\n", c->lost);
    fflush(stderr);
    /* no MPI_Abort here: the core records the failure in status.json, then calls abort() */
    return fg_error_set(err, FG_FATAL, "%s", c->lost);
}

fg_status fg_mpi_poll(fg_mpi_comm *c, MPI_Request *req, int *done, fg_error *err)
{
    int flag = 0;
    int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return fg_mpi_fail(rc, "MPI_Test", err);
    *done = flag;
    return FG_OK;
}

fg_status fg_mpi_complete(fg_mpi_comm *c, MPI_Request *req, const fg_mpi_op *op, fg_error *err)
{
    if (c->lost[0]) return fg_error_set(err, FG_FATAL, "%s", c->lost); /* a peer is lost */
    double start = fg_mpi_now(), deadline = start + c->timeout_s;
    long ns = FIRST_NAP_NS;
    for (;;) {
        int done = 0;
        fg_status st = fg_mpi_poll(c, req, &done, err);
        if (st != FG_OK || done) return st;
        double now = fg_mpi_now();
        if (now >= deadline) return timed_out(c, op, err);
        if (now - start < SPIN_SECONDS) continue;
        answer_probes(c);
        nap(ns);
        if (ns < MAX_NAP_NS) ns *= 2;
    }
}
