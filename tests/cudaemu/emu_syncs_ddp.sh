#!/bin/sh
# Host synchronisations per step of ddp on 2 ranks (mpirun) with the emulated CUDA backend
# and NCCL, clipping by norm: runs of A and B optimizer steps (no log step, no sanity
# validation), counted by FGEMU_SYNC_LOG (one line per rank). Steady-state steps hold no
# queue sync and no blocking copy to the host: the gradient buckets start after an event on
# the compute stream and the stream waits for them on the device (comm.nccl's
# wait_on_queue), and the clip factor stays on the device. The host-read norm
# (FULGUR_TEST_UNFUSED_STEP=1) takes exactly one queue sync a step more, and both give the
# same weights. The ranks' stop agreement (about once a second, so a count that varies with
# the run's speed) is moved past the runs' end (FULGUR_TEST_AGREE_EVERY=1000); the loader's
# staging fence asks event_query before it waits. Steady state: no host synchronisation.
#   emu_syncs_ddp.sh MPIRUN FULGUR EMU_PLUGIN_DIR CONFIG
set -u
mpirun=$1 fulgur=$2 plugins=$3 cfg=$4
command -v "$mpirun" >/dev/null 2>&1 || { echo "skip: no mpirun"; exit 77; }
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
A=6 B=14
run() { # NAME STEPS UNFUSED
  FGEMU_DEVICES=2 FGEMU_SYNC_LOG="$tmp/$1.syncs" FULGUR_TEST_UNFUSED_STEP=$3 \
    FULGUR_TEST_AGREE_EVERY=1000 "$mpirun" $root --oversubscribe -n 2 -x FGEMU_DEVICES \
    -x FGEMU_SYNC_LOG -x FULGUR_TEST_UNFUSED_STEP -x FULGUR_TEST_AGREE_EVERY "$fulgur" --plugin-path "$plugins" fit "$cfg" comm.name=nccl \
    trainer.max_steps="$2" trainer.log_every_n_steps=1000 trainer.gradient_clip_val=0.5 \
    trainer.num_sanity_val_steps=0 trainer.default_root_dir="$tmp/runs" >"$1.out" 2>&1 ||
    { cat "$1.out"; echo "FAIL: run $1"; exit 1; }
  [ "$(wc -l <"$1.syncs")" = 2 ] || { cat "$1.out"; echo "FAIL: $1: want a sync line per rank"; exit 1; }
}
# count NAME KIND: rank 0's count of one kind (host_syncs: all); the ranks' lines come in
# the order they exit, each ending "rank R"
count() { awk -v k="$2" '$(NF - 1) == "rank" && $NF == "0" { for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1.syncs"; }
delta() { echo $(( $(count "${1}B" "$2") - $(count "${1}A" "$2") )); }
run fusedA $A 0
run fusedB $B 0
run oldA $A 1
run oldB $B 1
steps=$((B - A))
for pair in fused old; do
  echo "$pair: in $steps steady-state steps (rank 0): $(delta $pair host_syncs) host syncs:" \
    "cudaStreamSynchronize $(delta $pair cudaStreamSynchronize)," \
    "copy_to_pageable $(delta $pair copy_to_pageable)," \
    "copy_from_pageable $(delta $pair copy_from_pageable)," \
    "cudaEventSynchronize $(delta $pair cudaEventSynchronize)"
done
status=0
ds=$(( $(delta old cudaStreamSynchronize) - $(delta fused cudaStreamSynchronize) ))
if [ "$ds" -ne "$steps" ]; then
  echo "FAIL: the device clip path saves $ds queue syncs in $steps steps (want one a step)"; status=1
fi
if [ "$(delta fused host_syncs)" -ne 0 ]; then
  echo "FAIL: steady-state ddp steps synchronise the host $(delta fused host_syncs) times in $steps steps (want 0)"; status=1
fi
if [ "$(delta fused copy_to_pageable)" -gt "$(delta old copy_to_pageable)" ]; then
  echo "FAIL: the device clip path makes more blocking copies than the host path"; status=1
fi
a=$(grep -o 'digest [0-9a-f]*' fusedB.out) b=$(grep -o 'digest [0-9a-f]*' oldB.out)
if [ -z "$a" ] || [ "$a" != "$b" ]; then
  echo "FAIL: weights: fused $a, unfused $b"; status=1
else
  echo "ok: the same weights fused and unfused ($a)"
fi
[ $status = 0 ] || cat fusedB.out oldB.out
exit $status
