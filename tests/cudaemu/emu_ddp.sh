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
run() { # COMM DEVICES LOG [OVERRIDES...]
  local comm=$1 devices=$2 log=$3
  shift 3
  FGEMU_DEVICES=$devices FGEMU_NCCL_ENQUEUE_MS=60 "$mpirun" $root --oversubscribe -n 2 \
    -x FGEMU_DEVICES -x FGEMU_NCCL_ENQUEUE_MS \
    "$fulgur" --plugin-path "$plugins" fit "$cfg" comm.name="$comm" \
    trainer.default_root_dir="$tmp/runs" "$@" >"$log" 2>&1
}
run nccl 2 nccl.out || { cat nccl.out; echo "FAIL: ddp with the emulated comm.nccl"; exit 1; }
run mpi 2 mpi.out || { cat mpi.out; echo "FAIL: ddp with comm.mpi"; exit 1; }
grep -q "backend cuda, strategy ddp (2 processes)" nccl.out || { cat nccl.out; echo "FAIL: not ddp on cuda"; exit 1; }
a=$(grep -o 'digest [0-9a-f]*' nccl.out) b=$(grep -o 'digest [0-9a-f]*' mpi.out)
[ -n "$a" ] && [ "$a" = "$b" ] || { cat nccl.out mpi.out; echo "FAIL: weights: nccl $a, mpi $b"; exit 1; }
grep '^epoch .* step ' nccl.out >nccl.steps; grep '^epoch .* step ' mpi.out >mpi.steps
[ -s nccl.steps ] && cmp -s nccl.steps mpi.steps || { cat nccl.out mpi.out; echo "FAIL: logged losses differ"; exit 1; }
echo "ok: comm.nccl (emulated) and comm.mpi: $a, $(wc -l <nccl.steps) identical loss lines"
# On comm.nccl the buckets start after an event on the compute stream and the compute stream
# waits for them (wait_on_queue): no host synchronisation. The emulated collectives complete
# late (FGEMU_NCCL_ENQUEUE_MS), so a compute stream that did not wait would average stale
# gradients and the digests above would differ; the start's order cannot be seen here
# (emulated kernels complete when enqueued).
grep -q "ordered on the device (no host synchronisation)" nccl.out ||
  { cat nccl.out; echo "FAIL: the nccl buckets are not ordered on the device"; exit 1; }
grep -q "ordered on the device" mpi.out && { cat mpi.out; echo "FAIL: comm.mpi claims device order"; exit 1; }
# grad_comm_dtype = bf16: the cast to the wire copy and back runs on the device around the
# collective; both comms sum two bf16 values in f32 and round once, so the weights agree.
run nccl 2 nccl16.out strategy.grad_comm_dtype=bf16 || { cat nccl16.out; echo "FAIL: bf16 gradients on comm.nccl"; exit 1; }
run mpi 2 mpi16.out strategy.grad_comm_dtype=bf16 || { cat mpi16.out; echo "FAIL: bf16 gradients on comm.mpi"; exit 1; }
a16=$(grep -o 'digest [0-9a-f]*' nccl16.out) b16=$(grep -o 'digest [0-9a-f]*' mpi16.out)
[ -n "$a16" ] && [ "$a16" = "$b16" ] && [ "$a16" != "$a" ] ||
  { cat nccl16.out mpi16.out; echo "FAIL: bf16 weights: nccl $a16, mpi $b16 (f32: $a)"; exit 1; }
echo "ok: grad_comm_dtype = bf16 on comm.nccl (emulated) and comm.mpi: $a16 (f32 run: $a)"
if run nccl 1 dup.out; then
  cat dup.out; echo "FAIL: two ranks on one device were accepted"; exit 1
fi
grep -q "Duplicate GPU detected" dup.out || { cat dup.out; echo "FAIL: no duplicate-GPU message"; exit 1; }
echo "ok: two ranks on one device refused: $(grep -m1 -o 'Duplicate GPU detected[^;]*' dup.out)"
