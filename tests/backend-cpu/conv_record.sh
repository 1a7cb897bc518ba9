#!/usr/bin/env bash
# [backend] conv_algorithm through `fulgur fit` (the pipeline tests' small CNN, single
# strategy, one device): a bad value stops the run naming the key; each choice the backend
# makes lands in the run folder's plugins.log (auto: timed, with both times; onednn: fixed;
# im2col: none to make); a fixed choice gives the same weights run after run.
# Usage: conv_record.sh (FULGUR, CNN_INI in the environment)
set -u
: "${FULGUR:?FULGUR must name the fulgur binary}" "${CNN_INI:?CNN_INI must name tests/pipeline/cnn.ini}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

# fit NAME KEYS...: a 3-step fit into runs/NAME; its output in NAME.out
fit() {
    local name=$1
    shift
    "$FULGUR" fit "$CNN_INI" strategy.name=single backend.devices=1 trainer.max_steps=3 \
        trainer.test_after_fit=false trainer.name="$name" "$@" >"$name.out" 2>&1
}
digest_of() { grep -o 'digest [0-9a-f]*' "$1.out" | awk '{print $2}'; }
record() { cat runs/"$1"/version_0/plugins.log; }

fit bad backend.conv_algorithm=fastest && fail "conv_algorithm = fastest was accepted"
grep -q 'conv_algorithm' bad.out || fail "the refusal does not name conv_algorithm: $(cat bad.out)"

fit im2col_a backend.conv_algorithm=im2col || fail "im2col: $(cat im2col_a.out)"
fit im2col_b backend.conv_algorithm=im2col || fail "im2col again: $(cat im2col_b.out)"
! record im2col_a | grep -q 'conv2d' || fail "im2col recorded a choice: $(record im2col_a)"
[ -n "$(digest_of im2col_a)" ] && [ "$(digest_of im2col_a)" = "$(digest_of im2col_b)" ] ||
    fail "im2col twice: digests $(digest_of im2col_a) and $(digest_of im2col_b)"

if ! fit onednn_a backend.conv_algorithm=onednn; then
    grep -q 'without oneDNN' onednn_a.out || fail "onednn refused unclearly: $(cat onednn_a.out)"
    echo "ok: this build has no oneDNN; onednn is refused, im2col recorded nothing and repeats"
    exit 0
fi
fit onednn_b backend.conv_algorithm=onednn || fail "onednn again: $(cat onednn_b.out)"
for dir in forward backward; do
    record onednn_a | grep -q "conv2d n32 c1 12x12 -> k8 3x3 .* f32 $dir: onednn (conv_algorithm = onednn" ||
        fail "onednn: no $dir record for conv1: $(record onednn_a)"
done
[ "$(digest_of onednn_a)" = "$(digest_of onednn_b)" ] ||
    fail "onednn twice: digests $(digest_of onednn_a) and $(digest_of onednn_b)"

fit auto || fail "auto: $(cat auto.out)"
for dir in forward backward; do
    record auto | grep -Eq "conv2d n32 c8 5x5 -> k16 3x3 .* f32 $dir: (onednn|im2col) \(timed: onednn [0-9.]+ ms, im2col [0-9.]+ ms" ||
        fail "auto: no timed $dir record for conv2: $(record auto)"
done
echo "ok: im2col and onednn each repeat their weights ($(digest_of im2col_a), $(digest_of onednn_a)); auto recorded:"
record auto
