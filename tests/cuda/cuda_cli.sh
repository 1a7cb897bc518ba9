#!/bin/sh
# cuda.cli: the CUDA backend as a user meets it, on any machine (no GPU needed):
#   - `fulgur fit ... backend.name=cuda` with no device visible (CUDA_VISIBLE_DEVICES=-1)
#     exits 2 with one line naming what is missing: no driver (libcuda.so.1 not found) on
#     a machine without one, no CUDA device on a machine with one;
#   - `fulgur devices` lists the backend with the same reason, and exits 0;
#   - `fulgur explain backend.cuda` shows its options; an option it does not implement
#     (cuda_graphs) is refused before anything runs.
#
#   cuda_cli.sh FULGUR PLUGIN_DIR
set -u
[ $# -eq 2 ] || { echo "usage: $0 FULGUR PLUGIN_DIR" >&2; exit 2; }
FULGUR=$1
PLUGINS=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fulgur-cuda-cli.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
# run/runp, fail
# shellcheck source=../common/expect_lib.sh
. "$(dirname "$0")/../common/expect_lib.sh"
HOME=$TMP/home
export HOME
unset FULGUR_PLUGIN_PATH
mkdir -p "$HOME"
cd "$TMP" || exit 1
CUDA_VISIBLE_DEVICES=-1 # no device visible to any command here
export CUDA_VISIBLE_DEVICES

cat >"$TMP/tiny.ini" <<'INI'
[trainer]
max_epochs = 1

[backend]
name = cuda

[data]
name = synthetic
train_size = 256
test_size = 64
batch_size = 32
num_workers = 0

[layer.flat]
type = flatten

[layer.fc1]
type = linear
out_features = 10
INI

REASON='backend\.cuda: no CUDA (driver \(libcuda\.so\.1 not found|device \(CUDA_VISIBLE_DEVICES=-1\))'

runp fit_unavailable fit "$TMP/tiny.ini"
[ "$RC" -eq 2 ] || fail "exit code $RC, expected 2"
grep -qE "$REASON" "$ERR" || fail "stderr does not say which of driver or device is missing"
[ "$(wc -l <"$ERR")" -eq 1 ] || fail "expected one line on stderr"

if [ -f "$PLUGINS/fulgur-backend-cpu.so" ]; then
    runp fit_override fit "$TMP/tiny.ini" backend.name=cpu
    [ "$RC" -eq 0 ] || fail "the same config on the cpu backend must run (exit $RC)"
fi

runp devices devices
[ "$RC" -eq 0 ] || fail "fulgur devices exit code $RC, expected 0"
grep -E "^cuda +unavailable: " "$OUT" | grep -qE "$REASON" ||
    fail "fulgur devices does not list cuda as unavailable with the reason"

runp explain explain backend.cuda
[ "$RC" -eq 0 ] || fail "explain exit code $RC"
grep -qE '^  allow_tf32 +bool ' "$OUT" || fail "no option line for allow_tf32"

runp key_refused fit "$TMP/tiny.ini" backend.cuda_graph=true
[ "$RC" -eq 2 ] || fail "an undeclared key (cuda_graph) must be refused (exit $RC)"
grep -q "cuda_graph\b" "$ERR" || fail "the refusal does not name cuda_graph"

[ "$FAILED" -eq 0 ] || exit 1
echo "ok: cuda backend unavailable path, devices, explain, unknown key"
