#!/bin/sh
# ddp on 2 ranks (processes, under mpirun) with the emulated CUDA backend: comm.nccl over
# the emulated NCCL must give the weights comm.mpi gives, bit for bit (2 ranks: one sum per
# element in either), and the same logged losses. Then both ranks on one device: the
# emulated NCCL must refuse it as NCCL does ("Duplicate GPU detected"). Every emulated
# enqueue takes 60 ms (FGEMU_NCCL_ENQUEUE_MS), longer than comm-nccl's 50 ms watchdog poll:
# a watchdog call on the communicator concurrent with an enqueue (NCCL forbids it) is met.
#   emu_ddp.sh MPIRUN FULGUR EMU_PLUGIN_DIR CONFIG
set -u
mpirun=$1 fulgur=$2 plugins=$3 cfg=$4
command -v "$mpirun" >/dev/null 2>&1 || { echo "skip: no mpirun"; exit 77; }
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
run() { # COMM DEVICES LOG
  FGEMU_DEVICES=$2 FGEMU_NCCL_ENQUEUE_MS=60 "$mpirun" $root --oversubscribe -n 2 \
    -x FGEMU_DEVICES -x FGEMU_NCCL_ENQUEUE_MS \
    "$fulgur" --plugin-path "$plugins" fit "$cfg" comm.name="$1" \
    trainer.default_root_dir="$tmp/runs" >"$3" 2>&1
}
run nccl 2 nccl.out || { cat nccl.out; echo "FAIL: ddp with the emulated comm.nccl"; exit 1; }
run mpi 2 mpi.out || { cat mpi.out; echo "FAIL: ddp with comm.mpi"; exit 1; }
grep -q "backend cuda, strategy ddp (2 processes)" nccl.out || { cat nccl.out; echo "FAIL: not ddp on cuda"; exit 1; }
a=$(grep -o 'digest [0-9a-f]*' nccl.out) b=$(grep -o 'digest [0-9a-f]*' mpi.out)
[ -n "$a" ] && [ "$a" = "$b" ] || { cat nccl.out mpi.out; echo "FAIL: weights: nccl $a, mpi $b"; exit 1; }
grep '^epoch .* step ' nccl.out >nccl.steps; grep '^epoch .* step ' mpi.out >mpi.steps
[ -s nccl.steps ] && cmp -s nccl.steps mpi.steps || { cat nccl.out mpi.out; echo "FAIL: logged losses differ"; exit 1; }
echo "ok: comm.nccl (emulated) and comm.mpi: $a, $(wc -l <nccl.steps) identical loss lines"
if run nccl 1 dup.out; then
  cat dup.out; echo "FAIL: two ranks on one device were accepted"; exit 1
fi
grep -q "Duplicate GPU detected" dup.out || { cat dup.out; echo "FAIL: no duplicate-GPU message"; exit 1; }
echo "ok: two ranks on one device refused: $(grep -m1 -o 'Duplicate GPU detected[^;]*' dup.out)"
