#!/usr/bin/env bash
# The largest model each strategy fits under a per-rank memory limit (backend.cpu
# memory_limit_mb): ddp and strategy.sharded stages 1, 2, 3 on 2 and 4 ranks, fp32 AdamW.
# The model is an MLP of DEPTH linear layers of width W (input 64, 10 classes); for each
# strategy and rank count the widest W whose `fulgur check` (every buffer allocated, as at
# the start of fit) passes is found by bisection, and its parameter count printed. The
# last rows train the widest stage-2 model for 5 steps to show it runs, not only fits.
#   tests/bench/bench_sharded.sh [BUILD_DIR] [LIMIT_MB] [DEPTH]
set -u
BUILD=${1:-build}
LIMIT=${2:-64}
DEPTH=${3:-16}
FULGUR=$BUILD/bin/fulgur
PLUGINS=$BUILD/lib/fulgur/plugins
[ -x "$FULGUR" ] || { echo "no $FULGUR: build first (cmake --build $BUILD)" >&2; exit 2; }
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

model_ini() { # model_ini WIDTH STRATEGY_LINES...
    local w=$1 i
    shift
    printf '[trainer]\nmax_steps = 5\nseed = 1\nlog_every_n_steps = 5\ntest_after_fit = false\nlimit_val_batches = 0\nfinal_checkpoint =\n\n'
    printf '[backend]\nname = cpu\nthreads = 1\nmemory_limit_mb = %s\n\n[precision]\nname = fp32\n\n' "$LIMIT"
    printf '%s\n' "$@"
    printf '\n[comm]\nname = mpi\n\n[data]\nname = synthetic\nshape = 64\ntrain_size = 1024\ntest_size = 100\nbatch_size = 16\nnum_workers = 0\n\n[model]\nloss = softmax_cross_entropy\n\n'
    for i in $(seq 1 "$DEPTH"); do printf '[layer.fc%d]\ntype = linear\nout_features = %d\n\n[layer.r%d]\ntype = relu\n\n' "$i" "$w" "$i"; done
    printf '[layer.out]\ntype = linear\nout_features = 10\n\n[optimizer]\nname = adamw\nlr = 0.001\n'
}

strategy_lines() { # ddp | 1 | 2 | 3
    if [ "$1" = ddp ]; then printf '[strategy]\nname = ddp\n'; else printf '[strategy]\nname = sharded\nstage = %s\nbucket_mb = 1\n' "$1"; fi
}

fits() { # fits N STRATEGY WIDTH [VERB]
    local n=$1 s=$2 w=$3 verb=${4:-check}
    model_ini "$w" "$(strategy_lines "$s")" >"$WORK/m.ini"
    mpirun "${MPI_FLAGS[@]}" -n "$n" "$FULGUR" --plugin-path "$PLUGINS" "$verb" "$WORK/m.ini" >"$WORK/out.log" 2>&1
}

params_of() { # params of the model at width W (from a single-process check of the model)
    model_ini "$1" "$(strategy_lines ddp)" | sed 's/^memory_limit_mb.*//' >"$WORK/p.ini"
    mpirun "${MPI_FLAGS[@]}" -n 1 "$FULGUR" --plugin-path "$PLUGINS" check "$WORK/p.ini" 2>/dev/null |
        sed -n 's/^model: [0-9]* layers, \([0-9]*\) parameters.*/\1/p'
}

echo "per-rank limit $LIMIT MiB, $DEPTH layers of width W, fp32 AdamW, batch 16 per rank"
printf '%-9s %5s %7s %12s %14s\n' strategy ranks width parameters "params MiB"
for n in 2 4; do
    for s in ddp 1 2 3; do
        lo=8 hi=8192
        fits "$n" "$s" $lo || { echo "$s: even width $lo does not fit"; continue; }
        while [ $((hi - lo)) -gt 8 ]; do
            mid=$(((lo + hi) / 2))
            if fits "$n" "$s" $mid; then lo=$mid; else hi=$mid; fi
        done
        p=$(params_of $lo)
        name=$([ "$s" = ddp ] && echo ddp || echo "stage $s")
        printf '%-9s %5d %7d %12s %14.1f\n' "$name" "$n" "$lo" "$p" "$(awk -v p="$p" 'BEGIN { print p * 4 / 1048576 }')"
        [ "$s" = 2 ] && [ "$n" = 2 ] && W2=$lo
    done
done
if [ -n "${W2:-}" ]; then
    fits 2 ddp "$W2" check && echo "unexpected: ddp fits width $W2" ||
        echo "ddp at width $W2: $(grep -o 'out of memory.*\|allocating[^;]*' "$WORK/out.log" | head -1)"
    if fits 2 2 "$W2" fit; then
        echo "stage 2 on 2 ranks at width $W2 trained: $(grep 'after 5 steps' "$WORK/out.log")"
    else
        echo "stage 2 on 2 ranks at width $W2 failed to train:"; tail -5 "$WORK/out.log"
    fi
fi
