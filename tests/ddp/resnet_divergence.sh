#!/bin/sh
# A measurement, not a test: how far ddp -n 2 at batch 32 (sync_batchnorm) drifts from one
# device at batch 64 on the CPU backend, per step, on examples/fashion_mnist_resnet.ini read
# from Debian's fashion-mnist idx files (no augmentation, no callbacks but a checkpoint per
# step, backend.threads = 1 everywhere: the CPU backend's gemm blocks depend on the pool's
# size, so 1 against 2 threads differs too). For each optimizer (sgd: lr 0.05, momentum
# 0.9; adamw: the example's), activation (relu, tanh) and first pooling (max, avg): the
# model's largest difference over its largest value at steps 1, 2, 3, 5, 10, 20, 50, and the
# tensor it is in; and the same for one device at batch 64 with [model] batch_groups = 2
# (0: the same bits). README.md ("Batch norm across replicas") quotes the figures.
#   tests/ddp/resnet_divergence.sh FULGUR [WORKDIR]      (about 30 minutes on 2 loaded cores)
set -eu
fulgur=$1 work=${2:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../../examples/fashion_mnist_resnet.ini
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
export OPENBLAS_NUM_THREADS=1
common="backend.threads=1 trainer.max_steps=50 trainer.num_sanity_val_steps=0 trainer.check_val_every_n_epoch=0 trainer.test_after_fit=false model.sync_batchnorm=true"
for opt in sgd adamw; do for act in relu tanh; do for pool in maxpool2d avgpool2d; do
  d=$work/${opt}_${act}_${pool}
  mkdir -p "$d"
  sh "$here/resnet_ini.sh" "$src" "$act" "$pool" "$opt" 1 >"$d/single.ini"
  { cat "$d/single.ini"; printf '\n[comm]\nname = mpi\ntimeout_s = 300\n'; } >"$d/ddp.ini"
  # shellcheck disable=SC2086
  "$fulgur" fit "$d/single.ini" $common trainer.default_root_dir="$d/single" \
    callback.checkpoint.dirpath="$d/single/ck" >"$d/single.out" 2>&1
  # shellcheck disable=SC2086
  mpirun $root --oversubscribe -n 2 -x OPENBLAS_NUM_THREADS "$fulgur" fit "$d/ddp.ini" $common \
    strategy.name=ddp data.batch_size=32 trainer.default_root_dir="$d/ddp" \
    callback.checkpoint.dirpath="$d/ddp/ck" >"$d/ddp.out" 2>&1
  # shellcheck disable=SC2086
  "$fulgur" fit "$d/single.ini" $common model.batch_groups=2 trainer.default_root_dir="$d/groups" \
    callback.checkpoint.dirpath="$d/groups/ck" >"$d/groups.out" 2>&1
  echo "== $opt $act $pool: ddp -n 2 x 32 against single x 64 (and single x 64 in 2 batch groups)"
  python3 - "$d/ddp/ck" "$d/single/ck" "$d/groups/ck" <<'PY'
import array, json, os, struct, sys
def read(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    head, data, out = json.loads(blob[8:8 + n]), blob[8 + n:], {}
    for k, t in head.items():
        if k == "__metadata__" or k.startswith("optimizer.") or t["dtype"] != "F32": continue
        a, b = t["data_offsets"]; v = array.array("f"); v.frombytes(data[a:b]); out[k] = v
    return out
for s in (1, 2, 3, 5, 10, 20, 50):
    A = read(os.path.join(sys.argv[1], f"step={s}.safetensors"))
    B = read(os.path.join(sys.argv[2], f"step={s}.safetensors"))
    G = read(os.path.join(sys.argv[3], f"step={s}.safetensors"))
    scale = max(max(abs(x) for x in v) for v in B.values())
    d, k = max((max(abs(x - y) for x, y in zip(A[k], B[k])), k) for k in B)
    g = max(max(abs(x - y) for x, y in zip(A[k], G[k])) for k in G)
    print(f"  step {s:2d}: {d / scale:.2e} ({k}); in batch groups {g / scale:.2e}")
PY
done; done; done
