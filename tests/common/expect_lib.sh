# Sourced by the scripts that check the `fulgur` command case by case (harden_test.sh,
# cli/cli_test.sh, cuda/cuda_cli.sh): run/runp keep a command's exit code, stdout and stderr;
# expect_* check them; fail prints the failed expectation with the command and its output
# and counts it in $FAILED.
#   FULGUR: the command; PLUGINS: the built plugins' folder; TMP: the scratch folder (all set
#   before sourcing).

FAILED=0
CASE=""
OUT=$TMP/stdout
ERR=$TMP/stderr
RC=0
LAST_CMD=""

# run NAME ARGS...: runs fulgur, keeps its exit code, stdout and stderr for the checks.
run() {
    CASE=$1
    shift
    "$FULGUR" "$@" >"$OUT" 2>"$ERR"
    RC=$?
    LAST_CMD="fulgur $*"
}

# runp NAME ARGS...: the same with the built plugins' folder searched first.
runp() {
    _name=$1
    shift
    run "$_name" --plugin-path "$PLUGINS" "$@"
}

fail() {
    FAILED=$((FAILED + 1))
    echo "FAIL [$CASE] $1"
    echo "  command: $LAST_CMD"
    echo "  exit code: $RC"
    echo "  --- stdout"
    head -c 4000 "$OUT" | sed 's/^/  | /'
    echo "  --- stderr"
    head -c 4000 "$ERR" | sed 's/^/  | /'
}

expect_rc() { [ "$RC" -eq "$1" ] || fail "expected exit code $1, got $RC"; }
# expect_out / expect_err FRAGMENT: the fragment occurs verbatim in stdout / stderr.
expect_out() { grep -qF -- "$1" "$OUT" || fail "stdout lacks: $1"; }
expect_err() { grep -qF -- "$1" "$ERR" || fail "stderr lacks: $1"; }
expect_no_out() { [ ! -s "$OUT" ] || fail "expected nothing on stdout"; }
expect_no_err() { [ ! -s "$ERR" ] || fail "expected nothing on stderr"; }
