/* fulgur estimate --measure-link FILE: all-reduces of growing size over the config's comm
 * plugin (run on every rank, under srun or mpirun), their median times written by rank 0
 * in the link file format fg_est_link_fit_file reads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "estimate.h"
#include "fulgur/comm.h"
#include "runtime.h"

#define REPS 7

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median time of REPS all-reduces of count floats (a machine whose other processes
 * take the cores now and then slows some of them down), after one not timed; the ranks
 * start each one together (a one-float all-reduce before it). */
static fg_status time_size(const fg_comm_vtable *vt, void *state, float *buf, size_t count,
                           double *median, fg_error *err)
{
    double t[REPS];
    fg_status st = vt->all_reduce(state, NULL, buf, count, FG_F32, FG_REDUCE_SUM, err);
    for (int r = 0; st == FG_OK && r < REPS; r++) {
        st = vt->all_reduce(state, NULL, buf, 1, FG_F32, FG_REDUCE_SUM, err);
        double t0 = seconds();
        if (st == FG_OK) st = vt->all_reduce(state, NULL, buf, count, FG_F32, FG_REDUCE_SUM, err);
        t[r] = seconds() - t0;
    }
    qsort(t, REPS, sizeof t[0], by_value);
    *median = t[REPS / 2];
    return st;
}

static fg_status measure(const fg_comm_vtable *vt, void *state, const fg_comm_topology *topo,
                         const char *path, FILE *f, fg_error *err)
{
    size_t max_count = (size_t)1 << 22; /* 16 MiB of floats */
    float *buf = calloc(max_count, sizeof *buf);
    if (!buf) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    fg_status st = FG_OK;
    if (f) fprintf(f, "# fulgur estimate --measure-link: median of %d f32 sum all-reduces a size\n"
                   "ranks = %d\n", REPS, topo->world_size);
    for (size_t count = (size_t)1 << 14; st == FG_OK && count <= max_count; count <<= 2) {
        double median = 0;
        st = time_size(vt, state, buf, count, &median, err);
        if (st == FG_OK && f) fprintf(f, "%zu %.9g\n", count * sizeof(float), median);
    }
    free(buf);
    if (st == FG_OK && f && ferror(f)) st = fg_error_set(err, FG_IO_ERROR, "cannot write %s", path);
    return st;
}

fg_status fg_est_measure_link(fg_runtime *rt, const char *path, int *wrote, fg_error *err)
{
    *wrote = 0;
    fg_instance *inst = fg_runtime_instance_of_kind(rt, FG_KIND_COMM);
    if (!inst)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--measure-link: the config has no [comm] "
                            "section to measure");
    fg_status st = fg_runtime_init_plugins(rt, err);
    const fg_comm_vtable *vt = inst->plugin->vtable;
    fg_comm_topology topo;
    memset(&topo, 0, sizeof topo);
    topo.struct_size = sizeof topo;
    topo.world_size = 1;
    if (st == FG_OK) st = vt->topology(inst->state, &topo, err);
    if (st == FG_OK && topo.world_size < 2)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "--measure-link: comm.%s has one rank; run "
                          "it on the ranks to measure (srun, mpirun -n 2 ...)", inst->name);
    FILE *f = NULL;
    if (st == FG_OK && topo.rank == 0 && !(f = fopen(path, "w")))
        st = fg_error_set(err, FG_IO_ERROR, "--measure-link %s: %s", path, strerror(errno));
    if (st == FG_OK) st = measure(vt, inst->state, &topo, path, f, err);
    if (f && fclose(f) != 0 && st == FG_OK) st = fg_error_set(err, FG_IO_ERROR, "cannot write %s", path);
    *wrote = f != NULL;
    return st;
}
