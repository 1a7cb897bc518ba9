#!/bin/sh
# fp8-mixed on the emulated CUDA device (issue 32's Done-when): CONFIG (fp8_char_lm.ini: linear
# layers; fp8_gpt_lm.ini: a GPT-2 transformer block) trained 200 AdamW steps in bf16-mixed and
# in fp8-mixed (amax_history_len = 16, the other keys their defaults: hybrid, max, margin 0)
# from the same seed and windows.
#   - the fp8 run prints each LINE (the plan: which layers' gemms run in fp8, which not);
#   - fp8-mixed tracks bf16-mixed: the step losses' mean relative difference over the 200
#     steps at most MEAN_TOL, and over the last 20 steps' mean losses at most END_TOL; both
#     runs learn (the last 20 steps' mean below 0.75 of the first step's loss); fp8 changes
#     the numbers (the curves are not identical);
#   - the scales and amax histories are in the checkpoint (it holds the tensor TENSOR): 20
#     steps, a checkpoint, 20 more resumed end with the weights' digest of 40 straight steps,
#     bit for bit.
#   emu_fp8_lm.sh FULGUR EMU_PLUGIN_DIR CONFIG MEAN_TOL END_TOL TENSOR LINE...
# Exits 77 (skipped) without Debian's fortunes.
set -u
fulgur=$1 plugins=$2 cfg=$3 mean_tol=$4 end_tol=$5 tensor=$6
shift 6
[ -d /usr/share/games/fortunes ] || { echo "skip: no /usr/share/games/fortunes"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { # NAME ARGS...: a fit on the emulated backend, its output in $tmp/NAME.out
  name=$1; shift
  rc=0
  "$fulgur" --plugin-path "$plugins" fit "$cfg" trainer.default_root_dir="$tmp/$name" "$@" \
    >"$tmp/$name.out" 2>&1 || rc=$?
  [ $rc = 0 ] || { cat "$tmp/$name.out"; fail "the $name run exited $rc"; }
}
fp8="precision.amax_history_len=16"
run bf16 precision.name=bf16-mixed
run fp8 $fp8
for line in "$@"; do
  grep -qF "$line" "$tmp/fp8.out" || { cat "$tmp/fp8.out"; fail "no line: $line"; }
done
csv() { find "$tmp/$1" -name metrics.csv | head -1; }
python3 - "$(csv bf16)" "$(csv fp8)" "$mean_tol" "$end_tol" <<'PY' || fail "fp8-mixed does not track bf16-mixed"
import csv, sys
def losses(path):
    return [float(r["train/step_loss"]) for r in csv.DictReader(open(path)) if r.get("train/step_loss")]
bf, f8, mean_tol, end_tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
ok = len(bf) == len(f8) == 200
rel = [abs(a - b) / b for a, b in zip(f8, bf)]
mean_rel = sum(rel) / len(rel) if rel else 1
end_bf, end_f8 = sum(bf[-20:]) / 20, sum(f8[-20:]) / 20
end_rel = abs(end_f8 - end_bf) / end_bf
print(f"steps {len(bf)}/{len(f8)}; loss bf16 {bf[0]:.4f} -> {end_bf:.4f}, fp8 {f8[0]:.4f} -> "
      f"{end_f8:.4f} (last 20 steps' mean); mean relative difference {mean_rel:.4f} (tolerance "
      f"{mean_tol}), max {max(rel):.4f}, last 20 steps' means {end_rel:.4f} (tolerance {end_tol})")
learns = end_bf < 0.75 * bf[0] and end_f8 < 0.75 * f8[0]
differs = max(rel) > 0
print(f"both learn: {learns}; fp8 changes the losses: {differs}")
sys.exit(0 if ok and mean_rel <= mean_tol and end_rel <= end_tol and learns and differs else 1)
PY
# resume: the scaling state travels in the checkpoint
run straight trainer.max_steps=40 $fp8
run half trainer.max_steps=20 $fp8 trainer.final_checkpoint="$tmp/s20.safetensors"
head -c 65536 "$tmp/s20.safetensors" | grep -aqF "\"$tensor\"" ||
  fail "the checkpoint holds no $tensor"
run resumed trainer.max_steps=40 $fp8 --ckpt-path "$tmp/s20.safetensors"
digest() { grep -o 'digest [0-9a-f]*' "$tmp/$1.out" | awk '{print $2}'; }
d0=$(digest straight) d1=$(digest resumed)
[ -n "$d0" ] && [ "$d0" = "$d1" ] || fail "resumed at step 20: weights digest $d1, straight $d0"
echo "ok: 20 steps + resume end with 40 straight steps' weights (digest $d0)"
