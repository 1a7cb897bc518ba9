#!/usr/bin/env bash
# The csv plugin through the fulgur command. Usage:
#   csv_check.sh fit_classification      an iris-like table trains (test accuracy floor)
#   csv_check.sh fit_regression          petal_width from the other features with loss = mse
#                                        (test mse and mae floors); f32 targets under
#                                        softmax_cross_entropy are refused
#   csv_check.sh fit_bce                 "is it class 0" (0/1 f32 targets) with bce_with_logits
#   csv_check.sh fit_bad_table           broken tables stop with exit 2 naming file:line
#   csv_check.sh fit_ignore_index        class 2 and half of class 0 relabelled 7 and [model]
#                                        ignore_index = 7: trained and scored on the rest
#                                        alone; bad ignore_index values stop with exit 2
#   csv_check.sh fit_label_smoothing     [model] label_smoothing = 0.1 in fp32, bf16-mixed
#                                        and fp16-mixed: each learns (test accuracy >= 0.9)
#                                        and its test loss is the smoothed one (above the
#                                        smoothed targets' entropy, 0.291 for 3 classes,
#                                        which the plain loss of the same fit is below);
#                                        1, -0.1 and under mse stop with exit 2 naming the key
# FULGUR names the fulgur binary, CSV_DIR this folder.
set -u
check=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
cfg="$CSV_DIR/iris_like.ini"
common=(data.dir="$tmp" trainer.default_root_dir="$tmp/runs")

python3 "$CSV_DIR/iris_like.py" "$tmp" || fail "iris_like.py failed"

fit_classification() {
  "$FULGUR" fit "$cfg" "${common[@]}" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "fit exited $?"; }
  tail -n 3 "$tmp/out"
  local acc
  acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/out")
  [ -n "$acc" ] || fail "no test accuracy line"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }' || fail "test accuracy $acc < 0.9"
  echo "ok: iris-like table: test accuracy $acc >= 0.9"
}

expect_exit2() {
  local what=$1 fragment=$2; shift 2
  "$@" >"$tmp/bad" 2>&1
  local rc=$?
  [ $rc -eq 2 ] || { cat "$tmp/bad"; fail "$what: exit $rc, expected 2"; }
  grep -qF -- "$fragment" "$tmp/bad" || { cat "$tmp/bad"; fail "$what: message lacks '$fragment'"; }
  echo "ok: $what -> $(grep -F -- "$fragment" "$tmp/bad" | head -c 400)"
}

metric_of() { # metric_of FILE LINE_PREFIX NAME: the value after NAME on the last such line
  awk -v p="$2" -v n="$3" 'index($0, p) == 1 {for (i = 1; i <= NF; i++) if ($i == n) v = $(i + 1)} END {print v}' "$1"
}

fit_regression() {
  local reg=(data.task=regression data.target=petal_width data.features=sepal_length,sepal_width,petal_length)
  expect_exit2 "regression targets under softmax_cross_entropy" "f32 regression targets; they train with [model] loss = mse" \
    "$FULGUR" fit "$cfg" "${common[@]}" "${reg[@]}"
  "$FULGUR" fit "$cfg" "${common[@]}" "${reg[@]}" model.loss=mse layer.fc2.out_features=1 >"$tmp/out" 2>&1 ||
    { cat "$tmp/out"; fail "mse fit exited $?"; }
  tail -n 2 "$tmp/out"
  local mse mae
  mse=$(metric_of "$tmp/out" "test " loss); mae=$(metric_of "$tmp/out" "test " mae)
  [ -n "$mse" ] && [ -n "$mae" ] || fail "no test loss/mae line"
  # petal_width varies by about 0.6 (variance) across the classes; a fit explains most of it
  awk -v a="$mse" -v b="$mae" 'BEGIN { exit !(a < 0.1 && b < 0.3) }' || fail "test mse $mse >= 0.1 or mae $mae >= 0.3"
  echo "ok: petal_width regression: test mse $mse < 0.1, mae $mae < 0.3"
}

fit_bce() {
  for f in train test; do # a 0/1 column: is it class 0
    awk -F, -v OFS=, 'NR == 1 {print $0, "setosa"; next} {print $0, ($6 == 0 ? 1 : 0)}' "$tmp/$f.csv" >"$tmp/b$f.csv"
  done
  "$FULGUR" fit "$cfg" "${common[@]}" data.train_file=btrain.csv data.test_file=btest.csv data.task=regression \
    data.target=setosa model.loss=bce_with_logits layer.fc2.out_features=1 trainer.max_epochs=10 >"$tmp/out" 2>&1 ||
    { cat "$tmp/out"; fail "bce fit exited $?"; }
  tail -n 2 "$tmp/out"
  local loss acc
  loss=$(metric_of "$tmp/out" "test " loss); acc=$(metric_of "$tmp/out" "test " acc)
  awk -v l="$loss" -v a="$acc" 'BEGIN { exit !(l < 0.2 && a >= 0.95) }' || fail "bce: test loss $loss >= 0.2 or accuracy $acc < 0.95"
  echo "ok: setosa or not with bce_with_logits: test loss $loss, accuracy $acc"
}

fit_bad_table() {
  cp "$tmp/train.csv" "$tmp/good.csv"
  sed '5s/,[^,]*$//' "$tmp/good.csv" > "$tmp/train.csv"
  expect_exit2 "a ragged row" "train.csv:5: 5 fields, the header has 6" "$FULGUR" fit "$cfg" "${common[@]}"
  sed '7s/^\([^,]*\),[^,]*,/\1,oops,/' "$tmp/good.csv" > "$tmp/train.csv"
  expect_exit2 "a non-numeric cell" "train.csv:7: column \"sepal_length\" (column 2): \"oops\" is not a number" \
    "$FULGUR" fit "$cfg" "${common[@]}"
  cp "$tmp/good.csv" "$tmp/train.csv"
  expect_exit2 "an unknown target column" "no column named \"kind\" (the target)" \
    "$FULGUR" fit "$cfg" "${common[@]}" data.target=kind
}

fit_ignore_index() {
  for f in train test; do
    awk -F, -v OFS=, 'NR > 1 && ($6 == 2 || ($6 == 0 && $1 % 2)) {$6 = 7} {print}' "$tmp/$f.csv" >"$tmp/i$f.csv"
  done
  local run=("$FULGUR" fit "$cfg" "${common[@]}" data.train_file=itrain.csv data.test_file=itest.csv
             layer.fc2.out_features=8)
  expect_exit2 "ignore_index under mse" "[model] ignore_index applies to softmax_cross_entropy, not loss = mse" \
    "$FULGUR" fit "$cfg" "${common[@]}" model.loss=mse model.ignore_index=7 data.task=regression \
    data.target=petal_width data.features=sepal_length layer.fc2.out_features=1
  expect_exit2 "a malformed ignore_index" "[model] ignore_index = two: not none or a 32-bit integer label" \
    "${run[@]}" model.ignore_index=two
  # class 7 is class 2 and half of class 0: inseparable from 0 unless its rows are ignored
  "${run[@]}" model.ignore_index=7 trainer.max_epochs=10 >"$tmp/out" 2>&1 ||
    { cat "$tmp/out"; fail "fit with ignore_index exited $?"; }
  tail -n 2 "$tmp/out"
  local loss acc
  loss=$(metric_of "$tmp/out" "test " loss); acc=$(metric_of "$tmp/out" "test " acc)
  awk -v l="$loss" -v a="$acc" 'BEGIN { exit !(l < 0.1 && a >= 0.99) }' ||
    fail "ignore_index: test loss $loss >= 0.1 or accuracy $acc < 0.99 over the classes that count"
  "${run[@]}" trainer.max_epochs=10 >"$tmp/out2" 2>&1 || { cat "$tmp/out2"; fail "fit without ignore_index exited $?"; }
  local acc2
  acc2=$(metric_of "$tmp/out2" "test " acc)
  awk -v a="$acc2" 'BEGIN { exit !(a < 0.99) }' || fail "without ignore_index the accuracy is $acc2: the check cannot tell"
  echo "ok: label 7 ignored: test loss $loss, accuracy $acc over the other rows ($acc2 with every row)"
}

fit_label_smoothing() {
  expect_exit2 "label_smoothing = 1" "[model] label_smoothing = 1: must be in [0, 1)" \
    "$FULGUR" fit "$cfg" "${common[@]}" model.label_smoothing=1
  expect_exit2 "label_smoothing = -0.1" "[model] label_smoothing" \
    "$FULGUR" fit "$cfg" "${common[@]}" model.label_smoothing=-0.1
  expect_exit2 "label_smoothing under mse" "[model] label_smoothing applies to softmax_cross_entropy, not loss = mse" \
    "$FULGUR" fit "$cfg" "${common[@]}" model.loss=mse model.label_smoothing=0.1 data.task=regression \
    data.target=petal_width data.features=sepal_length layer.fc2.out_features=1
  "$FULGUR" fit "$cfg" "${common[@]}" >"$tmp/plain" 2>&1 || { cat "$tmp/plain"; fail "plain fit exited $?"; }
  local plain
  plain=$(metric_of "$tmp/plain" "test " loss)
  # eps 0.1 over 3 classes: targets 0.9333 / 0.0333 / 0.0333, whose entropy bounds the loss
  awk -v l="$plain" 'BEGIN { exit !(l < 0.291) }' || fail "the plain test loss $plain is not below 0.291: the check cannot tell"
  for prec in fp32 bf16-mixed fp16-mixed; do
    "$FULGUR" fit "$cfg" "${common[@]}" model.label_smoothing=0.1 precision.name=$prec >"$tmp/out" 2>&1 ||
      { cat "$tmp/out"; fail "$prec fit with label_smoothing exited $?"; }
    local loss acc
    loss=$(metric_of "$tmp/out" "test " loss); acc=$(metric_of "$tmp/out" "test " acc)
    awk -v l="$loss" -v a="$acc" 'BEGIN { exit !(l >= 0.291 && l < 0.6 && a >= 0.9) }' ||
      fail "$prec label_smoothing 0.1: test loss $loss outside [0.291, 0.6) or accuracy $acc < 0.9"
    echo "ok: $prec label_smoothing 0.1: test loss $loss (plain fit: $plain), accuracy $acc"
  done
}

case "$check" in
  fit_classification|fit_regression|fit_bce|fit_bad_table|fit_ignore_index|fit_label_smoothing) "$check" ;;
  *) echo "unknown check $check"; exit 2 ;;
esac
