#!/usr/bin/env bash
# What fit would refuse only after training, `fulgur check` refuses first (issue 17, defect
# 7), exit 2 naming the key and the place: a layer name that is not UTF-8 (checkpoint
# headers are JSON); a final_checkpoint, a checkpoint dirpath or a default_root_dir under a
# regular file (also for root, whom permissions do not stop). Needs FULGUR.
set -u
: "${FULGUR:?}"
fail() { echo "FAIL [preflight]: $*" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/ok.ini" <<INI
[trainer]
default_root_dir = $WORK/runs
[data]
name = synthetic
shape = 8
train_size = 64
test_size = 16
batch_size = 16
[layer.fc]
type = linear
out_features = 10
INI
touch "$WORK/file"
expect() { # expect NEEDLE ARGS...: check exits 2 and says NEEDLE
    local needle=$1 out rc
    shift
    out=$("$FULGUR" check "$@" 2>&1)
    rc=$?
    [ $rc = 2 ] || fail "exit $rc (expected 2) for: $* -- $out"
    [[ "$out" == *"$needle"* ]] || fail "'$out' lacks '$needle'"
}
"$FULGUR" check "$WORK/ok.ini" >/dev/null 2>&1 || fail "the plain config is refused"
expect "[trainer] final_checkpoint = $WORK/file/w.safetensors: $WORK/file is not a folder" \
    "$WORK/ok.ini" trainer.final_checkpoint="$WORK/file/w.safetensors"
expect "[callback.checkpoint] dirpath = $WORK/file/ck: $WORK/file is not a folder" \
    "$WORK/ok.ini" callback.checkpoint.dirpath="$WORK/file/ck"
expect "[trainer] default_root_dir = $WORK/file/runs: $WORK/file is not a folder" \
    "$WORK/ok.ini" trainer.default_root_dir="$WORK/file/runs"
{ cat "$WORK/ok.ini"; printf '[layer.r\377]\ntype = relu\n'; } >"$WORK/bad.ini"
expect "the layer name is not valid UTF-8" "$WORK/bad.ini"
echo "preflight: ok"
