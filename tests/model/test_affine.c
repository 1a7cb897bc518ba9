/* The linear layer's affine map (core/src/model/affine.c) on the CPU backend (argv[1]): it
 * calls gemm_bias when the backend has it for the dtypes, and gemm then bias_add when the
 * entry is NULL or past the vtable's struct_size (a backend built against ABI 1.1); in f32
 * the three give the same bits, in bf16 the fused one rounds once. */
#include <stdlib.h>
#include <string.h>

#include "testkit.h"

static const fg_backend_vtable *real;
static int gemm_calls, bias_add_calls, gemm_bias_calls;

static fg_status count_gemm(void *s, void *q, uint32_t at, uint32_t bt, uint32_t ct, int ta,
                            int tb, int m, int n, int k, float alpha, const void *a, int lda,
                            const void *b, int ldb, float beta, void *c, int ldc, fg_error *err)
{
    gemm_calls++;
    return real->gemm(s, q, at, bt, ct, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                      err);
}

static fg_status count_bias_add(void *s, void *q, uint32_t yt, uint32_t bt, void *y,
                                const void *bias, int rows, int cols, int spatial,
                                fg_error *err)
{
    bias_add_calls++;
    return real->bias_add(s, q, yt, bt, y, bias, rows, cols, spatial, err);
}

static fg_status count_gemm_bias(void *s, void *q, uint32_t at, uint32_t bt, uint32_t ct,
                                 int ta, int tb, int m, int n, int k, const void *a, int lda,
                                 const void *b, int ldb, const void *bias, void *c, int ldc,
                                 fg_error *err)
{
    gemm_bias_calls++;
    return real->gemm_bias(s, q, at, bt, ct, ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc,
                           err);
}

enum { ROWS = 37, IN = 300, OUT = 45 };

/* y = x W^T + b through fg_affine_forward on vt, in dtype (f32 or bf16 for every role). */
static void affine(tk_backend *b, const fg_backend_vtable *vt, uint32_t dtype, const void *x,
                   const void *w, const void *bias, void *y)
{
    fg_layer_ctx c = {.be = vt, .bs = b->bs, .queue = b->queue, .batch = ROWS};
    c.dt.act = c.dt.param = c.dt.grad = dtype;
    fg_error err = {0};
    fg_status st = fg_affine_forward(&c, ROWS, OUT, IN, x, w, bias, y, OUT, &err);
    CHECK(st == FG_OK, "fg_affine_forward: %s", err.message);
}

static void counts(const char *what, int g, int ba, int gb)
{
    CHECK(gemm_calls == g && bias_add_calls == ba && gemm_bias_calls == gb,
          "%s: gemm %d, bias_add %d, gemm_bias %d calls; expected %d, %d, %d", what, gemm_calls,
          bias_add_calls, gemm_bias_calls, g, ba, gb);
    gemm_calls = bias_add_calls = gemm_bias_calls = 0;
}

static void test_paths(tk_backend *b)
{
    real = b->be;
    fg_backend_vtable fused = *real, absent = *real, old = *real;
    fused.gemm = absent.gemm = old.gemm = count_gemm;
    fused.bias_add = absent.bias_add = old.bias_add = count_bias_add;
    fused.gemm_bias = old.gemm_bias = count_gemm_bias;
    absent.gemm_bias = NULL;
    /* a 1.1 backend's table ends before gemm_bias: the entry there must not be read */
    old.struct_size = (uint32_t)offsetof(fg_backend_vtable, gemm_bias);

    size_t xn = (size_t)ROWS * IN, wn = (size_t)OUT * IN, yn = (size_t)ROWS * OUT;
    float *host = malloc((xn + wn + OUT) * sizeof(float));
    for (size_t i = 0; i < xn + wn + OUT; i++)
        host[i] = (float)((int)((i * 7919u) % 2001u) - 1000) * 1e-3f;
    float *x = tk_dev_alloc(b, xn), *w = tk_dev_alloc(b, wn), *bias = tk_dev_alloc(b, OUT);
    tk_upload(b, x, host, xn * 4);
    tk_upload(b, w, host + xn, wn * 4);
    tk_upload(b, bias, host + xn + wn, OUT * 4);
    float *y[3], *out[3];
    for (int i = 0; i < 3; i++) {
        y[i] = tk_dev_alloc(b, yn);
        out[i] = malloc(yn * 4);
    }

    /* f32: one path each, the same bits */
    affine(b, &fused, FG_F32, x, w, bias, y[0]);
    counts("f32, gemm_bias present", 0, 0, 1);
    affine(b, &absent, FG_F32, x, w, bias, y[1]);
    counts("f32, gemm_bias NULL", 1, 1, 0);
    affine(b, &old, FG_F32, x, w, bias, y[2]);
    counts("f32, a 1.1 vtable", 1, 1, 0);
    for (int i = 0; i < 3; i++)
        tk_download(b, out[i], y[i], yn * 4);
    CHECK(memcmp(out[0], out[1], yn * 4) == 0 && memcmp(out[0], out[2], yn * 4) == 0,
          "f32: gemm_bias and gemm + bias_add differ");
    /* no bias: gemm alone */
    affine(b, &fused, FG_F32, x, w, NULL, y[0]);
    counts("f32 without bias", 1, 0, 0);

    /* bf16: the fused path rounds once, the fallback twice; each matches its own ops */
    uint16_t *xh = (uint16_t *)tk_dev_alloc(b, xn), *wh = (uint16_t *)tk_dev_alloc(b, wn);
    uint16_t *bh = (uint16_t *)tk_dev_alloc(b, OUT), *yh[2], *ref = malloc(yn * 2);
    uint16_t *got = malloc(yn * 2);
    fg_error err = {0};
    CHECK(real->cast(b->bs, b->queue, FG_BF16, FG_F32, xh, x, xn, &err) == FG_OK, "cast");
    CHECK(real->cast(b->bs, b->queue, FG_BF16, FG_F32, wh, w, wn, &err) == FG_OK, "cast");
    CHECK(real->cast(b->bs, b->queue, FG_BF16, FG_F32, bh, bias, OUT, &err) == FG_OK, "cast");
    for (int i = 0; i < 2; i++)
        yh[i] = (uint16_t *)tk_dev_alloc(b, yn);
    affine(b, &fused, FG_BF16, xh, wh, bh, yh[0]);
    counts("bf16, gemm_bias present", 0, 0, 1);
    affine(b, &absent, FG_BF16, xh, wh, bh, yh[1]);
    counts("bf16, gemm_bias NULL", 1, 1, 0);
    CHECK(real->gemm_bias(b->bs, b->queue, FG_BF16, FG_BF16, FG_BF16, 0, 1, ROWS, OUT, IN, xh,
                          IN, wh, IN, bh, (void *)ref, OUT, &err) == FG_OK, "gemm_bias");
    tk_download(b, got, yh[0], yn * 2);
    CHECK(memcmp(got, ref, yn * 2) == 0, "bf16 fused path is not gemm_bias");
    CHECK(real->gemm(b->bs, b->queue, FG_BF16, FG_BF16, FG_BF16, 0, 1, ROWS, OUT, IN, 1.0f, xh,
                     IN, wh, IN, 0.0f, (void *)ref, OUT, &err) == FG_OK, "gemm");
    CHECK(real->bias_add(b->bs, b->queue, FG_BF16, FG_BF16, (void *)ref, bh, ROWS, OUT, 1,
                         &err) == FG_OK, "bias_add");
    uint16_t *fallback = malloc(yn * 2);
    tk_download(b, fallback, yh[1], yn * 2);
    CHECK(memcmp(fallback, ref, yn * 2) == 0, "bf16 fallback is not gemm then bias_add");
    size_t differ = 0;
    for (size_t i = 0; i < yn; i++)
        differ += got[i] != fallback[i];
    printf("  bf16: one rounding and two differ in %zu of %zu values\n", differ, yn);
    CHECK(differ > 0, "bf16: the fused and the fallback path agree everywhere");

    for (int i = 0; i < 3; i++) {
        tk_dev_free(b, y[i]);
        free(out[i]);
    }
    for (int i = 0; i < 2; i++)
        tk_dev_free(b, yh[i]);
    tk_dev_free(b, x), tk_dev_free(b, w), tk_dev_free(b, bias);
    tk_dev_free(b, xh), tk_dev_free(b, wh), tk_dev_free(b, bh);
    free(host), free(ref), free(got), free(fallback);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s BACKEND.so\n", argv[0]);
        return 2;
    }
    tk_backend b;
    if (tk_backend_open(&b, argv[1]) != 0)
        return 1;
    test_paths(&b);
    tk_backend_close(&b);
    return fg_test_report("model.affine");
}
