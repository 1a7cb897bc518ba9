/* Drives fulgur-comm-mpi.so through its ABI under mpirun: every collective, every dtype it
 * supports, checked against values each rank can compute alone. Exit 0 when all hold.
 *   mpirun -n 3 comm_driver PLUGIN.so
 *   mpirun -n 3 comm_driver PLUGIN.so laggard
 * laggard: the last rank skips the first all_reduce and waits in a receive instead, so
 * the others time out (COMM_DRIVER_TIMEOUT_S, default 30; the laggard's own is 10 times
 * that), fail with FG_FATAL naming it (and so does the next call), then abort: exit 3.
 *   mpirun -n 3 comm_driver PLUGIN.so ordered
 * ordered: ordered_sums = true; the same checks, sums whose rounding tells the rank order
 * apart (on 4 ranks Open MPI's own order fails them), and half sums refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_host.h"
#include "fulgur/comm.h"
#include "plugin_load.h"

/* ---- the hosts: the common fake host, every log line (debug too) on stdout for the
 * tests to grep ------------------------------------------------------------------------ */

static fg_fake_host comm_host, backend_host;

/* timeout_s from COMM_DRIVER_TIMEOUT_S (default 30): the laggard (the last rank, as Open
 * MPI's launcher numbers it) waits 10 times longer, so the ranks that arrived are the ones
 * that time out. stage_device_buffers from COMM_DRIVER_STAGE when set. */
static void comm_options(fg_fake_host *h)
{
    const char *v = getenv("COMM_DRIVER_TIMEOUT_S");
    double timeout = v ? atof(v) : 30;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK"), *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (rank && size && atoi(rank) == atoi(size) - 1) timeout *= 10;
    char text[64];
    snprintf(text, sizeof text, "%g", timeout);
    fg_fake_host_set(h, "timeout_s", text);
    const char *stage = getenv("COMM_DRIVER_STAGE");
    if (stage) fg_fake_host_set(h, "stage_device_buffers", stage);
}

/* The backend the comm stages through (COMM_DRIVER_BACKEND: its .so), found by the comm's
 * find_plugin. */
static int load_backend(void)
{
    const char *path = getenv("COMM_DRIVER_BACKEND");
    if (!path) return 0;
    const fg_plugin *p = fg_test_load_plugin(path, FG_KIND_BACKEND, NULL);
    void *state = NULL;
    fg_error err = {0};
    if (p) {
        fg_fake_host_init(&backend_host, p, NULL);
        fg_fake_host_echo(&backend_host, stdout, FG_LOG_DEBUG);
    }
    if (!p || p->init(&backend_host.host, &state, &err) != FG_OK) {
        fprintf(stderr, "cannot load the backend %s: %s\n", path, err.message);
        return 1;
    }
    fg_fake_host_add_plugin(&comm_host, FG_KIND_BACKEND, p->vtable, state);
    return 0;
}

/* ---- checks ----------------------------------------------------------------------- */

typedef struct comm {
    const fg_comm_vtable *vt;
    void *s;
    int rank, size;
} comm;

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
    CHECK_OK(c->vt->all_reduce(c->s, NULL, f, 5, FG_F32, FG_REDUCE_SUM, &fg_test_err));
    CHECK_OK(c->vt->all_reduce(c->s, NULL, d, 5, FG_F64, FG_REDUCE_AVG, &fg_test_err));
    CHECK_OK(c->vt->all_reduce(c->s, NULL, i32, 5, FG_I32, FG_REDUCE_MAX, &fg_test_err));
    CHECK_OK(c->vt->all_reduce(c->s, NULL, i64, 5, FG_I64, FG_REDUCE_SUM, &fg_test_err));
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
    CHECK_OK(c->vt->all_reduce_start(c->s, NULL, a, 100, FG_F32, FG_REDUCE_SUM, &ra, &fg_test_err));
    CHECK_OK(c->vt->all_reduce_start(c->s, NULL, b, 7, FG_F32, FG_REDUCE_AVG, &rb, &fg_test_err));
    CHECK_OK(c->vt->all_reduce_start(c->s, NULL, x, 3, FG_F32, FG_REDUCE_MAX, &rx, &fg_test_err));
    int done = 0;
    for (long spins = 0; !done && spins < 100000000L; spins++) CHECK_OK(c->vt->test(c->s, rb, &done, &fg_test_err));
    CHECK(done, "test() never reported the started all_reduce done");
    CHECK_OK(c->vt->wait(c->s, rx, &fg_test_err));
    CHECK_OK(c->vt->wait(c->s, ra, &fg_test_err));
    CHECK_OK(c->vt->wait(c->s, rb, &fg_test_err));
    float sum = (float)(c->size * (c->size - 1) / 2);
    for (int k = 0; k < 100; k++) CHECK(a[k] == sum, "started sum [%d] = %g, want %g", k, a[k], sum);
    for (int k = 0; k < 7; k++) CHECK(b[k] == (float)k, "started avg [%d] = %g", k, b[k]);
    for (int k = 0; k < 3; k++)
        CHECK(x[k] == (float)((c->size - 1) * 3 + k), "started max [%d] = %g", k, x[k]);
}

/* reduce_scatter_v (AVG, separate send and recv) then all_gather_v, counts r + 2 per rank. */
static void check_v(const comm *c)
{
    int n = c->size, r = c->rank;
    size_t counts[16], total = 0, at = 0;
    if (n > 16) return;
    for (int k = 0; k < n; k++) total += counts[k] = (size_t)k + 2;
    for (int k = 0; k < r; k++) at += counts[k];
    float *send = malloc(sizeof(float) * total), *all = malloc(sizeof(float) * total);
    float mine[17];
    for (size_t i = 0; i < total; i++) send[i] = (float)((r + 1) * (int)(i + 1));
    void *req = NULL;
    CHECK_OK(c->vt->reduce_scatter_v_start(c->s, NULL, send, mine, counts, FG_F32, FG_REDUCE_AVG, &req, &fg_test_err));
    if (req) CHECK_OK(c->vt->wait(c->s, req, &fg_test_err));
    for (size_t i = 0; i < counts[r]; i++) {
        float want = (float)(at + i + 1) * (float)(n + 1) / 2;
        CHECK(mine[i] == want, "reduce_scatter_v avg [%zu] = %g, want %g", i, mine[i], want);
    }
    CHECK_OK(c->vt->all_gather_v_start(c->s, NULL, mine, all, counts, FG_F32, &req, &fg_test_err));
    if (req) CHECK_OK(c->vt->wait(c->s, req, &fg_test_err));
    for (size_t i = 0; i < total; i++)
        CHECK(all[i] == (float)(i + 1) * (float)(n + 1) / 2, "all_gather_v [%zu] = %g", i, all[i]);
    free(send);
    free(all);
}

static void check_scatter_gather(const comm *c)
{
    int n = c->size, r = c->rank;
    double *send = malloc(sizeof(double) * 2 * (size_t)n), recv[2];
    int32_t mine[2] = {r, -r}, *all = malloc(sizeof(int32_t) * 2 * (size_t)n);
    for (int k = 0; k < 2 * n; k++) send[k] = k + 0.5 * r;
    CHECK_OK(c->vt->reduce_scatter(c->s, NULL, send, recv, 2, FG_F64, FG_REDUCE_SUM, &fg_test_err));
    for (int k = 0; k < 2; k++) {
        double want = n * (2.0 * r + k) + 0.5 * n * (n - 1) / 2.0;
        CHECK(fabs(recv[k] - want) < 1e-12, "reduce_scatter [%d] = %g, want %g", k, recv[k], want);
    }
    CHECK_OK(c->vt->all_gather(c->s, NULL, mine, all, 2, FG_I32, &fg_test_err));
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
    CHECK_OK(c->vt->broadcast(c->s, NULL, v, 3, FG_I64, root, &fg_test_err));
    for (int k = 0; k < 3; k++) CHECK(v[k] == root, "broadcast [%d] = %lld", k, (long long)v[k]);
    /* A ring: send to the next rank, receive from the previous; even ranks send first. */
    float out[4], in[4];
    for (int k = 0; k < 4; k++) out[k] = (float)(c->rank * 10 + k);
    int next = (c->rank + 1) % c->size, prev = (c->rank + c->size - 1) % c->size;
    if (c->size > 1) {
        if (c->rank % 2 == 0) {
            CHECK_OK(c->vt->send(c->s, NULL, out, 4, FG_F32, next, &fg_test_err));
            CHECK_OK(c->vt->recv(c->s, NULL, in, 4, FG_F32, prev, &fg_test_err));
        } else {
            CHECK_OK(c->vt->recv(c->s, NULL, in, 4, FG_F32, prev, &fg_test_err));
            CHECK_OK(c->vt->send(c->s, NULL, out, 4, FG_F32, next, &fg_test_err));
        }
        for (int k = 0; k < 4; k++) CHECK(in[k] == (float)(prev * 10 + k), "recv [%d] = %g", k, in[k]);
    }
    CHECK_OK(c->vt->barrier(c->s, &fg_test_err));
}

/* f16 / bf16 (bit patterns): sums in f32 rounded to nearest even, so the pairs below test
 * the rounding; only ranks 0 and 1 contribute non-zero values where the order could matter. */
static void check_half(const comm *c)
{
    int n = c->size, r = c->rank;
    enum { K = 6 };
    /* bf16: 1 + 3*2^-9 -> 1 + 2^-7 (nearest, not truncated); 1 + 2^-8 tie -> 1 (even);
     * 1 + 3*2^-8 tie -> 1 + 2^-6 (even); r + 1 summed; -2 + 2 = 0; 1 + 2^-9 -> 1 */
    const uint16_t bf_r0[K] = {0x3f80, 0x3f80, 0x3f80, 0, 0xc000, 0x3f80};
    const uint16_t bf_r1[K] = {0x3bc0, 0x3b80, 0x3c40, 0, 0x4000, 0x3b00};
    const uint16_t bf_want[K] = {0x3f81, 0x3f80, 0x3f82, 0, 0x0000, 0x3f80};
    /* f16: 1 + 3*2^-11 tie -> 1 + 2^-9 (even); 1 + 2^-11 tie -> 1; 60000 + 60000 -> inf;
     * 2^-24 + 2^-24 = 2^-23 (subnormals exact); r + 1 summed; 0.5 + 0.25 = 0.75 */
    const uint16_t h_r0[K] = {0x3c00, 0x3c00, 0x7b53, 0x0001, 0, 0x3800};
    const uint16_t h_r1[K] = {0x1600, 0x1000, 0x7b53, 0x0001, 0, 0x3400};
    const uint16_t h_want[K] = {0x3c02, 0x3c00, 0x7c00, 0x0002, 0, 0x3a00};
    uint16_t bf[K] = {0}, h[K] = {0};
    for (int k = 0; k < K; k++) {
        bf[k] = r == 0 ? bf_r0[k] : r == 1 ? bf_r1[k] : 0;
        h[k] = r == 0 ? h_r0[k] : r == 1 ? h_r1[k] : 0;
    }
    /* element 3 of bf16 / 4 of f16: r + 1 (small integers are exact in both) */
    const uint16_t bf_int[4] = {0x3f80, 0x4000, 0x4040, 0x4080}; /* 1 2 3 4 */
    const uint16_t h_int[4] = {0x3c00, 0x4000, 0x4200, 0x4400};
    bf[3] = bf_int[r % 4];
    h[4] = h_int[r % 4];
    void *req = NULL;
    CHECK_OK(c->vt->all_reduce(c->s, NULL, bf, K, FG_BF16, FG_REDUCE_SUM, &fg_test_err));
    CHECK_OK(c->vt->all_reduce_start(c->s, NULL, h, K, FG_F16, FG_REDUCE_SUM, &req, &fg_test_err));
    if (req) CHECK_OK(c->vt->wait(c->s, req, &fg_test_err));
    uint16_t bf_sum = 0, h_sum = 0; /* n(n+1)/2 for n <= 4: 3, 6, 10 */
    if (n <= 4) {
        const uint16_t bf_tri[5] = {0, 0x3f80, 0x4040, 0x40c0, 0x4120};
        const uint16_t h_tri[5] = {0, 0x3c00, 0x4200, 0x4600, 0x4900};
        bf_sum = bf_tri[n];
        h_sum = h_tri[n];
    }
    for (int k = 0; k < K; k++) {
        uint16_t bw = k == 3 ? bf_sum : bf_want[k], hw = k == 4 ? h_sum : h_want[k];
        if (n <= 4) CHECK(bf[k] == bw, "bf16 sum [%d] = 0x%04x, want 0x%04x", k, bf[k], bw);
        if (n <= 4) CHECK(h[k] == hw, "f16 sum [%d] = 0x%04x, want 0x%04x", k, h[k], hw);
    }
    /* AVG and MAX: rank r holds r + 1 (n <= 4): avg (n + 1) / 2, max n */
    uint16_t avg[2] = {bf_int[r % 4], bf_int[r % 4]}, mx[2] = {h_int[r % 4], 0xfc00};
    CHECK_OK(c->vt->all_reduce(c->s, NULL, avg, 2, FG_BF16, FG_REDUCE_AVG, &fg_test_err));
    CHECK_OK(c->vt->all_reduce(c->s, NULL, mx, 2, FG_F16, FG_REDUCE_MAX, &fg_test_err));
    const uint16_t bf_avg[5] = {0, 0x3f80, 0x3fc0, 0x4000, 0x4020}; /* 1 1.5 2 2.5 */
    if (n <= 4) {
        CHECK(avg[0] == bf_avg[n] && avg[1] == bf_avg[n], "bf16 avg = 0x%04x", avg[0]);
        CHECK(mx[0] == h_int[n - 1] && mx[1] == 0xfc00, "f16 max = 0x%04x 0x%04x", mx[0], mx[1]);
    }
    /* reduce_scatter_v (in place) with counts k + 1, then all_gather_v of the pieces: every
     * element is the sum over ranks of 1, i.e. n (exact), and each rank sees all pieces */
    size_t *counts = malloc(sizeof(size_t) * (size_t)n), total = 0, at = 0;
    for (int k = 0; k < n; k++) total += counts[k] = (size_t)k + 1;
    uint16_t *buf = malloc(2 * total), *all = malloc(2 * total);
    for (size_t i = 0; i < total; i++) buf[i] = 0x3f80;
    for (int k = 0; k < r; k++) at += counts[k];
    CHECK_OK(c->vt->reduce_scatter_v_start(c->s, NULL, buf, buf, counts, FG_BF16, FG_REDUCE_SUM,
                                           &req, &fg_test_err));
    if (req) CHECK_OK(c->vt->wait(c->s, req, &fg_test_err));
    if (n <= 4)
        for (size_t i = 0; i < counts[r]; i++)
            CHECK(buf[i] == bf_int[n - 1], "reduce_scatter_v bf16 [%zu] = 0x%04x", i, buf[i]);
    for (size_t i = 0; i < counts[r]; i++) buf[i] = (uint16_t)(0x7e01 + at + i); /* NaN bits */
    CHECK_OK(c->vt->all_gather_v_start(c->s, NULL, buf, all, counts, FG_F16, &req, &fg_test_err));
    if (req) CHECK_OK(c->vt->wait(c->s, req, &fg_test_err));
    for (size_t i = 0; i < total; i++)
        CHECK(all[i] == (uint16_t)(0x7e01 + i), "all_gather_v f16 [%zu] = 0x%04x", i, all[i]);
    /* blocking reduce_scatter / all_gather / broadcast: copies are bit exact */
    uint16_t one[2] = {0x3f80, 0x3f80}, got = 0, bits[2] = {(uint16_t)(0x1234 + r), 0xffff};
    uint16_t *blocks = malloc(2 * (size_t)n * 2);
    uint16_t *sends = malloc(2 * (size_t)n);
    for (int k = 0; k < n; k++) sends[k] = one[0];
    CHECK_OK(c->vt->reduce_scatter(c->s, NULL, sends, &got, 1, FG_BF16, FG_REDUCE_SUM, &fg_test_err));
    if (n <= 4) CHECK(got == bf_int[n - 1], "reduce_scatter bf16 = 0x%04x", got);
    CHECK_OK(c->vt->all_gather(c->s, NULL, bits, blocks, 2, FG_BF16, &fg_test_err));
    for (int k = 0; k < n; k++)
        CHECK(blocks[2 * k] == 0x1234 + k && blocks[2 * k + 1] == 0xffff,
              "all_gather bf16 block %d = 0x%04x 0x%04x", k, blocks[2 * k], blocks[2 * k + 1]);
    CHECK_OK(c->vt->broadcast(c->s, NULL, bits, 2, FG_F16, 0, &fg_test_err));
    CHECK(bits[0] == 0x1234 && bits[1] == 0xffff, "broadcast f16 = 0x%04x", bits[0]);
    free(counts);
    free(buf);
    free(all);
    free(blocks);
    free(sends);
}

static void check_refusals(const comm *c)
{
    fg_error err = {0};
    float f = 0;
    CHECK(c->vt->all_reduce(c->s, NULL, &f, 1, FG_U8, FG_REDUCE_SUM, &err) == FG_INVALID_ARGUMENT &&
          strstr(err.message, "dtype u8"), "u8 accepted or unclear: %s", err.message);
    CHECK(c->vt->all_reduce(c->s, NULL, &f, 1, FG_F32, 42, &err) == FG_INVALID_ARGUMENT &&
          strstr(err.message, "reduce op 42"), "op 42 accepted or unclear: %s", err.message);
    CHECK(c->vt->broadcast(c->s, NULL, &f, 1, FG_F32, c->size, &err) == FG_INVALID_ARGUMENT &&
          strstr(err.message, "root"), "bad root accepted or unclear: %s", err.message);
}

/* ordered_sums: in element k rank k % size gives 1 and every other rank 2^-24 (f32) or
 * 2^-53 (f64), half an ulp of 1, so where the 1 comes in the order decides the rounding:
 * each result must be the sum taken rank after rank, computed here. Started and blocking,
 * sum and avg; half sums refused. */
static void check_ordered(const comm *c)
{
    enum { K = 20000 }; /* 80 kB of f32: past the size where Open MPI leaves its tree */
    static float f[K], want_f[K], avg[K];
    static double d[K], want_d[K];
    for (int k = 0; k < K; k++) {
        int one = k % c->size;
        f[k] = c->rank == one ? 1.0f : 0x1p-24f;
        d[k] = c->rank == one ? 1.0 : 0x1p-53;
        avg[k] = 2 * f[k];
        want_f[k] = 0, want_d[k] = 0;
        for (int r = 0; r < c->size; r++) {
            want_f[k] = r ? want_f[k] + (r == one ? 1.0f : 0x1p-24f) : (r == one ? 1.0f : 0x1p-24f);
            want_d[k] = r ? want_d[k] + (r == one ? 1.0 : 0x1p-53) : (r == one ? 1.0 : 0x1p-53);
        }
    }
    void *req = NULL;
    CHECK_OK(c->vt->all_reduce_start(c->s, NULL, f, K, FG_F32, FG_REDUCE_SUM, &req, &fg_test_err));
    CHECK_OK(c->vt->all_reduce(c->s, NULL, d, K, FG_F64, FG_REDUCE_SUM, &fg_test_err));
    CHECK_OK(c->vt->wait(c->s, req, &fg_test_err));
    CHECK_OK(c->vt->all_reduce(c->s, NULL, avg, K, FG_F32, FG_REDUCE_AVG, &fg_test_err));
    for (int k = 0; k < K; k++) {
        CHECK(f[k] == want_f[k], "ordered f32 sum [%d] = %a, want %a (rank order)", k, f[k],
              want_f[k]);
        CHECK(d[k] == want_d[k], "ordered f64 sum [%d] = %a, want %a (rank order)", k, d[k],
              want_d[k]);
        CHECK(avg[k] == 2 * want_f[k] / (float)c->size, "ordered f32 avg [%d] = %a", k, avg[k]);
    }
    uint16_t h = 0;
    fg_error err = {0};
    CHECK(c->vt->all_reduce(c->s, NULL, &h, 1, FG_BF16, FG_REDUCE_SUM, &err) == FG_UNAVAILABLE &&
          strstr(err.message, "ordered_sums"), "a bf16 ordered sum accepted or unclear: %s",
          err.message);
}

int main(int argc, char **argv)
{
    int laggard = argc == 3 && strcmp(argv[2], "laggard") == 0;
    int ordered = argc == 3 && strcmp(argv[2], "ordered") == 0;
    if (argc != 2 && !laggard && !ordered) {
        fprintf(stderr, "usage: %s fulgur-comm-mpi.so [laggard | ordered]\n", argv[0]);
        return 2;
    }
    const fg_plugin *p = fg_test_need_plugin(argv[1], FG_KIND_COMM, NULL);
    fg_fake_host_init(&comm_host, p, NULL);
    fg_fake_host_echo(&comm_host, stdout, FG_LOG_DEBUG);
    comm_options(&comm_host);
    if (ordered) fg_fake_host_set(&comm_host, "ordered_sums", "true");
    if (load_backend()) return 1;
    void *state = NULL;
    fg_error err = {0};
    if (p->init(&comm_host.host, &state, &err) != FG_OK) {
        fprintf(stderr, "init: %s\n", err.message);
        return 1;
    }
    comm c = {p->vtable, state, 0, 0};
    fg_comm_topology t = {sizeof t, 0, 0, 0, 0, 0, 0};
    CHECK_OK(c.vt->topology(state, &t, &fg_test_err));
    c.rank = t.rank;
    c.size = t.world_size;
    CHECK(t.world_size >= 2 && t.rank >= 0 && t.rank < t.world_size, "topology %d of %d", t.rank,
          t.world_size);
    CHECK(t.local_size == t.world_size && t.local_rank == t.rank && t.node == 0 && t.node_count == 1,
          "one node: local %d of %d, node %d of %d", t.local_rank, t.local_size, t.node,
          t.node_count);
    if (laggard) {
        float v[4] = {0};
        fg_status st = c.rank == c.size - 1
            ? c.vt->recv(state, NULL, v, 4, FG_F32, 0, &fg_test_err) /* rank 0 never sends */
            : c.vt->all_reduce(state, NULL, v, 4, FG_F32, FG_REDUCE_SUM, &fg_test_err);
        /* the timeout fails the call with FG_FATAL; the caller (the core) records the run as
         * failed, then ends the job through abort(), which exits 3 whatever code it is given;
         * a later call fails at once */
        CHECK(st == FG_FATAL && strstr(fg_test_err.message, "timed out after"), "%s: %s",
              fg_status_name(st), fg_test_err.message);
        fg_error again = {0};
        CHECK(c.vt->barrier(state, &again) == FG_FATAL && strcmp(again.message, fg_test_err.message) == 0,
              "a call after the timeout: %s", again.message);
        c.vt->abort(state, 1, fg_test_err.message);
        fprintf(stderr, "rank %d: laggard mode returned instead of aborting\n", c.rank);
        return 1;
    }
    check_all_reduce(&c);
    check_started(&c);
    check_scatter_gather(&c);
    check_v(&c);
    check_broadcast_p2p(&c);
    if (ordered)
        check_ordered(&c);
    else
        check_half(&c);
    check_refusals(&c);
    p->deinit(state);
    if (fg_test_failures) {
        fprintf(stderr, "rank %d: %d check(s) failed\n", t.rank, fg_test_failures);
        return 1;
    }
    printf("rank %d of %d: every collective checked\n", t.rank, t.world_size);
    return 0;
}
