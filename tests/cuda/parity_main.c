/* The parity harness: loads the CPU backend (the reference) and a backend under test, runs
 * every op on both from the same inputs, compares (ggml's test-backend-ops, for fulgur).
 *
 *   test_parity [--backend NAME] [--plugin PATH] [--set KEY=VALUE]... GROUP | all | --vtable
 *
 * NAME defaults to $FG_PARITY_BACKEND, else cuda. The plugins are fulgur-backend-NAME.so and
 * fulgur-backend-cpu.so in $FG_TEST_PLUGIN_DIR, else the build's plugin folder; --plugin
 * (or $FG_TEST_PLUGIN) names the tested one's file, $FG_TEST_CPU_PLUGIN the reference's.
 * Against the CPU backend itself every output must be bitwise equal; against another,
 * within each check's tolerance. A partial backend (one whose capability query leaves out
 * some op or dtype) has the groups whose entries it lacks and the cases it answers
 * FG_UNAVAILABLE skipped, and counted. Exits 77 (ctest SKIP) when the tested backend is
 * unavailable here (the CUDA backend without a driver or device) or runs none of the
 * groups asked for, 2 on a usage error. --set gives both backends a string option of their
 * [backend] section (e.g. attention=cudnn for the CUDA backend); a backend reads only the
 * keys it declares. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"

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
    P.skip_outputs = 0;
    if (sc == FG_OK && sg == FG_UNAVAILABLE && P.partial) {
        P.skipped++; /* an op or dtype the backend declares it does not run */
        P.skip_outputs = 1;
        return 0;
    }
    checks++;
    if (sc == FG_OK && sg == FG_OK)
        return 1;
    fail("%s: cpu %s (%s), %s %s (%s)", what, fg_status_name(sc), sc ? ec->message : "", P.dut_name,
         fg_status_name(sg), sg ? eg->message : "");
    return 0;
}

static void die(const char *what, fg_status st, const fg_error *e)
{
    fprintf(stderr, "%s: %s: %s\n", what, fg_status_name(st), e->message);
    exit(1);
}

static void sync_dut(void)
{
    fg_error e = {0};
    fg_status st = P.dut->queue_sync(P.ds, P.dq, &e);
    if (st != FG_OK)
        die("queue_sync of the backend under test", st, &e);
}

pair pnew(size_t bytes)
{
    pair p = { NULL, NULL, bytes };
    fg_error e = {0};
    fg_status st = P.ref->alloc(P.rs, 0, bytes ? bytes : 4, &p.c, &e);
    if (st != FG_OK)
        die("cpu alloc", st, &e);
    st = P.dut->alloc(P.ds, 0, bytes ? bytes : 4, &p.g, &e);
    if (st != FG_OK)
        die("alloc on the backend under test", st, &e);
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
    fg_status st = P.dut->copy(P.ds, P.dq, dst, 0, host, -1, bytes, &e);
    if (st != FG_OK)
        die("copy to the backend under test", st, &e);
    sync_dut();
}

void download(pair p, void *host)
{
    fg_error e = {0};
    fg_status st = P.dut->copy(P.ds, P.dq, host, -1, p.g, 0, p.bytes, &e);
    if (st != FG_OK)
        die("copy from the backend under test", st, &e);
    sync_dut();
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
    sync_dut();
    for (int i = 0; i < live_count; i++) {
        P.ref->free(P.rs, 0, live[i].c);
        P.dut->free(P.ds, 0, live[i].g);
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
        fg_status st = P.ref->alloc(P.rs, 0, n * 4 + 4, &tmp, &e);
        if (st == FG_OK) {
            memcpy(tmp, v, n * 4);
            st = P.ref->cast(P.rs, P.rq, dtype, FG_F32, p.c, tmp, n, &e);
            P.ref->free(P.rs, 0, tmp);
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
    if (P.skip_outputs)
        return 1;
    if (P.exact)
        return compare_exact(what, p, n * dtype_size(dtype));
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
        fail("%s: element %zu of %zu: %s %g, cpu %g (NaN/inf on one side only; unwritten?)", what,
             bad_at, n, P.dut_name, to_double(g, dtype, bad_at), to_double(p.c, dtype, bad_at));
        ok = 0;
    } else {
        double err = norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
        if (!(err <= tol)) {
            fail("%s: relative error %.3g > %.3g over %zu values (worst element %zu: %s "
                 "%.9g, cpu %.9g)",
                 what, err, tol, n, worst, P.dut_name, to_double(g, dtype, worst),
                 to_double(p.c, dtype, worst));
            ok = 0;
        }
    }
    free(g);
    return ok;
}

int compare_exact(const char *what, pair p, size_t bytes)
{
    if (P.skip_outputs)
        return 1;
    checks++;
    unsigned char *g = malloc(p.bytes ? p.bytes : 1);
    download(p, g);
    const unsigned char *c = p.c;
    int ok = 1;
    for (size_t i = 0; i < bytes; i++)
        if (g[i] != c[i]) {
            fail("%s: byte %zu of %zu differs: %s 0x%02x, cpu 0x%02x", what, i, bytes, P.dut_name,
                 g[i], c[i]);
            ok = 0;
            break;
        }
    free(g);
    return ok;
}

/* ---- plugins ------------------------------------------------------------------------- */

static void host_log(const fg_host *host, int level, const char *fmt, ...)
{
    (void)host;
    if (level > FG_LOG_WARN)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[plugin] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static fg_status host_get_int(const fg_host *host, const char *key, int64_t *out)
{
    (void)host;
    if (strcmp(key, "devices") == 0)
        *out = 1;
    else if (strcmp(key, "threads") == 0 || strcmp(key, "memory_limit_mb") == 0)
        *out = 0;
    else
        return FG_NOT_FOUND;
    return FG_OK;
}

/* --set KEY=VALUE options (string-valued; a boolean reads "true" or "false") */
#define MAX_SETS 8
static const char *set_keys[MAX_SETS], *set_values[MAX_SETS];
static char set_buf[MAX_SETS][128];
static int set_count;

static fg_status host_get_bool(const fg_host *host, const char *key, int *out)
{
    (void)host;
    for (int i = 0; i < set_count; i++)
        if (strcmp(key, set_keys[i]) == 0 && (strcmp(set_values[i], "true") == 0 ||
                                              strcmp(set_values[i], "false") == 0)) {
            *out = strcmp(set_values[i], "true") == 0;
            return FG_OK;
        }
    if (strcmp(key, "allow_tf32") != 0)
        return FG_NOT_FOUND;
    *out = 0; /* the 1e-5 comparisons need true fp32 */
    return FG_OK;
}

static int add_set(const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv || set_count == MAX_SETS || strlen(kv) >= sizeof set_buf[0])
        return 0;
    char *b = set_buf[set_count];
    snprintf(b, sizeof set_buf[0], "%s", kv);
    b[eq - kv] = '\0';
    set_keys[set_count] = b;
    set_values[set_count++] = b + (eq - kv) + 1;
    return 1;
}

/* The CPU backend's convolutions are pinned to im2col: a reference must not depend on
 * timing (auto times im2col against oneDNN per shape, and two instances may choose
 * differently); tests/backend-cpu conv_algo compares the two. */
static fg_status host_get_string(const fg_host *host, const char *key, const char **out)
{
    (void)host;
    for (int i = 0; i < set_count; i++)
        if (strcmp(key, set_keys[i]) == 0) {
            *out = set_values[i];
            return FG_OK;
        }
    if (strcmp(key, "conv_algorithm") != 0)
        return FG_NOT_FOUND;
    *out = "im2col";
    return FG_OK;
}

static const fg_host test_host = {
    .struct_size = sizeof(fg_host), .abi_major = FG_ABI_MAJOR, .abi_minor = FG_ABI_MINOR,
    .section = "backend", .log = host_log, .get_bool = host_get_bool,
    .get_int = host_get_int, .get_string = host_get_string,
};

static const fg_plugin *load(const char *path, const char *name)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    const fg_plugin *p = dlsym(lib, FG_PLUGIN_ENTRY_NAME);
    if (!p || p->magic != FG_PLUGIN_MAGIC || p->kind != FG_KIND_BACKEND ||
        strcmp(p->name, name) != 0 || !p->init || !p->vtable) {
        fprintf(stderr, "%s: bad or missing descriptor\n", path);
        exit(1);
    }
    return p;
}

/* A plugin's file: the environment's, else fulgur-backend-NAME.so in $FG_TEST_PLUGIN_DIR or
 * the build's plugin folder (a bundle moved to a GPU machine: tests/cuda/gpu_checks.sh). */
static const char *plugin_path(const char *given, const char *env, const char *name)
{
    static char buf[2][4096];
    static int next;
    const char *v = given ? given : getenv(env);
    if (v && *v)
        return v;
    const char *dir = getenv("FG_TEST_PLUGIN_DIR");
    char *out = buf[next++ % 2];
    snprintf(out, sizeof buf[0], "%s/fulgur-backend-%s.so",
             dir && *dir ? dir : FG_PARITY_PLUGIN_DIR, name);
    return out;
}

static const char *dut_path;

static void open_backends(void)
{
    const fg_plugin *tp = load(plugin_path(dut_path, "FG_TEST_PLUGIN", P.dut_name), P.dut_name);
    fg_error e = {0};
    fg_status st = tp->init(&test_host, &P.ds, &e);
    if (st == FG_UNAVAILABLE) {
        printf("SKIP: %s\n", e.message);
        exit(77);
    }
    if (st != FG_OK)
        die("init of the backend under test", st, &e);
    const fg_plugin *cp = load(plugin_path(NULL, "FG_TEST_CPU_PLUGIN", "cpu"), "cpu");
    st = cp->init(&test_host, &P.rs, &e);
    if (st != FG_OK)
        die("cpu init", st, &e);
    P.ref = cp->vtable;
    P.dut = tp->vtable;
    P.dut_minor = tp->abi_minor;
    if ((st = P.ref->queue_create(P.rs, 0, &P.rq, &e)) != FG_OK)
        die("cpu queue_create", st, &e);
    if ((st = P.dut->queue_create(P.ds, 0, &P.dq, &e)) != FG_OK)
        die("queue_create on the backend under test", st, &e);
}

/* The groups, each with the ops it calls (FG_OP_COUNT ends a list). */
#define OPS(...) (const uint32_t[]){ __VA_ARGS__, FG_OP_COUNT }
static const struct {
    const char *name;
    void (*run)(void);
    const uint32_t *ops;
} groups[] = {
    { "device", test_device, OPS(FG_OP_COUNT) },
    { "checks", test_checks, OPS(FG_OP_COUNT) }, /* every op, skipping missing entries */
    { "flat", test_flat, OPS(FG_OP_FILL, FG_OP_SCALE, FG_OP_AXPY, FG_OP_CLAMP, FG_OP_SUM_SQUARES) },
    { "cast", test_cast, OPS(FG_OP_CAST) },
    { "gemm", test_gemm, OPS(FG_OP_GEMM) },
    { "gemm_bias", test_gemm_bias, OPS(FG_OP_GEMM_BIAS) },
    { "gemm_epilogue", test_gemm_epilogue,
      OPS(FG_OP_GEMM_EPILOGUE, FG_OP_GEMM, FG_OP_GEMM_BIAS, FG_OP_ACTIVATION_FORWARD,
          FG_OP_ACTIVATION_BACKWARD, FG_OP_BIAS_GRAD) },
    { "bias_act", test_bias_act,
      OPS(FG_OP_BIAS_ADD, FG_OP_BIAS_GRAD, FG_OP_ACTIVATION_FORWARD, FG_OP_ACTIVATION_BACKWARD) },
    { "conv", test_conv, OPS(FG_OP_CONV2D_FORWARD, FG_OP_CONV2D_BACKWARD) },
    { "pool", test_pool, OPS(FG_OP_POOL2D_FORWARD, FG_OP_POOL2D_BACKWARD) },
    { "nhwc", test_nhwc,
      OPS(FG_OP_CONV2D_FORWARD, FG_OP_CONV2D_BACKWARD, FG_OP_POOL2D_FORWARD,
          FG_OP_POOL2D_BACKWARD, FG_OP_BATCHNORM_FORWARD, FG_OP_BATCHNORM_BACKWARD,
          FG_OP_TRANSPOSE_BATCHED) },
    { "batchnorm", test_batchnorm, OPS(FG_OP_BATCHNORM_FORWARD, FG_OP_BATCHNORM_BACKWARD) },
    { "batchnorm_sync", test_batchnorm_sync,
      OPS(FG_OP_BATCHNORM_STATS, FG_OP_BATCHNORM_APPLY, FG_OP_BATCHNORM_BACKWARD_REDUCE,
          FG_OP_BATCHNORM_BACKWARD_APPLY) },
    { "dropout", test_dropout, OPS(FG_OP_DROPOUT_FORWARD, FG_OP_DROPOUT_BACKWARD) },
    { "dropout_dev", test_dropout_dev, OPS(FG_OP_DROPOUT_FORWARD_DEV, FG_OP_DROPOUT_FORWARD) },
    { "xent", test_xent, OPS(FG_OP_SOFTMAX_XENT_FORWARD, FG_OP_SOFTMAX_XENT_BACKWARD) },
    { "classifier", test_classifier,
      OPS(FG_OP_CLASSIFIER, FG_OP_SOFTMAX_XENT_FORWARD, FG_OP_SOFTMAX_XENT_BACKWARD) },
    { "ploss", test_pointwise_loss, OPS(FG_OP_POINTWISE_LOSS) },
    { "optim", test_optim, OPS(FG_OP_SGD_UPDATE, FG_OP_ADAMW_UPDATE) },
    { "smoothing", test_smoothing, OPS(FG_OP_CLASSIFIER_SMOOTHED, FG_OP_CLASSIFIER) },
    { "loss_scale", test_loss_scale,
      OPS(FG_OP_LOSS_SCALE_UPDATE, FG_OP_SOFTMAX_XENT_BACKWARD_SCALED,
          FG_OP_SOFTMAX_XENT_BACKWARD, FG_OP_SGD_FUSED, FG_OP_ADAMW_FUSED, FG_OP_SCALE,
          FG_OP_SUM_SQUARES) },
    { "optim_fused", test_optim_fused,
      OPS(FG_OP_GRAD_CLIP_COEF, FG_OP_SGD_FUSED, FG_OP_ADAMW_FUSED, FG_OP_SGD_UPDATE,
          FG_OP_ADAMW_UPDATE, FG_OP_SCALE, FG_OP_CAST, FG_OP_SUM_SQUARES) },
    { "layernorm", test_layernorm, OPS(FG_OP_LAYERNORM_FORWARD, FG_OP_LAYERNORM_BACKWARD) },
    { "embedding", test_embedding, OPS(FG_OP_EMBEDDING_FORWARD, FG_OP_EMBEDDING_BACKWARD) },
    { "attention", test_attention, OPS(FG_OP_ATTENTION_FORWARD, FG_OP_ATTENTION_BACKWARD) },
    { "attention_fused", test_attention_fused,
      OPS(FG_OP_ATTENTION_FORWARD, FG_OP_ATTENTION_BACKWARD) },
    { "attention_gemm", test_attention_gemm,
      OPS(FG_OP_ATTENTION_FORWARD, FG_OP_ATTENTION_BACKWARD) },
    { "vec", test_vec,
      OPS(FG_OP_FILL, FG_OP_SCALE, FG_OP_AXPY, FG_OP_CLAMP, FG_OP_CAST, FG_OP_ACTIVATION_FORWARD,
          FG_OP_ACTIVATION_BACKWARD, FG_OP_BIAS_ADD, FG_OP_DROPOUT_FORWARD,
          FG_OP_DROPOUT_BACKWARD, FG_OP_LAYERNORM_FORWARD, FG_OP_LAYERNORM_BACKWARD,
          FG_OP_EMBEDDING_FORWARD, FG_OP_EMBEDDING_BACKWARD, FG_OP_CLASSIFIER,
          FG_OP_SOFTMAX_XENT_FORWARD) },
    { "ln_residual", test_ln_residual,
      OPS(FG_OP_LAYERNORM_RESIDUAL_FORWARD, FG_OP_LAYERNORM_RESIDUAL_BACKWARD, FG_OP_AXPY,
          FG_OP_LAYERNORM_FORWARD, FG_OP_LAYERNORM_BACKWARD) },
    { "rope", test_rope, OPS(FG_OP_ROPE_FORWARD, FG_OP_ROPE_BACKWARD) },
    { "swiglu", test_swiglu, OPS(FG_OP_SWIGLU_FORWARD, FG_OP_SWIGLU_BACKWARD) },
    { "gqa", test_gqa, OPS(FG_OP_ATTENTION_FORWARD, FG_OP_ATTENTION_BACKWARD) },
    { "fp8", test_fp8, OPS(FG_OP_GEMM_FP8) }, /* the CUDA backend's; skipped without it */
    /* the CUDA backend's paths without grouped-query attention (--set attention=cudnn,
     * attention=gemm): the tested backend alone must refuse, naming it */
    { "gqa_refused_cudnn", test_gqa_refused_cudnn, OPS(FG_OP_ATTENTION_FORWARD) },
    { "gqa_refused_gemm", test_gqa_refused_gemm, OPS(FG_OP_ATTENTION_FORWARD) },
};

/* A group "all" leaves out: it expects the refusal an option (--set) asks for. */
static int by_name_only(void (*run)(void))
{
    return run == test_gqa_refused_cudnn || run == test_gqa_refused_gemm;
}

/* The first entry of ops the backend under test leaves NULL, or NULL when it has them all
 * (conv needs conv2d_workspace too). */
static const char *missing_entry(const uint32_t *ops)
{
    for (; *ops != FG_OP_COUNT; ops++) {
        const fg_backend_op_desc *d = fg_backend_op_info(*ops);
        void (*fn)(void) = NULL;
        if (d->offset + sizeof fn <= P.dut->struct_size)
            memcpy(&fn, (const char *)P.dut + d->offset, sizeof fn);
        if (!fn)
            return d->name;
        if ((*ops == FG_OP_CONV2D_FORWARD || *ops == FG_OP_CONV2D_BACKWARD) &&
            !P.dut->conv2d_workspace)
            return "conv2d_workspace";
        if ((*ops == FG_OP_ATTENTION_FORWARD || *ops == FG_OP_ATTENTION_BACKWARD) &&
            !P.dut->attention_workspace)
            return "attention_workspace";
    }
    return NULL;
}

/* Whether the backend under test declares every op in every mix of f32, f16 and bf16, as
 * the CPU backend does; otherwise it is partial: a case it answers FG_UNAVAILABLE is
 * skipped, and a group whose entries it lacks too. */
static int declares_everything(void)
{
    static const uint32_t floats[] = { FG_F32, FG_F16, FG_BF16 };
    if (!P.dut->supports)
        return 0;
    for (uint32_t op = 0; op < FG_OP_COUNT; op++)
        for (int mix = 0; mix < 27 && op != FG_OP_GEMM_FP8 && op != FG_OP_TRANSPOSE_BATCHED;
             mix++) { /* fp8: parity_fp8.c; the transpose: parity_nhwc.c */
            uint32_t dt[3] = { floats[mix % 3], floats[mix / 3 % 3], floats[mix / 9] };
            if (!fg_backend_can(P.dut, P.ds, op, dt))
                return 0;
        }
    return 1;
}

/* Every entry of the vtable as this build's backend.h declares it is implemented (runs
 * without a device: the descriptor is read, init is not called). */
static int check_vtable(void)
{
    const char *path = plugin_path(dut_path, "FG_TEST_PLUGIN", P.dut_name);
    const fg_backend_vtable *vt = load(path, P.dut_name)->vtable;
    if (vt->struct_size != sizeof *vt) {
        fprintf(stderr, "FAIL: vtable struct_size %u, backend.h's is %zu\n",
                (unsigned)vt->struct_size, sizeof *vt);
        return 1;
    }
    size_t first = offsetof(fg_backend_vtable, device_count), missing = 0;
    for (size_t off = first; off + sizeof(void (*)(void)) <= sizeof *vt; off += sizeof(void (*)(void))) {
        void (*fn)(void);
        memcpy(&fn, (const char *)vt + off, sizeof fn);
        /* optional entries: a synchronous copy path needs no queue of its own; the
         * regression losses (pointwise_loss) and the transformer ops (from layernorm_forward
         * on) may be left out, and the setup check names the op when a run needs it */
        if (!fn && (off == offsetof(fg_backend_vtable, copy_queue_create) ||
                    off == offsetof(fg_backend_vtable, pointwise_loss) ||
                    off >= offsetof(fg_backend_vtable, layernorm_forward)))
            continue;
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

static int usage(void)
{
    fprintf(stderr, "usage: test_parity [--backend NAME] [--plugin PATH] [--set KEY=VALUE]... "
                    "GROUP|all|--vtable\n"
                    "groups:");
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        fprintf(stderr, " %s", groups[i].name);
    fprintf(stderr, "\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *env = getenv("FG_PARITY_BACKEND"), *what = NULL;
    P.dut_name = env && *env ? env : "cuda";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
            P.dut_name = argv[++i];
        else if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc)
            dut_path = argv[++i];
        else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc) {
            if (!add_set(argv[++i]))
                return usage();
        }
        else if (!what && argv[i][0] != '-')
            what = argv[i];
        else if (!what && strcmp(argv[i], "--vtable") == 0)
            what = argv[i];
        else
            return usage();
    }
    if (!what)
        return usage();
    P.exact = strcmp(P.dut_name, "cpu") == 0; /* the reference against itself */
    if (strcmp(what, "--vtable") == 0)
        return check_vtable();
    int all = strcmp(what, "all") == 0, known = all;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        known = known || strcmp(what, groups[i].name) == 0;
    if (!known)
        return usage();
    open_backends();
    P.partial = !declares_everything();
    printf("backend.%s against backend.cpu%s\n", P.dut_name,
           P.exact ? " (bitwise)" : P.partial ? " (partial: unsupported cases skipped)" : "");
    int ran = 0;
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        if (all ? by_name_only(groups[i].run) : strcmp(what, groups[i].name) != 0)
            continue;
        const char *missing = missing_entry(groups[i].ops);
        if (missing) {
            printf("%-10s skipped: backend.%s has no %s\n", groups[i].name, P.dut_name, missing);
            continue;
        }
        ran++;
        int before = failures, checks_before = checks;
        rng_seed(0x5EED0000ull + i);
        groups[i].run();
        release_all();
        printf("%-10s %4d checks, %d failed\n", groups[i].name, checks - checks_before,
               failures - before);
    }
    P.dut->queue_destroy(P.ds, P.dq);
    P.ref->queue_destroy(P.rs, P.rq);
    printf("%d checks, %d failed, %d cases skipped (unsupported)\n", checks, failures,
           P.skipped);
    if (!ran)
        return 77; /* nothing this backend runs */
    return failures ? 1 : 0;
}
