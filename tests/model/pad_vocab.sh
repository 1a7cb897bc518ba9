#!/usr/bin/env bash
# model.pad_vocab: [model] pad_vocab_to pads the logits' rows (the output gemms' leading
# dimension) without changing the maths: the char LM fits 20 steps with 256 classes padded
# to 288 and unpadded, and the weight digests and val losses are equal; the fit says it
# padded; predict/generate-style replicas and a loss other than softmax cross-entropy are
# covered by the model's own checks (a bias on the output layer is refused with its reason).
# Needs FULGUR and EXAMPLES; skips (77) without Debian's fortunes.
set -uo pipefail
[ -d /usr/share/games/fortunes ] || exit 77
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
fit() { # NAME [overrides...]
    local name=$1
    shift
    "$FULGUR" fit "$EXAMPLES/char_lm.ini" trainer.name="$name" trainer.max_steps=20 \
        trainer.limit_val_batches=2 trainer.num_sanity_val_steps=0 trainer.test_after_fit=false \
        data.num_workers=0 "$@" > "$name.out" 2>&1 || fail "$name: exit $?: $(tail -3 "$name.out")"
}
digest() { sed -n 's/^weights: .* digest \([0-9a-f]*\), after 20 steps$/\1/p' "$1.out"; }
val() { sed -n 's/^val *loss \([0-9.]*\) .*/\1/p' "$1.out" | tail -1; }
fit plain
fit padded model.pad_vocab_to=96
grep -q '^model: logits rows of 288 for 256 classes' padded.out || fail "no line saying the rows are padded"
! grep -q 'logits rows' plain.out || fail "the unpadded run says it padded"
a=$(digest plain) b=$(digest padded)
[ -n "$a" ] || fail "no digest: $(tail -3 plain.out)"
[ "$a" = "$b" ] || fail "digest $a unpadded, $b padded"
[ "$(val plain)" = "$(val padded)" ] || fail "val loss $(val plain) unpadded, $(val padded) padded"
echo "both give digest $a, val loss $(val plain)"
# an output layer with a bias cannot take padded rows: said with the reason
"$FULGUR" check "$EXAMPLES/char_lm.ini" model.pad_vocab_to=96 layer.lm_head.bias=true \
    > bias.out 2>&1 && fail "a biased output layer was accepted with pad_vocab_to"
grep -q 'pad_vocab_to = 96 pads the logits of an output linear: the output linear has a bias' bias.out ||
    fail "unclear refusal: $(cat bias.out)"
echo ok
