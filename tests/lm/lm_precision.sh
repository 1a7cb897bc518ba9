#!/usr/bin/env bash
# examples/char_lm.ini for 50 AdamW steps in fp32 and in PRECISION (bf16-mixed or
# fp16-mixed) from the same seeded weights: every step's loss within LIMIT relative of
# fp32's, the loss falling, and the weights not fp32's (the half arithmetic ran). Measured:
# bf16-mixed 8.6e-4, fp16-mixed 4.9e-5. EXAMPLE (default char_lm) picks another example, as
# llama_tiny (rope, grouped-query attention, RMSNorm, SwiGLU in the half dtype). Needs FULGUR;
# skips (77) without Debian's fortunes.
#   lm_precision.sh PRECISION LIMIT [EXAMPLE]
set -uo pipefail
test -d /usr/share/games/fortunes || exit 77
here=$(cd "$(dirname "$0")" && pwd)
prec=$1 limit=$2 example=${3:-char_lm}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { # precision -> its metrics.csv path on stdout, the fit's digest line in $dir/$1.log
  "$FULGUR" fit "$here/../../examples/$example.ini" precision.name="$1" trainer.max_epochs=1 \
    trainer.limit_train_batches=50 trainer.limit_val_batches=2 trainer.log_every_n_steps=1 \
    trainer.enable_progress_bar=false trainer.test_after_fit=false data.train_windows=1600 \
    trainer.default_root_dir="$dir/$1" callback.csv_logger.enabled=true >"$dir/$1.log" 2>&1 ||
    { cat "$dir/$1.log"; echo "FAIL: fit with $1 exited $?"; exit 1; }
}
run fp32
run "$prec"
digest() { sed -nE 's/^weights: .* digest ([0-9a-f]+),.*/\1/p' "$dir/$1.log"; }
[ -n "$(digest fp32)" ] && [ "$(digest fp32)" != "$(digest "$prec")" ] ||
  { echo "FAIL: $prec's weights ($(digest "$prec")) are fp32's ($(digest fp32)): no half arithmetic ran"; exit 1; }
/usr/bin/env python3 - "$dir" "$prec" "$limit" <<'PY'
import csv, glob, sys
folder, prec, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
def losses(p):
    path = glob.glob(f"{folder}/{p}/default/version_*/metrics.csv")[0]
    return [float(r["train/step_loss"]) for r in csv.DictReader(open(path)) if r.get("train/step_loss")]
ref, half = losses("fp32"), losses(prec)
if len(ref) != 50 or len(half) != 50:
    sys.exit(f"FAIL: {len(ref)} fp32 and {len(half)} {prec} step losses, expected 50 each")
worst = max(abs(a - b) / a for a, b in zip(ref, half))
print(f"{prec}: 50 steps, loss {half[0]:.4f} -> {half[-1]:.4f} (fp32 {ref[-1]:.4f}), "
      f"worst relative difference {worst:.2e} (limit {limit:g})")
if half[-1] > half[0] - 2.0:
    sys.exit(f"FAIL: {prec}'s loss fell only from {half[0]:.4f} to {half[-1]:.4f}")
sys.exit(0 if worst <= limit else 1)
PY
