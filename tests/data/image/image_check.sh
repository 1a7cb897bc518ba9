#!/usr/bin/env bash
# The image_folder checks that need more than the test binary. Usage:
#   image_check.sh reference BIN        Pillow writes fixtures and decodes them
#                                       (pil_reference.py); BIN compares the plugin's pixels
#   image_check.sh fashion_png BIN      the Fashion-MNIST PNG export equals the IDX files
#   image_check.sh fit_determinism BIN  augmented training: same weights with 0 and 2 workers
#   image_check.sh fit_resume BIN       resume inside an epoch = the unbroken run
#   image_check.sh fit_accuracy BIN     an MLP learns the PNG export (test accuracy floor)
#   image_check.sh fit_bad_data BIN     broken files stop fit with exit 2 naming the file
#   image_check.sh fit_resnet BIN       examples/fashion_mnist_resnet.ini (residual blocks with
#                                       add) learns 5400 augmented PNGs in 1 epoch (floor)
#   image_check.sh predict_relative BIN fit then predict with a relative data.dir (the
#                                       example's own form): predict reads dir/test_dir
# FULGUR and EXAMPLES name the fulgur binary and the examples folder (fit_* and the export).
set -u
check=$1 bin=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
FASHION=/usr/share/datasets/fashion-mnist

# A python3 that has Pillow (Debian's python3-pil lives in /usr/bin/python3).
pil_python() {
  local py
  for py in "${PYTHON:-}" python3 /usr/bin/python3; do
    [ -n "$py" ] && command -v "$py" >/dev/null && "$py" -c "import PIL" 2>/dev/null &&
      { echo "$py"; return 0; }
  done
  return 1
}

reference() {
  local py
  py=$(pil_python) || fail "no python3 with Pillow (Debian python3-pil): run tests/install-deps.sh"
  "$py" "$here/pil_reference.py" "$tmp/ref" || fail "pil_reference.py failed"
  "$bin" reference "$tmp/ref" || fail "the plugin's pixels differ from Pillow's"
}

# The first N images of each Fashion-MNIST split as PNG class folders in $tmp/fm.
export_fashion() {
  [ -f "$FASHION/t10k-images-idx3-ubyte.gz" ] ||
    { echo "skipped: $FASHION missing (apt install dataset-fashion-mnist)"; exit 77; }
  python3 "$EXAMPLES/fashion_mnist_to_png.py" "$tmp/fm" --limit "$1" >/dev/null ||
    fail "fashion_mnist_to_png.py failed"
}

fashion_png() {
  export_fashion 2000
  "$bin" fashion_png "$tmp/fm" || fail "the PNG export read back differs from the IDX files"
}

digest_of() { grep -o 'digest [0-9a-f]*' "$1" | awk '{print $2}'; }

# Every augmentation on, a short cosine schedule fixed in steps (2 epochs of 16 batches).
augmented=(data.dir="$tmp/fm" data.random_crop_padding=2 data.random_resized_crop=true data.center_crop=28
           data.rrc_scale=0.5,1 data.brightness=0.3 data.contrast=0.3 trainer.default_root_dir="$tmp/runs"
           trainer.log_every_n_steps=8 scheduler.t_max=32 trainer.test_after_fit=false)

fit() { # OUT [key=value...]
  local out=$1; shift
  "$FULGUR" fit "$EXAMPLES/fashion_mnist_png.ini" "${augmented[@]}" "$@" >"$out" 2>&1 ||
    { cat "$out"; fail "fit $* exited $?"; }
}

fit_determinism() {
  export_fashion 1000
  fit "$tmp/w0" trainer.max_epochs=1 data.num_workers=0
  fit "$tmp/w2" trainer.max_epochs=1 data.num_workers=2 data.prefetch=3
  fit "$tmp/s7" trainer.max_epochs=1 data.num_workers=2 trainer.seed=7
  fit "$tmp/plain" trainer.max_epochs=1 data.num_workers=2 data.hflip=0 data.random_resized_crop=false \
    data.brightness=0 data.contrast=0 data.random_crop_padding=0
  local d0 d2 d7 dp
  d0=$(digest_of "$tmp/w0"); d2=$(digest_of "$tmp/w2"); d7=$(digest_of "$tmp/s7"); dp=$(digest_of "$tmp/plain")
  [ -n "$d0" ] && [ -n "$d2" ] && [ -n "$d7" ] && [ -n "$dp" ] || fail "no weights digest printed"
  [ "$d0" = "$d2" ] || fail "augmented, same seed: 0 workers $d0, 2 workers $d2"
  [ "$d0" != "$d7" ] || fail "seeds 1 and 7 gave the same weights $d0"
  [ "$d0" != "$dp" ] || fail "augmentation on and off gave the same weights $d0"
  echo "ok: 0 and 2 workers -> $d0; seed 7 -> $d7; without augmentation -> $dp"
}

fit_resume() {
  export_fashion 1000
  fit "$tmp/straight" trainer.max_epochs=2
  fit "$tmp/a" trainer.max_epochs=2 trainer.max_steps=24 trainer.final_checkpoint="$tmp/s24.safetensors"
  fit "$tmp/b" trainer.max_epochs=2 --ckpt-path "$tmp/s24.safetensors" data.num_workers=1
  local d0 d1
  d0=$(digest_of "$tmp/straight"); d1=$(digest_of "$tmp/b")
  [ -n "$d0" ] && [ "$d0" = "$d1" ] || { cat "$tmp/b"; fail "resume at step 24 (inside epoch 2): $d1, straight $d0"; }
  echo "ok: resumed inside epoch 2 -> $d1 = straight"
}

fit_accuracy() {
  export_fashion 6000
  "$FULGUR" fit "$EXAMPLES/fashion_mnist_png.ini" data.dir="$tmp/fm" trainer.default_root_dir="$tmp/runs" \
    >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "fit exited $?"; }
  cat "$tmp/out"
  local acc
  acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/out")
  [ -n "$acc" ] || fail "no test accuracy line"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.78) }' || fail "test accuracy $acc < 0.78"
  echo "ok: 6000 PNGs, 3 epochs: test accuracy $acc >= 0.78 (0.81 when written)"
}

fit_resnet() {
  export_fashion 6000
  "$FULGUR" fit "$EXAMPLES/fashion_mnist_resnet.ini" data.dir="$tmp/fm" trainer.default_root_dir="$tmp/runs" \
    trainer.max_epochs=1 >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "fit exited $?"; }
  tail -n 4 "$tmp/out"
  grep -qF "val_split: 600 samples held out" "$tmp/out" || fail "the example does not hold out 0.1 for validation"
  local acc
  acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/out")
  [ -n "$acc" ] || fail "no test accuracy line"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.72) }' || fail "test accuracy $acc < 0.72"
  echo "ok: residual CNN, 5400 augmented PNGs, 1 epoch: test accuracy $acc >= 0.72 (0.779 when written)"
}

predict_relative() {
  export_fashion 300
  "$FULGUR" fit "$EXAMPLES/fashion_mnist_png.ini" data.dir=fm trainer.default_root_dir=runs \
    trainer.max_epochs=1 trainer.final_checkpoint=w.safetensors >"$tmp/out" 2>&1 ||
    { rc=$?; cat "$tmp/out"; fail "fit exited $rc"; }
  local acc pred csv rc
  acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/out")
  [ -n "$acc" ] || { cat "$tmp/out"; fail "no test accuracy line"; }
  "$FULGUR" predict "$EXAMPLES/fashion_mnist_png.ini" data.dir=fm trainer.default_root_dir=runs \
    --ckpt-path runs/default/version_0/w.safetensors >"$tmp/pred" 2>&1 ||
    { rc=$?; cat "$tmp/pred"; fail "predict with data.dir=fm (relative) exited $rc"; }
  csv=$(sed -n 's/^predictions: 300 rows in \(.*\) (accuracy .*/\1/p' "$tmp/pred")
  [ -n "$csv" ] && [ -f "$csv" ] || { cat "$tmp/pred"; fail "no predictions line for 300 rows"; }
  [ "$(wc -l <"$csv")" -eq 301 ] || fail "$csv: $(wc -l <"$csv") lines, expected a header and 300 rows"
  pred=$(sed -n 's/^predictions: .*(accuracy \([0-9.]*\) against the labels)/\1/p' "$tmp/pred")
  [ "$pred" = "$acc" ] || fail "predict's accuracy $pred differs from the fit's test accuracy $acc"
  echo "ok: relative data.dir: predict read fm/test (300 rows), accuracy $pred = the fit's test $acc"
}

expect_exit2() {
  local what=$1 fragment=$2; shift 2
  "$@" >"$tmp/bad" 2>&1
  local rc=$?
  [ $rc -eq 2 ] || { cat "$tmp/bad"; fail "$what: exit $rc, expected 2"; }
  grep -qF -- "$fragment" "$tmp/bad" || { cat "$tmp/bad"; fail "$what: message lacks '$fragment'"; }
  echo "ok: $what -> $(grep -F -- "$fragment" "$tmp/bad" | head -c 400)"
}

fit_bad_data() {
  export_fashion 200
  local cls="$tmp/fm/train/3_dress" file
  file=$(ls "$cls" | head -n 1)
  head -c 60 "$cls/$file" > "$tmp/cut" && mv "$tmp/cut" "$cls/$file"
  expect_exit2 "a truncated PNG" "$cls/$file: PNG" \
    "$FULGUR" fit "$EXAMPLES/fashion_mnist_png.ini" data.dir="$tmp/fm" trainer.default_root_dir="$tmp/runs"
  : > "$cls/$file"
  expect_exit2 "a zero-byte file" "$cls/$file: empty file" \
    "$FULGUR" fit "$EXAMPLES/fashion_mnist_png.ini" data.dir="$tmp/fm" trainer.default_root_dir="$tmp/runs"
  rm "$cls"/*
  expect_exit2 "an empty class folder" "$cls holds no .png" \
    "$FULGUR" fit "$EXAMPLES/fashion_mnist_png.ini" data.dir="$tmp/fm" trainer.default_root_dir="$tmp/runs"
  expect_exit2 "resize without center_crop" "set center_crop" \
    "$FULGUR" check "$EXAMPLES/fashion_mnist_png.ini" data.dir="$tmp/fm" data.resize=32
}

case "$check" in
  reference|fashion_png|fit_determinism|fit_resume|fit_accuracy|fit_bad_data|fit_resnet|predict_relative) "$check" ;;
  *) echo "unknown check $check"; exit 2 ;;
esac
