#!/usr/bin/env bash
# End-to-end checks through the fulgur command. Usage:
#   fit_check.sh accuracy CONFIG FLOOR   test accuracy after the config's epochs >= FLOOR
#   fit_check.sh determinism             same seed -> same weights, with 0 and 2 workers
#   fit_check.sh bad_data                broken data inputs fail with a clear message, exit 2
set -u
: "${FULGUR:?FULGUR must name the fulgur binary}" "${EXAMPLES:?EXAMPLES must name the examples folder}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

digest_of() { grep -o 'digest [0-9a-f]*' "$1" | awk '{print $2}'; }

accuracy() {
  local cfg=$1 floor=$2
  "$FULGUR" fit "$EXAMPLES/$cfg" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "fit $cfg exited $?"; }
  cat "$tmp/out"
  local acc
  acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/out")
  [ -n "$acc" ] || fail "no test accuracy line in the output of $cfg"
  awk -v a="$acc" -v f="$floor" 'BEGIN { exit !(a >= f) }' || fail "$cfg: test accuracy $acc < floor $floor"
  echo "ok: $cfg test accuracy $acc >= $floor"
}

determinism() {
  local cfg="$EXAMPLES/fashion_mnist_mlp.ini" common=(trainer.max_epochs=1 trainer.test_after_fit=false
        trainer.validate_every_n_epochs=0 trainer.limit_train_batches=300)
  "$FULGUR" fit "$cfg" "${common[@]}" data.num_workers=0 >"$tmp/w0" 2>&1 || fail "fit (0 workers) failed: $(cat "$tmp/w0")"
  "$FULGUR" fit "$cfg" "${common[@]}" data.num_workers=2 data.prefetch=3 >"$tmp/w2" 2>&1 || fail "fit (2 workers) failed"
  "$FULGUR" fit "$cfg" "${common[@]}" data.num_workers=2 trainer.seed=7 >"$tmp/s7" 2>&1 || fail "fit (seed 7) failed"
  local d0 d2 d7
  d0=$(digest_of "$tmp/w0"); d2=$(digest_of "$tmp/w2"); d7=$(digest_of "$tmp/s7")
  [ -n "$d0" ] && [ -n "$d2" ] && [ -n "$d7" ] || fail "no weights digest printed"
  [ "$d0" = "$d2" ] || fail "same seed, 0 vs 2 workers: digests differ ($d0 vs $d2)"
  [ "$d0" != "$d7" ] || fail "seed 1 and seed 7 gave the same weights ($d0): the seed is ignored"
  echo "ok: 0 and 2 workers -> $d0; seed 7 -> $d7"
}

expect_exit2() {
  local what=$1 fragment=$2; shift 2
  "$@" >"$tmp/bad" 2>&1
  local rc=$?
  [ $rc -eq 2 ] || { cat "$tmp/bad"; fail "$what: exit $rc, expected 2"; }
  grep -qF -- "$fragment" "$tmp/bad" || { cat "$tmp/bad"; fail "$what: message lacks '$fragment'"; }
  echo "ok: $what -> $(head -c 300 "$tmp/bad")"
}

bad_data() {
  local cfg="$EXAMPLES/fashion_mnist_mlp.ini"
  mkdir -p "$tmp/empty"
  expect_exit2 "missing data folder" "install the Debian package dataset-fashion-mnist" \
    "$FULGUR" fit "$cfg" data.dir="$tmp/empty"
  expect_exit2 "labels outside the model's classes" "label" \
    "$FULGUR" fit "$cfg" data.num_classes=5
  printf 'not an idx file at all' > "$tmp/empty/train-images-idx3-ubyte.gz"
  expect_exit2 "wrong magic" "train-images-idx3-ubyte.gz" \
    "$FULGUR" fit "$cfg" data.dir="$tmp/empty"
  head -c 5000 /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz > "$tmp/empty/train-images-idx3-ubyte.gz"
  cp /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz "$tmp/empty/"
  expect_exit2 "truncated gzip" "train-images-idx3-ubyte.gz" \
    "$FULGUR" fit "$cfg" data.dir="$tmp/empty"
}

case "${1:-}" in
  accuracy) accuracy "$2" "$3" ;;
  determinism) determinism ;;
  bad_data) bad_data ;;
  *) echo "usage: $0 accuracy CONFIG FLOOR | determinism | bad_data"; exit 2 ;;
esac
