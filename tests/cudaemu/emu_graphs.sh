#!/bin/sh
# [backend] cuda_graphs on the emulated CUDA backend: `fulgur fit` of CONFIG for A and then B
# batches of one epoch (gradient clipping by norm, no log step before the epoch's end),
# each run uncaptured and captured (2 eager steps, the third captured, every later one a
# graph replay). Asserts: the captured runs end with the uncaptured runs' weights bit for
# bit (digest); the B - A replayed steps hold no host synchronisation at all (FGEMU_SYNC_LOG:
# queue, device or event sync, blocking copy to the host, a copy to the device out of
# pageable memory: the per-step values come from a page-locked ring); the fit says it replayed B - 3
# steps (so the graph ran, not an eager step).
#   emu_graphs.sh FULGUR EMU_PLUGIN_DIR CONFIG PRECISION OPTIMIZER DATA_DIR A B [KEY=VALUE...]
# OPTIMIZER: sgd or adamw (the config's [optimizer] is rewritten to it).
set -u
fulgur=$1 plugins=$2 cfg=$3 precision=$4 optimizer=$5 data=$6 A=$7 B=$8
shift 8
extra="$*"
[ -d "$data" ] || { echo "skip: no $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
# [optimizer] as asked: sgd with momentum 0.9, or adamw; the other's keys dropped
awk -v opt="$optimizer" '
  /^\[/ { in_opt = ($0 == "[optimizer]") }
  in_opt && /^(name|lr|momentum|weight_decay|beta1|beta2|eps|nesterov|dampening) *=/ { next }
  { print }
  $0 == "[optimizer]" {
    if (opt == "sgd") print "name = sgd\nlr = 0.02\nmomentum = 0.9\nweight_decay = 0.0001"
    else print "name = adamw\nlr = 0.001\nweight_decay = 0.01"
  }' "$cfg" >run.ini
run() { # run NAME BATCHES [KEY=VALUE...]: NAME.out, NAME.syncs
  name=$1 batches=$2
  shift 2
  # shellcheck disable=SC2086
  FGEMU_SYNC_LOG="$tmp/$name.syncs" "$fulgur" --plugin-path "$plugins" fit run.ini \
    backend.name=cuda precision.name="$precision" data.dir="$data" trainer.max_epochs=1 \
    trainer.limit_train_batches="$batches" trainer.limit_val_batches=2 \
    trainer.test_after_fit=false trainer.log_every_n_steps=1000 \
    trainer.gradient_clip_val=0.5 data.num_workers=0 data.drop_last=true \
    trainer.default_root_dir="$tmp/runs" $extra "$@" >"$name.out" 2>&1 ||
    { cat "$name.out"; echo "FAIL: run $name"; exit 1; }
  grep -q "backend cuda" "$name.out" || { cat "$name.out"; echo "FAIL: $name did not use backend cuda"; exit 1; }
  [ -s "$name.syncs" ] || { cat "$name.out"; echo "FAIL: $name wrote no FGEMU_SYNC_LOG"; exit 1; }
}
count() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1.syncs"; }
digest() { grep -o 'digest [0-9a-f]*' "$1.out"; }
run eagerA "$A"
run eagerB "$B"
run graphA "$A" backend.cuda_graphs=true
run graphB "$B" backend.cuda_graphs=true
status=0
for n in A B; do
  we=$(digest eager$n) wg=$(digest graph$n)
  if [ -z "$we" ] || [ "$we" != "$wg" ]; then
    echo "FAIL: $n: weights uncaptured '$we', captured '$wg' (want bit for bit)"; status=1
  else
    echo "ok: $n: the same weights captured and uncaptured ($wg)"
  fi
done
want=$((B - 3))
if ! grep -q "cuda graphs: step 3 of the fit captured, $want step(s) replayed" graphB.out; then
  echo "FAIL: graphB does not say it replayed $want steps"; status=1
fi
steps=$((B - A))
for kind in host_syncs cudaStreamSynchronize cudaDeviceSynchronize copy_to_pageable copy_from_pageable cudaEventSynchronize; do
  d=$(( $(count graphB $kind) - $(count graphA $kind) ))
  e=$(( $(count eagerB $kind) - $(count eagerA $kind) ))
  echo "$kind in $steps steady-state steps: captured $d, uncaptured $e"
  if [ "$d" -ne 0 ]; then
    echo "FAIL: $d $kind in $steps replayed steps (want 0)"; status=1
  fi
done
[ $status = 0 ] || cat graphA.out graphB.out eagerB.out
exit $status
