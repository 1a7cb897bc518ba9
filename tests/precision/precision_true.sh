#!/usr/bin/env bash
# Half gradients and the "true" half modes (bf16-true, fp16-true) through the fulgur command.
#   precision_true.sh memory    params and grads at half of fp32's bytes, no master copy;
#                               grad_dtype = half halves the mixed modes' grads only
#   precision_true.sh accuracy FLOOR PRECISION [KEY=VALUE...]
#                               the MLP example's test accuracy after its 3 epochs >= FLOOR
#   precision_true.sh ckpt      a bf16-true checkpoint holds f32 values that are exactly
#                               bf16 and reloads to the same weights digest
#   precision_true.sh refusals  strategies without half storage refuse with a message
set -u
: "${FULGUR:?FULGUR must name the fulgur binary}" "${EXAMPLES:?EXAMPLES must name the examples folder}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
mlp="$EXAMPLES/fashion_mnist_mlp.ini"
big=(data.batch_size=4096 data.eval_batch_size=4096)

field() { grep '^memory (device 0)' "$tmp/$1" | grep -o "$2 [0-9.]* MiB" | awk '{print $2}'; }
ratio() { awk -v h="$1" -v f="$2" -v lo="$3" -v hi="$4" 'BEGIN { r = h / f; exit !(r >= lo && r <= hi) }'; }

memory() {
  local run
  for run in fp32 bf16-true fp16-true bf16-mixed; do
    "$FULGUR" check "$mlp" precision.name=$run "${big[@]}" >"$tmp/$run" 2>&1 || fail "check $run: $(cat "$tmp/$run")"
  done
  "$FULGUR" check "$mlp" precision.name=fp16-mixed precision.grad_dtype=half "${big[@]}" >"$tmp/fp16h" 2>&1 || fail "check fp16-mixed grad_dtype=half: $(cat "$tmp/fp16h")"
  "$FULGUR" check "$mlp" precision.name=bf16-mixed precision.grad_dtype=half "${big[@]}" >"$tmp/bf16h" 2>&1 || fail "check bf16-mixed grad_dtype=half: $(cat "$tmp/bf16h")"
  local p32 g32 o32 a32
  p32=$(field fp32 params); g32=$(field fp32 grads); o32=$(field fp32 optimizer); a32=$(field fp32 activations)
  [ -n "$p32" ] && [ -n "$g32" ] || fail "no memory line: $(cat "$tmp/fp32")"
  for run in bf16-true fp16-true; do
    local p g m o a
    p=$(field $run params); g=$(field $run grads); m=$(field $run master); o=$(field $run optimizer); a=$(field $run activations)
    ratio "$p" "$p32" 0.49 0.51 || fail "$run params $p MiB vs fp32 $p32: not half"
    ratio "$g" "$g32" 0.49 0.51 || fail "$run grads $g MiB vs fp32 $g32: not half"
    ratio "$a" "$a32" 0.49 0.51 || fail "$run activations $a MiB vs fp32 $a32: not half"
    [ "$m" = "0.00" ] || fail "$run: master $m MiB, want 0 (no f32 master copy)"
    [ "$o" = "$o32" ] || fail "$run: optimizer $o MiB, want fp32's $o32 (the state stays f32)"
    echo "ok: $run params $p, grads $g, master $m MiB (fp32 $p32, $g32)"
  done
  local mg=$(field bf16-mixed grads)
  [ "$mg" = "$g32" ] || fail "bf16-mixed (grad_dtype = fp32) grads $mg MiB, want fp32's $g32"
  for run in bf16h fp16h; do
    local g m
    g=$(field $run grads); m=$(field $run master)
    ratio "$g" "$g32" 0.49 0.51 || fail "$run grads $g MiB vs fp32 $g32: not half"
    [ "$m" = "$p32" ] || fail "$run: master $m MiB, want fp32's params $p32"
    echo "ok: $run (grad_dtype = half) grads $g MiB, master $m MiB"
  done
}

accuracy() {
  local floor=$1 prec=$2 acc
  shift 2
  "$FULGUR" fit "$mlp" precision.name="$prec" "$@" trainer.default_root_dir="$tmp/runs" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "fit ($prec $*) exited $?"; }
  grep -E '^(memory|epoch [0-9]+/|test|loss scale)' "$tmp/out"
  acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/out")
  [ -n "$acc" ] || fail "no test accuracy line"
  awk -v a="$acc" -v f="$floor" 'BEGIN { exit !(a >= f) }' || fail "$prec $*: test accuracy $acc < $floor"
  echo "ok: $prec $*: test accuracy $acc >= $floor"
}

# The checkpoint stores f32 (the format is dtype-agnostic); every value must be a bf16 one
# (low 16 bits zero), the update having rounded into bf16. Loading it under bf16-true and
# taking no step gives the same weights digest.
ckpt() {
  local q=(precision.name=bf16-true trainer.test_after_fit=false trainer.check_val_every_n_epoch=0
           trainer.num_sanity_val_steps=0 trainer.default_root_dir="$tmp/runs")
  "$FULGUR" fit "$mlp" "${q[@]}" trainer.max_epochs=1 trainer.limit_train_batches=20 \
    trainer.final_checkpoint="$tmp/a.safetensors" >"$tmp/a" 2>&1 || fail "fit: $(cat "$tmp/a")"
  python3 - "$tmp/a.safetensors" <<'PY' || fail "checkpoint values are not bf16"
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
head = json.loads(data[8:8 + n])
body = data[8 + n:]
checked = 0
for name, t in head.items():
    if name == "__metadata__" or name.startswith("optimizer.") or "running" in name:
        continue
    a, b = t["data_offsets"]
    vals = struct.unpack("<%dI" % ((b - a) // 4), body[a:b])
    bad = [v for v in vals if v & 0xffff]
    if bad:
        sys.exit("%s: %d of %d values are not bf16 (0x%08x)" % (name, len(bad), len(vals), bad[0]))
    checked += len(vals)
if checked < 200000:
    sys.exit("only %d parameter values checked" % checked)
print("ok: %d parameter values, all bf16" % checked)
PY
  local d1 d2
  d1=$(grep -o 'digest [0-9a-f]*' "$tmp/a" | awk '{print $2}')
  "$FULGUR" fit "$mlp" "${q[@]}" trainer.max_steps=0 --ckpt-path "$tmp/a.safetensors" >"$tmp/b" 2>&1 || fail "reload: $(cat "$tmp/b")"
  d2=$(grep -o 'digest [0-9a-f]*' "$tmp/b" | awk '{print $2}')
  [ -n "$d1" ] && [ "$d1" = "$d2" ] || fail "digest after reload $d2, saved $d1"
  echo "ok: reloaded bf16-true weights, digest $d1"
}

refusals() {
  local what fragment
  expect() {
    what=$1 fragment=$2; shift 2
    "$FULGUR" check "$mlp" "$@" >"$tmp/r" 2>&1
    local rc=$?
    [ $rc -eq 2 ] && grep -qF -- "$fragment" "$tmp/r" || fail "$what: exit $rc, $(cat "$tmp/r")"
    echo "ok: $what -> $(head -c 240 "$tmp/r")"
  }
  expect "bf16-true under dp" "[strategy] dp reads gradients and parameters as f32 only" \
    precision.name=bf16-true strategy.name=dp backend.devices=2
  expect "fp16-true under dp" "fp16-true keeps f16 gradients and parameters" \
    precision.name=fp16-true strategy.name=dp backend.devices=2
}

case "${1:-}" in
  memory) memory ;;
  accuracy) shift; accuracy "$@" ;;
  ckpt) ckpt ;;
  refusals) refusals ;;
  *) echo "usage: $0 memory | accuracy FLOOR PRECISION [KEY=VALUE...] | ckpt | refusals"; exit 2 ;;
esac
