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
    snprintf(buf, len, "%s", "");
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const char *const names[] = {"sse4.2", "avx", "fma", "avx2", "avx512f",
                                        "avx512bw", "avx512vl", "avx512bf16"};
    size_t at = 0;
    __builtin_cpu_init();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int has = 0;
        /* __builtin_cpu_supports takes a string literal only */
        switch (i) {
        case 0: has = __builtin_cpu_supports("sse4.2"); break;
        case 1: has = __builtin_cpu_supports("avx"); break;
        case 2: has = __builtin_cpu_supports("fma"); break;
        case 3: has = __builtin_cpu_supports("avx2"); break;
        case 4: has = __builtin_cpu_supports("avx512f"); break;
        case 5: has = __builtin_cpu_supports("avx512bw"); break;
        case 6: has = __builtin_cpu_supports("avx512vl"); break;
        default: has = __builtin_cpu_supports("avx512bf16"); break;
        }
        if (has && at < len) {
            int w = snprintf(buf + at, len - at, "%s%s", at ? " " : "", names[i]);
            at += w > 0 ? (size_t)w : 0;
        }
    }
#endif
    if (buf[0] == '\0')
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
