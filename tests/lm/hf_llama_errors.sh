#!/usr/bin/env bash
# Broken Hugging Face Llama folders and configs: each `fulgur check` (or export) must fail
# with exit 2 and a message naming the tensor, key and file at fault; a folder-compatible
# INI section (agreeing keys, an extra key) must pass. Files written by
# tests/lm/hf_llama_torch.py. Needs FULGUR; skips (77) without Debian's python3-torch.
set -uo pipefail
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null || exit 77
here=$(cd "$(dirname "$0")" && pwd)
. "$here/torch_run_head.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
/usr/bin/python3 "$here/hf_llama_torch.py" init "$dir" || exit 1
# case NAME EDIT EXPECTED [INI_TAIL] [VERB...]: a fresh copy of the folder, EDIT (python on
# tensors `t`, config `c`), then VERB (check) must exit 2 with EXPECTED (fixed string) in its
# output; EXPECTED "" means it must pass.
case_() {
    local name=$1 edit=$2 expected=$3 tail=${4:-} ; shift 4 2>/dev/null || shift $#
    local verb=("${@:-check}")
    local d="$dir/$name"
    mkdir -p "$d" && cp "$dir/model.safetensors" "$dir/config.json" "$dir/corpus.txt" "$d/"
    /usr/bin/python3 - "$here" "$d" "$edit" <<'PY' || { echo "FAIL: $name: the edit failed"; failures=$((failures + 1)); return; }
import json, sys
sys.path.insert(0, sys.argv[1])
from hf_llama_torch import load, save
d, edit = sys.argv[2], sys.argv[3]
t, c = load(f"{d}/model.safetensors"), json.load(open(f"{d}/config.json"))
exec(edit)
save(f"{d}/model.safetensors", t, "F32")
json.dump(c, open(f"{d}/config.json", "w"))
PY
    { torch_run_head "$d" model.safetensors; printf '%b' "$tail"; } > "$d/run.ini"
    "$FULGUR" "${verb[@]}" "$d/run.ini" >"$d/out.log" 2>&1
    local rc=$?
    if [ -z "$expected" ]; then
        [ $rc -eq 0 ] && { echo "ok: $name passes"; return; }
        echo "FAIL: $name: exit $rc, expected success"; cat "$d/out.log"
    elif [ $rc -eq 2 ] && grep -qF -- "$expected" "$d/out.log"; then
        echo "ok: $name: $(grep -F -- "$expected" "$d/out.log" | head -1)"; return
    else
        echo "FAIL: $name: exit $rc, expected 2 and: $expected"; cat "$d/out.log"
    fi
    failures=$((failures + 1))
}
case_ missing_tensor 'del t["model.layers.1.mlp.up_proj.weight"]' \
    "init_from $dir/missing_tensor/model.safetensors: tensor 'model.layers.1.mlp.up_proj.weight' (the model's 'layers.1.mlp.up_proj.weight') is not in the file"
case_ missing_k 'del t["model.layers.0.self_attn.k_proj.weight"]' \
    "tensor 'model.layers.0.self_attn.k_proj.weight' (the model's 'layers.0.attn.qkv.weight') is not in the file"
case_ wrong_shape 't["model.layers.0.self_attn.k_proj.weight"] = t["model.layers.0.self_attn.q_proj.weight"]' \
    "init_from $dir/wrong_shape/model.safetensors: tensor 'model.layers.0.self_attn.k_proj.weight' has shape (32, 32), the model's 'layers.0.attn.qkv.weight rows 32..47' is (16, 32)"
case_ extra_tensor 't["model.layers.0.self_attn.q_proj.bias"] = t["model.norm.weight"]' \
    "init_from $dir/extra_tensor/model.safetensors: tensor 'model.layers.0.self_attn.q_proj.bias' has no place in the model"
case_ tied_with_head 'c["tie_word_embeddings"] = True' \
    "tensor 'lm_head.weight' has no place in the model (its lm_head is tied to the embedding"
case_ rope_yarn 'c["rope_scaling"] = {"rope_type": "yarn", "factor": 2.0}' \
    "$dir/rope_yarn/config.json: \"rope_scaling.rope_type\" is not one fulgur computes (default, llama3, linear)"
case_ rope_llama3_missing 'c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}' \
    "$dir/rope_llama3_missing/config.json: \"rope_scaling.original_max_position_embeddings\" is missing (this rope_type needs it)"
case_ rope_linear_extra 'c["rope_scaling"] = {"type": "linear", "factor": 2.0, "low_freq_factor": 1.0}' \
    "$dir/rope_linear_extra/config.json: \"rope_scaling.low_freq_factor\" is not a key of this rope_type"
case_ rope_factor_text 'c["rope_scaling"] = {"type": "linear", "factor": "2"}' \
    "$dir/rope_factor_text/config.json: \"rope_scaling.factor\" is not a number"
case_ rope_factor_small 'c["rope_scaling"] = {"type": "linear", "factor": 0.5}' \
    "rope_scaling.factor: [layer.layers] rope_factor = 0.5 is out of range [1, 1000000]"
case_ rope_high_low 'c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}' \
    "[layer.layers] rope_high_freq_factor: must be greater than rope_low_freq_factor"
case_ rope_ini_disagrees 'c["rope_scaling"] = {"type": "linear", "factor": 2.0}' \
    "[layer.layers] rope_factor = 3 disagrees with $dir/rope_ini_disagrees/config.json: rope_scaling.factor = 2" \
    "[layer.layers]\nrope_factor = 3\n"
case_ rope_default 'c["rope_scaling"] = {"rope_type": "default"}' ""
case_ model_type 'c["model_type"] = "mistral"' \
    "$dir/model_type/config.json: \"model_type\" must be \"llama\""
case_ unknown_key 'c["sliding_window"] = 4096' \
    "$dir/unknown_key/config.json: \"sliding_window\" is not a key hf_config knows"
case_ missing_key 'del c["hidden_size"]' \
    "$dir/missing_key/config.json: \"hidden_size\" is missing"
case_ hidden_act 'c["hidden_act"] = "gelu"' "\"hidden_act\" must be \"silu\""
case_ disagree '' \
    "run.ini:24: [layer.layers] heads = 8 disagrees with $dir/disagree/config.json: num_attention_heads = 4" \
    '[layer.layers]\nheads = 8\n'
case_ agree_and_add '' "" '[layer.layers]\nheads = 4\neps = 0.00001\nrecompute = true\n'
case_ other_layer '' "[layer.wte]: with [model] hf_config ($dir/other_layer/config.json) the layers are config.json's" \
    'hf_config = '"$dir"'/other_layer/config.json\n[layer.wte]\ntype = embedding\n'
case_ context 'c["max_position_embeddings"] = 8' \
    "[data] context = 16 is longer than $dir/context/config.json: max_position_embeddings = 8"
case_ export_no_out '' "fulgur export needs --out DIR" '' export
# export of a model the layout cannot hold (a GELU block with biases, learned positions)
mkdir -p "$dir/gpt"
{ torch_run_head "$dir" | grep -v '^init_from'
  printf '[layer.wte]\ntype = embedding\nnum_embeddings = 256\nembedding_dim = 32\n'
  printf '[layer.h]\ntype = transformer_block\nheads = 4\n[layer.lm_head]\ntype = linear\n'
  printf 'out_features = 256\n'; } > "$dir/gpt/run.ini"
"$FULGUR" export "$dir/gpt/run.ini" --out "$dir/gpt/out" >"$dir/gpt/out.log" 2>&1
rc=$?
want="run.ini:26: [layer.h] (transformer_block): the Hugging Face Llama layout needs norm = rmsnorm, mlp = swiglu"
if [ $rc -eq 2 ] && grep -qF "$want" "$dir/gpt/out.log" && [ ! -e "$dir/gpt/out/model.safetensors" ]; then
    echo "ok: export_gpt: $(cat "$dir/gpt/out.log" | tail -1)"
else
    echo "FAIL: export_gpt: exit $rc, expected 2, no file and: $want"; cat "$dir/gpt/out.log"
    failures=$((failures + 1))
fi
exit $((failures > 0))
