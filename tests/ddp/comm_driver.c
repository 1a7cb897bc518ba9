/* Drives fulgur-comm-mpi.so through its ABI under mpirun: every collective, every dtype it
 * supports, checked against values each rank can compute alone. Exit 0 when all hold.
 *   mpirun -n 3 comm_driver PLUGIN.so
 *   mpirun -n 3 comm_driver PLUGIN.so laggard
 * laggard: the last rank skips the first all_reduce and waits in a receive instead, so
 * the others time out (COMM_DRIVER_TIMEOUT_S, default 30; the laggard's own is 10 times
 * that) and must name it, then abort. */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fulgur/comm.h"

static int failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                           \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* ---- a minimal host ------------------------------------------------------------------ */

static void host_log(const fg_host *h, int level, const char *fmt, ...)
{
}
static fg_status host_get_float(const fg_host *h, const char *key, double *out)
{
    if (strcmp(key, "timeout_s") != 0) return FG_NOT_FOUND;
    const char *v = getenv("COMM_DRIVER_TIMEOUT_S");
    *out = v ? atof(v) : 30;
    /* The laggard (the last rank, as Open MPI's launcher numbers it) waits 10 times longer,
     * so the ranks that arrived are the ones that time out. */
    const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (rank && size && atoi(rank) == atoi(size) - 1) *out *= 10;
    return FG_OK;
}
static fg_status host_not_found_int(const fg_host *h, const char *k, int64_t *o) { return FG_NOT_FOUND; }
static fg_status host_not_found_bool(const fg_host *h, const char *k, int *o) { return FG_NOT_FOUND; }
static fg_status host_not_found_str(const fg_host *h, const char *k, const char **o) { return FG_NOT_FOUND; }

/* ---- checks ----------------------------------------------------------------------- */

typedef struct comm {
    const fg_comm_vtable *vt;
    void *s;
    int rank, size;
} comm;

#define OK(call)                                                                           \
    do {                                                                                   \
        fg_error e = {0};                                                                  \
        fg_status st_ = (call);                                                            \
        CHECK(st_ == FG_OK, "%s -> %s: %s", #call, fg_status_name(st_), e.message);        \
    } while (0)

static void check_all_reduce(const comm *c)
{
    int n = c->size, r = c->rank;
    float f[5];
    double d[5];
    int32_t i32[5];
    int64_t i64[5];
    for (int k = 0; k < 5; k++) {
        f[k] = (float)(r + 1) * (float)(k + 1);
        d[k] = (double)(r + 1) * (k + 1);
        i32[k] = (r + 1) * (k + 1);
        i64[k] = (int64_t)(r + 1) * (k + 1) * 10000000000LL;
    }
    double tri = n * (n + 1) / 2.0; /* sum of (r + 1) over ranks */
    OK(c->vt->all_reduce(c->s, NULL, f, 5, FG_F32, FG_REDUCE_SUM, &e));
    OK(c->vt->all_reduce(c->s, NULL, d, 5, FG_F64, FG_REDUCE_AVG, &e));
    OK(c->vt->all_reduce(c->s, NULL, i32, 5, FG_I32, FG_REDUCE_MAX, &e));
    OK(c->vt->all_reduce(c->s, NULL, i64, 5, FG_I64, FG_REDUCE_SUM, &e));
    for (int k = 0; k < 5; k++) {
        CHECK(f[k] == (float)(tri * (k + 1)), "f32 sum [%d] = %g, want %g", k, f[k], tri * (k + 1));
        CHECK(fabs(d[k] - tri / n * (k + 1)) < 1e-12, "f64 avg [%d] = %g", k, d[k]);
        CHECK(i32[k] == n * (k + 1), "i32 max [%d] = %d", k, i32[k]);
        CHECK(i64[k] == (int64_t)tri * (k + 1) * 10000000000LL, "i64 sum [%d] = %lld", k,
              (long long)i64[k]);
    }
}

static void check_started(const comm *c)
{
    /* Three overlapping requests waited out of order, one tested until done first. */
    float a[100], b[7], x[3];
    for (int k = 0; k < 100; k++) a[k] = (float)c->rank;
    for (int k = 0; k < 7; k++) b[k] = (float)k;
    for (int k = 0; k < 3; k++) x[k] = (float)(c->rank * 3 + k);
    void *ra = NULL, *rb = NULL, *rx = NULL;
    OK(c->vt->all_reduce_start(c->s, NULL, a, 100, FG_F32, FG_REDUCE_SUM, &ra, &e));
    OK(c->vt->all_reduce_start(c->s, NULL, b, 7, FG_F32, FG_REDUCE_AVG, &rb, &e));
    OK(c->vt->all_reduce_start(c->s, NULL, x, 3, FG_F32, FG_REDUCE_MAX, &rx, &e));
    int done = 0;
    for (long spins = 0; !done && spins < 100000000L; spins++) OK(c->vt->test(c->s, rb, &done, &e));
    CHECK(done, "test() never reported the started all_reduce done");
    OK(c->vt->wait(c->s, rx, &e));
    OK(c->vt->wait(c->s, ra, &e));
    OK(c->vt->wait(c->s, rb, &e));
    float sum = (float)(c->size * (c->size - 1) / 2);
    for (int k = 0; k < 100; k++) CHECK(a[k] == sum, "started sum [%d] = %g, want %g", k, a[k], sum);
    for (int k = 0; k < 7; k++) CHECK(b[k] == (float)k, "started avg [%d] = %g", k, b[k]);
    for (int k = 0; k < 3; k++)
        CHECK(x[k] == (float)((c->size - 1) * 3 + k), "started max [%d] = %g", k, x[k]);
}

static void check_scatter_gather(const comm *c)
{
    int n = c->size, r = c->rank;
    double *send = malloc(sizeof(double) * 2 * (size_t)n), recv[2];
    int32_t mine[2] = {r, -r}, *all = malloc(sizeof(int32_t) * 2 * (size_t)n);
    for (int k = 0; k < 2 * n; k++) send[k] = k + 0.5 * r;
    OK(c->vt->reduce_scatter(c->s, NULL, send, recv, 2, FG_F64, FG_REDUCE_SUM, &e));
    for (int k = 0; k < 2; k++) {
        double want = n * (2.0 * r + k) + 0.5 * n * (n - 1) / 2.0;
        CHECK(fabs(recv[k] - want) < 1e-12, "reduce_scatter [%d] = %g, want %g", k, recv[k], want);
    }
    OK(c->vt->all_gather(c->s, NULL, mine, all, 2, FG_I32, &e));
    for (int p = 0; p < n; p++)
        CHECK(all[2 * p] == p && all[2 * p + 1] == -p, "all_gather block %d = %d %d", p,
              all[2 * p], all[2 * p + 1]);
    free(send);
    free(all);
}

static void check_broadcast_p2p(const comm *c)
{
    int64_t v[3] = {c->rank, c->rank, c->rank};
    int root = c->size - 1;
    OK(c->vt->broadcast(c->s, NULL, v, 3, FG_I64, root, &e));
    for (int k = 0; k < 3; k++) CHECK(v[k] == root, "broadcast [%d] = %lld", k, (long long)v[k]);
    /* A ring: send to the next rank, receive from the previous; even ranks send first. */
    float out[4], in[4];
    for (int k = 0; k < 4; k++) out[k] = (float)(c->rank * 10 + k);
    int next = (c->rank + 1) % c->size, prev = (c->rank + c->size - 1) % c->size;
    if (c->size > 1) {
        if (c->rank % 2 == 0) {
            OK(c->vt->send(c->s, NULL, out, 4, FG_F32, next, &e));
            OK(c->vt->recv(c->s, NULL, in, 4, FG_F32, prev, &e));
        } else {
            OK(c->vt->recv(c->s, NULL, in, 4, FG_F32, prev, &e));
            OK(c->vt->send(c->s, NULL, out, 4, FG_F32, next, &e));
        }
        for (int k = 0; k < 4; k++) CHECK(in[k] == (float)(prev * 10 + k), "recv [%d] = %g", k, in[k]);
    }
    OK(c->vt->barrier(c->s, &e));
}

static void check_refusals(const comm *c)
{
    fg_error err = {0};
    float f = 0;
    CHECK(c->vt->all_reduce(c->s, NULL, &f, 1, FG_F16, FG_REDUCE_SUM, &err) == FG_INVALID_ARGUMENT &&
          strstr(err.message, "dtype f16"), "f16 accepted or unclear: %s", err.message);
    CHECK(c->vt->all_reduce(c->s, NULL, &f, 1, FG_F32, 42, &err) == FG_INVALID_ARGUMENT &&
          strstr(err.message, "reduce op 42"), "op 42 accepted or unclear: %s", err.message);
    CHECK(c->vt->broadcast(c->s, NULL, &f, 1, FG_F32, c->size, &err) == FG_INVALID_ARGUMENT &&
          strstr(err.message, "root"), "bad root accepted or unclear: %s", err.message);
}

int main(int argc, char **argv)
{
    int laggard = argc == 3 && strcmp(argv[2], "laggard") == 0;
    if (argc != 2 && !laggard) {
        fprintf(stderr, "usage: %s fulgur-comm-mpi.so [laggard]\n", argv[0]);
        return 2;
    }
    void *so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    const fg_plugin *p = so ? dlsym(so, FG_PLUGIN_ENTRY_NAME) : NULL;
    if (!p) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
        return 1;
    }
    fg_host host;
    memset(&host, 0, sizeof host);
    host.struct_size = sizeof host;
    host.abi_major = FG_ABI_MAJOR;
    host.abi_minor = FG_ABI_MINOR;
    host.section = "comm";
    host.log = host_log;
    host.get_float = host_get_float;
    host.get_int = host_not_found_int;
    host.get_bool = host_not_found_bool;
    host.get_string = host_not_found_str;
    void *state = NULL;
    fg_error err = {0};
    if (p->init(&host, &state, &err) != FG_OK) {
        fprintf(stderr, "init: %s\n", err.message);
        return 1;
    }
    comm c = {p->vtable, state, 0, 0};
    fg_comm_topology t = {sizeof t, 0, 0, 0, 0, 0, 0};
    OK(c.vt->topology(state, &t, &e));
    c.rank = t.rank;
    c.size = t.world_size;
    CHECK(t.world_size >= 2 && t.rank >= 0 && t.rank < t.world_size, "topology %d of %d", t.rank,
          t.world_size);
    CHECK(t.local_size == t.world_size && t.local_rank == t.rank && t.node == 0 && t.node_count == 1,
          "one node: local %d of %d, node %d of %d", t.local_rank, t.local_size, t.node,
          t.node_count);
    if (laggard) {
        float v[4] = {0};
        if (c.rank == c.size - 1)
            OK(c.vt->recv(state, NULL, v, 4, FG_F32, 0, &e)); /* rank 0 never sends */
        else
            OK(c.vt->all_reduce(state, NULL, v, 4, FG_F32, FG_REDUCE_SUM, &e));
        fprintf(stderr, "rank %d: laggard mode returned instead of aborting\n", c.rank);
        return 1;
    }
    check_all_reduce(&c);
    check_started(&c);
    check_scatter_gather(&c);
    check_broadcast_p2p(&c);
    check_refusals(&c);
    p->deinit(state);
    if (failures) {
        fprintf(stderr, "rank %d: %d check(s) failed\n", t.rank, failures);
        return 1;
    }
    printf("rank %d of %d: every collective checked\n", t.rank, t.world_size);
    return 0;
}
