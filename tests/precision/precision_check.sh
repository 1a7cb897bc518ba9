#!/usr/bin/env bash
# Training in half precision through the fulgur command. Usage:
#   precision_check.sh accuracy CONFIG PRECISION FLOOR  test accuracy after the config's
#                                                      epochs >= FLOOR
#   precision_check.sh skip      injected overflow: steps skipped, nothing moves, scale halves
#   precision_check.sh growth    the scale doubles after growth_interval clean steps
#   precision_check.sh resume    fp16-mixed resume restores the loss scale exactly
#   precision_check.sh memory    half activations and working params: half the bytes
#   precision_check.sh refusals  unsupported settings fail with a message
#   precision_check.sh emulated  bf16 on the CPU's f32 emulation (backend.bf16 = emulated, what
#                                a CPU without avx512_bf16 runs) says "bf16 emulated" once;
#                                fp32 says nothing of it
set -u
: "${FULGUR:?FULGUR must name the fulgur binary}" "${EXAMPLES:?EXAMPLES must name the examples folder}"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
tool() { python3 "$here/ckpt_tool.py" "$@"; }
digest_of() { grep -o 'digest [0-9a-f]*' "$1" | awk '{print $2}'; }
mlp="$EXAMPLES/fashion_mnist_mlp.ini"
quiet=(trainer.max_epochs=1 trainer.test_after_fit=false trainer.check_val_every_n_epoch=0
       trainer.num_sanity_val_steps=0 trainer.default_root_dir="$tmp/runs")

accuracy() {
  local cfg=$1 prec=$2 floor=$3 acc
  "$FULGUR" fit "$EXAMPLES/$cfg" precision.name="$prec" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "fit $cfg ($prec) exited $?"; }
  cat "$tmp/out"
  acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/out")
  [ -n "$acc" ] || fail "no test accuracy line in the output of $cfg"
  awk -v a="$acc" -v f="$floor" 'BEGIN { exit !(a >= f) }' || fail "$cfg ($prec): test accuracy $acc < $floor"
  echo "ok: $cfg under $prec: test accuracy $acc >= $floor"
}

# init_scale 2^40 overflows float16 at once: three steps, all skipped. Weights and optimizer
# state must be bitwise those of a run that took no step, the scale halved three times, the
# step counter and the schedule (lr) unmoved.
skip() {
  local p=(precision.name=fp16-mixed precision.init_scale=1099511627776)
  "$FULGUR" fit "$mlp" "${quiet[@]}" "${p[@]}" trainer.limit_train_batches=3 trainer.log_every_n_steps=1 \
    trainer.final_checkpoint="$tmp/skip.safetensors" >"$tmp/a" 2>&1 || fail "3 skipped steps: $(cat "$tmp/a")"
  "$FULGUR" fit "$mlp" "${quiet[@]}" "${p[@]}" trainer.max_steps=0 \
    trainer.final_checkpoint="$tmp/none.safetensors" >"$tmp/b" 2>&1 || fail "no step: $(cat "$tmp/b")"
  grep -qF "loss scale: 137438953472, 3 step(s) skipped" "$tmp/a" || fail "scale 2^40 / 2^3 after 3 overflows expected: $(cat "$tmp/a")"
  grep -qF "after 0 steps" "$tmp/a" || fail "skipped steps must not count: $(grep weights "$tmp/a")"
  tool same "$tmp/skip.safetensors" "$tmp/none.safetensors" || fail "weights or optimizer state moved on a skipped step"
  [ "$(tool meta "$tmp/skip.safetensors" optimizer_step)" = 0 ] || fail "the optimizer's step counter moved"
  [ "$(tool meta "$tmp/skip.safetensors" loss_scale_skipped_steps)" = 3 ] || fail "checkpoint: skipped steps"
  [ "$(grep -c ' lr 0.02$' "$tmp/a")" -eq 3 ] || fail "the schedule moved on skipped steps: $(grep step "$tmp/a")"
  # Then the scale comes down until gradients fit, and training goes on: every batch is a
  # step or a skip.
  "$FULGUR" fit "$mlp" "${quiet[@]}" "${p[@]}" trainer.limit_train_batches=40 >"$tmp/c" 2>&1 || fail "recovery: $(cat "$tmp/c")"
  local steps skipped
  steps=$(grep -o 'after [0-9]* steps' "$tmp/c" | awk '{print $2}')
  skipped=$(grep -o '[0-9]* step(s) skipped' "$tmp/c" | awk '{print $1}')
  [ -n "$steps" ] && [ -n "$skipped" ] && [ "$skipped" -ge 4 ] && [ $((steps + skipped)) -eq 40 ] \
    || fail "40 batches should be steps + skips, with the first ones skipped: $steps steps, $skipped skipped"
  echo "ok: 3 overflows skipped bitwise, scale 2^37; recovery: $skipped skipped, $steps steps"
}

# Without overflow (init_scale 1) the scale doubles every growth_interval = 5 steps.
growth() {
  "$FULGUR" fit "$mlp" "${quiet[@]}" precision.name=fp16-mixed precision.init_scale=1 precision.growth_interval=5 \
    trainer.limit_train_batches=12 trainer.final_checkpoint="$tmp/g.safetensors" >"$tmp/g" 2>&1 || fail "growth: $(cat "$tmp/g")"
  grep -qF "loss scale: 4, 0 step(s) skipped" "$tmp/g" || fail "12 clean steps at interval 5: scale 4 expected: $(grep -F 'loss scale' "$tmp/g")"
  [ "$(tool meta "$tmp/g.safetensors" loss_scale_growth_tracker)" = 2 ] || fail "growth tracker 2 expected"
  echo "ok: scale 1 -> 4 after 12 clean steps"
}

# 2 epochs straight == 1 epoch + resume, under fp16-mixed with a scale that moves (skips at
# 2^30, growth every 20 steps): same weights bit for bit and the same final scale.
resume() {
  local c=(precision.name=fp16-mixed precision.init_scale=1073741824 precision.growth_interval=20
           trainer.limit_train_batches=100 scheduler.t_max=200 trainer.log_every_n_steps=25
           trainer.max_epochs=2 trainer.test_after_fit=false trainer.default_root_dir="$tmp/runs")
  "$FULGUR" fit "$mlp" "${c[@]}" >"$tmp/s" 2>&1 || fail "straight: $(cat "$tmp/s")"
  "$FULGUR" fit "$mlp" "${c[@]}" trainer.max_epochs=1 trainer.final_checkpoint="$tmp/e1.safetensors" >"$tmp/a" 2>&1 || fail "epoch 1: $(cat "$tmp/a")"
  "$FULGUR" fit "$mlp" "${c[@]}" --ckpt-path "$tmp/e1.safetensors" >"$tmp/b" 2>&1 || fail "resume: $(cat "$tmp/b")"
  local saved d0 d1 l0 l1
  saved=$(tool meta "$tmp/e1.safetensors" loss_scale) || fail "no loss_scale in the checkpoint"
  [ "$saved" != 1073741824 ] || fail "the scale never moved in epoch 1: the test would prove nothing"
  grep -qF "loss scale: $saved," "$tmp/a" || fail "checkpoint scale $saved differs from the run's: $(grep -F 'loss scale' "$tmp/a")"
  d0=$(digest_of "$tmp/s"); d1=$(digest_of "$tmp/b")
  [ -n "$d0" ] && [ "$d0" = "$d1" ] || fail "resumed digest $d1, straight $d0"
  l0=$(grep -F 'loss scale' "$tmp/s"); l1=$(grep -F 'loss scale' "$tmp/b")
  [ -n "$l0" ] && [ "$l0" = "$l1" ] || fail "final scale after resume '$l1', straight '$l0'"
  echo "ok: resumed at scale $saved; straight and resumed give $d0, $l0"
}

# Bytes per role, as fulgur prints them at setup, at a batch large enough for 2 decimals.
memory() {
  local p
  for p in fp32 bf16-mixed fp16-mixed; do
    "$FULGUR" check "$mlp" precision.name=$p data.batch_size=4096 data.eval_batch_size=4096 >"$tmp/$p" 2>&1 || fail "check $p: $(cat "$tmp/$p")"
  done
  field() { grep '^memory (device 0)' "$tmp/$1" | grep -o "$2 [0-9.]* MiB" | awk '{print $2}'; }
  local a32 p32 g32 o32
  a32=$(field fp32 activations); p32=$(field fp32 params); g32=$(field fp32 grads); o32=$(field fp32 optimizer)
  [ -n "$a32" ] && [ -n "$p32" ] || fail "no memory line: $(cat "$tmp/fp32")"
  for p in bf16-mixed fp16-mixed; do
    local a pp m g o
    a=$(field $p activations); pp=$(field $p params); m=$(field $p master); g=$(field $p grads); o=$(field $p optimizer)
    awk -v h="$a" -v f="$a32" 'BEGIN { r = h / f; exit !(r >= 0.49 && r <= 0.51) }' || fail "$p activations $a MiB vs fp32 $a32 MiB: not half"
    awk -v h="$pp" -v f="$p32" 'BEGIN { r = h / f; exit !(r >= 0.49 && r <= 0.51) }' || fail "$p working params $pp MiB vs fp32 $p32 MiB: not half"
    [ "$m" = "$p32" ] && [ "$g" = "$g32" ] && [ "$o" = "$o32" ] || fail "$p: master $m, grads $g, optimizer $o MiB; want the fp32 params $p32, grads $g32, optimizer $o32"
    echo "ok: $p activations $a MiB (fp32 $a32), params $pp + master $m MiB (fp32 $p32)"
  done
}

# What is not supported fails with a message that says so (exit 2), never silently.
refusals() {
  local what fragment
  expect() {
    what=$1 fragment=$2; shift 2
    "$FULGUR" check "$mlp" "$@" >"$tmp/r" 2>&1
    local rc=$?
    [ $rc -eq 2 ] && grep -qF -- "$fragment" "$tmp/r" || fail "$what: exit $rc, $(cat "$tmp/r")"
    echo "ok: $what -> $(head -c 200 "$tmp/r")"
  }
  expect "half gradients under dp" "[strategy] dp reads gradients and parameters as f32 only" precision.name=bf16-mixed precision.grad_dtype=half strategy.name=dp backend.devices=2
  expect "min_scale above init_scale" "min_scale = 1e+06" precision.name=fp16-mixed precision.min_scale=1e6
  expect "a scaler key under bf16" "hysteresis" precision.name=bf16-mixed precision.hysteresis=2
  expect "fp8 on the CPU backend" "[precision] name = fp8-mixed: backend.cpu has no fp8 gemm" precision.name=fp8-mixed
  expect "an fp8 key under bf16" "amax_history_len" precision.name=bf16-mixed precision.amax_history_len=16
}

emulated() {
  local short=(trainer.limit_train_batches=5 trainer.test_after_fit=false
               trainer.check_val_every_n_epoch=0 trainer.num_sanity_val_steps=0
               trainer.default_root_dir="$tmp/runs")
  "$FULGUR" fit "$mlp" "${short[@]}" trainer.max_epochs=2 precision.name=bf16-mixed \
    backend.bf16=emulated >"$tmp/e" 2>&1 || fail "bf16 on the emulation: $(tail -5 "$tmp/e")"
  local n; n=$(grep -c 'bf16 emulated' "$tmp/e")
  [ "$n" = 1 ] || fail "'bf16 emulated' said $n times: $(cat "$tmp/e")"
  grep -F 'bf16 emulated' "$tmp/e" | grep -qF 'backend.bf16 = emulated' ||
    fail "the note does not say why: $(grep -F 'bf16 emulated' "$tmp/e")"
  echo "ok: $(grep -F 'bf16 emulated' "$tmp/e")"
  "$FULGUR" fit "$mlp" "${short[@]}" trainer.max_epochs=1 precision.name=fp32 \
    backend.bf16=emulated >"$tmp/f" 2>&1 || fail "fp32: $(tail -5 "$tmp/f")"
  ! grep -qF 'bf16 emulated' "$tmp/f" || fail "fp32 said bf16 emulated"
  echo "ok: fp32 says nothing of bf16"
}

case "${1:-}" in
  accuracy) accuracy "$2" "$3" "$4" ;;
  skip) skip ;;
  growth) growth ;;
  resume) resume ;;
  memory) memory ;;
  refusals) refusals ;;
  emulated) emulated ;;
  *) echo "usage: $0 accuracy CONFIG PRECISION FLOOR | skip | growth | resume | memory | refusals | emulated"; exit 2 ;;
esac
