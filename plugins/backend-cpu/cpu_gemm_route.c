/* The kernels' own gemms (attention's score and output tiles, im2col's products) through
 * the per-shape choice of cpu_gemm_choice.c, as the ops' gemms: a kernel calls the hook with
 * its thread's slot, and each slot runs oneDNN on its own primitive cache. */
#include <stdio.h>

#include "cpu_backend.h"

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

const fg_cpu_gemm_hook *fg_cpu_gemm_route_begin(fg_cpu_gemm_route *r, fg_cpu_backend *be,
                                                fg_cpu_queue *q, const char *op,
                                                uint32_t dtype, int slots)
{
    r->hook.run = NULL;
    if (be->gemm_mode == FG_CPU_GEMM_OPENBLAS || !q)
        return NULL;
    r->hook.run = route_run;
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
    if (st != FG_OK || !r->hook.run || !atomic_load(&r->failed))
        return st;
    return fg_error_set(err, FG_BACKEND_ERROR, "%s", r->err.message);
}
