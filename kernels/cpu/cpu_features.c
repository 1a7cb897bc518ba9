/* The CPU's vector features (cpuid, through the compiler's __builtin_cpu_supports, which
 * also checks that the OS saves the wide registers) and the vector level of an OpenBLAS
 * core name, so the backend can tell when OpenBLAS runs kernels far below the CPU. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cpu_kernels.h"

int fg_cpu_isa_level(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return FG_CPU_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return FG_CPU_ISA_AVX2;
    if (__builtin_cpu_supports("avx"))
        return FG_CPU_ISA_AVX;
    return FG_CPU_ISA_SSE;
#else
    return FG_CPU_ISA_OTHER;
#endif
}

const char *fg_cpu_isa_name(int level)
{
    switch (level) {
    case FG_CPU_ISA_SSE: return "SSE";
    case FG_CPU_ISA_AVX: return "AVX";
    case FG_CPU_ISA_AVX2: return "AVX2/FMA";
    case FG_CPU_ISA_AVX512: return "AVX-512";
    default: return "not x86-64";
    }
}

void fg_cpu_isa_features(char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    /* __builtin_cpu_supports takes string literals only: one entry each */
    const struct { const char *name; int has; } features[] = {
        {"sse4.2", __builtin_cpu_supports("sse4.2")},
        {"avx", __builtin_cpu_supports("avx")},
        {"fma", __builtin_cpu_supports("fma")},
        {"avx2", __builtin_cpu_supports("avx2")},
        {"avx512f", __builtin_cpu_supports("avx512f")},
        {"avx512bw", __builtin_cpu_supports("avx512bw")},
        {"avx512vl", __builtin_cpu_supports("avx512vl")},
        {"avx512bf16", __builtin_cpu_supports("avx512bf16")},
    };
    for (size_t i = 0; i < sizeof features / sizeof features[0]; i++) {
        int w = features[i].has && at < len
                    ? snprintf(buf + at, len - at, "%s%s", at ? " " : "", features[i].name)
                    : 0;
        at += w > 0 ? (size_t)w : 0;
    }
#endif
    if (at == 0)
        snprintf(buf, len, "none known to fulgur");
}

static int same_name(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    return *a == *b;
}

/* OpenBLAS's x86-64 core names (DYNAMIC_ARCH, 0.3.x) by the vector width of their sgemm
 * kernels. */
int fg_cpu_openblas_core_level(const char *core)
{
    static const struct { const char *name; int level; } cores[] = {
        {"Generic", FG_CPU_ISA_SSE},       {"Katmai", FG_CPU_ISA_SSE},
        {"Coppermine", FG_CPU_ISA_SSE},    {"Northwood", FG_CPU_ISA_SSE},
        {"Prescott", FG_CPU_ISA_SSE},      {"Banias", FG_CPU_ISA_SSE},
        {"Atom", FG_CPU_ISA_SSE},          {"Core2", FG_CPU_ISA_SSE},
        {"Penryn", FG_CPU_ISA_SSE},        {"Dunnington", FG_CPU_ISA_SSE},
        {"Nehalem", FG_CPU_ISA_SSE},       {"Athlon", FG_CPU_ISA_SSE},
        {"Opteron", FG_CPU_ISA_SSE},       {"Opteron_SSE3", FG_CPU_ISA_SSE},
        {"Barcelona", FG_CPU_ISA_SSE},     {"Bobcat", FG_CPU_ISA_SSE},
        {"Nano", FG_CPU_ISA_SSE},          {"Sandybridge", FG_CPU_ISA_AVX},
        {"Bulldozer", FG_CPU_ISA_AVX},     {"Piledriver", FG_CPU_ISA_AVX},
        {"Steamroller", FG_CPU_ISA_AVX},   {"Excavator", FG_CPU_ISA_AVX},
        {"Haswell", FG_CPU_ISA_AVX2},      {"Zen", FG_CPU_ISA_AVX2},
        {"SkylakeX", FG_CPU_ISA_AVX512},   {"Cooperlake", FG_CPU_ISA_AVX512},
        {"SapphireRapids", FG_CPU_ISA_AVX512},
    };
    for (size_t i = 0; core && i < sizeof cores / sizeof cores[0]; i++)
        if (same_name(core, cores[i].name))
            return cores[i].level;
    return FG_CPU_ISA_OTHER;
}
