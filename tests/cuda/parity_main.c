/* cuda.parity: loads the CPU and CUDA backends, runs every op on both, compares.
 * Exits 77 (ctest SKIP) when the CUDA backend is unavailable (no driver, no device). */
#define _GNU_SOURCE
#include <stddef.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_host.h"
#include "parity.h"
#include "plugin_load.h"

parity P;
int checks, failures;

#define MAX_PAIRS 4096
static pair live[MAX_PAIRS];
static int live_count;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    failures++;
}

int both_ok(const char *what, fg_status sc, const fg_error *ec, fg_status sg,
            const fg_error *eg)
{
    checks++;
    if (sc == FG_OK && sg == FG_OK)
        return 1;
    fail("%s: cpu %s (%s), cuda %s (%s)", what, fg_status_name(sc), sc ? ec->message : "",
         fg_status_name(sg), sg ? eg->message : "");
    return 0;
}

static void die(const char *what, fg_status st, const fg_error *e)
{
    fprintf(stderr, "%s: %s: %s\n", what, fg_status_name(st), e->message);
    exit(1);
}

static void sync_cuda(void)
{
    fg_error e = {0};
    fg_status st = P.cuda->queue_sync(P.gs, P.gq, &e);
    if (st != FG_OK)
        die("cuda queue_sync", st, &e);
}

pair pnew(size_t bytes)
{
    pair p = { NULL, NULL, bytes };
    fg_error e = {0};
    fg_status st = P.cpu->alloc(P.cs, 0, bytes ? bytes : 4, &p.c, &e);
    if (st != FG_OK)
        die("cpu alloc", st, &e);
    st = P.cuda->alloc(P.gs, 0, bytes ? bytes : 4, &p.g, &e);
    if (st != FG_OK)
        die("cuda alloc", st, &e);
    if (live_count == MAX_PAIRS) {
        fprintf(stderr, "test: more than %d live buffers\n", MAX_PAIRS);
        exit(1);
    }
    live[live_count++] = p;
    return p;
}

static void upload(void *dst, const void *host, size_t bytes)
{
    fg_error e = {0};
    fg_status st = P.cuda->copy(P.gs, P.gq, dst, 0, host, -1, bytes, &e);
    if (st != FG_OK)
        die("cuda copy H2D", st, &e);
    sync_cuda();
}

void download(pair p, void *host)
{
    fg_error e = {0};
    fg_status st = P.cuda->copy(P.gs, P.gq, host, -1, p.g, 0, p.bytes, &e);
    if (st != FG_OK)
        die("cuda copy D2H", st, &e);
    sync_cuda();
}

void pput(pair p, const void *host)
{
    memcpy(p.c, host, p.bytes);
    upload(p.g, host, p.bytes);
}

void pmirror(pair p)
{
    upload(p.g, p.c, p.bytes);
}

void ppoison(pair p)
{
    void *h = malloc(p.bytes ? p.bytes : 1);
    memset(h, 0xFF, p.bytes);
    upload(p.g, h, p.bytes);
    free(h);
}

void release_all(void)
{
    sync_cuda();
    for (int i = 0; i < live_count; i++) {
        P.cpu->free(P.cs, 0, live[i].c);
        P.cuda->free(P.gs, 0, live[i].g);
    }
    live_count = 0;
}

void rng_seed(uint64_t s)
{
    rng = s ? s : 1;
}

double rng_uniform(double lo, double hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

size_t dtype_size(uint32_t t)
{
    return t == FG_F32 ? 4 : 2;
}

/* Values are made in f32 and rounded by the CPU backend's cast: both sides get the same
 * bits. */
static pair typed_from_f32(const float *v, size_t n, uint32_t dtype)
{
    pair p = pnew(n * dtype_size(dtype));
    if (dtype == FG_F32) {
        memcpy(p.c, v, n * 4);
    } else {
        void *tmp = NULL;
        fg_error e = {0};
        fg_status st = P.cpu->alloc(P.cs, 0, n * 4 + 4, &tmp, &e);
        if (st == FG_OK) {
            memcpy(tmp, v, n * 4);
            st = P.cpu->cast(P.cs, P.cq, p.c, dtype, tmp, FG_F32, n, &e);
            P.cpu->free(P.cs, 0, tmp);
        }
        if (st != FG_OK)
            die("cpu cast (making inputs)", st, &e);
    }
    pmirror(p);
    return p;
}

pair prandom(size_t n, uint32_t dtype, double lo, double hi)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)rng_uniform(lo, hi);
    pair p = typed_from_f32(v, n, dtype);
    free(v);
    return p;
}

pair pfill(size_t n, uint32_t dtype, float value)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = value;
    pair p = typed_from_f32(v, n, dtype);
    free(v);
    return p;
}

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0)
        return s * ldexp((double)m, -24);
    if (e == 31)
        return m ? NAN : s * INFINITY;
    return s * ldexp((double)(m | 0x400), e - 25);
}

double to_double(const void *base, uint32_t dtype, size_t i)
{
    if (dtype == FG_F32)
        return ((const float *)base)[i];
    uint16_t h = ((const uint16_t *)base)[i];
    if (dtype == FG_F16)
        return half_to_double(h);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

double tol_of(uint32_t dtype)
{
    return dtype == FG_F32 ? 1e-5 : dtype == FG_F16 ? 2e-3 : 1e-2;
}

int compare(const char *what, pair p, size_t n, uint32_t dtype, double tol)
{
    checks++;
    void *g = malloc(p.bytes ? p.bytes : 1);
    download(p, g);
    double diff = 0.0, norm = 0.0;
    size_t bad_at = (size_t)-1, worst = 0;
    double worst_d = -1.0;
    for (size_t i = 0; i < n; i++) {
        double want = to_double(p.c, dtype, i), got = to_double(g, dtype, i);
        if (isnan(want) != isnan(got) || (isinf(want) && got != want)) {
            if (bad_at == (size_t)-1)
                bad_at = i;
            continue;
        }
        if (isnan(want) || isinf(want))
            continue;
        double d = fabs(got - want);
        diff += d * d;
        norm += want * want;
        if (d > worst_d) {
            worst_d = d;
            worst = i;
        }
    }
    int ok = 1;
    if (bad_at != (size_t)-1) {
        fail("%s: element %zu of %zu: cuda %g, cpu %g (NaN/inf on one side only; unwritten?)",
             what, bad_at, n, to_double(g, dtype, bad_at), to_double(p.c, dtype, bad_at));
        ok = 0;
    } else {
        double err = norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
        if (!(err <= tol)) {
            fail("%s: relative error %.3g > %.3g over %zu values (worst element %zu: cuda "
                 "%.9g, cpu %.9g)", what, err, tol, n, worst, to_double(g, dtype, worst),
                 to_double(p.c, dtype, worst));
            ok = 0;
        }
    }
    free(g);
    return ok;
}

int compare_exact(const char *what, pair p, size_t bytes)
{
    checks++;
    unsigned char *g = malloc(p.bytes ? p.bytes : 1);
    download(p, g);
    const unsigned char *c = p.c;
    int ok = 1;
    for (size_t i = 0; i < bytes; i++)
        if (g[i] != c[i]) {
            fail("%s: byte %zu of %zu differs: cuda 0x%02x, cpu 0x%02x", what, i, bytes, g[i],
                 c[i]);
            ok = 0;
            break;
        }
    free(g);
    return ok;
}

/* ---- plugins ------------------------------------------------------------------------- */

/* The common fake host of each backend: the schema's defaults, warnings echoed. */
static fg_fake_host cuda_host, cpu_host;

static const fg_plugin *load(const char *path, const char *name)
{
    return fg_test_need_plugin(path, FG_KIND_BACKEND, name);
}

/* The built paths, unless the environment names others (a bundle moved to a GPU machine:
 * tests/cuda/gpu_checks.sh). */
static const char *plugin_path(const char *env, const char *built)
{
    const char *v = getenv(env);
    return v && *v ? v : built;
}

static void open_backends(void)
{
    const fg_plugin *gp = load(plugin_path("FG_TEST_CUDA_PLUGIN", FG_CUDA_PLUGIN_PATH), "cuda");
    fg_fake_host_init(&cuda_host, gp, NULL);
    fg_fake_host_set(&cuda_host, "allow_tf32", "false"); /* the 1e-5 comparisons need true fp32 */
    fg_fake_host_echo(&cuda_host, stderr, FG_LOG_WARN);
    fg_error e = {0};
    fg_status st = gp->init(&cuda_host.host, &P.gs, &e);
    if (st == FG_UNAVAILABLE) {
        printf("SKIP: %s\n", e.message);
        exit(77);
    }
    if (st != FG_OK)
        die("cuda init", st, &e);
    const fg_plugin *cp = load(plugin_path("FG_TEST_CPU_PLUGIN", FG_CPU_PLUGIN_PATH), "cpu");
    fg_fake_host_init(&cpu_host, cp, NULL);
    fg_fake_host_echo(&cpu_host, stderr, FG_LOG_WARN);
    st = cp->init(&cpu_host.host, &P.cs, &e);
    if (st != FG_OK)
        die("cpu init", st, &e);
    P.cpu = cp->vtable;
    P.cuda = gp->vtable;
    if ((st = P.cpu->queue_create(P.cs, 0, &P.cq, &e)) != FG_OK)
        die("cpu queue_create", st, &e);
    if ((st = P.cuda->queue_create(P.gs, 0, &P.gq, &e)) != FG_OK)
        die("cuda queue_create", st, &e);
}

static const struct {
    const char *name;
    void (*run)(void);
} groups[] = {
    { "device", test_device }, { "flat", test_flat },   { "cast", test_cast },
    { "gemm", test_gemm },     { "bias_act", test_bias_act }, { "conv", test_conv },
    { "pool", test_pool },     { "batchnorm", test_batchnorm }, { "dropout", test_dropout },
    { "xent", test_xent },     { "optim", test_optim },
};

/* Every entry of the vtable as this build's backend.h declares it is implemented (runs
 * without a device: the descriptor is read, init is not called). */
static int check_vtable(void)
{
    const char *path = plugin_path("FG_TEST_CUDA_PLUGIN", FG_CUDA_PLUGIN_PATH);
    const fg_backend_vtable *vt = load(path, "cuda")->vtable;
    if (vt->struct_size != sizeof *vt) {
        fprintf(stderr, "FAIL: vtable struct_size %u, backend.h's is %zu\n",
                (unsigned)vt->struct_size, sizeof *vt);
        return 1;
    }
    size_t first = offsetof(fg_backend_vtable, device_count), missing = 0;
    for (size_t off = first; off + sizeof(void (*)(void)) <= sizeof *vt; off += sizeof(void (*)(void))) {
        void (*fn)(void);
        memcpy(&fn, (const char *)vt + off, sizeof fn);
        if (!fn) {
            fprintf(stderr, "FAIL: vtable entry %zu (byte offset %zu) is NULL\n",
                    (off - first) / sizeof fn, off);
            missing++;
        }
    }
    printf("vtable: %zu entries, %zu missing\n", (sizeof *vt - first) / sizeof(void (*)(void)),
           missing);
    return missing ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--vtable") == 0)
        return check_vtable();
    open_backends();
    int ran = 0;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        if (argc > 1 && strcmp(argv[1], groups[i].name) != 0)
            continue;
        int before = failures, checks_before = checks;
        rng_seed(0x5EED0000ull + i);
        groups[i].run();
        release_all();
        printf("%-10s %4d checks, %d failed\n", groups[i].name, checks - checks_before,
               failures - before);
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "unknown group '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    P.cuda->queue_destroy(P.gs, P.gq);
    P.cpu->queue_destroy(P.cs, P.cq);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
