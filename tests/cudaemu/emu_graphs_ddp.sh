#!/bin/sh
# [backend] cuda_graphs under ddp on 2 ranks (mpirun) with the emulated CUDA backend and
# NCCL, clipping by norm: runs of A and B optimizer steps, uncaptured and captured (2 eager
# steps, the third captured with its gradient buckets' NCCL all-reduces, every later one a
# graph replay). Asserts: the captured runs end with the uncaptured runs' weights bit for bit
# (digest), also with strategy.grad_comm_dtype = bf16; buckets of 1310 floats, so a bucket
# starts before backward ends and ddp asks comm.nccl's test() about it while backward is
# captured (its event is a graph node: "not done", never an error); rank 0's B - A replayed steps hold
# no host synchronisation of any kind (FGEMU_SYNC_LOG); the fit says it replayed B - 3
# steps; ddp over comm.mpi, and ddp with model buffers (batch-norm running statistics, which
# ddp copies from rank 0 on the host's say), are refused at setup with their messages.
# With DROPOUT (a probability): CONFIG with a dropout layer of that p before each of fc2 and
# fc3 (each rank draws its own masks from device counters: ABI 1.10's dropout_forward_dev),
# the fp32 wire only, and no refusal cases.
#   emu_graphs_ddp.sh MPIRUN FULGUR EMU_PLUGIN_DIR CONFIG [DROPOUT]
set -u
mpirun=$1 fulgur=$2 plugins=$3 cfg=$4 dropout=${5:-}
command -v "$mpirun" >/dev/null 2>&1 || { echo "skip: no mpirun"; exit 77; }
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
A=5 B=9
wires="fp32 bf16"
if [ -n "$dropout" ]; then
  awk -v p="$dropout" '$0 == "[layer.fc2]" || $0 == "[layer.fc3]" {
         print "[layer.drop" ++k "]\ntype = dropout\np = " p "\n" }
       { print }' "$cfg" >dropout.ini
  [ "$(grep -c "^type = dropout" dropout.ini)" = 2 ] || { echo "FAIL: no dropout in $cfg"; exit 1; }
  cfg=$tmp/dropout.ini wires=fp32
fi
launch() { # NAME STEPS [KEY=VALUE...]: NAME.out, NAME.syncs; returns fulgur's status
  name=$1 steps=$2
  shift 2
  FGEMU_DEVICES=2 FGEMU_SYNC_LOG="$tmp/$name.syncs" FULGUR_TEST_AGREE_EVERY=1000 \
    "$mpirun" $root --oversubscribe -n 2 -x FGEMU_DEVICES -x FGEMU_SYNC_LOG \
    -x FULGUR_TEST_AGREE_EVERY "$fulgur" --plugin-path "$plugins" fit "$cfg" \
    trainer.max_steps="$steps" trainer.log_every_n_steps=1000 trainer.gradient_clip_val=0.5 \
    trainer.num_sanity_val_steps=0 data.drop_last=true trainer.default_root_dir="$tmp/runs" \
    strategy.bucket_mb=0.005 "$@" >"$name.out" 2>&1
}
run() {
  launch "$@" || { cat "$1.out"; echo "FAIL: run $1"; exit 1; }
  [ "$(wc -l <"$1.syncs")" = 2 ] || { cat "$1.out"; echo "FAIL: $1: want a sync line per rank"; exit 1; }
}
count() { awk -v k="$2" '$(NF - 1) == "rank" && $NF == "0" { for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1.syncs"; }
digest() { grep -o 'digest [0-9a-f]*' "$1.out" | head -1; }
status=0
for wire in $wires; do
  run eagerA$wire $A comm.name=nccl strategy.grad_comm_dtype=$wire
  run eagerB$wire $B comm.name=nccl strategy.grad_comm_dtype=$wire
  run graphA$wire $A comm.name=nccl strategy.grad_comm_dtype=$wire backend.cuda_graphs=true
  run graphB$wire $B comm.name=nccl strategy.grad_comm_dtype=$wire backend.cuda_graphs=true
  for n in A B; do
    we=$(digest eager$n$wire) wg=$(digest graph$n$wire)
    if [ -z "$we" ] || [ "$we" != "$wg" ]; then
      echo "FAIL: $wire $n: weights uncaptured '$we', captured '$wg' (want bit for bit)"; status=1
    else
      echo "ok: $wire $n: the same weights captured and uncaptured ($wg)"
    fi
  done
  want=$((B - 3))
  if ! grep -q "cuda graphs: step 3 of the fit captured, $want step(s) replayed" graphB$wire.out; then
    echo "FAIL: $wire: graphB does not say it replayed $want steps"; status=1
  fi
  for kind in host_syncs cudaStreamSynchronize cudaDeviceSynchronize copy_to_pageable \
              copy_from_pageable cudaEventSynchronize; do
    d=$(( $(count graphB$wire $kind) - $(count graphA$wire $kind) ))
    e=$(( $(count eagerB$wire $kind) - $(count eagerA$wire $kind) ))
    echo "$wire: $kind in $((B - A)) steady-state steps (rank 0): captured $d, uncaptured $e"
    if [ "$d" -ne 0 ]; then
      echo "FAIL: $wire: $d $kind in $((B - A)) replayed steps (want 0)"; status=1
    fi
  done
  [ $status = 0 ] || cat graphB$wire.out
done
[ -z "$dropout" ] || exit $status
want="[backend] cuda_graphs: [strategy] ddp over [comm] mpi: its collectives run on the host"
if launch mpi 3 comm.name=mpi backend.cuda_graphs=true || ! grep -qF -- "$want" mpi.out; then
  cat mpi.out; echo "FAIL: ddp over comm.mpi under cuda_graphs: want a failure saying '$want'"
  status=1
else
  echo "ok: ddp over comm.mpi refused: $(grep -F -m1 -- "$want" mpi.out)"
fi
want="[backend] cuda_graphs: [strategy] ddp: the model holds buffers"
if launch bn 3 comm.name=nccl backend.cuda_graphs=true layer.bn.type=batchnorm ||
   ! grep -qF -- "$want" bn.out; then
  cat bn.out; echo "FAIL: ddp with batch-norm buffers under cuda_graphs: want '$want'"
  status=1
else
  echo "ok: ddp with batch-norm buffers refused: $(grep -F -m1 -- "$want" bn.out)"
fi
exit $status
