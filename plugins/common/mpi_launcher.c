/* Launcher variables against MPI's topology.
 *
 * srun, mpirun, PMIx and Hydra each export this process's place (rank, local rank, ...)
 * before MPI starts. MPI's own answer is what fulgur uses; the launcher's must agree, or
 * the job is not what it looks like (srun without PMI gives N worlds of one rank, a
 * launcher from another MPI gives the same, a wrapper script exporting the wrong
 * variables pins ranks to the wrong devices). Checks are local, then every rank learns the
 * first failing rank's message, so the whole job stops with one reason.
 *
 * srun's variables count only in a task srun started as one of the MPI ranks: its
 * SLURM_STEP_NUM_TASKS equals MPI's world size. Under mpirun inside an allocation the
 * ranks inherit the batch step's (SLURM_PROCID = 0 everywhere, no step variables) or
 * mpirun's daemons' (one task per node): those describe other processes and are skipped.
 * SLURM_NODEID numbers nodes as the step does; fulgur numbers them by their lowest rank,
 * so the two are compared as partitions: same node for MPI <=> same SLURM_NODEID. */
#include "mpi_launcher.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F_RANK, F_SIZE, F_LOCAL_RANK, F_LOCAL_SIZE, F_NODE, F_NODE_COUNT };

static const char *const field_name[] = {"rank", "world size", "local rank", "local size",
                                         "node", "node count"};

typedef struct check {
    int field;
    const char *var, *fallback; /* fallback: read when var is unset */
} check;

typedef struct launcher {
    const char *name;
    const char *gate; /* set when this launcher started the process */
    const check *checks;
    int count;
} launcher;

static const check srun_checks[] = {
    {F_RANK, "SLURM_PROCID", NULL},          {F_SIZE, "SLURM_STEP_NUM_TASKS", NULL},
    {F_SIZE, "SLURM_NTASKS", NULL},          {F_LOCAL_RANK, "SLURM_LOCALID", NULL},
    {F_NODE, "SLURM_NODEID", NULL},          {F_NODE_COUNT, "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES"},
};
static const check ompi_checks[] = {
    {F_RANK, "OMPI_COMM_WORLD_RANK", NULL},
    {F_SIZE, "OMPI_COMM_WORLD_SIZE", NULL},
    {F_LOCAL_RANK, "OMPI_COMM_WORLD_LOCAL_RANK", NULL},
    {F_LOCAL_SIZE, "OMPI_COMM_WORLD_LOCAL_SIZE", NULL},
};
static const check pmix_checks[] = {{F_RANK, "PMIX_RANK", NULL}};
static const check hydra_checks[] = {
    {F_RANK, "PMI_RANK", NULL},
    {F_SIZE, "PMI_SIZE", NULL},
    {F_LOCAL_RANK, "MPI_LOCALRANKID", NULL},
    {F_LOCAL_SIZE, "MPI_LOCALNRANKS", NULL},
};

#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))
static const launcher launchers[] = {
    {"srun", "SLURM_STEP_NUM_TASKS", srun_checks, COUNT(srun_checks)},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", ompi_checks, COUNT(ompi_checks)},
    {"PMIx", "PMIX_RANK", pmix_checks, COUNT(pmix_checks)},
    {"Hydra", "PMI_RANK", hydra_checks, COUNT(hydra_checks)},
};

typedef struct verdict {
    char message[FG_ERROR_MESSAGE_MAX]; /* empty: this rank agrees */
    int node_claim;                     /* SLURM_NODEID of an srun task, else -1 */
    const char *summary_end;
} verdict;

static int mpi_value(const fg_comm_topology *t, int field)
{
    switch (field) {
    case F_RANK: return t->rank;
    case F_SIZE: return t->world_size;
    case F_LOCAL_RANK: return t->local_rank;
    case F_LOCAL_SIZE: return t->local_size;
    case F_NODE: return t->node;
    default: return t->node_count;
    }
}

/* The variable's value as a count or index; -1 when unset, -2 (and a message) when it is
 * not one. */
static long read_var(const char *var, const char *who, int rank, verdict *v)
{
    const char *s = getenv(var);
    if (!s) return -1;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < 0 || x > 1L << 30) {
        snprintf(v->message, sizeof v->message, "%s: rank %d: %s = '%s' is not a rank or a count",
                 who, rank, var, s);
        return -2;
    }
    return x;
}

static void append(char *summary, size_t size, const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(summary);
    if (n < size) snprintf(summary + n, size - n, fmt, a, b);
}

/* One launcher's checks on this rank. */
static void check_launcher(const launcher *l, const fg_comm_topology *mpi, const char *who,
                           verdict *v, char *summary, size_t size)
{
    int checked = 0;
    for (int i = 0; i < l->count && !v->message[0]; i++) {
        const check *c = &l->checks[i];
        const char *var = c->var;
        long x = read_var(var, who, mpi->rank, v);
        if (x == -1 && c->fallback) x = read_var(var = c->fallback, who, mpi->rank, v);
        if (x < 0) continue;
        checked++;
        append(summary, size, checked == 1 ? "%s (%s" : " %s", checked == 1 ? l->name : var,
               var);
        if (c->field == F_NODE) {
            v->node_claim = (int)x; /* compared across ranks */
            continue;
        }
        int want = mpi_value(mpi, c->field);
        if (x == want) continue;
        snprintf(v->message, sizeof v->message, "%s: rank %d: the launcher (%s) gives %s %ld "
                 "(%s = %ld), MPI gives %s %d%s", who, mpi->rank, l->name, field_name[c->field],
                 x, var, x, field_name[c->field], want,
                 mpi->world_size == 1 && c->field == F_SIZE
                     ? ": every rank started alone; the launcher does not match the MPI library "
                       "fulgur uses (under srun: srun --mpi=pmix, see srun --mpi=list)"
                     : "");
    }
    if (checked) append(summary, size, "%s%s", ")", "; ");
}

/* srun's variables describe this process only when srun started it as one of the ranks. */
static int srun_started_us(const fg_comm_topology *mpi, const char *who, verdict *v,
                           char *summary, size_t size)
{
    long tasks = read_var("SLURM_STEP_NUM_TASKS", who, mpi->rank, v);
    if (tasks == -1 && getenv("SLURM_PROCID"))
        append(summary, size, "%s%s", "SLURM_* skipped (no SLURM_STEP_NUM_TASKS: the batch "
               "step's variables, not srun's)", "; ");
    if (tasks < 0) return 0;
    if (tasks == mpi->world_size) return 1;
    if (mpi->world_size == 1) {
        snprintf(v->message, sizeof v->message, "%s: srun started %ld tasks "
                 "(SLURM_STEP_NUM_TASKS = %ld), MPI gives a world size of 1: each task runs "
                 "alone; srun lacks PMI support for this MPI (srun --mpi=pmix, see srun "
                 "--mpi=list)", who, tasks, tasks);
        return 0;
    }
    append(summary, size, "%s%s", "SLURM_* skipped (the step's tasks are not the MPI ranks: "
           "mpirun inside an allocation)", "; ");
    return 0;
}

/* Same node for MPI <=> same SLURM_NODEID, from every rank's (verdict, node, claim):
 * one pass, remembering the first rank seen on each node and with each claim. */
static void check_nodes(const int *all, int size, const char *who, char *message, size_t cap)
{
    int *first = malloc(2 * sizeof(int) * (size_t)size);
    if (!first) {
        snprintf(message, cap, "%s: out of memory", who);
        return;
    }
    int *on_node = first, *with_claim = first + size;
    for (int i = 0; i < 2 * size; i++) first[i] = -1;
    for (int r = 0; r < size && !message[0]; r++) {
        const int *p = all + 3 * r;
        if ((p[2] < 0) != (all[2] < 0)) {
            snprintf(message, cap, "%s: rank %d has SLURM_NODEID, rank %d has not: the ranks "
                     "were started differently", who, p[2] < 0 ? 0 : r, p[2] < 0 ? r : 0);
        } else if (p[2] >= size) {
            snprintf(message, cap, "%s: rank %d: SLURM_NODEID = %d, but the job has %d ranks",
                     who, r, p[2], size);
        } else if (p[2] >= 0) {
            int a = on_node[p[1]], b = with_claim[p[2]];
            if (a >= 0 && all[3 * a + 2] != p[2])
                snprintf(message, cap, "%s: ranks %d and %d share a node (MPI shared memory) "
                         "but have SLURM_NODEID = %d and %d", who, a, r, all[3 * a + 2], p[2]);
            else if (b >= 0 && all[3 * b + 1] != p[1])
                snprintf(message, cap, "%s: ranks %d and %d both have SLURM_NODEID = %d but "
                         "MPI puts them on different nodes (%d and %d)", who, b, r, p[2],
                         all[3 * b + 1], p[1]);
            if (a < 0) on_node[p[1]] = r;
            if (b < 0) with_claim[p[2]] = r;
        }
    }
    free(first);
}

fg_status fg_mpi_check_launcher(MPI_Comm world, const fg_comm_topology *mpi, const char *who,
                                char *summary, size_t summary_size, fg_error *err)
{
    verdict v;
    memset(&v, 0, sizeof v);
    v.node_claim = -1;
    summary[0] = 0;
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0] && !v.message[0]; i++) {
        const launcher *l = &launchers[i];
        if (l->checks == srun_checks ? !srun_started_us(mpi, who, &v, summary, summary_size)
                                     : !getenv(l->gate))
            continue;
        check_launcher(l, mpi, who, &v, summary, summary_size);
    }
    size_t len = strlen(summary);
    if (len >= 2 && summary[len - 2] == ';') summary[len - 2] = 0;
    if (!summary[0]) snprintf(summary, summary_size, "no launcher variables to check");
    /* Every rank's verdict and node pair, so all ranks fail alike. O(size) once. */
    int mine[3] = {v.message[0] != 0, mpi->node, v.node_claim};
    int *all = malloc(3 * sizeof(int) * (size_t)mpi->world_size);
    if (!all) return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", who);
    int rc = MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, world);
    int bad = -1;
    for (int r = 0; rc == MPI_SUCCESS && r < mpi->world_size && bad < 0; r++)
        if (all[3 * r]) bad = r;
    if (rc == MPI_SUCCESS && bad >= 0)
        rc = MPI_Bcast(v.message, (int)sizeof v.message, MPI_CHAR, bad, world);
    else if (rc == MPI_SUCCESS)
        check_nodes(all, mpi->world_size, who, v.message, sizeof v.message);
    free(all);
    if (rc != MPI_SUCCESS)
        return fg_error_set(err, FG_INTERNAL, "%s: the launcher check (MPI_Allgather/MPI_Bcast) "
                            "failed with MPI error %d", who, rc);
    if (v.message[0]) return fg_error_set(err, FG_INVALID_ARGUMENT, "%s", v.message);
    return FG_OK;
}
