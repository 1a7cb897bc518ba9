#!/usr/bin/env bash
# bf16-mixed against fp32 on a GPT, on the CPU backend: bench_lm.sh's small GPT (4 layers,
# 4 heads, width 128, context 64, batch 12, byte vocab, AdamW) or its mid one, fp32 and
# bf16-mixed alternating run by run so the machine's drift meets both alike; with
# --baseline DIR also bf16-mixed on another build of fulgur-backend-cpu.so (DIR holds only
# that file; e.g. the build before a change), so the change is timed in the same
# invocation. Prints each run's tokens/s (epoch 2 of 2; epoch 1 warms up), the medians, the
# ratios bf16-mixed / fp32 (of the medians, and each run's against the fp32 run before it,
# with their median) and bf16-mixed / baseline, whether the CPU has avx512_bf16, and
# the final losses (the baseline must print the same loss when the change keeps the bits).
#
#   tests/bench/bench_lm_bf16.sh [--fulgur PATH] [--threads N] [--runs N] [--steps N]
#                                [--size small|mid] [--baseline DIR]
#
# Not a ctest test: timings depend on the machine and its load.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=gpt_bench.sh
. "$here/gpt_bench.sh"
fulgur=$root/build/bin/fulgur threads=2 runs=5 steps=30 size=small baseline=""
usage="usage: $(basename "$0") [--fulgur PATH] [--threads N] [--runs N] [--steps N] [--size small|mid] [--baseline DIR]"
while [ $# -gt 0 ]; do
    case $1 in
    --fulgur|--threads|--runs|--steps|--size|--baseline)
        [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
        case $1 in
        --fulgur) fulgur=$2 ;; --threads) threads=$2 ;; --runs) runs=$2 ;;
        --steps) steps=$2 ;; --size) size=$2 ;; --baseline) baseline=$2 ;;
        esac
        shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
done
[ -x "$fulgur" ] || { echo "bench_lm_bf16: no fulgur at $fulgur (build first)" >&2; exit 2; }
[ -z "$baseline" ] || [ -f "$baseline/fulgur-backend-cpu.so" ] ||
    { echo "bench_lm_bf16: no fulgur-backend-cpu.so in $baseline" >&2; exit 2; }
case $size in
small) set -- 4 4 128 64 12 ;;
mid) set -- 6 6 384 256 16 ;;
*) echo "bench_lm_bf16: --size small or mid, not '$size'" >&2; exit 2 ;;
esac
layers=$1 heads=$2 width=$3 context=$4 batch=$5
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export OPENBLAS_NUM_THREADS=$threads
head -c 4000000 /dev/urandom | base64 >"$scratch/corpus.txt"
gpt_ini "$scratch/gpt.ini" "$scratch" "$threads" "$layers" "$heads" "$width" "$context" "$batch" "$steps"
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# run LABEL [fulgur args...] -> tokens/s of epoch 2; its last epoch line into $scratch/LABEL.loss
run() {
    local label=$1 out
    shift
    out=$("$fulgur" "$@" fit "$scratch/gpt.ini" precision.name="$precision" 2>&1) ||
        { echo "bench_lm_bf16: $label failed:" >&2; echo "$out" >&2; return 1; }
    grep -E '^epoch 2/2' <<<"$out" | sed -nE 's/.*train loss ([0-9.]+).*/\1/p' >"$scratch/$label.loss"
    epoch2_tokens_per_s "$((batch * steps))" "$context" <<<"$out"
}

flags=$(grep -m1 '^flags' /proc/cpuinfo | grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_bf16' | sort -u | tr '\n' ' ')
echo "bench_lm_bf16: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1) ($flags), $size GPT (L$layers H$heads C$width T$context B$batch), $threads threads, $runs runs of $steps steps, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
: >"$scratch/fp32" ; : >"$scratch/bf16" ; : >"$scratch/base"
for ((i = 0; i < runs; i++)); do
    precision=fp32 run fp32 >>"$scratch/fp32"
    precision=bf16-mixed run bf16 >>"$scratch/bf16"
    if [ -n "$baseline" ]; then
        precision=bf16-mixed run base --plugin-path "$baseline" >>"$scratch/base"
    fi
done
f=$(median <"$scratch/fp32") b=$(median <"$scratch/bf16")
echo "runs (tokens/s): fp32 $(tr '\n' ' ' <"$scratch/fp32")| bf16-mixed $(tr '\n' ' ' <"$scratch/bf16")"
printf 'median: fp32 %.0f, bf16-mixed %.0f tokens/s: bf16-mixed / fp32 %.2f\n' "$f" "$b" \
    "$(awk -v a="$b" -v f="$f" 'BEGIN{print a/f}')"
# each run's ratio against the fp32 run just before it: steadier than the ratio of medians
# when the machine's speed changes in the middle of an invocation
pairs=$(paste "$scratch/bf16" "$scratch/fp32" | awk '{printf "%.2f\n", $1 / $2}')
printf 'run by run, bf16-mixed / fp32: %s| median %.2f\n' "$(tr '\n' ' ' <<<"$pairs")" \
    "$(median <<<"$pairs")"
echo "epoch-2 train loss: fp32 $(cat "$scratch/fp32.loss"), bf16-mixed $(cat "$scratch/bf16.loss")"
if [ -n "$baseline" ]; then
    p=$(median <"$scratch/base")
    echo "baseline runs (bf16-mixed, $baseline): $(tr '\n' ' ' <"$scratch/base")"
    printf 'median: baseline bf16-mixed %.0f tokens/s: this build / baseline %.2f\n' "$p" \
        "$(awk -v a="$b" -v p="$p" 'BEGIN{print a/p}')"
    echo "epoch-2 train loss: baseline bf16-mixed $(cat "$scratch/base.loss")"
fi
