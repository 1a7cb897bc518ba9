#!/bin/bash
# harden.*: the defects of issue 17, each as a user met it, run through the `fulgur`
# command in a scratch folder.
#
#   harden_test.sh FULGUR PLUGIN_DIR GROUP
#
# Every case of the group runs; each failed expectation is printed with the command's
# output, and the script exits 1 when any failed.
set -u

if [ $# -ne 3 ]; then
    echo "usage: $0 FULGUR PLUGIN_DIR GROUP" >&2
    exit 2
fi
FULGUR=$1
PLUGINS=$2
GROUP=$3
HERE=$(cd "$(dirname "$0")" && pwd)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/fulgur-harden.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
HOME=$TMP/home
export HOME
unset FULGUR_PLUGIN_PATH
mkdir -p "$HOME"
cd "$TMP" || exit 1

FAILED=0
CASE=""
OUT=$TMP/stdout
ERR=$TMP/stderr
RC=0
LAST_CMD=""

run() {
    CASE=$1
    shift
    "$FULGUR" "$@" >"$OUT" 2>"$ERR"
    RC=$?
    LAST_CMD="fulgur $*"
}

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
expect_out() { grep -qF -- "$1" "$OUT" || fail "stdout lacks: $1"; }
expect_err() { grep -qF -- "$1" "$ERR" || fail "stderr lacks: $1"; }

# A small valid config: synthetic data, flatten + linear, short epochs.
write_ok_config() {
    cat >"$1" <<'EOC'
[trainer]
max_epochs = 1
enable_progress_bar = false

[data]
name = synthetic
train_size = 512
test_size = 256
batch_size = 64
num_workers = 0

[layer.flat]
type = flatten

[layer.fc1]
type = linear
out_features = 10
EOC
}

for f in "$HERE"/groups/*.sh; do
    # shellcheck source=/dev/null
    . "$f"
done

if ! command -v "group_$GROUP" >/dev/null; then
    echo "unknown group: $GROUP" >&2
    exit 2
fi
"group_$GROUP"
if [ "$FAILED" -ne 0 ]; then
    echo "$FAILED expectation(s) failed in group $GROUP"
    exit 1
fi
echo "group $GROUP: all expectations held"
