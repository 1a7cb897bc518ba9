#!/bin/sh
# backend_caps.*: the capability check at setup. `fulgur check` (and fit) work out which
# backend ops a config's model, precision and optimizer call, with their dtypes, and refuse a
# backend that lacks any of them before anything runs: exit 2 and ONE message naming every
# missing op. The backend is the fixture fulgur-backend-nobatchnorm.so (the CPU backend
# without batchnorm_forward, and without adamw_update on f16 parameters).
#
#   backend_caps.sh FULGUR PLUGIN_DIR FIXTURE_DIR CASE      CASE: works | lacks_op | lacks_dtype
set -u

if [ $# -ne 4 ]; then
    echo "usage: $0 FULGUR PLUGIN_DIR FIXTURE_DIR CASE" >&2
    exit 2
fi
FULGUR=$1
PLUGINS=$2
FIXTURES=$3
CASE=$4

TMP=$(mktemp -d "${TMPDIR:-/tmp}/fulgur-caps.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
HOME=$TMP/home
export HOME
unset FULGUR_PLUGIN_PATH
mkdir -p "$HOME"
cd "$TMP" || exit 1

# config FILE [LAYERS] [EXTRA SECTIONS]: synthetic data, the fixture backend, flatten then
# the given layers (printf format) then a linear classifier.
config() {
    {
        printf '[backend]\nname = nobatchnorm\n\n[trainer]\nmax_epochs = 1\n\n'
        printf '[data]\nname = synthetic\ntrain_size = 128\ntest_size = 64\nbatch_size = 32\n'
        printf 'num_workers = 0\n\n[layer.flat]\ntype = flatten\n\n'
        printf '%b' "${2:-}"
        printf '[layer.fc]\ntype = linear\nout_features = 10\n\n'
        printf '%b' "${3:-}"
    } >"$1"
}

# run VERB CONFIG: fulgur with the fixture folder first, then the built plugins.
run() {
    "$FULGUR" --plugin-path "$FIXTURES" --plugin-path "$PLUGINS" "$1" "$2" >"$TMP/out" 2>&1
    RC=$?
}

fail() {
    echo "FAIL [backend_caps.$CASE] $*"
    echo "--- output (exit $RC):"
    cat "$TMP/out"
    exit 1
}

expect_rc() {
    [ "$RC" -eq "$1" ] || fail "exit $RC, want $1"
}

expect_out() {
    grep -qF -- "$1" "$TMP/out" || fail "no '$1' in the output"
}

BN='[layer.hidden]\ntype = linear\nout_features = 32\n\n[layer.bn]\ntype = batchnorm\n\n'
case $CASE in
works) # everything but the missing op runs: a fit of a model without batch norm
    config ok.ini
    run check ok.ini
    expect_rc 0
    run fit ok.ini
    expect_rc 0
    expect_out "weights:"
    ;;
lacks_op) # the model needs batchnorm_forward: refused by check and by fit, before training
    config bn.ini "$BN"
    run check bn.ini
    expect_rc 2
    expect_out "backend.nobatchnorm lacks: batchnorm_forward(f32) for [layer.bn]"
    run fit bn.ini
    expect_rc 2
    expect_out "backend.nobatchnorm lacks: batchnorm_forward(f32) for [layer.bn]"
    [ ! -d runs ] || fail "fit made a run folder before refusing the backend"
    ;;
lacks_dtype) # fp16-true with adamw: both missing ops in one message
    config half.ini "$BN" '[precision]\nname = fp16-true\n\n[optimizer]\nname = adamw\n'
    run check half.ini
    expect_rc 2
    expect_out "backend.nobatchnorm lacks: batchnorm_forward(f16) for [layer.bn]"
    expect_out "adamw_update(f16) for [optimizer] name = adamw"
    lines=$(grep -c 'lacks:' "$TMP/out")
    [ "$lines" -eq 1 ] || fail "$lines messages name missing ops, want one"
    ;;
*)
    echo "unknown case '$CASE'" >&2
    exit 2
    ;;
esac
echo "ok [backend_caps.$CASE]"
