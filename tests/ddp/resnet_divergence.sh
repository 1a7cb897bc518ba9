#!/bin/sh
# A measurement, not a test: how far ddp -n 2 at batch 32 (sync_batchnorm) drifts from one
# device at batch 64 on the CPU backend, per step, on examples/fashion_mnist_resnet.ini read
# from Debian's fashion-mnist idx files (no augmentation, no callbacks but a checkpoint per
# step, backend.threads = 1 everywhere: the CPU backend's gemm blocks depend on the pool's
# size, so 1 against 2 threads differs too). For each optimizer (sgd: lr 0.05, momentum
# 0.9; adamw: the example's), activation (relu, tanh) and first pooling (max, avg): the
# model's largest difference over its largest value at steps 1, 2, 3, 5, 10, 20, 50, and the
# tensor it is in. README.md ("Batch norm across replicas") quotes the figures.
#   tests/ddp/resnet_divergence.sh FULGUR [WORKDIR]      (about 30 minutes on 2 loaded cores)
set -eu
fulgur=$1 work=${2:-$(mktemp -d)}
src=$(cd "$(dirname "$0")/../.." && pwd)/examples/fashion_mnist_resnet.ini
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
export OPENBLAS_NUM_THREADS=1
ini() { # ACT POOL OPT: the example on the idx files with a checkpoint every step
  awk -v act="$1" -v pool="$2" -v opt="$3" '
/^\[data\]/ { print "[data]\nname = idx\ndir = /usr/share/datasets/fashion-mnist\nbatch_size = 64\nnum_workers = 0\nnormalize = true\nval_split = 5000\nshuffle = true\n"; skip = 1; next }
/^\[callback\./ { skip = 1; next }
/^\[optimizer\]/ { if (opt == "sgd") print "[optimizer]\nname = sgd\nlr = 0.05\nmomentum = 0.9\n"; else print "[optimizer]\nname = adamw\nlr = 0.003\nweight_decay = 0.01\n"; skip = 1; next }
/^\[/ { skip = 0 }
skip { next }
/^type = relu/ { print "type = " act; next }
/^type = maxpool2d/ { print "type = " pool; next }
{ print }' "$src"
  printf '[callback.checkpoint]\nmonitor =\nsave_top_k = -1\nevery_n_train_steps = 1\nevery_n_epochs = 0\nfilename = step={step}\n'
}
common="backend.threads=1 trainer.max_steps=50 trainer.num_sanity_val_steps=0 trainer.check_val_every_n_epoch=0 trainer.test_after_fit=false model.sync_batchnorm=true"
for opt in sgd adamw; do for act in relu tanh; do for pool in maxpool2d avgpool2d; do
  d=$work/${opt}_${act}_${pool}
  mkdir -p "$d"
  ini "$act" "$pool" "$opt" >"$d/single.ini"
  { cat "$d/single.ini"; printf '\n[comm]\nname = mpi\ntimeout_s = 300\n'; } >"$d/ddp.ini"
  # shellcheck disable=SC2086
  "$fulgur" fit "$d/single.ini" $common trainer.default_root_dir="$d/single" \
    callback.checkpoint.dirpath="$d/single/ck" >"$d/single.out" 2>&1
  # shellcheck disable=SC2086
  mpirun $root --oversubscribe -n 2 -x OPENBLAS_NUM_THREADS "$fulgur" fit "$d/ddp.ini" $common \
    strategy.name=ddp data.batch_size=32 trainer.default_root_dir="$d/ddp" \
    callback.checkpoint.dirpath="$d/ddp/ck" >"$d/ddp.out" 2>&1
  echo "== $opt $act $pool: ddp -n 2 x 32 against single x 64"
  python3 - "$d/ddp/ck" "$d/single/ck" <<'PY'
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
    scale = max(max(abs(x) for x in v) for v in B.values())
    d, k = max((max(abs(x - y) for x, y in zip(A[k], B[k])), k) for k in B)
    print(f"  step {s:2d}: {d / scale:.2e} ({k})")
PY
done; done; done
