#!/bin/sh
# [model] sync_batchnorm = true on the emulated CUDA backend (the ABI 1.8 split batch-norm
# ops of kernels/cuda/batchnorm_sync.cu): tests/ddp/sync_batchnorm.ini (the CPU tests'
# residual CNN with 2-D and 1-D batch norm, tanh and average pooling) under ddp on 2
# emulated ranks at batch 32 over the emulated comm.nccl ends within 1e-6 (of the model's
# largest value; each tensor within 1e-5 of its own) of one emulated device at batch 64
# without the key, with the same logged losses; both ranks' running statistics equal
# without a broadcast after setup's; comm.mpi (the sums staged through the host) gives
# bitwise comm.nccl's weights; without the key ddp is far from single; `fulgur check` passes
# the key on backend cuda (it used to refuse it naming the split ops); strategy.dp on 2
# emulated devices (32 + 32) is single within 1e-6 too; one emulated device at batch 64 with
# [model] batch_groups = 2 has ddp's bits (the weights' digest). Host synchronisations
# per steady-state step (FGEMU_SYNC_LOG, rank 0, runs of A and B steps without a log step,
# the stop agreement moved past the run's end): none over comm.nccl (the f64 sums are
# all-reduced on the device, ordered by the stage's stream); over comm.mpi the key adds 3 per
# all-reduce (the stage's queue, the staging copy to the host and back), 2 per batch-norm
# layer and step. STEPS (default 50): the length of the runs compared with single.
#   emu_sync_batchnorm.sh MPIRUN FULGUR EMU_PLUGIN_DIR CONFIG PYTHON DDP_TESTS [STEPS]
set -u
mpirun=$1 fulgur=$2 plugins=$3 cfg=$4 python=$5 ddp_tests=$6 steps=${7:-50}
command -v "$mpirun" >/dev/null 2>&1 || { echo "skip: no mpirun"; exit 77; }
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
grep -v -e '^threads' "$cfg" >ddp.ini
grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' ddp.ini >single.ini
common="backend.name=cuda trainer.num_sanity_val_steps=0"
fail() { echo "FAIL: $*"; exit 1; }
ddp() { # NAME COMM SYNC STEPS [OVERRIDES]: ddp -n 2 on 2 emulated devices
  local name=$1 comm=$2 sync=$3 n=$4
  shift 4
  FGEMU_DEVICES=2 FGEMU_SYNC_LOG="$tmp/$name.syncs" FULGUR_TEST_AGREE_EVERY=1000 \
    "$mpirun" $root --oversubscribe -n 2 -x FGEMU_DEVICES -x FGEMU_SYNC_LOG \
    -x FULGUR_TEST_AGREE_EVERY "$fulgur" --plugin-path "$plugins" fit ddp.ini -v $common \
    trainer.max_steps="$n" comm.name="$comm" model.sync_batchnorm="$sync" \
    trainer.default_root_dir="$tmp/runs" trainer.final_checkpoint="$tmp/$name.safetensors" \
    "$@" >"$name.out" 2>&1 || { cat "$name.out"; fail "ddp run $name"; }
  grep -aq "after $n steps" "$name.out" || { cat "$name.out"; fail "$name did not run $n steps"; }
  [ "$(wc -l <"$name.syncs")" = 2 ] || fail "$name: want a sync line per rank"
}
digest() { grep -ao 'weights: .* digest [0-9a-f]*' "$1.out" | grep -o 'digest [0-9a-f]*' | head -1; }
# rank 0's count of one kind of host sync (host_syncs: all of them)
count() { awk -v k="$2" '$(NF - 1) == "rank" && $NF == "0" { for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1.syncs"; }
buffers() { # NAME RANK: the digest of the rank's running statistics (1 broadcast: setup's)
  grep -aoE "rank $2: model buffers \(128 floats\) digest [0-9a-f]+, 1 broadcast\(s\)" "$1.out" |
    awk '{sub(/,$/, "", $8); print $8}'
}

# the check that refused the key on this backend (naming the split ops) now passes it
"$fulgur" --plugin-path "$plugins" check single.ini strategy.name=single $common \
  model.sync_batchnorm=true >check.out 2>&1 || { cat check.out; fail "check refused sync_batchnorm on cuda"; }
grep -q "backend cuda" check.out || { cat check.out; fail "the check did not use backend cuda"; }
grep -q "batchnorm_stats" check.out && { cat check.out; fail "the check still names the split ops"; }
"$fulgur" --plugin-path "$plugins" fit single.ini strategy.name=single $common \
  trainer.max_steps="$steps" data.batch_size=64 model.sync_batchnorm=false trainer.default_root_dir="$tmp/runs" \
  trainer.final_checkpoint="$tmp/single.safetensors" >single.out 2>&1 ||
  { cat single.out; fail "single at batch 64"; }
grep -q "backend cuda" single.out || { cat single.out; fail "single did not run on backend cuda"; }
ddp sync nccl true "$steps"
ddp nosync nccl false "$steps"
ddp mpi mpi true "$steps"
grep -aq "backend cuda, strategy ddp (2 processes)" sync.out || { cat sync.out; fail "not ddp on cuda"; }

grep '^epoch .* step ' single.out >single.steps
grep -a '^epoch .* step ' sync.out >sync.steps
[ -s single.steps ] && cmp -s single.steps sync.steps ||
  { diff single.steps sync.steps; fail "the logged losses differ (single <, ddp >)"; }
near=$("$python" "$ddp_tests/compare_model_relative.py" sync.safetensors single.safetensors 1e-6) ||
  fail "ddp with sync_batchnorm on cuda is not single at twice the batch: $near"
tensors=$("$python" "$ddp_tests/compare_safetensors.py" sync.safetensors single.safetensors 1e-5) ||
  fail "ddp with sync_batchnorm on cuda: a tensor is not single's: $tensors"
if off=$("$python" "$ddp_tests/compare_model_relative.py" nosync.safetensors single.safetensors 1e-3); then
  fail "without sync_batchnorm ddp still equals single ($off): the key changed nothing"
fi
d0=$(buffers sync 0) d1=$(buffers sync 1)
[ -n "$d0" ] && [ "$d0" = "$d1" ] ||
  { grep -a 'model buffers' sync.out; fail "running statistics differ between ranks or were broadcast: '$d0' '$d1'"; }
a=$(digest sync) b=$(digest mpi)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "weights: comm.nccl $a, comm.mpi $b"
# strategy.dp: 2 emulated devices in one process, 32 + 32 (its all-reduce copies through the host)
FGEMU_DEVICES=2 "$fulgur" --plugin-path "$plugins" fit single.ini strategy.name=dp $common \
  trainer.max_steps="$steps" data.batch_size=64 trainer.default_root_dir="$tmp/runs" \
  trainer.final_checkpoint="$tmp/dp.safetensors" >dp.out 2>&1 || { cat dp.out; fail "dp on 2 devices"; }
grep -q "strategy dp" dp.out || { cat dp.out; fail "not strategy dp"; }
grep '^epoch .* step ' dp.out >dp.steps
cmp -s single.steps dp.steps || { diff single.steps dp.steps; fail "dp: the logged losses differ (single <, dp >)"; }
dpnear=$("$python" "$ddp_tests/compare_model_relative.py" dp.safetensors single.safetensors 1e-6) ||
  fail "dp with sync_batchnorm on cuda is not single: $dpnear"
echo "ok: dp 32 + 32 with sync_batchnorm on 2 emulated devices vs single batch 64: $dpnear"
# [model] batch_groups = 2: one emulated device at 64 takes its sums as the 2 ranks do
"$fulgur" --plugin-path "$plugins" fit single.ini strategy.name=single $common \
  trainer.max_steps="$steps" data.batch_size=64 model.batch_groups=2 \
  trainer.default_root_dir="$tmp/runs" >groups.out 2>&1 || { cat groups.out; fail "single in batch groups"; }
g=$(digest groups)
[ -n "$g" ] && [ "$g" = "$a" ] || fail "single at 64 in 2 batch groups: $g, ddp's: $a"
echo "ok: one emulated device at batch 64 in 2 batch groups has ddp's bits: $g"
echo "ok: ddp -n 2 batch 32 with sync_batchnorm vs single batch 64 on the emulated device after $steps steps: $near; per tensor $tensors; running statistics $d0 on both ranks; comm.mpi = comm.nccl ($a); without the key: $off"

# host synchronisations per steady-state step (no log step between A and B; 3 batch-norm
# layers: 6 replica all-reduces a step)
A=2 B=5
for r in "nccl;nccl;true" "mpi;mpi;true" "mpioff;mpi;false"; do
  name=${r%%;*} rest=${r#*;}
  ddp "${name}A" "${rest%;*}" "${rest#*;}" $A trainer.log_every_n_steps=1000
  ddp "${name}B" "${rest%;*}" "${rest#*;}" $B trainer.log_every_n_steps=1000
done
delta() { echo $(( $(count "${1}B" "$2") - $(count "${1}A" "$2") )); }
k=$((B - A)) added=$(( $(delta mpi host_syncs) - $(delta mpioff host_syncs) ))
echo "host syncs in $k steady-state steps (rank 0): comm.nccl $(delta nccl host_syncs);" \
  "comm.mpi $(delta mpi host_syncs) (cudaStreamSynchronize $(delta mpi cudaStreamSynchronize))," \
  "$(delta mpioff host_syncs) without the key"
[ "$(delta nccl host_syncs)" -eq 0 ] ||
  fail "sync_batchnorm over comm.nccl synchronises the host $(delta nccl host_syncs) times in $k steps (want 0)"
# comm.mpi: per all-reduce the stage's queue, then the staging copy to the host and back
[ "$added" -eq $((3 * 6 * k)) ] ||
  fail "sync_batchnorm over comm.mpi adds $added host syncs in $k steps (want 3 per all-reduce, 18 a step)"
