/* What the CPU can do against what OpenBLAS runs on it: the notice, once at load, when
 * OpenBLAS picked kernels far below the CPU (Debian's OpenBLAS 0.3.21 ran its Prescott SSE3
 * kernels on an AVX-512 Xeon it did not recognise: a fifth of oneDNN's sgemm rate), and the
 * machine line `fulgur devices` shows: model, vector features, the measured FMA peak,
 * OpenBLAS's core. fulgur never sets OPENBLAS_CORETYPE: forcing a core gave wrong results on
 * some CPUs with that OpenBLAS, and one the user's environment sets is theirs. */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_backend.h"

void fg_cpu_machine_probe(fg_cpu_backend *be)
{
    be->isa_level = fg_cpu_isa_level();
    be->openblas_core = fg_cpu_openblas_corename();
    int core = fg_cpu_openblas_core_level(be->openblas_core);
    /* "far below": SSE kernels on an AVX2 or AVX-512 CPU, AVX (no FMA) ones on AVX-512; a
     * core name the table does not know is never called generic */
    be->openblas_generic = core != FG_CPU_ISA_OTHER && be->isa_level - core >= 2;
    /* gemm unset: oneDNN's matmul wherever the build has it. Fixed rather than timed, so
     * as reproducible as gemm = onednn; it ran the GPTs about 10% faster than OpenBLAS's
     * own AVX-512 kernels on a Zen 4, its sgemm rate was 10% above OpenBLAS's on a Zen 3
     * and 5x on a Xeon OpenBLAS did not know (tests/bench/RESULTS.md) */
    if (be->gemm_mode == FG_CPU_GEMM_DEFAULT) {
        be->gemm_defaulted = 1;
#ifdef FG_CPU_WITH_DNNL
        be->gemm_mode = FG_CPU_GEMM_ONEDNN;
#else
        be->gemm_mode = FG_CPU_GEMM_OPENBLAS;
#endif
    }
}

static const char *what_fulgur_does(const fg_cpu_backend *be)
{
    static const char no_onednn[] = "this build has no oneDNN, so gemms stay on OpenBLAS";
    switch (be->gemm_mode) {
    case FG_CPU_GEMM_AUTO:
#ifdef FG_CPU_WITH_DNNL
        return "gemm = auto: f32 gemms run oneDNN's matmul wherever it has one for the shape";
#else
        return no_onednn;
#endif
    case FG_CPU_GEMM_ONEDNN:
        return be->gemm_defaulted ? "f32 gemms run oneDNN's matmul (gemm unset; gemm = "
                                    "openblas would put them on OpenBLAS)"
                                  : "gemm = onednn: f32 gemms run oneDNN's matmul";
    default:
        return be->gemm_defaulted ? no_onednn
                                  : "gemm = openblas keeps them there; [backend] gemm = auto "
                                    "or onednn runs oneDNN's matmul instead";
    }
}

void fg_cpu_machine_notice(fg_cpu_backend *be)
{
    if (!be->openblas_generic || !be->host || !be->host->log)
        return;
    const char *env = getenv("OPENBLAS_CORETYPE");
    be->host->log(be->host, FG_LOG_WARN,
                  "cpu backend: OpenBLAS runs its %s kernels (%s) on this %s CPU (%s): its "
                  "sgemm reaches a fraction of the CPU's rate; %s (OPENBLAS_CORETYPE %s%s; "
                  "fulgur does not set it)", be->openblas_core,
                  fg_cpu_isa_name(fg_cpu_openblas_core_level(be->openblas_core)),
                  fg_cpu_isa_name(be->isa_level), be->cpu_model, what_fulgur_does(be),
                  env ? "= " : "is unset", env ? env : "");
}

void fg_cpu_machine_describe(fg_cpu_backend *be)
{
    if (atomic_exchange(&be->described, 1) != 0 || !be->host || !be->host->log)
        return;
    char features[160], peak[160];
    fg_cpu_isa_features(features, sizeof features);
    fg_cpu_fma_peak_result r;
    fg_cpu_fma_peak(be->pool, &r);
    if (r.gflops_256 <= 0 && r.gflops_512 <= 0)
        snprintf(peak, sizeof peak, "cannot be measured (%s)",
                 be->isa_level == FG_CPU_ISA_OTHER ? "not an x86-64 CPU" : "no FMA");
    else if (r.gflops_512 > 0)
        snprintf(peak, sizeof peak, "%.1f GFLOP/s (AVX-512 %.1f, AVX2 %.1f)",
                 r.gflops_512 > r.gflops_256 ? r.gflops_512 : r.gflops_256, r.gflops_512,
                 r.gflops_256);
    else
        snprintf(peak, sizeof peak, "%.1f GFLOP/s (AVX2)", r.gflops_256);
    be->host->log(be->host, FG_LOG_INFO, "cpu backend: %s; vector features: %s; FMA peak on "
                  "%d thread%s: %s; OpenBLAS core: %s%s; f32 gemms: %s%s; stream grain %zu "
                  "(%s)", be->cpu_model, features, be->threads, be->threads == 1 ? "" : "s",
                  peak, be->openblas_core,
                  be->openblas_generic ? " (generic kernels for this CPU)" : "",
                  fg_cpu_gemm_mode_name(be->gemm_mode),
                  be->gemm_defaulted ? " (gemm unset)" : "", be->stream_grain,
                  be->tuning_source);
}
