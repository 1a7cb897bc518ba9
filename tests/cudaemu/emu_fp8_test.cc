/* fp8 on the emulated device (gemm_fp8, ABI 1.9):
 *   - the rounding the quantize kernel uses (cuda_fp8.h's __nv_cvt_float_to_fp8 with
 *     __NV_SATFINITE, as kernels/cuda/fp8_quantize.cu calls it) against a reference written
 *     from the formats' definitions: nearest even on each format's grid, subnormals, the
 *     largest finite values 448 (E4M3) and 57344 (E5M2) with saturation above them, NaN
 *     kept; every edge by name, then a sweep of f32 values;
 *   - the emulated cuBLASLt's fp8 decoding (emu_types.h) against cuda_fp8.h's, all 256
 *     bytes of both formats;
 *   - a TN fp8 matmul with A and B scales worked by hand, and the refusals of cuBLASLt's
 *     fp8 rules (layout, E5M2 x E5M2, 16-byte dimensions, scale pointers without fp8
 *     operands or outside device memory, C in fp8). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_fp8.h>

#include "emu_types.h"

static int failures;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stdout, "FAIL %s:%d: ", __FILE__, __LINE__);                           \
            fprintf(stdout, __VA_ARGS__);                                                  \
            fprintf(stdout, "\n");                                                         \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

struct format {
    const char *name;
    cudaDataType_t type;
    __nv_fp8_interpretation_t interp;
    int mbits, bias;
    double max;
};

static const format e4m3 = { "e4m3", CUDA_R_8F_E4M3, __NV_E4M3, 3, 7, 448.0 };
static const format e5m2 = { "e5m2", CUDA_R_8F_E5M2, __NV_E5M2, 2, 15, 57344.0 };

/* x rounded to the format from its definition: nearest on the grid of x's binade (the
 * subnormal binade below 2^(1-bias)), ties to the even step, saturated to +-max (the
 * SATFINITE conversion, infinities included), NaN kept. */
static double ref_round(float x, const format &f)
{
    if (isnan(x))
        return NAN;
    double a = fabs((double)x);
    if (isinf(x) || a > f.max)
        return copysign(f.max, x);
    if (a == 0.0)
        return x;
    int e;
    frexp(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
    if (e < 1 - f.bias)
        e = 1 - f.bias;
    double q = ldexp(1.0, e - f.mbits), steps = nearbyint(a / q); /* a / q exact; ties even */
    double v = steps * q;
    return copysign(v > f.max ? f.max : v, x);
}

static double device_round(float x, const format &f)
{
    __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, f.interp);
    return (double)fgemu::fp8_value(b, f.type);
}

static void expect_round(float x, double want, const format &f)
{
    double got = device_round(x, f), ref = ref_round(x, f);
    CHECK((isnan(want) && isnan(got) && isnan(ref)) ||
              (got == want && ref == want && signbit(got) == signbit(want)),
          "%s(%a): device %a, reference %a, want %a", f.name, (double)x, got, ref, want);
}

static void test_rounding_edges(void)
{
    /* E4M3: max finite 448 = 1.75 * 2^8, step 32 there; 464 is the tie to the missing 480 */
    expect_round(448.0f, 448.0, e4m3);
    expect_round(460.0f, 448.0, e4m3);
    expect_round(464.0f, 448.0, e4m3); /* saturates (480 would be NaN's code) */
    expect_round(1e6f, 448.0, e4m3);
    expect_round(-1e6f, -448.0, e4m3);
    expect_round(INFINITY, 448.0, e4m3);
    expect_round(-INFINITY, -448.0, e4m3);
    expect_round(NAN, NAN, e4m3);
    /* ties to even: 1 + 1/16 lies between 1 (mantissa 000) and 1.125 (001): 1 */
    expect_round(1.0625f, 1.0, e4m3);
    expect_round(1.1875f, 1.25, e4m3); /* between 1.125 (001) and 1.25 (010): even 1.25 */
    expect_round(1.0625f + 1e-7f, 1.125, e4m3);
    /* subnormals: step 2^-9; the smallest 2^-9, half of it ties to 0, 1.5 of it to 2^-8 */
    expect_round(ldexpf(1, -9), ldexp(1, -9), e4m3);
    expect_round(ldexpf(1, -10), 0.0, e4m3);
    expect_round(-ldexpf(1, -10), -0.0, e4m3);
    expect_round(ldexpf(3, -10), ldexp(1, -8), e4m3);
    expect_round(ldexpf(5, -10), ldexp(1, -8), e4m3); /* 2.5 steps: even 2 */
    expect_round(ldexpf(7, -10), ldexp(1, -7), e4m3); /* 3.5 steps: even 4 */
    expect_round(ldexpf(1, -6) - ldexpf(1, -10), ldexp(1, -6), e4m3); /* 7.5 steps: 8 */
    expect_round(ldexpf(1, -11), 0.0, e4m3);
    expect_round(-0.0f, -0.0, e4m3);
    /* E5M2: max finite 57344 = 1.75 * 2^15, step 8192; 61440 ties to the infinity */
    expect_round(57344.0f, 57344.0, e5m2);
    expect_round(61439.0f, 57344.0, e5m2);
    expect_round(61440.0f, 57344.0, e5m2);
    expect_round(INFINITY, 57344.0, e5m2);
    expect_round(-INFINITY, -57344.0, e5m2);
    expect_round(NAN, NAN, e5m2);
    expect_round(1.125f, 1.0, e5m2); /* between 1 (00) and 1.25 (01): even 1 */
    expect_round(1.375f, 1.5, e5m2); /* between 1.25 (01) and 1.5 (10): even 1.5 */
    expect_round(ldexpf(1, -16), ldexp(1, -16), e5m2);
    expect_round(ldexpf(1, -17), 0.0, e5m2);
    expect_round(ldexpf(3, -17), ldexp(1, -15), e5m2);
    expect_round(ldexpf(1, -14), ldexp(1, -14), e5m2); /* the smallest normal */
}

/* Every 4099th f32 bit pattern (about a million values of every sign, binade and NaN). */
static void test_rounding_sweep(void)
{
    const format *fs[2] = { &e4m3, &e5m2 };
    for (int k = 0; k < 2; k++) {
        const format &f = *fs[k];
        long bad = 0;
        for (uint64_t u = 0; u <= 0xffffffffull; u += 4099) {
            uint32_t bits = (uint32_t)u;
            float x;
            memcpy(&x, &bits, 4);
            double got = device_round(x, f), ref = ref_round(x, f);
            int same = (isnan(got) && isnan(ref)) || (got == ref && signbit(got) == signbit(ref));
            if (!same && bad++ < 5)
                CHECK(same, "%s(%a): device %a, reference %a", f.name, (double)x, got, ref);
        }
        CHECK(bad == 0, "%s: %ld values of the sweep differ", f.name, bad);
    }
}

static void test_decoding(void)
{
    const format *fs[2] = { &e4m3, &e5m2 };
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < 256; b++) {
            __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, fs[k]->interp);
            __half hv(h);
            float want = __half2float(hv), got = fgemu::fp8_value((unsigned char)b, fs[k]->type);
            CHECK((isnan(want) && isnan(got)) || (want == got && signbit(want) == signbit(got)),
                  "%s byte 0x%02x: emulator %a, cuda_fp8.h %a", fs[k]->name, b, (double)got,
                  (double)want);
        }
    CHECK(fgemu::fp8_value(0x7e, CUDA_R_8F_E4M3) == 448.0f, "E4M3 0x7e is 448");
    CHECK(isnan(fgemu::fp8_value(0x7f, CUDA_R_8F_E4M3)), "E4M3 0x7f is NaN");
    CHECK(fgemu::fp8_value(0x7b, CUDA_R_8F_E5M2) == 57344.0f, "E5M2 0x7b is 57344");
    CHECK(isinf(fgemu::fp8_value(0x7c, CUDA_R_8F_E5M2)), "E5M2 0x7c is infinity");
}

/* A (k x m) stored column-major, transposed: op(A) = A^T (m x k); B (k x n) as is. */
struct lt_case {
    cudaDataType_t a_type, b_type, d_type;
    cublasOperation_t ta, tb;
    int k;
    int scale_ptrs; /* 0: none, 1: device, 2: host memory */
    cudaDataType_t scale; /* the descriptor's scale type */
    cublasComputeType_t compute;
};

static cublasStatus_t lt_fp8(const lt_case &c, float *d_host)
{
    const int m = 16, n = 16, k = c.k, ld = 32;
    unsigned char a[32 * 16], b[32 * 16];
    /* A^T(i, p) = (i + p) % 4 - 1 and B(p, j) = (p == j) + (p == j + 1): E4M3/E5M2 codes of
     * -1, 0, 1, 2 (E4M3 1.0 = 0x38, E5M2 1.0 = 0x3c) */
    auto code = [](cudaDataType_t t, int v) -> unsigned char {
        unsigned char one = t == CUDA_R_8F_E4M3 ? 0x38 : 0x3c, two = one + (t == CUDA_R_8F_E4M3 ? 8 : 4);
        return v == 0 ? 0 : v == 1 ? one : v == 2 ? two : (unsigned char)(one | 0x80);
    };
    for (int i = 0; i < m; i++)
        for (int p = 0; p < ld; p++)
            a[i * ld + p] = code(c.a_type, (i + p) % 4 - 1);
    for (int j = 0; j < n; j++)
        for (int p = 0; p < ld; p++)
            b[j * ld + p] = code(c.b_type, (p == j) + (p == j + 1));
    void *da, *db, *dd, *ds;
    cudaMalloc(&da, sizeof a);
    cudaMalloc(&db, sizeof b);
    cudaMalloc(&dd, m * n * 4);
    cudaMalloc(&ds, 8);
    float scales[2] = { 0.5f, 4.0f }, host_scales[2] = { 0.5f, 4.0f };
    cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice);
    cudaMemcpy(ds, scales, 8, cudaMemcpyHostToDevice);
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    cublasLtCreate(&h);
    cublasLtMatmulDescCreate(&op, c.compute, c.scale);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &c.ta, sizeof c.ta);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &c.tb, sizeof c.tb);
    const float *sa = c.scale_ptrs == 2 ? host_scales : (const float *)ds, *sb = sa + 1;
    if (c.scale_ptrs) {
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
    }
    int fp8 = fgemu::is_fp8(c.a_type);
    cublasLtMatrixLayoutCreate(&la, c.a_type, c.ta == CUBLAS_OP_T ? k : m,
                               c.ta == CUBLAS_OP_T ? m : k, fp8 ? ld : 16);
    cublasLtMatrixLayoutCreate(&lb, c.b_type, c.tb == CUBLAS_OP_N ? k : n,
                               c.tb == CUBLAS_OP_N ? n : k, fp8 ? ld : 16);
    cublasLtMatrixLayoutCreate(&lc, c.d_type, m, n, m);
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &r, &found);
    float one = 1, zero = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(h, op, &one, da, la, db, lb, &zero, dd, lc, dd, lc, &r.algo, NULL, 0,
                            0);
    if (d_host)
        cudaMemcpy(d_host, dd, m * n * 4, cudaMemcpyDeviceToHost);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dd);
    cudaFree(ds);
    return st;
}

static void test_matmul(void)
{
    float d[256];
    lt_case ok = { CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_32F, CUBLAS_OP_T, CUBLAS_OP_N, 16, 1,
                   CUDA_R_32F, CUBLAS_COMPUTE_32F };
    CHECK(lt_fp8(ok, d) == CUBLAS_STATUS_SUCCESS, "a TN E4M3 x E5M2 matmul is refused");
    int wrong = 0;
    for (int i = 0; i < 16 && !wrong; i++)
        for (int j = 0; j < 16; j++) {
            /* sum_p A^T(i,p) B(p,j) = a(i,j) + a(i,j+1) (when j + 1 < 16), times 0.5 * 4 */
            double want = ((i + j) % 4 - 1) + (j + 1 < 16 ? (i + j + 1) % 4 - 1 : 0);
            want *= 2.0;
            if (d[j * 16 + i] != (float)want && !wrong++)
                CHECK(0, "D(%d, %d) = %g, want %g", i, j, d[j * 16 + i], want);
        }
    lt_case c = ok;
    c.ta = CUBLAS_OP_N;
    c.tb = CUBLAS_OP_N;
    CHECK(lt_fp8(c, NULL) == CUBLAS_STATUS_NOT_SUPPORTED, "an NN fp8 matmul is accepted");
    c = ok;
    c.a_type = CUDA_R_8F_E5M2;
    CHECK(lt_fp8(c, NULL) == CUBLAS_STATUS_NOT_SUPPORTED, "E5M2 x E5M2 is accepted");
    c = ok;
    c.k = 8;
    CHECK(lt_fp8(c, NULL) == CUBLAS_STATUS_NOT_SUPPORTED, "k = 8 is accepted in fp8");
    c = ok;
    c.d_type = CUDA_R_16F;
    CHECK(lt_fp8(c, NULL) == CUBLAS_STATUS_SUCCESS, "C = D in f16 is refused");
    c.d_type = CUDA_R_8F_E4M3;
    CHECK(lt_fp8(c, NULL) == CUBLAS_STATUS_NOT_SUPPORTED, "C = D in fp8 is accepted");
    c = ok;
    c.scale_ptrs = 2;
    CHECK(lt_fp8(c, NULL) == CUBLAS_STATUS_EXECUTION_FAILED, "host scale pointers are accepted");
    c = ok;
    c.scale = CUDA_R_16F;
    CHECK(lt_fp8(c, NULL) == CUBLAS_STATUS_NOT_SUPPORTED, "an f16 scale type is accepted in fp8");
    c = ok;
    c.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    CHECK(lt_fp8(c, NULL) == CUBLAS_STATUS_NOT_SUPPORTED, "FAST_TF32 compute is accepted in fp8");
    lt_case bf = { CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_OP_T, CUBLAS_OP_N, 16, 1,
                   CUDA_R_32F, CUBLAS_COMPUTE_32F };
    CHECK(lt_fp8(bf, NULL) == CUBLAS_STATUS_INVALID_VALUE,
          "A/B scale pointers on a bf16 matmul are accepted");
    bf.scale_ptrs = 0;
    CHECK(lt_fp8(bf, NULL) == CUBLAS_STATUS_SUCCESS, "a bf16 matmul without scales is refused");
}

int main(void)
{
    test_rounding_edges();
    test_rounding_sweep();
    test_decoding();
    test_matmul();
    if (failures)
        printf("%d failure(s)\n", failures);
    else
        printf("cudaemu fp8: all checks passed\n");
    return failures ? 1 : 0;
}
