#!/usr/bin/env bash
# GPT-2 small (examples/gpt2_124m.ini: 124M parameters, context 1024, batch 8, AdamW,
# gradient clipping) on one CUDA GPU: fulgur's tokens/s against PyTorch eager and
# torch.compile (tests/bench/torch_gpt_cuda_ref.py, flash attention through
# scaled_dot_product_attention), in fp32 (no TF32 on either side) and bf16-mixed, on random
# tokens (llm.c's .bin format). Also the step's model FLOP/s (6 N + 12 L T C per token).
# fulgur runs with [model] pad_vocab_to = 64 (the logits' rows 50304 wide, as llm.c) and
# [backend] attention = auto (cuDNN's fused attention in bf16); PyTorch's model is its own
# (vocabulary 50257). FULGUR_BENCH_EXTRA adds overrides to fulgur's runs.
# fp8-mixed in the list (--precisions "bf16-mixed fp8-mixed") runs fulgur alone (no PyTorch
# reference: Transformer Engine is not installed) and prints its tokens/s as a ratio to
# fulgur's bf16-mixed of the same call, with the run's fp8 lines (which linear layers ran
# their gemms in fp8; an H100 or another sm_89+ GPU).
# --llmc PATH adds the anchor: llm.c's CUDA trainer (tests/bench/llmc_build.sh builds it
# outside the tree; bf16, cuDNN attention, its own fused kernels, random init "d12") on the same
# tokens at batch 8 and at its own operating point, batch 64, with the same FLOP count.
#
#   tests/bench/bench_lm_cuda.sh --fulgur PATH [--steps N] [--precisions "fp32 bf16-mixed"]
#                                [--modes "eager compile"] [--llmc PATH]
#
# Runs where tests/cuda/gpu_checks.sh runs (a GPU machine); not a ctest test.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
fulgur="" steps=20 precisions="fp32 bf16-mixed" modes="eager compile" llmc=""
while [ $# -gt 0 ]; do
    case $1 in
    --fulgur) fulgur=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --llmc) llmc=$2; shift 2 ;;
    *) echo "usage: $(basename "$0") --fulgur PATH [--steps N] [--precisions LIST] [--modes LIST] [--llmc PATH]" >&2; exit 2 ;;
    esac
done
[ -x "$fulgur" ] || { echo "bench_lm_cuda: --fulgur must name the fulgur binary" >&2; exit 2; }
[ -z "$llmc" ] || [ -x "$llmc" ] || { echo "bench_lm_cuda: --llmc must name llm.c's train_gpt2cu" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
B=8 T=1024 warm=5
python3 - "$scratch/tok.bin" $(((steps + 2) * B * (T + 1))) <<'PY'
import struct, sys, random
n = int(sys.argv[2])
h = [0] * 256
h[0], h[1], h[2] = 20240520, 1, n
rng = random.Random(1)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", *h))
    f.write(struct.pack(f"<{n}H", *(rng.randrange(50257) for _ in range(n))))
PY
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)
echo "bench_lm_cuda: GPT-2 small, batch $B x $T, $steps timed steps after $steps (fulgur: its second epoch) or $warm (torch), $gpu, $(date -u +%F)"
# 124,439,808 parameters; attention 12 * L * T * C FLOPs per token (forward and backward)
flops_per_token=$(awk 'BEGIN { printf "%.0f", 6 * 124439808 + 12 * 12 * 1024 * 768 }')
fulgur_run() { # precision -> tokens/s of the second epoch (the first warms up)
    local out sps note
    out=$("$fulgur" fit "$root/examples/gpt2_124m.ini" backend.name=cuda precision.name="$1" \
        data.dir="$scratch" data.train_file=tok.bin data.val_file=tok.bin \
        data.train_windows=$((steps * B)) data.val_windows=8 data.num_workers=2 \
        trainer.max_epochs=2 trainer.limit_val_batches=0 trainer.num_sanity_val_steps=0 \
        trainer.test_after_fit=false trainer.enable_progress_bar=false \
        trainer.log_every_n_steps=$steps trainer.default_root_dir="$scratch/runs" \
        model.pad_vocab_to=64 ${FULGUR_BENCH_EXTRA:-} 2>&1) ||
        { echo "$out" | tail -20 >&2; echo NA; return 1; }
    note=$(grep '^fp8: ' <<<"$out")
    [ -z "$note" ] || echo "$note" >&2
    sps=$(sed -n 's/^epoch 2\/2 .* \([0-9.]*\) samples\/s.*/\1/p' <<<"$out")
    [ -n "$sps" ] || { echo "$out" | tail -20 >&2; echo NA; return 1; }
    awk -v s="$sps" -v t=$T 'BEGIN { printf "%.1f", s * t }'
}
torch_run() { # precision mode -> tokens/s
    local extra=""
    [ "$2" = compile ] && extra=--compile
    python3 "$here/torch_gpt_cuda_ref.py" --precision "$1" $extra --batch $B --context $T \
        --steps "$steps" --warmup $warm 2>&1 | sed -n 's/^RESULT tokens_per_s=\([0-9.]*\).*/\1/p' | grep . || echo NA
}
llmc_run() { # batch -> tokens/s: the median step time after $warm steps, of $steps + $warm
    local out ms
    out=$(cd "$scratch" && "$llmc" -i "$scratch/tok.bin" -j "$scratch/tok.bin" -e d12 -b "$1" -t $T \
        -d $(($1 * T)) -x $((steps + warm)) -v 1000000 -m 1 -s 0 -h 0 -n 0 2>&1) ||
        { echo "$out" | tail -20 >&2; echo NA; return 1; }
    ms=$(sed -n 's/^step *\([0-9]*\)\/[0-9]* |.*| \([0-9.]*\) ms |.*/\1 \2/p' <<<"$out" |
        awk -v w=$warm '$1 > w { print $2 }' | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
    [ -n "$ms" ] || { echo "$out" | tail -20 >&2; echo NA; return 1; }
    awk -v ms="$ms" -v b="$1" -v t=$T 'BEGIN { printf "%.1f", b * t * 1000 / ms }'
}
tflops() { awk -v t="$1" -v k="$flops_per_token" 'BEGIN { if (t == "NA") print "NA"; else printf "%.1f", t * k / 1e12 }'; }
failed=0
for p in $precisions; do
    f=$(fulgur_run "$p") || failed=1
    line="$p: fulgur $f tokens/s ($(tflops "$f") TFLOP/s)"
    [ "$p" = bf16-mixed ] && fulgur_bf16=$f
    if [ "$p" = fp8-mixed ]; then
        echo "$line, fulgur bf16-mixed ${fulgur_bf16:-NA} ($(awk -v a="$f" -v b="${fulgur_bf16:-NA}" 'BEGIN { if (a == "NA" || b == "NA") print "NA"; else printf "%.2fx", a / b }'))"
        continue
    fi
    for m in $modes; do
        r=$(torch_run "$p" "$m")
        line="$line, torch $m $r ($(awk -v a="$f" -v b="$r" 'BEGIN { if (a == "NA" || b == "NA") print "NA"; else printf "%.2fx", a / b }'))"
    done
    echo "$line"
done
if [ -n "$llmc" ]; then
    # llm.c is bf16 only (master weights f32, as fulgur's bf16-mixed)
    l8=$(llmc_run 8) || failed=1
    l64=$(llmc_run 64) || failed=1
    echo "llm.c bf16: batch 8 $l8 tokens/s ($(tflops "$l8") TFLOP/s), batch 64 $l64 tokens/s ($(tflops "$l64") TFLOP/s); fulgur bf16-mixed batch 8 / llm.c batch 8: $(awk -v a="${fulgur_bf16:-NA}" -v b="$l8" 'BEGIN { if (a == "NA" || b == "NA") print "NA"; else printf "%.2fx", a / b }')"
fi
exit $failed
