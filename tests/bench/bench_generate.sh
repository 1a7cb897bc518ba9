#!/usr/bin/env bash
# Generation speed with and without the KV cache ([generate] kv_cache), on the GPTs of
# bench_lm.sh (byte vocab, fp32, weights from one training step: speed does not depend on
# them):
#   small  4 layers, 4 heads, width 128, context 64
#   mid    6 layers, 6 heads, width 384, context 256
# Each size generates N = context - 8 tokens after an 8-byte prompt (inside the context,
# where the cache saves the window's forward) and 1.5 x context tokens (the last third past
# it, where the window slides and each token is a forward again, cache or not). tokens/s
# is fulgur generate's own figure after the first token (the prompt's forward, the process
# start and the model load left out), the median of RUNS runs. Also checks that both modes
# print the same text.
#
#   tests/bench/bench_generate.sh [--fulgur PATH] [--threads N] [--runs N]
#
# Not a ctest test: timings depend on the machine and its load.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
fulgur=$root/build/bin/fulgur threads=2 runs=3
while [ $# -gt 0 ]; do
    case $1 in
    --fulgur) fulgur=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $(basename "$0") [--fulgur PATH] [--threads N] [--runs N]" >&2; exit 2 ;;
    esac
done
[ -x "$fulgur" ] || { echo "bench_generate: no fulgur at $fulgur (build first)" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export OPENBLAS_NUM_THREADS=$threads
head -c 200000 /dev/urandom | base64 >"$scratch/corpus.txt"
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# model L H C T: a config and a one-step checkpoint in $scratch
model() {
    local l=$1 h=$2 c=$3 t=$4 ini=$scratch/gpt.ini
    cat >"$ini" <<INI
[trainer]
max_steps = 1
seed = 1
test_after_fit = false
enable_progress_bar = false
num_sanity_val_steps = 0
default_root_dir = $scratch/runs
[backend]
name = cpu
threads = $threads
[data]
name = text
dir = $scratch
files = corpus.txt
context = $t
val_fraction = 0
train_windows = 4
batch_size = 4
num_workers = 0
[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = $c
[layer.wpe]
type = position_embedding
max_positions = $t
[layer.h]
type = transformer_block
heads = $h
repeat = $l
[layer.ln_f]
type = layernorm
[layer.lm_head]
type = linear
out_features = 256
bias = false
[optimizer]
name = adamw
lr = 0.001
INI
    "$fulgur" fit "$ini" trainer.final_checkpoint="$scratch/w.safetensors" >/dev/null 2>&1
}

# tokens/s after the first token (fulgur generate's own figure on stderr: the prompt's
# forward, the process start and the model load left out) of n tokens with kv_cache = $2,
# the median of RUNS runs; the text in $scratch/out.$2
rate() {
    local n=$1 kv=$2 r=()
    for _ in $(seq 1 "$runs"); do
        "$fulgur" generate "$scratch/gpt.ini" --ckpt-path "$scratch/w.safetensors" \
            --prompt "The text" --max-new-tokens "$n" --temperature 1 --seed 3 \
            generate.kv_cache="$kv" 2>"$scratch/err" | tail -n 1 >"$scratch/out.$kv"
        r+=("$(sed -n 's/.*then \([0-9.]*\) tokens\/s.*/\1/p' "$scratch/err")")
    done
    printf '%s\n' "${r[@]}" | median
}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
flags=$(grep -o -w -e avx2 -e avx512f -e avx512_bf16 -e amx_bf16 /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "bench_generate: $cpu ($flags), $threads threads, median of $runs runs, $(date -u +%F)"
for size in small mid; do
    if [ $size = small ]; then set -- 4 4 128 64; else set -- 6 6 384 256; fi
    model "$@"
    t=$4
    for n in $((t - 8)) $((t + t / 2)); do
        cached=$(rate "$n" true)
        full=$(rate "$n" false)
        cmp -s "$scratch/out.true" "$scratch/out.false" ||
            { echo "bench_generate: $size, $n tokens: the two modes printed different text" >&2; exit 1; }
        where=$([ "$n" -lt "$t" ] && echo "inside" || echo "past")
        echo "$size (context $t), $n tokens ($where the context): KV cache $cached tokens/s," \
             "full forward $full tokens/s, ratio $(awk -v a="$cached" -v b="$full" 'BEGIN {printf "%.2f", a / b}')"
    done
done
