#!/usr/bin/env bash
# model.relu_after_pool: a relu followed by a max pooling runs after the pooling
# (core/src/model/layer_order.c) and trains bitwise the same weights as the file's order.
# The CNN example fits 30 steps twice per precision: as written (the fit says it swapped two
# pairs), and with each relu's `input` naming its conv, which keeps the file's order (no such
# line). The weight digests must be equal, in fp32 and bf16-mixed. Needs FULGUR and
# EXAMPLES; skips (77) without the Fashion-MNIST package.
set -uo pipefail
[ -d /usr/share/datasets/fashion-mnist ] || exit 77
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

fit() { # NAME PRECISION [overrides...]
    local name=$1 prec=$2
    shift 2
    "$FULGUR" fit "$EXAMPLES/fashion_mnist_cnn.ini" trainer.name="$name" trainer.max_steps=30 \
        trainer.limit_val_batches=2 trainer.num_sanity_val_steps=0 precision.name="$prec" \
        data.num_workers=1 backend.conv_algorithm=im2col "$@" > "$name.out" 2>&1 || fail "$name: exit $?: $(tail -3 "$name.out")"
}
digest() { sed -n 's/^weights: .* digest \([0-9a-f]*\), after 30 steps$/\1/p' "$1.out"; }

for prec in fp32 bf16-mixed; do
    fit "swapped_$prec" "$prec"
    fit "file_order_$prec" "$prec" layer.relu1.input=conv1 layer.relu2.input=conv2
    grep -q '^model: 2 relu layers run after the max pooling that follows' "swapped_$prec.out" ||
        fail "$prec: no line saying two relu layers run after their pooling"
    ! grep -q 'relu layer' "file_order_$prec.out" || fail "$prec: the file's order was changed"
    a=$(digest "swapped_$prec") b=$(digest "file_order_$prec")
    [ -n "$a" ] || fail "$prec: no weight digest: $(tail -3 "swapped_$prec.out")"
    [ "$a" = "$b" ] || fail "$prec: digest $a with the swap, $b in the file's order"
    echo "$prec: both orders give digest $a"
done
echo "ok"
