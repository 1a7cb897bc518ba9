#!/usr/bin/env bash
# The CPU backend's fixed thresholds (plugins/backend-cpu/README.md, "tuning") timed on the
# CPU at hand: each is built into fulgur-backend-cpu.so at half and at twice its value
# (-D on the compiler's line: cpu_kernels.h and threadpool.c take it), and every variant
# is an A/B against the build at the defaults (bench_ab.sh: alternating fits, medians) on
# the model that exercises it:
#   FG_CPU_ATTN_BLOCK        64 query rows    a GPT at context 256 (L2 H4 C128, batch 8)
#   FG_CPU_GEMM_SPLIT_FLOPS  2^21 FLOPs       the small GPT (L4 H4 C128 T64 B12) and the MLP
#   FG_CPU_SPIN_ITERATIONS   2000 polls       the MLP (mlp.ini) and the small GPT
#   FG_CPU_GRAIN             32768 elements   the MLP and the small GPT
# A default is right on this CPU when no variant beats it by more than the A/B's own spread
# (one plugin against itself: the "default" row). Prints one line per variant: B/A, where
# B is the variant. Builds under build-thresholds/ (one CMake tree per value, only the CPU
# plugin: about a minute each on 2 cores; kept, so a second run rebuilds only what changed).
#
#   tests/bench/bench_thresholds.sh [--fulgur PATH] [--fits N] [--only NAME]
#
# Not a ctest test: timings depend on the machine and its load.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=gpt_bench.sh
. "$here/gpt_bench.sh"
die() { echo "bench_thresholds: $*" >&2; exit 2; }
fulgur=$root/build/bin/fulgur fits=6 only=""
while (( $# > 0 )); do
    case $1 in
    --fulgur|--fits|--only) (( $# >= 2 )) || die "$1 needs a value"
        case $1 in --fulgur) fulgur=$2 ;; --fits) fits=$2 ;; --only) only=$2 ;; esac
        shift 2 ;;
    *) die "usage: bench_thresholds.sh [--fulgur PATH] [--fits N] [--only NAME]" ;;
    esac
done
[[ -x $fulgur ]] || die "no fulgur at $fulgur (build first)"
out=$root/build-thresholds
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
head -c 2000000 /dev/urandom | base64 >"$scratch/corpus.txt"
gpt_ini "$scratch/gpt_small.ini" "$scratch" 2 4 4 128 64 12 40
gpt_ini "$scratch/gpt_long.ini" "$scratch" 2 2 4 128 256 8 30
mlp=$here/mlp.ini

# plugin NAME VALUE: the CPU plugin built with -DNAME=VALUE (NAME "default": no -D)
plugin() {
    local name=$1 value=$2 dir flags=""
    dir=$out/$name-$value
    [[ $name == default ]] || flags="-D$name=$value"
    [[ -f $dir/CMakeCache.txt ]] ||
        cmake -S "$root" -B "$dir" -DFULGUR_WITH_CUDA=OFF -DFULGUR_BUILD_TESTS=OFF \
            -DFULGUR_BUILD_EXAMPLES=OFF -DCMAKE_C_FLAGS="$flags" >"$dir.log" 2>&1 ||
        die "configuring $name=$value failed: see $dir.log"
    cmake --build "$dir" -j2 --target fulgur-backend-cpu >>"$dir.log" 2>&1 ||
        die "building $name=$value failed: see $dir.log"
    echo "$dir/lib/fulgur/plugins/fulgur-backend-cpu.so"
}

# ab LABEL VARIANT_SO CONFIG: one bench_ab.sh A/B, its B/A
ab() {
    local label=$1 so=$2 config=$3 line
    line=$("$here/bench_ab.sh" "$base" "$so" --fulgur "$fulgur" --config "$config" \
        --fits "$fits" --epochs 3 | tail -1)
    printf '  %-36s %-14s %s\n' "$label" "$(basename "$config")" "$line"
}

mkdir -p "$out"
echo "bench_thresholds: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
    "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|fma)' | sort | tr '\n' ' ')"
echo "  $fits fits per side, $(nproc) CPUs, OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset}, $(date -u +%FT%TZ)"
base=$(plugin default 0)
rows=(
    "default 0 $mlp $scratch/gpt_small.ini"
    "FG_CPU_ATTN_BLOCK 32 $scratch/gpt_long.ini"
    "FG_CPU_ATTN_BLOCK 128 $scratch/gpt_long.ini"
    "FG_CPU_GEMM_SPLIT_FLOPS 1048576 $scratch/gpt_small.ini $mlp"
    "FG_CPU_GEMM_SPLIT_FLOPS 4194304 $scratch/gpt_small.ini $mlp"
    "FG_CPU_SPIN_ITERATIONS 1000 $mlp $scratch/gpt_small.ini"
    "FG_CPU_SPIN_ITERATIONS 4000 $mlp $scratch/gpt_small.ini"
    "FG_CPU_GRAIN 16384 $mlp $scratch/gpt_small.ini"
    "FG_CPU_GRAIN 65536 $mlp $scratch/gpt_small.ini"
)
for row in "${rows[@]}"; do
    read -r name value configs <<<"$row"
    [[ -z $only || $name == "$only" || $name == default ]] || continue
    so=$(plugin "$name" "$value")
    [[ $name == default ]] && so=$base
    for config in $configs; do
        ab "$name=$value" "$so" "$config"
    done
done
