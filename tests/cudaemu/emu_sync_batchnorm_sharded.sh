#!/bin/sh
# [model] sync_batchnorm = true under strategy.sharded on the emulated CUDA backend:
# tests/ddp/sync_batchnorm.ini (the residual CNN of cudaemu.sync_batchnorm.ddp: 2-D and
# 1-D batch norm, tanh and average pooling, SGD) with stages 1, 2 and 3 on 2 emulated
# ranks at batch 32 over COMM (mpi: comm.nccl lacks the per-rank-count collectives that
# sharded needs) ends within 1e-6 (of the model's largest value; each tensor within 1e-5
# of its own) of one emulated device at batch 64 without the key, with the same logged
# losses, and both ranks' running statistics equal with no broadcast after setup's; stage
# 2 without the key is far from single (1e-3), so the key is what makes the runs meet.
# STEPS (default 20): the runs' length (the ddp test runs 50; without the key the runs
# are 3.8e-2 apart after 20, so 1e-6 still separates synchronised from not).
#   emu_sync_batchnorm_sharded.sh MPIRUN FULGUR EMU_PLUGIN_DIR CONFIG PYTHON DDP_TESTS COMM [STEPS]
set -u
mpirun=$1 fulgur=$2 plugins=$3 cfg=$4 python=$5 ddp_tests=$6 comm=$7 steps=${8:-20}
command -v "$mpirun" >/dev/null 2>&1 || { echo "skip: no mpirun"; exit 77; }
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
grep -v -e '^threads' -e '^name = ddp' "$cfg" |
  sed -e 's/^\[strategy\]/[strategy]\nname = sharded/' >sharded.ini
grep -v -e '^threads' -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' "$cfg" >single.ini
common="backend.name=cuda trainer.num_sanity_val_steps=0 trainer.max_steps=$steps"
fail() { echo "FAIL: $*"; exit 1; }
sharded() { # NAME STAGE SYNC: sharded -n 2 on 2 emulated devices at batch 32
  FGEMU_DEVICES=2 "$mpirun" $root --oversubscribe -n 2 -x FGEMU_DEVICES \
    "$fulgur" --plugin-path "$plugins" fit sharded.ini -v $common strategy.stage="$2" \
    comm.name="$comm" model.sync_batchnorm="$3" trainer.default_root_dir="$tmp/runs" \
    trainer.final_checkpoint="$tmp/$1.safetensors" >"$1.out" 2>&1 ||
    { cat "$1.out"; fail "sharded run $1"; }
  grep -aq "after $steps steps" "$1.out" || { cat "$1.out"; fail "$1 did not run $steps steps"; }
  grep -aq "backend cuda, strategy sharded (2 processes)" "$1.out" ||
    { cat "$1.out"; fail "$1 is not sharded on cuda"; }
}
buffers() { # NAME RANK: the digest of the rank's running statistics (1 broadcast: setup's)
  grep -aoE "rank $2: model buffers \(128 floats\) digest [0-9a-f]+, 1 broadcast\(s\)" "$1.out" |
    awk '{sub(/,$/, "", $8); print $8}'
}
"$fulgur" --plugin-path "$plugins" fit single.ini strategy.name=single $common \
  data.batch_size=64 model.sync_batchnorm=false trainer.default_root_dir="$tmp/runs" \
  trainer.final_checkpoint="$tmp/single.safetensors" >single.out 2>&1 ||
  { cat single.out; fail "single at batch 64"; }
grep -q "backend cuda" single.out || { cat single.out; fail "single did not run on backend cuda"; }
grep '^epoch .* step ' single.out >single.steps
[ -s single.steps ] || { cat single.out; fail "single logged no step"; }
for s in 1 2 3; do
  sharded "stage$s" "$s" true
  grep -a '^epoch .* step ' "stage$s.out" >"stage$s.steps"
  cmp -s single.steps "stage$s.steps" ||
    { diff single.steps "stage$s.steps"; fail "stage $s: the logged losses differ (single <, sharded >)"; }
  near=$("$python" "$ddp_tests/compare_model_relative.py" "stage$s.safetensors" single.safetensors 1e-6) ||
    fail "stage $s with sync_batchnorm on cuda is not single at twice the batch: $near"
  tensors=$("$python" "$ddp_tests/compare_safetensors.py" "stage$s.safetensors" single.safetensors 1e-5) ||
    fail "stage $s with sync_batchnorm on cuda: a tensor is not single's: $tensors"
  d0=$(buffers "stage$s" 0) d1=$(buffers "stage$s" 1)
  [ -n "$d0" ] && [ "$d0" = "$d1" ] ||
    { grep -a 'model buffers' "stage$s.out"; fail "stage $s: running statistics differ between ranks or were broadcast: '$d0' '$d1'"; }
  echo "ok: sharded stage $s ($comm) batch 32 x 2 with sync_batchnorm vs single batch 64 on the emulated device after $steps steps: $near; per tensor $tensors; running statistics $d0 on both ranks"
done
sharded nosync 2 false
if off=$("$python" "$ddp_tests/compare_model_relative.py" nosync.safetensors single.safetensors 1e-3); then
  fail "without sync_batchnorm sharded still equals single ($off): the key changed nothing"
fi
echo "ok: without the key stage 2 is $off"
