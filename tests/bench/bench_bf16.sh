#!/usr/bin/env bash
# bf16-mixed against fp32 on the CPU: fulgur's MLP and CNN benchmark models (mlp.ini, cnn.ini
# here) at one batch size, fp32, bf16-mixed, and bf16-mixed with [backend] bf16 = emulated,
# alternating run by run so the machine's drift hits all three alike. Prints the median
# samples/s of each (epoch 2 of 2; epoch 1 warms up), the ratios to fp32, whether the CPU
# has avx512_bf16, and the first run's "bf16 emulated" line where there is one.
#
#   tests/bench/bench_bf16.sh [--fulgur PATH] [--batch-size N] [--runs N]
#                             [--mlp-batches N] [--cnn-batches N] [--threads N]
#
# Not a ctest test: timings depend on the machine and its load (run it on a quiet one).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
fulgur=$root/build-bench/bin/fulgur batch=256 runs=3 mlp_batches=150 cnn_batches=30 threads=2
while [ $# -gt 0 ]; do
    case $1 in
    --fulgur) fulgur=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --mlp-batches) mlp_batches=$2; shift 2 ;;
    --cnn-batches) cnn_batches=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: $(basename "$0") [--fulgur PATH] [--batch-size N] [--runs N] [--mlp-batches N] [--cnn-batches N] [--threads N]" >&2; exit 2 ;;
    esac
done
[ -x "$fulgur" ] || { echo "bench_bf16: no fulgur at $fulgur (build build-bench first)" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

run() { # ini batches label overrides... -> samples/s of epoch 2
    local ini=$1 batches=$2 label=$3 out
    shift 3
    out=$("$fulgur" fit "$here/$ini" trainer.max_epochs=2 trainer.limit_train_batches="$batches" \
        trainer.limit_val_batches=0 trainer.num_sanity_val_steps=0 trainer.test_after_fit=false \
        trainer.log_every_n_steps="$batches" trainer.default_root_dir="$scratch/runs" \
        backend.threads="$threads" data.batch_size="$batch" "$@" 2>&1) ||
        { echo "bench_bf16: $ini $label failed:" >&2; echo "$out" >&2; return 1; }
    grep -m1 'bf16 emulated' <<<"$out" >"$scratch/emulated_$label.txt" || true
    grep -E '^epoch 2/2 +train loss' <<<"$out" | sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' | grep .
}

flags=$(grep -m1 '^flags' /proc/cpuinfo | grep -o 'avx512_bf16\|amx_bf16' | sort -u | tr '\n' ' ')
echo "bench_bf16: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, bf16 flags: ${flags:-none}; batch $batch, $threads threads, $runs runs each, $(date -u +%FT%TZ)"
for model in mlp cnn; do
    batches=$mlp_batches
    [ $model = cnn ] && batches=$cnn_batches
    : >"$scratch/fp32" ; : >"$scratch/bf16" ; : >"$scratch/emu"
    for ((i = 0; i < runs; i++)); do
        run $model.ini "$batches" fp32 precision.name=fp32 >>"$scratch/fp32"
        run $model.ini "$batches" bf16 precision.name=bf16-mixed >>"$scratch/bf16"
        run $model.ini "$batches" emu precision.name=bf16-mixed backend.bf16=emulated >>"$scratch/emu"
    done
    f=$(median <"$scratch/fp32") b=$(median <"$scratch/bf16") e=$(median <"$scratch/emu")
    printf '%s  fp32 %9.0f  bf16-mixed %9.0f (%.2fx)  bf16-mixed emulated %9.0f (%.2fx)  samples/s\n' \
        "$model" "$f" "$b" "$(awk -v a="$b" -v f="$f" 'BEGIN{print a/f}')" "$e" \
        "$(awk -v a="$e" -v f="$f" 'BEGIN{print a/f}')"
    echo "      runs: fp32 $(tr '\n' ' ' <"$scratch/fp32")| bf16 $(tr '\n' ' ' <"$scratch/bf16")| emulated $(tr '\n' ' ' <"$scratch/emu")"
done
[ -s "$scratch/emulated_bf16.txt" ] && echo "bf16-mixed said: $(cat "$scratch/emulated_bf16.txt")"
[ -s "$scratch/emulated_emu.txt" ] && echo "bf16-mixed with bf16 = emulated said: $(cat "$scratch/emulated_emu.txt")"
exit 0
