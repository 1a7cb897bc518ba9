#!/bin/sh
# Host synchronisations per steady-state training step on the emulated CUDA backend
# (FGEMU_SYNC_LOG, tests/cudaemu/emu_runtime.cc): `fulgur fit` of the Fashion-MNIST MLP
# with gradient clipping by norm and OPTIMIZER (sgd | adamw) for A and then B batches in
# one epoch (no log step before the epoch's end, the same validation): the runs differ
# only by B - A steady-state steps, which must hold no host synchronisation at all: no queue
# sync, device sync, event sync or blocking copy to the host. The same two runs with FULGUR_TEST_UNFUSED_STEP=1 (the host-read clip norm)
# must show at least one round trip a step (the counter sees them), and end with the same
# weights (digest) as the fused runs.
#   emu_syncs.sh FULGUR EMU_PLUGIN_DIR CONFIG PRECISION OPTIMIZER STRATEGY [DATA_DIR]
set -u
fulgur=$1 plugins=$2 cfg=$3 precision=$4 optimizer=$5 strategy=$6
data=${7:-/usr/share/datasets/fashion-mnist}
[ -d "$data" ] || { echo "skip: no $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
# the example's [optimizer] is sgd with momentum; adamw takes none of its sgd keys
if [ "$optimizer" = adamw ]; then
  sed -e 's/^name = sgd$/name = adamw/' -e '/^momentum/d' -e 's/^lr = .*/lr = 0.001/' "$cfg" >run.ini
else
  cp "$cfg" run.ini
fi
A=3 B=7
run() { # run NAME BATCHES [ENV...]: the run's sync count in NAME.syncs, its output NAME.out
  name=$1 batches=$2
  shift 2
  rm -f "$tmp/$name.syncs"
  # shellcheck disable=SC2086
  env FGEMU_SYNC_LOG="$tmp/$name.syncs" "$@" "$fulgur" --plugin-path "$plugins" fit run.ini \
    backend.name=cuda strategy.name="$strategy" precision.name="$precision" \
    data.dir="$data" trainer.max_epochs=1 trainer.limit_train_batches="$batches" \
    trainer.limit_val_batches=2 trainer.test_after_fit=false trainer.log_every_n_steps=1000 \
    trainer.gradient_clip_val=0.5 data.num_workers=0 trainer.default_root_dir="$tmp/runs" \
    >"$name.out" 2>&1 || { cat "$name.out"; echo "FAIL: run $name"; exit 1; }
  grep -q "backend cuda" "$name.out" || { cat "$name.out"; echo "FAIL: $name did not use backend cuda"; exit 1; }
  [ -s "$name.syncs" ] || { cat "$name.out"; echo "FAIL: $name wrote no FGEMU_SYNC_LOG"; exit 1; }
}
# count NAME KIND: the run's syncs of one kind (host_syncs: all)
count() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1.syncs"; }
digest() { grep -o 'digest [0-9a-f]*' "$1.out"; }
run fusedA $A
run fusedB $B
run oldA $A FULGUR_TEST_UNFUSED_STEP=1
run oldB $B FULGUR_TEST_UNFUSED_STEP=1
steps=$((B - A))
# per_step PAIR KIND: (count in PAIR B - count in PAIR A) / steps, as "x.yz"
delta() { echo $(( $(count "${1}B" "$2") - $(count "${1}A" "$2") )); }
per_step() { awk -v d="$(delta "$1" "$2")" -v s="$steps" 'BEGIN { printf "%.2f", d / s }'; }
for pair in fused old; do
  echo "$pair: per steady-state step: $(per_step $pair host_syncs) host syncs:" \
    "cudaStreamSynchronize $(per_step $pair cudaStreamSynchronize)," \
    "cudaDeviceSynchronize $(per_step $pair cudaDeviceSynchronize)," \
    "copy_to_pageable $(per_step $pair copy_to_pageable)," \
    "copy_from_pageable $(per_step $pair copy_from_pageable)," \
    "cudaEventSynchronize $(per_step $pair cudaEventSynchronize)" \
    "($A batches: $(count ${pair}A host_syncs), $B: $(count ${pair}B host_syncs))"
done
status=0
# The round trips: the host waits for work it just enqueued (a queue sync, a blocking read).
for kind in cudaStreamSynchronize cudaDeviceSynchronize copy_to_pageable copy_from_pageable cudaEventSynchronize; do
  d=$(delta fused $kind)
  if [ "$d" -ne 0 ]; then
    echo "FAIL: $d $kind in $steps steady-state steps (want 0)"; status=1
  fi
done
# The data loader's staging-slot fence (the copy of the batch that used the slot before,
# recorded batches earlier) asks event_query first and waits only for a copy still running:
# here none is (emulated copies complete when enqueued), so it adds no event sync either.
dr=$(( $(delta old cudaStreamSynchronize) + $(delta old copy_to_pageable) ))
if [ "$dr" -lt "$steps" ]; then
  echo "FAIL: the unfused path shows $dr round trips in $steps steps: the counter misses them"; status=1
fi
wf=$(digest fusedB) wo=$(digest oldB)
if [ -z "$wf" ] || [ "$wf" != "$wo" ]; then
  echo "FAIL: weights fused '$wf', unfused '$wo' (the fused step must be bitwise the old one)"; status=1
else
  echo "ok: the same weights fused and unfused ($wf)"
fi
[ $status = 0 ] || cat fusedB.out oldB.out
exit $status
