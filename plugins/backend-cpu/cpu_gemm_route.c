/* The kernels' own gemms (attention's score and output tiles, im2col's products) through
 * the per-shape choice of cpu_gemm_choice.c, as the ops' gemms: a kernel calls the hook with
 * its thread's slot, and each slot runs oneDNN on its own primitive cache. bf16 attention's
 * products of bf16 operands run natively where the CPU has avx512_bf16 (the tile kernel, or
 * oneDNN's bf16 matmul), whatever the f32 choice (as the bf16 ops' gemms do, cpu_bf16.c). */
#include <stdio.h>

#include "cpu_backend.h"
#ifdef FG_CPU_WITH_DNNL
#include "gemm_dnnl.h"
#include "half.h"
#endif

static void route_run(void *ctx, int slot, int trans_a, int trans_b, int m, int n, int k,
                      float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                      float *c, int ldc)
{
    fg_cpu_gemm_route *r = ctx;
    fg_cpu_gemm_call g = {r->op, r->dtype, trans_a, trans_b, m, n, k, alpha, beta, a, b, NULL,
                          c, lda, ldb, ldc};
    fg_error e = {0};
    if (fg_cpu_gemm_run_slot(r->be, r->q, slot, &g, &e) != FG_OK &&
        atomic_exchange(&r->failed, 1) == 0)
        r->err = e;
}

#ifdef FG_CPU_WITH_DNNL
/* bf16 operands where the CPU has avx512_bf16 (be->bf16_native): a tile's product packed on
 * the stack (kernels/cpu/gemm_bf16_tile.c), else oneDNN's bf16 matmul on the slot's own
 * cache; 0 (the kernel widens them) where the slot has none or oneDNN has no matmul for
 * the shape. */
static int route_run_bf16(void *ctx, int slot, int trans_a, int trans_b, int m, int n, int k,
                          float alpha, const uint16_t *a, int lda, const uint16_t *b, int ldb,
                          float beta, float *c, int ldc)
{
    fg_cpu_gemm_route *r = ctx;
    if (fg_cpu_gemm_bf16_tile(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
        return 1;
    fg_cpu_dnnl_gemm *d = slot == 0 ? fg_cpu_queue_dnnl(r->q) : fg_cpu_queue_dnnl_slot(r->q, slot);
    fg_cpu_mm mm = {trans_a, trans_b, m, n, k, a, b, NULL, c, lda, ldb, ldc, FG_CPU_F32,
                    FG_CPU_F32, beta, FG_CPU_BF16, alpha};
    int rc = d ? fg_cpu_dnnl_gemm_run(d, r->be->pool, &mm) : FG_CPU_DNNL_NONE;
    if (rc == FG_CPU_DNNL_NONE)
        return 0;
    if (rc != 0 && atomic_exchange(&r->failed, 1) == 0)
        fg_error_set(&r->err, FG_BACKEND_ERROR, "cpu backend: %s: oneDNN's bf16 matmul failed "
                     "(m = %d, n = %d, k = %d)", r->op, m, n, k);
    return 1;
}
#endif

const fg_cpu_gemm_hook *fg_cpu_gemm_route_begin(fg_cpu_gemm_route *r, fg_cpu_backend *be,
                                                fg_cpu_queue *q, const char *op,
                                                uint32_t dtype, int slots)
{
    r->hook.run = NULL;
    r->hook.run_bf16 = NULL;
#ifdef FG_CPU_WITH_DNNL
    if (dtype == FG_BF16 && be->bf16_native && q)
        r->hook.run_bf16 = route_run_bf16;
#endif
    if (be->gemm_mode != FG_CPU_GEMM_OPENBLAS && q)
        r->hook.run = route_run;
    if (!r->hook.run && !r->hook.run_bf16)
        return NULL;
    r->hook.ctx = r;
    r->be = be;
    r->q = q;
    r->op = op;
    r->dtype = dtype;
    atomic_init(&r->failed, 0);
    r->err.message[0] = '\0';
    /* a slot without its own oneDNN cache runs OpenBLAS (fg_cpu_gemm_run_slot's NONE) */
    (void)fg_cpu_queue_dnnl_slots(q, slots);
    return &r->hook;
}

fg_status fg_cpu_gemm_route_end(fg_cpu_gemm_route *r, fg_status st, fg_error *err)
{
    if (st != FG_OK || (!r->hook.run && !r->hook.run_bf16) || !atomic_load(&r->failed))
        return st;
    return fg_error_set(err, FG_BACKEND_ERROR, "%s", r->err.message);
}
