#!/usr/bin/env bash
# examples/smollm_finetune.ini on a SmolLM-135M-shaped Hugging Face folder of random weights
# (tests/lm/hf_llama_torch.py: hidden 576, 9 heads on 3 key/value heads, SwiGLU of 1536,
# vocabulary 49152, tied, rope_theta 10000, BF16 as SmolLM ships; 2 layers instead of 30 and
# context 64 to stay fast; the real weights are not downloaded in CI), through the example's
# own keys with only the paths and sizes overridden:
#  - fit reads the 16 model tensors by their Hugging Face names (q/k/v fused, no lm_head),
#    and its first step's loss is PyTorch's loss of the same batch within 1e-4 relative;
#  - three steps give finite losses; export --ckpt-path last --dtype bf16 writes a tied
#    2-layer folder of 20 BF16 tensors without lm_head.weight;
#  - the example's full shape (config.json of 30 layers) builds with SmolLM-135M's
#    134,515,008 parameters (`fulgur check` without weights).
# Needs FULGUR and SRC; skips (77) without Debian's python3-torch.
set -uo pipefail
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch, numpy" 2>/dev/null || exit 77
: "${FULGUR:?}" "${SRC:?}"
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL [lm.smollm_finetune]: $*"; exit 1; }
mkdir -p "$dir/hf" "$dir/data" "$dir/full"
shape="vocab=49152 hidden=576 inter=1536 heads=9 kv_heads=3 tied=1 theta=10000.0"
# shellcheck disable=SC2086
/usr/bin/python3 "$here/hf_llama_torch.py" init "$dir/hf" $shape layers=2 dtype=BF16 || exit 1
/usr/bin/python3 - "$dir" <<'PY' || exit 1
import json, struct, sys, numpy
d = sys.argv[1]
rng = numpy.random.default_rng(5)
for split, n in (("train", 8192), ("val", 2048)):
    header = [20240520, 1, n] + [0] * 253
    ids = rng.integers(0, 49152, n, dtype=numpy.uint16)
    with open(f"{d}/data/{split}_000000.bin", "wb") as f:
        f.write(struct.pack("<256i", *header) + ids.tobytes())
c = json.load(open(f"{d}/hf/config.json"))
c["num_hidden_layers"] = 30
json.dump(c, open(f"{d}/full/config.json", "w"))
PY
ex="$SRC/examples/smollm_finetune.ini"
common=(data.dir="$dir/data" data.context=64 data.batch_size=2 data.shuffle=false
        trainer.default_root_dir="$dir/runs")
"$FULGUR" fit "$ex" "${common[@]}" model.init_from="$dir/hf/model.safetensors" \
    trainer.max_steps=3 trainer.log_every_n_steps=1 callback.csv_logger.enabled=true \
    >"$dir/fit.log" 2>&1 || { cat "$dir/fit.log"; fail "fit"; }
grep -qF "init_from $dir/hf/model.safetensors: 16 tensors loaded (Hugging Face Llama names)" \
    "$dir/fit.log" || { cat "$dir/fit.log"; fail "the 16 tensors were not read by their Hugging Face names"; }
metrics=$(ls "$dir"/runs/default/version_*/metrics.csv)
ref=$(/usr/bin/python3 "$here/hf_llama_torch.py" loss "$dir/hf" "$dir/data/train_000000.bin" 64 2 1337) || exit 1
/usr/bin/python3 - "$metrics" "$ref" <<'PY' || { cat "$dir/fit.log"; fail "losses"; }
import csv, math, sys
ours = [float(r["train/step_loss"]) for r in csv.DictReader(open(sys.argv[1])) if r.get("train/step_loss")]
ref = float(sys.argv[2])
rel = abs(ours[0] - ref) / ref
print(f"smollm_finetune: losses {ours}, PyTorch's first {ref:.6f}, relative difference {rel:.2e}")
sys.exit(0 if len(ours) == 3 and all(math.isfinite(x) for x in ours) and rel < 1e-4 else 1)
PY
"$FULGUR" export "$ex" "${common[@]}" model.init_from="$dir/hf/model.safetensors" \
    --ckpt-path last --out "$dir/out" --dtype bf16 >"$dir/export.log" 2>&1 ||
    { cat "$dir/export.log"; fail "export"; }
/usr/bin/python3 - "$dir/out" <<'PY' || fail "the exported folder"
import json, sys
d = sys.argv[1]
raw = open(f"{d}/model.safetensors", "rb").read()
h = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
h.pop("__metadata__")
c = json.load(open(f"{d}/config.json"))
ok = (len(h) == 20 and "lm_head.weight" not in h and {v["dtype"] for v in h.values()} == {"BF16"}
      and h["model.layers.1.self_attn.k_proj.weight"]["shape"] == [192, 576]
      and c["num_hidden_layers"] == 2 and c["tie_word_embeddings"] is True
      and c["torch_dtype"] == "bfloat16")
print(f"smollm_finetune: export {len(h)} tensors, config {c['num_hidden_layers']} layers, tied {c['tie_word_embeddings']}")
sys.exit(0 if ok else 1)
PY
"$FULGUR" check "$ex" "${common[@]}" model.init_from= model.hf_config="$dir/full/config.json" \
    >"$dir/check.log" 2>&1 || { cat "$dir/check.log"; fail "check of the full shape"; }
grep -q ', 134515008 parameters,' "$dir/check.log" || { cat "$dir/check.log"; fail "not SmolLM-135M's 134515008 parameters"; }
echo "smollm_finetune: the full shape builds with 134515008 parameters"
