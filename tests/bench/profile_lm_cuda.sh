#!/usr/bin/env bash
# Per-kernel GPU time of GPT-2 small's training step under fulgur (Nsight Compute's
# gpu__time_duration of each launch of one step, after the first steps), summed by kernel
# name: where a step's time goes. Runs from the bundle of tests/cuda/gpu_bundle.sh on a GPU
# machine; writes $OUT/profile.csv (raw) and prints the top kernels.
#   tests/bench/profile_lm_cuda.sh [PRECISION]
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-/tmp/fulgur-profile}
mkdir -p "$OUT"
prec=${1:-fp32}
fg=/tmp/fulgur-gpu
[ -x $fg/bin/fulgur ] || { mkdir -p $fg && tar -C $fg -xJf "$root/.gpu/bundle.tar.xz"; } || exit 1
libs="$fg/lib:$fg/lib/deps:/usr/local/cuda/lib64"
for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))'); do
    for sub in cudnn/lib cublas/lib nccl/lib cu13/lib cuda_runtime/lib; do
        [ -d "$site/nvidia/$sub" ] && libs="$libs:$site/nvidia/$sub"
    done
done
export LD_LIBRARY_PATH=$libs
dir=$(mktemp -d)
python3 - "$dir/tok.bin" 100000 <<'PY'
import struct, sys, random
n = int(sys.argv[2]); h = [0] * 256; h[0], h[1], h[2] = 20240520, 1, n
rng = random.Random(1)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", *h)); f.write(struct.pack(f"<{n}H", *(rng.randrange(50257) for _ in range(n))))
PY
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n1)
# step 3's launches: skip the first two steps (about 520 launches each in fp32)
"$ncu" --metrics gpu__time_duration.sum --csv --launch-skip ${SKIP:-1100} --launch-count ${COUNT:-600} \
    "$fg/bin/fulgur" fit "$root/examples/gpt2_124m.ini" backend.name=cuda precision.name="$prec" \
    data.dir="$dir" data.train_file=tok.bin data.val_file=tok.bin data.train_windows=40 \
    data.val_windows=8 trainer.max_steps=4 trainer.limit_val_batches=0 \
    trainer.num_sanity_val_steps=0 trainer.test_after_fit=false trainer.enable_progress_bar=false \
    trainer.default_root_dir="$dir/runs" >"$OUT/profile.csv" 2>"$OUT/profile.err"
echo "ncu exit $?"
python3 - "$OUT/profile.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value"); u = head.index("Metric Unit")
tot = collections.Counter(); cnt = collections.Counter()
for r in rows[1:]:
    try: x = float(r[v].replace(",", ""))
    except ValueError: continue
    x *= {"nsecond": 1e-3, "usecond": 1, "msecond": 1e3}.get(r[u], 1)
    name = r[k].split("(")[0][:90]; tot[name] += x; cnt[name] += 1
s = sum(tot.values())
print(f"{len(rows) - 1} launches, {s / 1e3:.2f} ms of GPU time")
for n, x in tot.most_common(25):
    print(f"{x / 1e3:9.3f} ms {100 * x / s:5.1f}% {cnt[n]:5d}x  {n}")
PY
