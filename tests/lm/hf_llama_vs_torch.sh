#!/usr/bin/env bash
# A tiny Llama (width 32, 4 query heads on 2 key/value heads, 2 layers, SwiGLU of 64, rope)
# written by PyTorch as a Hugging Face checkpoint folder (tests/lm/hf_llama_torch.py:
# model.safetensors with Hugging Face Llama's tensor names, separate q/k/v_proj, and
# config.json), read by fulgur through [model] init_from alone: the layers come from the
# config.json beside the weights (no [layer.*] section in the INI). fulgur and the PyTorch
# model (Hugging Face's module names and formulas: rotate_half rope on q and k as stored)
# train 50 fp32 AdamW steps from it on the same windows: every step's loss must agree within
# 1e-4 relative. This is the check that Hugging Face's weights need no rope permutation; its
# control, the same PyTorch model with Meta's interleaved rope, must miss that limit.
#   hf_llama_vs_torch.sh untied   F32 weights, an lm_head of its own
#   hf_llama_vs_torch.sh tied     BF16 weights, tie_word_embeddings (no lm_head in the file),
#                                 config.json named by [model] hf_config
#   hf_llama_vs_torch.sh llama3 [CUDA_PLUGIN_DIR]   config.json's rope_scaling is Llama 3's
#                                 (hf_llama_torch.py: one pair kept, one blended, two divided):
#                                 `fulgur check` must show the keys it became, and the control
#                                 is the reference without the scaling (must miss 1e-4)
#   hf_llama_vs_torch.sh linear [CUDA_PLUGIN_DIR]   rope_scaling linear, factor 4, the same way
# With CUDA_PLUGIN_DIR fulgur trains on backend cuda loaded from there (the emulated device).
# Needs FULGUR; skips (77) without Debian's python3-torch.
set -uo pipefail
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null || exit 77
mode=${1:-untied}
cuda_plugins=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/torch_run_head.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
case $mode in
    tied) init_args="tied=1 dtype=BF16" ;;
    llama3 | linear) init_args="rope=$mode" ;;
    *) init_args="" ;;
esac
# shellcheck disable=SC2086
/usr/bin/python3 "$here/hf_llama_torch.py" init "$dir" $init_args || exit 1
{ torch_run_head "$dir" model.safetensors
    if [ "$mode" = tied ]; then
        mkdir "$dir/cfg" && mv "$dir/config.json" "$dir/cfg/config.json"
        echo "hf_config = $dir/cfg/config.json"
    fi
    cat <<INI
[optimizer]
name = adamw
lr = 0.001
weight_decay = 0.01
[callback.csv_logger]
INI
} > "$dir/llama.ini"
fulgur=("$FULGUR")
if [ -n "$cuda_plugins" ]; then
    sed -i -e '/^threads = 1$/d' -e 's/^name = cpu$/name = cuda/' "$dir/llama.ini"
    fulgur=("$FULGUR" --plugin-path "$cuda_plugins")
fi
"${fulgur[@]}" check "$dir/llama.ini" >"$dir/check.log" 2>&1 || { cat "$dir/check.log"; exit 1; }
expect_check() { # the keys config.json's rope_scaling became, with their origin
    grep -qxF "$1" "$dir/check.log" ||
        { cat "$dir/check.log"; echo "FAIL: fulgur check does not show: $1"; exit 1; }
}
if [ "$mode" = llama3 ]; then
    expect_check "rope_scaling = llama3    ; $dir/config.json: rope_scaling.rope_type"
    expect_check "rope_factor = 8    ; $dir/config.json: rope_scaling.factor"
    expect_check "rope_low_freq_factor = 1    ; $dir/config.json: rope_scaling.low_freq_factor"
    expect_check "rope_high_freq_factor = 4    ; $dir/config.json: rope_scaling.high_freq_factor"
    expect_check "rope_original_max_position_embeddings = 128    ; $dir/config.json: rope_scaling.original_max_position_embeddings"
elif [ "$mode" = linear ]; then
    expect_check "rope_scaling = linear    ; $dir/config.json: rope_scaling.rope_type"
    expect_check "rope_factor = 4    ; $dir/config.json: rope_scaling.factor"
fi
if [ "$mode" = llama3 ] || [ "$mode" = linear ]; then # export writes rope_scaling back as read
    "${fulgur[@]}" export "$dir/llama.ini" --out "$dir/export" >"$dir/export.log" 2>&1 ||
        { cat "$dir/export.log"; exit 1; }
    /usr/bin/python3 -c "import json, sys; a, b = (json.load(open(f))['rope_scaling'] for f in sys.argv[1:]); \
a['rope_type'] = a.pop('type', a.get('rope_type')); assert a == b, (a, b)" "$dir/config.json" \
        "$dir/export/config.json" || { echo "FAIL: export's rope_scaling differs"; exit 1; }
fi
"${fulgur[@]}" fit "$dir/llama.ini" >"$dir/fit.log" 2>&1 || { cat "$dir/fit.log"; exit 1; }
if [ -n "$cuda_plugins" ]; then
    grep -q "backend cuda" "$dir/fit.log" || { cat "$dir/fit.log"; echo "FAIL: not on cuda"; exit 1; }
fi
grep -q "tensors loaded (Hugging Face Llama names)" "$dir/fit.log" ||
    { echo "FAIL: fit did not say it read Hugging Face Llama names"; cat "$dir/fit.log"; exit 1; }
[ "$mode" = tied ] && mv "$dir/cfg/config.json" "$dir/config.json"
/usr/bin/python3 "$here/hf_llama_torch.py" train "$dir" >"$dir/torch.txt" || exit 1
metrics=$(ls "$dir"/runs/default/version_*/metrics.csv)
/usr/bin/python3 "$here/compare_losses.py" "hf_llama_vs_torch $mode" "$metrics" "$dir/torch.txt" 1e-4 ||
    exit 1
# The control: Meta's interleaved rope on the same weights must miss the 1e-4 agreement,
# so the agreement above is the rotate_half convention's, not a comparison too blunt to tell.
# With a rope scaling, the control is the reference without it.
control=interleaved
case $mode in llama3 | linear) control=unscaled ;; esac
HF_ROPE=$control /usr/bin/python3 "$here/hf_llama_torch.py" train "$dir" >"$dir/meta.txt" || exit 1
if /usr/bin/python3 "$here/compare_losses.py" "control, $control rope (must fail)" "$metrics" \
    "$dir/meta.txt" 1e-4; then
    echo "FAIL: fulgur's losses also match the $control rope: the test cannot tell them apart"
    exit 1
fi
