/* Small products of bf16 operands into f32 on AVX-512 BF16 (attention's tiles: 64 x 64 x 32
 * ran at 85 GFLOP/s in oneDNN's matmul on one Zen 4 core, its per-call packing and dispatch
 * as long as the arithmetic). vdpbf16ps reads 32-bit pairs of bf16 along k: a row of A
 * stored along k is that already (read in place; a transposed A or an odd k is packed into
 * such pairs on the stack), and B is packed on the stack by pairs of rows, padded to 16
 * columns with zeros. An 8 x 32 tile of C is 16 accumulators; per pair, two B vectors and
 * eight A words broadcast. vdpbf16ps adds each lane's two exact products in turn, rounding
 * to nearest even, with bf16 and f32 subnormals taken as zero (its definition). Then
 * C = alpha acc + beta C, beta 0 not reading C. Not built under AddressSanitizer (as
 * bf16_round.c's AVX-512 BF16 path): there the caller runs oneDNN or widens. */
#include <stdatomic.h>
#include <string.h>

#include "bf16_avx512.h"
#include "cpu_kernels.h"

enum { MR = 8, NR = 32, LANES = 16 };

#ifdef FG_CPU_HAVE_AVX512BF16
static uint32_t pair(uint16_t lo, uint16_t hi)
{
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* Stored rows 2p and 2p + 1 (of k; leading dimension ld) interleaved into out + p step:
 * word j = their values j, the second 0 past k. A transposed A's packing and B's. */
static void pair_rows(uint32_t *out, size_t step, const uint16_t *x, int ld, int count, int k,
                      int kp)
{
    for (int p = 0; p < kp; p++, out += step) {
        const uint16_t *lo = x + (size_t)(2 * p) * ld;
        if (2 * p + 1 < k)
            for (int j = 0; j < count; j++)
                out[j] = pair(lo[j], lo[j + ld]);
        else
            for (int j = 0; j < count; j++)
                out[j] = lo[j];
    }
}

/* Where the kernel reads A: pair p of row i is the 32 bits at base + i rs + p ps (in bf16
 * units). */
typedef struct a_view {
    const uint16_t *base;
    size_t rs, ps;
} a_view;

/* A stored along k with k even is read in place (rs lda, ps 2). A transposed A is packed
 * into ap by pairs of its stored rows, pair p of all m rows side by side (rs 2, ps 2m: the
 * interleave of two stored rows, as B's). An odd k packs each row's pairs with a zero after
 * its last value (rs 2 kp): the last pair's second product must be 0 x 0, never 0 times
 * what follows the row. */
static a_view pack_a(uint32_t *ap, const uint16_t *a, int lda, int trans, int m, int k, int kp)
{
    if (trans) {
        pair_rows(ap, (size_t)m, a, lda, m, k, kp);
        return (a_view){(const uint16_t *)ap, 2, 2 * (size_t)m};
    }
    if (k % 2 == 0)
        return (a_view){a, (size_t)lda, 2};
    for (int i = 0; i < m; i++) {
        const uint16_t *row = a + (size_t)i * lda;
        uint32_t *out = ap + (size_t)i * kp;
        for (int p = 0; p < kp; p++)
            out[p] = pair(row[2 * p], 2 * p + 1 < k ? row[2 * p + 1] : 0);
    }
    return (a_view){(const uint16_t *)ap, 2 * (size_t)kp, 2};
}

static __mmask16 cols_mask(int cols)
{
    return cols >= LANES ? (__mmask16)0xffff : (__mmask16)((1u << (cols > 0 ? cols : 0)) - 1u);
}

/* A transposed B: word p of stored row j into bp[p * nb + j], 16 rows at a time by
 * gathers (a row's 32-bit words need no alignment); an odd k's last pair from single
 * values. */
FG_CPU_BF16_TARGET static void
pack_b_trans(uint32_t *bp, const uint16_t *b, int ldb, int n, int k, int kp, int nb)
{
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i row_bytes = _mm512_mullo_epi32(lane, _mm512_set1_epi32(2 * ldb));
    for (int j0 = 0; j0 < n; j0 += LANES) {
        int cols = n - j0 < LANES ? n - j0 : LANES;
        __mmask16 m = cols_mask(cols);
        const uint16_t *rows = b + (size_t)j0 * ldb;
        for (int p = 0; p < k / 2; p++) {
            __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, row_bytes,
                                                    rows + 2 * p, 1);
            _mm512_mask_storeu_epi32(bp + (size_t)p * nb + j0, m, w);
        }
        for (int j = j0; j < j0 + cols && k % 2; j++)
            bp[(size_t)(kp - 1) * nb + j] = b[(size_t)j * ldb + k - 1];
    }
}

/* B by pairs of rows: bp[p * nb + j] = pair (2p, 2p + 1) of column j (zeros past k and
 * past n). Transposed, a stored row of B is column j's pairs. */
static void pack_b(uint32_t *bp, const uint16_t *b, int ldb, int trans, int n, int k, int kp,
                   int nb)
{
    for (int p = 0; p < kp; p++)
        for (int j = n; j < nb; j++)
            bp[(size_t)p * nb + j] = 0;
    if (trans) {
        pack_b_trans(bp, b, ldb, n, k, kp, nb);
        return;
    }
    pair_rows(bp, (size_t)nb, b, ldb, n, k, kp);
}

FG_CPU_BF16_TARGET static inline void
store_row(float *c, __m512 acc, float alpha, float beta, __mmask16 mask)
{
    __m512 v = _mm512_mul_ps(acc, _mm512_set1_ps(alpha));
    if (beta != 0.0f)
        v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, c), _mm512_set1_ps(beta)));
    _mm512_mask_storeu_ps(c, mask, v);
}

/* rows (<= MR; arow: MR row starts, the missing ones repeating a real row) x cols (<= LANES
 * vecs) of C from columns j0 */
FG_CPU_BF16_TARGET __attribute__((always_inline)) static inline void
tile_body(const uint16_t *const *arow, size_t ps, const uint32_t *bp, int kp, int nb, int j0,
          int rows, int cols, float alpha, float beta, float *c, int ldc, const int vecs)
{
    __m512 acc[MR][2];
    for (int r = 0; r < MR; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int p = 0; p < kp; p++) {
        const uint32_t *brow = bp + (size_t)p * nb + j0;
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(brow);
        __m512bh b1 = vecs == 2 ? (__m512bh)_mm512_loadu_si512(brow + LANES) : b0;
        for (int r = 0; r < MR; r++) {
            uint32_t w;
            memcpy(&w, arow[r] + (size_t)p * ps, sizeof w);
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)w);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
            if (vecs == 2)
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
        }
    }
    __mmask16 m0 = cols_mask(cols), m1 = cols_mask(cols - LANES);
    for (int r = 0; r < rows; r++) {
        float *crow = c + (size_t)r * ldc;
        store_row(crow, acc[r][0], alpha, beta, m0);
        if (vecs == 2)
            store_row(crow + LANES, acc[r][1], alpha, beta, m1);
    }
}

FG_CPU_BF16_TARGET static void
tile(const uint16_t *const *arow, size_t ps, const uint32_t *bp, int kp, int nb, int j0,
     int rows, int cols, float alpha, float beta, float *c, int ldc)
{
    if (cols > LANES)
        tile_body(arow, ps, bp, kp, nb, j0, rows, cols, alpha, beta, c, ldc, 2);
    else
        tile_body(arow, ps, bp, kp, nb, j0, rows, cols, alpha, beta, c, ldc, 1);
}

static int cpu_has_bf16(void)
{
    static _Atomic int known = -1; /* threads racing to fill it store the same value */
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k < 0) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx512bf16") != 0;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k;
}
#endif

int fg_cpu_gemm_bf16_tile(int trans_a, int trans_b, int m, int n, int k, float alpha,
                          const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta,
                          float *c, int ldc)
{
#ifdef FG_CPU_HAVE_AVX512BF16
    int kp = (k + 1) / 2, nb = (n + LANES - 1) / LANES * LANES;
    size_t a_words = (size_t)m * (size_t)kp, b_words = (size_t)kp * (size_t)nb;
    if (m <= 0 || n <= 0 || k <= 0 || a_words > FG_CPU_BF16_TILE_WORDS ||
        b_words > FG_CPU_BF16_TILE_WORDS || !cpu_has_bf16())
        return 0;
    uint32_t ap[FG_CPU_BF16_TILE_WORDS], bp[FG_CPU_BF16_TILE_WORDS];
    pack_b(bp, b, ldb, trans_b, n, k, kp, nb);
    a_view av = pack_a(ap, a, lda, trans_a, m, k, kp);
    for (int i0 = 0; i0 < m; i0 += MR) {
        int rows = m - i0 < MR ? m - i0 : MR;
        const uint16_t *arow[MR];
        for (int r = 0; r < MR; r++)
            arow[r] = av.base + (size_t)(i0 + (r < rows ? r : rows - 1)) * av.rs;
        for (int j0 = 0; j0 < n; j0 += NR) {
            int cols = n - j0 < NR ? n - j0 : NR;
            tile(arow, av.ps, bp, kp, nb, j0, rows, cols, alpha, beta,
                 c + (size_t)i0 * ldc + j0, ldc);
        }
    }
    return 1;
#else
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
    return 0;
#endif
}
