#!/usr/bin/env bash
# ZeRO-Offload ([strategy] offload_optimizer = host) on the CPU backend's devices:
#  1. the largest model that fits under a per-device memory limit (backend.cpu
#     memory_limit_mb, which counts every backend allocation and not host_alloc's pinned
#     memory) with and without offload: single fp32, single bf16-mixed (grad_dtype = half
#     both ways) and sharded stage 2 on 2 ranks (fp32); an MLP of DEPTH linear layers of
#     width W (input 64, 10 classes), AdamW, batch 16; the widest W whose `fulgur check`
#     passes, by bisection to 8 units of width;
#  2. what it costs: 30 steps of single fp32 at width TIME_W with and without offload in the
#     same invocation: samples/s of each and their ratio, and the host update's seconds.
#   tests/bench/bench_offload.sh [BUILD_DIR] [LIMIT_MB] [DEPTH] [TIME_W]
set -u
BUILD=${1:-build}
LIMIT=${2:-64}
DEPTH=${3:-16}
TIME_W=${4:-256}
FULGUR=$BUILD/bin/fulgur
PLUGINS=$BUILD/lib/fulgur/plugins
[ -x "$FULGUR" ] || { echo "no $FULGUR: build first (cmake --build $BUILD)" >&2; exit 2; }
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

model_ini() { # model_ini WIDTH STRATEGY PRECISION
    local w=$1 s=$2 p=$3 i
    printf '[trainer]\nmax_steps = 30\nseed = 1\nlog_every_n_steps = 30\ntest_after_fit = false\nlimit_val_batches = 0\nfinal_checkpoint =\n\n'
    printf '[backend]\nname = cpu\nthreads = 1\nmemory_limit_mb = %s\n\n' "$LIMIT"
    if [ "$p" = fp32 ]; then printf '[precision]\nname = fp32\n\n'; else printf '[precision]\nname = %s\ngrad_dtype = half\n\n' "$p"; fi
    if [ "$s" = single ]; then printf '[strategy]\nname = single\n\n'; else printf '[strategy]\nname = sharded\nstage = 2\nbucket_mb = 1\n\n[comm]\nname = mpi\n\n'; fi
    printf '[data]\nname = synthetic\nshape = 64\ntrain_size = 1024\ntest_size = 100\nbatch_size = 16\nnum_workers = 0\n\n[model]\nloss = softmax_cross_entropy\n\n'
    for i in $(seq 1 "$DEPTH"); do printf '[layer.fc%d]\ntype = linear\nout_features = %d\n\n[layer.r%d]\ntype = relu\n\n' "$i" "$w" "$i"; done
    printf '[layer.out]\ntype = linear\nout_features = 10\n\n[optimizer]\nname = adamw\nlr = 0.001\n'
}

run() { # run N STRATEGY PRECISION WIDTH OFFLOAD VERB
    local n=$1 s=$2 p=$3 w=$4 off=$5 verb=$6
    model_ini "$w" "$s" "$p" >"$WORK/m.ini"
    if [ "$n" = 1 ]; then
        "$FULGUR" --plugin-path "$PLUGINS" "$verb" "$WORK/m.ini" strategy.offload_optimizer="$off" trainer.default_root_dir="$WORK/runs" >"$WORK/out.log" 2>&1
    else
        mpirun "${MPI_FLAGS[@]}" -n "$n" "$FULGUR" --plugin-path "$PLUGINS" "$verb" "$WORK/m.ini" \
            strategy.offload_optimizer="$off" trainer.default_root_dir="$WORK/runs" >"$WORK/out.log" 2>&1
    fi
}

widest() { # widest N STRATEGY PRECISION OFFLOAD
    local lo=8 hi=4096 mid
    while [ $((hi - lo)) -gt 8 ]; do
        mid=$(((lo + hi) / 2))
        if run "$1" "$2" "$3" "$mid" "$4" check; then lo=$mid; else hi=$mid; fi
    done
    echo "$lo"
}

params() { # params WIDTH
    echo $((64 * $1 + $1 + (DEPTH - 1) * ($1 * $1 + $1) + 10 * $1 + 10))
}

echo "memory_limit_mb = $LIMIT per device, $DEPTH layers, AdamW, batch 16 ($(date -u +%F), $(getconf _NPROCESSORS_ONLN) cores)"
printf '| strategy | precision | ranks | offload | width | parameters | vs no offload |\n|---|---|---:|---|---:|---:|---:|\n'
for row in "1 single fp32" "1 single bf16-mixed" "2 sharded fp32"; do
    set -- $row
    w0=$(widest "$1" "$2" "$3" none)
    base=$(params "$w0")
    w=$(widest "$1" "$2" "$3" host)
    p=$(params "$w")
    printf '| %s | %s | %s | none | %s | %s | 1.00 |\n' "$2" "$3" "$1" "$w0" "$base"
    printf '| %s | %s | %s | host | %s | %s | %s |\n' "$2" "$3" "$1" "$w" "$p" \
        "$(awk -v a="$p" -v b="$base" 'BEGIN { printf "%.2f", a / b }')"
done

LIMIT=0
rate() { awk '/^epoch .* train loss/ { for (i = 1; i <= NF; i++) if ($i == "samples/s,") print $(i - 1) }' "$WORK/out.log"; }
run 1 single fp32 "$TIME_W" none fit || { cat "$WORK/out.log"; exit 1; }
plain=$(rate)
run 1 single fp32 "$TIME_W" host fit || { cat "$WORK/out.log"; exit 1; }
off=$(rate)
upd=$(grep -o 'host update [0-9.]* s, waiting for gradient copies [0-9.]* s' "$WORK/out.log")
echo "single fp32, width $TIME_W ($(params "$TIME_W") parameters), 30 steps: $plain samples/s without offload, $off with (ratio $(awk -v a="$off" -v b="$plain" 'BEGIN { printf "%.2f", a / b }')); $upd"
