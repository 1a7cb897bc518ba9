#!/bin/sh
# [strategy] offload_optimizer = host on the emulated CUDA device: the master weights and the
# optimizer state in page-locked host memory (cudaHostAlloc), the gradients copied there
# bucket by bucket, updated by plugins/common's host AdamW (kernels/cpu), the working copy
# copied back. Each run is compared with the same run without offload (AdamW on the
# device's kernels): weights and optimizer state bitwise, the same logged losses.
#   single fp32 (clipping by norm) and bf16-mixed (grad_dtype = half, as offload keeps
#   them); ddp on 2 emulated devices over the emulated comm.nccl; sharded stages 1 and 2 on
#   2 devices (comm.mpi, which reads the emulator's device memory: host memory); and single
#   bf16-mixed offloaded to step 10, resumed offloaded to 20 == the unbroken run without;
#   [backend] cuda_graphs = true beside it refused with its message.
#   emu_offload.sh MPIRUN FULGUR EMU_PLUGIN_DIR CONFIG COMPARE PYTHON
set -u
mpirun=$1 fulgur=$2 plugins=$3 cfg=$4 compare=$5 python=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
# the base config as each strategy reads it
grep -v -e '^threads' -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' -e '^stage' -e '^bucket_mb' \
  -e '^name = sharded' "$cfg" | sed -e 's/^name = cpu/name = cuda/' \
  -e 's/^\[strategy\]/[strategy]\nname = single/' >single.ini
grep -v -e '^threads' -e '^stage' "$cfg" | sed -e 's/^name = cpu/name = cuda/' \
  -e 's/^name = sharded/name = ddp/' -e 's/^name = mpi/name = nccl/' >ddp.ini
grep -v -e '^threads' "$cfg" | sed -e 's/^name = cpu/name = cuda/' >sharded.ini
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
run() { # run N LOG ARGS...
  n=$1 log=$2
  shift 2
  if [ "$n" = 1 ]; then
    "$fulgur" --plugin-path "$plugins" "$@" trainer.default_root_dir="$tmp/runs" >"$log" 2>&1
  else
    FGEMU_DEVICES=2 "$mpirun" $root --oversubscribe -n "$n" -x FGEMU_DEVICES \
      "$fulgur" --plugin-path "$plugins" "$@" trainer.default_root_dir="$tmp/runs" >"$log" 2>&1
  fi
}
same() { # same N NAME INI OVERRIDES...
  n=$1 name=$2 ini=$3
  shift 3
  run "$n" "$name.ref.out" fit "$ini" trainer.max_steps=20 "$@" \
    trainer.final_checkpoint="$tmp/$name.ref.safetensors" || { cat "$name.ref.out"; fail "$name without offload"; }
  run "$n" "$name.off.out" fit "$ini" trainer.max_steps=20 "$@" strategy.offload_optimizer=host \
    trainer.final_checkpoint="$tmp/$name.off.safetensors" || { cat "$name.off.out"; fail "$name with offload"; }
  grep -q "backend cuda" "$name.off.out" || { cat "$name.off.out"; fail "$name: not on backend cuda"; }
  grep -q 'offload_optimizer = host: 20 steps, host update' "$name.off.out" ||
    { cat "$name.off.out"; fail "$name: the host update did not run 20 steps"; }
  grep '^epoch .* step ' "$name.ref.out" >ref.steps
  grep '^epoch .* step ' "$name.off.out" >off.steps
  [ -s ref.steps ] && cmp -s ref.steps off.steps || { cat "$name.ref.out" "$name.off.out"; fail "$name: logged losses differ"; }
  out=$("$python" "$compare" "$name.off.safetensors" "$name.ref.safetensors" 0) ||
    fail "$name: weights or optimizer state differ with offload: $out"
  grep -q '^memory (device 0):.* optimizer 0.00 MiB' "$name.off.out" ||
    { grep '^memory' "$name.off.out"; fail "$name: optimizer bytes left on the device"; }
  echo "ok: $name on the emulated device, offload == device update (bitwise): $out"
}
# a CUDA graph cannot hold the host waits and update: refused by name
if run 1 graphs.out fit single.ini backend.cuda_graphs=true strategy.offload_optimizer=host \
  trainer.max_steps=3; then cat graphs.out; fail "cuda_graphs with offload accepted"; fi
grep -q 'offload_optimizer = host with \[backend\] cuda_graphs = true is not supported' graphs.out ||
  { cat graphs.out; fail "cuda_graphs with offload: no message"; }
echo "ok: refused: $(grep -m1 'cuda_graphs = true is not supported' graphs.out)"
same 1 single_fp32 single.ini trainer.gradient_clip_val=0.5
same 1 single_bf16 single.ini precision.name=bf16-mixed precision.grad_dtype=half
command -v "$mpirun" >/dev/null 2>&1 || { echo "skip: no mpirun for the 2-rank runs"; exit 77; }
same 2 ddp_nccl ddp.ini trainer.gradient_clip_val=0.5
same 2 sharded1 sharded.ini strategy.stage=1
same 2 sharded2 sharded.ini strategy.stage=2
# resume: step 10 offloaded, then to 20 offloaded == the unbroken run without offload
bf="precision.name=bf16-mixed precision.grad_dtype=half"
# shellcheck disable=SC2086
run 1 half.out fit single.ini $bf trainer.max_steps=10 strategy.offload_optimizer=host \
  trainer.final_checkpoint="$tmp/half.safetensors" || { cat half.out; fail "offloaded run to step 10"; }
# shellcheck disable=SC2086
run 1 resumed.out fit single.ini $bf trainer.max_steps=20 strategy.offload_optimizer=host \
  --ckpt-path "$tmp/half.safetensors" trainer.final_checkpoint="$tmp/resumed.safetensors" ||
  { cat resumed.out; fail "resumed offloaded run"; }
grep -q 'resuming at epoch 1, batch 10, step 10' resumed.out || { cat resumed.out; fail "no resume at step 10"; }
out=$("$python" "$compare" resumed.safetensors single_bf16.ref.safetensors 0) ||
  fail "offloaded checkpoint resumed differs from the unbroken run: $out"
echo "ok: single bf16-mixed offloaded to 10, resumed offloaded to 20 == unbroken without offload: $out"
