#!/usr/bin/env bash
# The csv plugin through the fulgur command. Usage:
#   csv_check.sh fit_classification      an iris-like table trains (test accuracy floor)
#   csv_check.sh fit_regression_refused  float targets stop with the "not yet" message
#   csv_check.sh fit_bad_table           broken tables stop with exit 2 naming file:line
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

fit_regression_refused() {
  # petal_width as a float target: the dataset opens (f32 targets), the trainer refuses it
  expect_exit2 "regression targets" "f32 regression targets; they need a regression loss" \
    "$FULGUR" fit "$cfg" "${common[@]}" data.task=regression data.target=petal_width \
    data.features=sepal_length,sepal_width,petal_length
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

case "$check" in
  fit_classification|fit_regression_refused|fit_bad_table) "$check" ;;
  *) echo "unknown check $check"; exit 2 ;;
esac
