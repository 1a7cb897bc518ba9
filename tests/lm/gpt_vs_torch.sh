#!/usr/bin/env bash
# A tiny GPT (2 blocks, 4 heads, width 32, context 16) trained by fulgur and by PyTorch from
# the same initial weights (written by PyTorch, read through [model] init_from) on the same
# windows of the same text: the per-step losses of 50 fp32 AdamW steps must agree within
# 1e-4 relative. `gpt_vs_torch.sh tied`: lm_head ties its weight to wte (GPT-2's one
# parameter, its gradient summed). `gpt_vs_torch.sh hf`: tied, the initial weights read from
# Hugging Face's GPT-2 layout (Conv1D weights transposed, "transformer." names, mask
# buffers). `gpt_vs_torch.sh ignore`: untied, [model] ignore_index = 32 (every space byte's
# label skipped, torch's ignore_index). `gpt_vs_torch.sh hf_padded`: hf with [model]
# pad_vocab_to = 96 (the logits' rows 288 wide). `gpt_vs_torch.sh smooth`: untied, [model]
# label_smoothing = 0.1 with ignore_index = 32 against F.cross_entropy(label_smoothing=0.1,
# ignore_index=32): the losses as above, and each final weight tensor within 1e-4 relative
# in the L2 norm (attn.qkv.bias left out, as in decay_vs_torch.sh: its key third's gradient
# is rounding noise that Adam scales to full steps). Needs FULGUR; skips (77) without
# Debian's python3-torch.
set -uo pipefail
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null || exit 77
here=$(cd "$(dirname "$0")" && pwd)
. "$here/torch_run_head.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mode=${1:-untied}
tie="" ignore="" pad=""
# hf_padded: hf with [model] pad_vocab_to (the logits' rows 288 wide for 256 classes)
[ "$mode" = hf_padded ] && { mode=hf pad="pad_vocab_to = 96"; }
case $mode in
  tied|hf) tie="tie = wte" ;;
  ignore) ignore="ignore_index = 32" ;;
  smooth) ignore="ignore_index = 32
label_smoothing = 0.1" ;;
esac
/usr/bin/python3 "$here/gpt_torch.py" init "$dir" "$mode" || exit 1
{ torch_run_head "$dir"
    cat <<INI
$ignore
$pad
[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = 32
[layer.wpe]
type = position_embedding
max_positions = 16
[layer.h]
type = transformer_block
heads = 4
repeat = 2
[layer.ln_f]
type = layernorm
[layer.lm_head]
type = linear
out_features = 256
bias = false
$tie
[optimizer]
name = adamw
lr = 0.001
weight_decay = 0.01
[callback.csv_logger]
INI
} > "$dir/gpt.ini"
"$FULGUR" fit "$dir/gpt.ini" trainer.final_checkpoint="$dir/final.safetensors" \
  >"$dir/fit.log" 2>&1 || { cat "$dir/fit.log"; exit 1; }
if [ -n "$pad" ] && ! grep -q "^model: logits rows of 288 for 256 classes" "$dir/fit.log"; then
  echo "FAIL: the logits were not padded"; cat "$dir/fit.log"; exit 1
fi
if [ "$mode" = hf ] && ! grep -q "tensors loaded (Hugging Face GPT-2 names)" "$dir/fit.log"; then
  echo "FAIL: the Hugging Face layout was not recognised"; cat "$dir/fit.log"; exit 1
fi
/usr/bin/python3 "$here/gpt_torch.py" train "$dir" "$mode" >"$dir/torch.txt" || exit 1
metrics=$(ls "$dir"/runs/default/version_*/metrics.csv)
/usr/bin/python3 - "$metrics" "$dir/torch.txt" "$mode" <<'PY' || exit 1
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("train/step_loss")]
ours = [float(r["train/step_loss"]) for r in rows]
ref = [float(x) for x in open(sys.argv[2])]
if len(ours) != len(ref):
    sys.exit(f"FAIL: fulgur logged {len(ours)} step losses, PyTorch {len(ref)}")
worst = max(abs(a - b) / abs(b) for a, b in zip(ours, ref))
print(f"gpt_vs_torch ({sys.argv[3]}): {len(ref)} steps, loss {ref[0]:.5f} -> {ref[-1]:.5f}, "
      f"worst relative difference {worst:.2e} (limit 1e-4)")
sys.exit(0 if worst < 1e-4 else 1)
PY
[ "$mode" = smooth ] || exit 0
/usr/bin/python3 - "$dir/final.safetensors" "$dir/torch_smooth.safetensors" <<'PY'
import json, struct, sys
def read(path):
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    out = {}
    for name, t in json.loads(blob[8:8 + n]).items():
        if name != "__metadata__":
            a, b = t["data_offsets"]
            out[name] = struct.unpack(f"<{(b - a) // 4}f", blob[8 + n + a:8 + n + b])
    return out
ours, ref = read(sys.argv[1]), read(sys.argv[2])
worst, where = 0.0, ""
for name, r in ref.items():
    if name.endswith("attn.qkv.bias"):
        continue
    if name not in ours:
        sys.exit(f"FAIL: fulgur's checkpoint lacks {name}")
    d = sum((a - b) ** 2 for a, b in zip(ours[name], r)) ** 0.5
    rel = d / (sum(b * b for b in r) ** 0.5 or 1.0)
    if rel > worst:
        worst, where = rel, name
print(f"gpt_vs_torch (smooth): {len(ref)} tensors, worst relative L2 difference {worst:.2e} "
      f"({where}; limit 1e-4)")
sys.exit(0 if worst < 1e-4 else 1)
PY
