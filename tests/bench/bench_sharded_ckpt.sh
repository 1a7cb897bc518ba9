#!/usr/bin/env bash
# Checkpoints under strategy.sharded: gathered to rank 0 (the default) against one file per
# rank (sharded_checkpoint = true), stage 3 on N ranks, fp32 AdamW, an MLP of DEPTH linear
# layers of width W. For each: the peak resident memory of rank 0 and of the other ranks
# (GNU time's %M over a fit of 1 step that writes the final checkpoint, so the model's own
# shard is in it too), the bytes rank 0 writes, and the fit's wall time; then the time of
# `fulgur ckpt merge` and a check that the merged file holds the gathered file's tensors.
#   tests/bench/bench_sharded_ckpt.sh [BUILD_DIR] [RANKS] [WIDTH] [DEPTH]
set -u
BUILD=${1:-build}
N=${2:-4}
W=${3:-1024}
DEPTH=${4:-8}
FULGUR=$BUILD/bin/fulgur
PLUGINS=$BUILD/lib/fulgur/plugins
[ -x "$FULGUR" ] || { echo "no $FULGUR: build first (cmake --build $BUILD)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time (/usr/bin/time)" >&2; exit 2; }
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

{
    printf '[trainer]\nmax_steps = 1\nseed = 1\nlog_every_n_steps = 1\ntest_after_fit = false\nlimit_val_batches = 0\nfinal_checkpoint =\n\n'
    printf '[backend]\nname = cpu\nthreads = 1\n\n[precision]\nname = fp32\n\n'
    printf '[strategy]\nname = sharded\nstage = 3\nbucket_mb = 4\n\n[comm]\nname = mpi\ntimeout_s = 300\n\n'
    printf '[data]\nname = synthetic\nshape = 64\ntrain_size = 1024\ntest_size = 100\nbatch_size = 16\nnum_workers = 0\n\n'
    printf '[model]\nloss = softmax_cross_entropy\n\n'
    for i in $(seq 1 "$DEPTH"); do printf '[layer.fc%d]\ntype = linear\nout_features = %d\n\n[layer.r%d]\ntype = relu\n\n' "$i" "$W" "$i"; done
    printf '[layer.out]\ntype = linear\nout_features = 10\n\n[optimizer]\nname = adamw\nlr = 0.001\n'
} >"$WORK/m.ini"

run() { # run NAME OVERRIDES...: a fit of 1 step; per-rank peak RSS to NAME.rss.RANK
    local name=$1 t0 t1
    shift
    t0=$(date +%s.%N)
    mpirun "${MPI_FLAGS[@]}" -n "$N" sh -c '/usr/bin/time -f "%M" -o "$0.rss.$OMPI_COMM_WORLD_RANK" "$@"' \
        "$WORK/$name" "$FULGUR" --plugin-path "$PLUGINS" fit "$WORK/m.ini" "$@" >"$WORK/$name.log" 2>&1 ||
        { cat "$WORK/$name.log"; exit 1; }
    t1=$(date +%s.%N)
    local others=0 r
    for r in $(seq 1 $((N - 1))); do
        [ "$(cat "$WORK/$name.rss.$r")" -gt "$others" ] && others=$(cat "$WORK/$name.rss.$r")
    done
    printf '%-22s rank 0 peak %7.1f MiB, others peak %7.1f MiB, fit %.2f s\n' "$name" \
        "$(echo "$(cat "$WORK/$name.rss.0") / 1024" | bc -l)" "$(echo "$others / 1024" | bc -l)" \
        "$(echo "$t1 - $t0" | bc -l)"
}

run none
echo "stage 3 on $N ranks, $(grep -o '[0-9]* parameters' "$WORK/none.log" | head -1), AdamW"
run gathered trainer.final_checkpoint="$WORK/gathered.safetensors"
run per_rank trainer.final_checkpoint="$WORK/shards/idx.safetensors" strategy.sharded_checkpoint=true
printf 'rank 0 writes: gathered %d bytes; per rank %d bytes (its shard) + index %d bytes\n' \
    "$(stat -c %s "$WORK/gathered.safetensors")" \
    "$(stat -c %s "$WORK"/shards/*.shards/rank-00000-of-*.safetensors)" \
    "$(stat -c %s "$WORK/shards/idx.safetensors")"
t0=$(date +%s.%N)
/usr/bin/time -f "%M" -o "$WORK/merge.rss" "$FULGUR" ckpt merge "$WORK/shards" -o "$WORK/merged.safetensors" >/dev/null || exit 1
t1=$(date +%s.%N)
printf 'ckpt merge: %.2f s, peak %.1f MiB, %d bytes\n' "$(echo "$t1 - $t0" | bc -l)" \
    "$(echo "$(cat "$WORK/merge.rss") / 1024" | bc -l)" "$(stat -c %s "$WORK/merged.safetensors")"
python3 "$(dirname "$0")/../ddp/compare_safetensors.py" "$WORK/merged.safetensors" "$WORK/gathered.safetensors" 0
