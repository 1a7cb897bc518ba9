#!/usr/bin/env bash
# fulgur export (the Hugging Face Llama layout out) against the files PyTorch wrote
# (tests/lm/hf_llama_torch.py, the layout in):
#  1. the export of a model read from a Hugging Face folder holds the same tensors, names,
#     shapes and values bit for bit, and its config.json the same shape keys;
#  2. import -> export -> import -> export: the second export is byte for byte the first
#     (model.safetensors and config.json);
#  3. --dtype bf16 holds each value rounded to nearest even, as torch's .to(bfloat16);
#  4. training from the exported folder logs exactly the losses training from the original
#     folder logs (50 steps);
#  5. the export of the trained checkpoint (--ckpt-path) is read by the PyTorch model, which
#     then trains 50 AdamW steps within 1e-4 relative of fulgur's training from that export.
# Needs FULGUR; skips (77) without Debian's python3-torch.
set -uo pipefail
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null || exit 77
here=$(cd "$(dirname "$0")" && pwd)
. "$here/torch_run_head.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
/usr/bin/python3 "$here/hf_llama_torch.py" init "$dir" || exit 1
# ini FOLDER NAME: a run from the Hugging Face folder FOLDER (config.json beside the weights)
ini() {
    { torch_run_head "$dir" "$1/model.safetensors"
      printf '[optimizer]\nname = adamw\nlr = 0.001\nweight_decay = 0.01\n[callback.csv_logger]\n'
    } | sed "s|default_root_dir = .*|default_root_dir = $dir/runs_$2|" > "$dir/$2.ini"
}
mkdir -p "$dir/orig" && cp "$dir/model.safetensors" "$dir/config.json" "$dir/orig/"
ini orig orig
"$FULGUR" export "$dir/orig.ini" --out "$dir/e1" >"$dir/e1.log" 2>&1 || { cat "$dir/e1.log"; exit 1; }
grep -q "export: $dir/e1/model.safetensors (21 tensors, f32" "$dir/e1.log" || { cat "$dir/e1.log"; fail "export's line"; }
ini e1 e1
"$FULGUR" export "$dir/e1.ini" --out "$dir/e2" >"$dir/e2.log" 2>&1 || { cat "$dir/e2.log"; exit 1; }
cmp "$dir/e1/model.safetensors" "$dir/e2/model.safetensors" || fail "import -> export changed model.safetensors"
cmp "$dir/e1/config.json" "$dir/e2/config.json" || fail "import -> export changed config.json"
"$FULGUR" export "$dir/orig.ini" --out "$dir/e3" --dtype bf16 >"$dir/e3.log" 2>&1 || { cat "$dir/e3.log"; exit 1; }
/usr/bin/python3 - "$here" "$dir" <<'PY' || exit 1
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from hf_llama_torch import load
d = sys.argv[2]
orig, e1, e3 = load(f"{d}/orig/model.safetensors"), load(f"{d}/e1/model.safetensors"), load(f"{d}/e3/model.safetensors")
assert sorted(orig) == sorted(e1) == sorted(e3), (sorted(orig), sorted(e1))
for name, t in orig.items():
    assert e1[name].shape == t.shape and torch.equal(e1[name], t), f"f32 export differs: {name}"
    assert torch.equal(e3[name], t.to(torch.bfloat16).float()), f"bf16 export differs: {name}"
raw = open(f"{d}/e3/model.safetensors", "rb").read()
header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
assert header.pop("__metadata__") == {"format": "pt"}, "transformers' metadata"
assert {h["dtype"] for h in header.values()} == {"BF16"}
a, b = json.load(open(f"{d}/orig/config.json")), json.load(open(f"{d}/e1/config.json"))
for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "rms_norm_eps", "rope_theta", "tie_word_embeddings", "model_type",
          "max_position_embeddings", "bos_token_id", "eos_token_id"):
    assert a[k] == b[k], f"config.json {k}: {a[k]} exported as {b[k]}"
assert json.load(open(f"{d}/e3/config.json"))["torch_dtype"] == "bfloat16"
print(f"export: {len(orig)} tensors bitwise in f32, rounded as torch in bf16; config.json keys kept")
PY
"$FULGUR" fit "$dir/orig.ini" trainer.final_checkpoint="$dir/final.safetensors" >"$dir/fo.log" 2>&1 || { cat "$dir/fo.log"; exit 1; }
"$FULGUR" fit "$dir/e1.ini" >"$dir/f1.log" 2>&1 || { cat "$dir/f1.log"; exit 1; }
losses() { /usr/bin/python3 -c "import csv,sys; print([r['train/step_loss'] for r in csv.DictReader(open(sys.argv[1])) if r.get('train/step_loss')])" "$1"; }
lo=$(losses "$(ls "$dir"/runs_orig/default/version_*/metrics.csv)")
l1=$(losses "$(ls "$dir"/runs_e1/default/version_*/metrics.csv)")
[ "$lo" = "$l1" ] && [ ${#lo} -gt 100 ] || fail "the export's losses differ: $lo vs $l1"
echo "export: training from the export logs the original's 50 losses exactly"
"$FULGUR" export "$dir/orig.ini" --ckpt-path "$dir/final.safetensors" --out "$dir/trained" >"$dir/et.log" 2>&1 || { cat "$dir/et.log"; exit 1; }
cp "$dir/corpus.txt" "$dir/trained/"
ini trained trained
"$FULGUR" fit "$dir/trained.ini" >"$dir/ft.log" 2>&1 || { cat "$dir/ft.log"; exit 1; }
/usr/bin/python3 "$here/hf_llama_torch.py" train "$dir/trained" >"$dir/torch.txt" || exit 1
/usr/bin/python3 "$here/compare_losses.py" "hf_llama_export (trained, reloaded)" \
    "$(ls "$dir"/runs_trained/default/version_*/metrics.csv)" "$dir/torch.txt" 1e-4
