#!/usr/bin/env bash
# Language-model training benchmark: fulgur against PyTorch on the same GPT (byte vocab,
# fp32, AdamW), same batch and threads, in one invocation, at two sizes:
#   small  4 layers, 4 heads, width 128, context 64, batch 12
#   mid    6 layers, 6 heads, width 384, context 256, batch 16
# Prints tokens/s of each (median of RUNS runs, alternating), their ratio, and each model's
# step as a fraction of the best library's raw sgemm rate (tests/bench/sgemm_peak.c, fastest
# shape of OpenBLAS and oneDNN, same threads) and of the machine's FMA peak (`fulgur devices`,
# peaks.sh). FLOPs per token: 6 * (parameters outside the embeddings + the output layer) +
# 6 * layers * context * width (causal attention, forward and backward). --gemm sets fulgur's
# [backend] gemm (default: the backend's, onednn).
#
#   tests/bench/bench_lm.sh [--fulgur PATH] [--threads N] [--runs N] [--steps N] [--gemm MODE]
#                           [--sizes "small mid"]
#
# Not a ctest test: timings depend on the machine and its load. PyTorch is Debian's
# python3-torch in /usr/bin/python3 (skipped, with a note, when it cannot be imported).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=peaks.sh
. "$here/peaks.sh"
# shellcheck source=gpt_bench.sh
. "$here/gpt_bench.sh"
fulgur=$root/build/bin/fulgur threads=2 runs=3 steps=20 gemm="" sizes="small mid"
while [ $# -gt 0 ]; do
    case $1 in
    --gemm) gemm=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --fulgur) fulgur=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "usage: $(basename "$0") [--fulgur PATH] [--threads N] [--runs N] [--steps N] [--gemm MODE] [--sizes \"small mid\"]" >&2; exit 2 ;;
    esac
done
[ -x "$fulgur" ] || { echo "bench_lm: no fulgur at $fulgur (build first)" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export OPENBLAS_NUM_THREADS=$threads
head -c 4000000 /dev/urandom | base64 >"$scratch/corpus.txt"
torch_ok=1
/usr/bin/python3 -c "import torch" 2>/dev/null || torch_ok=0
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# fulgur_run L H C T B: tokens/s of the second epoch (the first warms up)
fulgur_run() {
    gpt_ini "$scratch/gpt.ini" "$scratch" "$threads" "$@" "$steps" "${gemm:+gemm = $gemm}"
    "$fulgur" fit "$scratch/gpt.ini" 2>/dev/null | epoch2_tokens_per_s "$(($5 * steps))" "$4"
}

torch_run() {
    OMP_WAIT_POLICY=passive /usr/bin/python3 "$here/torch_gpt_ref.py" "$@" "$threads" "$steps" |
        sed -n 's/^tokens\/s //p'
}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
flags=$(grep -o -w -e avx2 -e avx512f -e avx512_bf16 -e amx_bf16 /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "bench_lm: $cpu ($flags), $threads threads, $runs runs of $steps steps, gemm = ${gemm:-default}, OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset}, $(date -u +%F)"
declare -A result
for size in $sizes; do
    if [ $size = small ]; then set -- 4 4 128 64 12; else set -- 6 6 384 256 16; fi
    f=() p=()
    for r in $(seq 1 "$runs"); do
        f+=("$(fulgur_run "$@")")
        [ $torch_ok = 1 ] && p+=("$(torch_run "$@")")
    done
    fm=$(printf '%s\n' "${f[@]}" | median)
    result[$size]=$fm
    if [ $torch_ok = 1 ]; then
        pm=$(printf '%s\n' "${p[@]}" | median)
        echo "$size: fulgur $fm tokens/s, torch $pm tokens/s, ratio $(awk -v a="$fm" -v b="$pm" 'BEGIN {printf "%.2f", a / b}')"
    else
        echo "$size: fulgur $fm tokens/s (no python3-torch: no reference)"
    fi
done
fma=$(fma_peak "$fulgur")
if build_sgemm_peak "$scratch" "$here"; then
    peak=$(OMP_WAIT_POLICY=passive "$scratch/sgemm_peak" "$threads" 4096 | sed -n 's/^best peak GFLOP\/s[^0-9]*\([0-9.]*\).*/\1/p')
else
    peak=NA
fi
echo "FMA peak (fulgur devices): $fma GFLOP/s; best library gemm peak (sgemm_peak.c, batch 4096): $peak GFLOP/s"
for size in $sizes; do
    if [ $size = small ]; then set -- 4 128 64; else set -- 6 384 256; fi
    awk -v size=$size -v tps="${result[$size]}" -v peak="$peak" -v fma="$fma" -v L="$1" -v C="$2" -v T="$3" 'BEGIN {
        V = 256
        n = L * (12 * C * C + 13 * C) + 2 * C + V * C
        flops = 6 * n + 6 * L * T * C
        g = tps * flops / 1e9
        printf "%s: %.1f GFLOP/s", size, g
        if (peak != "NA" && peak > 0) printf " = %.0f%% of the best library gemm peak (%.1f)", 100 * g / peak, peak
        if (fma != "NA" && fma > 0) printf ", %.0f%% of the FMA peak (%.1f)", 100 * g / fma, fma
        printf "\n" }'
done
