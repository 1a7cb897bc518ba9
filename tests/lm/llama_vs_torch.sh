#!/usr/bin/env bash
# A tiny Llama-style stack (width 32, 4 query heads on 2 key/value heads, 2 blocks, rope,
# RMSNorm, SwiGLU of 64 hidden units, no biases, untied head) trained by fulgur and by
# PyTorch (tests/lm/llama_torch.py, written from the formulas) from the same initial
# weights (written by PyTorch, read through [model] init_from) on the same windows of the
# same text: the per-step losses of 50 fp32 AdamW steps must agree within 1e-4 relative.
#   llama_vs_torch.sh [CUDA_PLUGIN_DIR]
# With CUDA_PLUGIN_DIR fulgur trains on backend cuda loaded from there (the emulated device's
# build: tests/cudaemu) instead of the CPU backend, against the same reference.
# Needs FULGUR; skips (77) without Debian's python3-torch.
set -uo pipefail
cuda_plugins=${1:-}
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null || exit 77
here=$(cd "$(dirname "$0")" && pwd)
. "$here/torch_run_head.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$here/llama_torch.py" init "$dir" || exit 1
{ torch_run_head "$dir"
    cat <<INI
[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = 32
[layer.h]
type = transformer_block
heads = 4
kv_heads = 2
repeat = 2
norm = rmsnorm
mlp = swiglu
mlp_hidden = 64
position = rope
bias = false
[layer.norm]
type = rmsnorm
eps = 1e-5
[layer.lm_head]
type = linear
out_features = 256
bias = false
[optimizer]
name = adamw
lr = 0.001
weight_decay = 0.01
[callback.csv_logger]
INI
} > "$dir/llama.ini"
if [ -n "$cuda_plugins" ]; then
    sed -i -e '/^threads = 1$/d' -e 's/^name = cpu$/name = cuda/' "$dir/llama.ini"
    "$FULGUR" --plugin-path "$cuda_plugins" fit "$dir/llama.ini" >"$dir/fit.log" 2>&1 ||
        { cat "$dir/fit.log"; exit 1; }
    grep -q "backend cuda" "$dir/fit.log" || { cat "$dir/fit.log"; echo "FAIL: not on cuda"; exit 1; }
else
    "$FULGUR" fit "$dir/llama.ini" >"$dir/fit.log" 2>&1 || { cat "$dir/fit.log"; exit 1; }
fi
/usr/bin/python3 "$here/llama_torch.py" train "$dir" >"$dir/torch.txt" || exit 1
metrics=$(ls "$dir"/runs/default/version_*/metrics.csv)
/usr/bin/python3 - "$metrics" "$dir/torch.txt" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("train/step_loss")]
ours = [float(r["train/step_loss"]) for r in rows]
ref = [float(x) for x in open(sys.argv[2])]
if len(ours) != len(ref):
    sys.exit(f"FAIL: fulgur logged {len(ours)} step losses, PyTorch {len(ref)}")
worst = max(abs(a - b) / abs(b) for a, b in zip(ours, ref))
print(f"llama_vs_torch: {len(ref)} steps, loss {ref[0]:.5f} -> {ref[-1]:.5f}, "
      f"worst relative difference {worst:.2e} (limit 1e-4)")
print("first losses, fulgur vs torch:", [f"{a:.6f}/{b:.6f}" for a, b in zip(ours[:3], ref[:3])])
sys.exit(0 if worst < 1e-4 else 1)
PY
