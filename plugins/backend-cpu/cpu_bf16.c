/* Real bf16 gemms where the CPU has avx512_bf16 and the plugin was built with oneDNN
 * (kernels/cpu/gemm_dnnl.c); elsewhere bf16 stays the f32 emulation of cpu_ops.c, and the
 * first bf16 gemm says so once ("bf16 emulated", at info level). The option bf16 = auto |
 * native | emulated picks: auto takes native where it can, native fails at init where it
 * cannot, emulated forces the emulation (tests, comparisons). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_backend.h"
#include "half.h"
#ifdef FG_CPU_WITH_DNNL
#include "gemm_dnnl.h"
#endif

static int cpu_has_avx512_bf16(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
#else
    return 0;
#endif
}

fg_status fg_cpu_bf16_setup(fg_cpu_backend *be, const char *mode, fg_error *err)
{
    int cpu = cpu_has_avx512_bf16();
#ifdef FG_CPU_WITH_DNNL
    int dnnl = 1;
#else
    int dnnl = 0;
#endif
    be->bf16_native = 0;
    atomic_init(&be->bf16_noted, 0);
    if (strcmp(mode, "auto") != 0 && strcmp(mode, "native") != 0 &&
        strcmp(mode, "emulated") != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: bf16 = %s; expected auto, "
                            "native or emulated", mode);
    if (strcmp(mode, "emulated") == 0)
        be->bf16_why = "backend.bf16 = emulated";
    else if (!cpu)
        be->bf16_why = "this CPU has no avx512_bf16";
    else if (!dnnl)
        be->bf16_why = "the cpu backend was built without oneDNN";
    else
        be->bf16_native = 1;
    if (strcmp(mode, "native") == 0 && !be->bf16_native)
        return fg_error_set(err, FG_UNAVAILABLE, "cpu backend: bf16 = native, but %s; use "
                            "bf16 = auto (emulates bf16 in f32 where needed)", be->bf16_why);
    return FG_OK;
}

/* Once per backend instance: the first bf16 gemm on the emulation says so. */
static void note_emulated(fg_cpu_backend *be)
{
    if (atomic_exchange(&be->bf16_noted, 1) == 0 && be->host && be->host->log)
        be->host->log(be->host, FG_LOG_INFO, "bf16 emulated (%s): bf16 gemms run in f32 "
                      "and round their results", be->bf16_why);
}

struct fg_cpu_dnnl_gemm *fg_cpu_queue_dnnl(fg_cpu_queue *q)
{
#ifdef FG_CPU_WITH_DNNL
    if (!q->dnnl && !q->dnnl_failed) {
        q->dnnl = fg_cpu_dnnl_gemm_create();
        q->dnnl_failed = q->dnnl == NULL;
    }
#endif
    return q->dnnl;
}

int fg_cpu_queue_dnnl_slots(fg_cpu_queue *q, int slots)
{
#ifdef FG_CPU_WITH_DNNL
    if (slots - 1 > q->dnnl_slot_count) {
        struct fg_cpu_dnnl_gemm **grown = realloc(q->dnnl_slots, (size_t)(slots - 1) * sizeof *grown);
        if (!grown)
            return -1;
        q->dnnl_slots = grown;
        while (q->dnnl_slot_count < slots - 1)
            q->dnnl_slots[q->dnnl_slot_count++] = fg_cpu_dnnl_gemm_create();
    }
    for (int s = 1; s < slots; s++)
        if (!q->dnnl_slots[s - 1])
            return -1;
#else
    (void)q;
    (void)slots;
#endif
    return 0;
}

struct fg_cpu_dnnl_gemm *fg_cpu_queue_dnnl_slot(fg_cpu_queue *q, int slot)
{
    return slot >= 1 && slot <= q->dnnl_slot_count ? q->dnnl_slots[slot - 1] : NULL;
}

void fg_cpu_bf16_queue_fini(fg_cpu_queue *q)
{
#ifdef FG_CPU_WITH_DNNL
    fg_cpu_dnnl_gemm_destroy(q->dnnl);
    for (int s = 0; s < q->dnnl_slot_count; s++)
        fg_cpu_dnnl_gemm_destroy(q->dnnl_slots[s]);
#endif
    free(q->dnnl_slots);
    q->dnnl_slots = NULL;
    q->dnnl_slot_count = 0;
    q->dnnl = NULL;
}

int fg_cpu_bf16_gemm(fg_cpu_backend *be, fg_cpu_queue *q, const fg_cpu_bf16_args *g,
                     fg_status *st, fg_error *err)
{
    int any_bf16 = g->a_dtype == FG_BF16 || g->b_dtype == FG_BF16 || g->c_dtype == FG_BF16;
    if (!any_bf16 || !q)
        return 0;
    if (!be->bf16_native) {
        note_emulated(be);
        return 0;
    }
#ifdef FG_CPU_WITH_DNNL
    /* bf16 products into bf16 or f32, the bias (if any) in bf16 or f32 */
    if (g->a_dtype != FG_BF16 || g->b_dtype != FG_BF16 ||
        (g->c_dtype != FG_BF16 && g->c_dtype != FG_F32) || g->alpha != 1.0f ||
        (g->beta != 0.0f && g->beta != 1.0f))
        return 0;
    if (!fg_cpu_queue_dnnl(q))
        return 0;
    fg_cpu_mm mm = {g->trans_a, g->trans_b, g->m, g->n, g->k, g->a, g->b, g->bias, g->c,
                    g->lda, g->ldb, g->ldc,
                    g->c_dtype == FG_BF16 ? FG_CPU_BF16 : FG_CPU_F32,
                    g->b_dtype == FG_BF16 ? FG_CPU_BF16 : FG_CPU_F32, g->beta, FG_CPU_BF16,
                    1.0f};
    int rc = fg_cpu_dnnl_gemm_run(q->dnnl, be->pool, &mm);
    if (rc == FG_CPU_DNNL_NONE)
        return 0;
    *st = rc == 0 ? FG_OK
                  : fg_error_set(err, FG_BACKEND_ERROR, "cpu backend: %s: oneDNN's bf16 matmul "
                                 "failed (m = %d, n = %d, k = %d)", g->op, g->m, g->n, g->k);
    return 1;
#else
    (void)err;
    (void)st;
    return 0;
#endif
}
