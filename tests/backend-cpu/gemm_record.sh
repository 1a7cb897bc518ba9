#!/usr/bin/env bash
# [backend] gemm through `fulgur fit` (the pipeline tests' MLP, single strategy, one device,
# two threads): a bad value stops the run naming the key; each shape's choice is logged once
# (onednn: fixed, auto: timed with both times, in the run folder's plugins.log; openblas and
# the default: at debug level, so in the output of `fulgur -v` and not in a default run's); a
# fixed choice gives the same weights run after run, and the default (gemm unset) is
# gemm = onednn's weights, or openblas's in a build without oneDNN.
# Usage: gemm_record.sh (FULGUR, MLP_INI in the environment)
set -u
: "${FULGUR:?FULGUR must name the fulgur binary}" "${MLP_INI:?MLP_INI must name tests/pipeline/pipeline.ini}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

# fit NAME KEYS...: a 5-step fit into runs/NAME; its output in NAME.out
fit() {
    local name=$1
    shift
    "$FULGUR" $verbose fit "$MLP_INI" strategy.name=single backend.devices=1 backend.threads=2 \
        trainer.max_steps=5 trainer.name="$name" "$@" >"$name.out" 2>&1
}
digest_of() { grep -o 'digest [0-9a-f]*' "$1.out" | awk '{print $2}'; }
record() { cat runs/"$1"/version_0/plugins.log; }
shape='gemm(_bias)? m[0-9]+ n[0-9]+ k[0-9]+ [NT][NT]( accumulate)? f32'
shapes_of() { record "$1" | grep -Eo "$shape: " | sort; }
verbose=

fit bad backend.gemm=fastest && fail "gemm = fastest was accepted"
grep -q "gemm = 'fastest'" bad.out || fail "the refusal does not name gemm: $(cat bad.out)"

fit default || fail "default: $(cat default.out)"
! grep -Eq "$shape" default.out || fail "a default run printed its gemm shapes: $(cat default.out)"
! record default | grep -Eq "$shape" || fail "a default run wrote its gemm shapes to plugins.log: $(record default)"
verbose=-v
fit default_v || fail "default -v: $(cat default_v.out)"
fit openblas_a backend.gemm=openblas || fail "openblas: $(cat openblas_a.out)"
verbose=
fit openblas_b backend.gemm=openblas || fail "openblas again: $(cat openblas_b.out)"
[ -n "$(digest_of openblas_a)" ] && [ "$(digest_of openblas_a)" = "$(digest_of openblas_b)" ] ||
    fail "openblas twice: digests $(digest_of openblas_a) and $(digest_of openblas_b)"
# openblas's records: the debug lines of the -v run's output
openblas_shapes() { grep -Eo "$shape: " openblas_a.out | sort; }
n=$(openblas_shapes | wc -l)
(( n >= 4 )) || fail "openblas: $n shape records (want the MLP's forward and backward gemms): $(cat openblas_a.out)"
[ "$(grep -Ec "debug: cpu backend: $shape: openblas \(gemm = openblas\)" openblas_a.out)" = "$n" ] ||
    fail "openblas: a shape not recorded as openblas: $(cat openblas_a.out)"
[ "$(openblas_shapes | uniq | wc -l)" = "$n" ] || fail "openblas: a shape recorded twice: $(cat openblas_a.out)"
! record openblas_a | grep -Eq "$shape" || fail "openblas wrote its debug lines to plugins.log: $(record openblas_a)"

if ! fit onednn_a backend.gemm=onednn; then
    grep -q 'without oneDNN' onednn_a.out || fail "onednn refused unclearly: $(cat onednn_a.out)"
    [ "$(digest_of default)" = "$(digest_of openblas_a)" ] ||
        fail "without oneDNN the default's digest $(digest_of default) is not gemm = openblas's $(digest_of openblas_a)"
    echo "ok: this build has no oneDNN; onednn is refused, openblas repeats ($(digest_of openblas_a))"
    exit 0
fi
fit onednn_b backend.gemm=onednn || fail "onednn again: $(cat onednn_b.out)"
[ "$(digest_of onednn_a)" = "$(digest_of onednn_b)" ] ||
    fail "onednn twice: digests $(digest_of onednn_a) and $(digest_of onednn_b)"
[ "$(record onednn_a | grep -Ec "$shape: onednn \(gemm = onednn\)")" = "$n" ] ||
    fail "onednn: not every one of the $n shapes recorded as onednn: $(record onednn_a)"
[ "$(shapes_of onednn_a)" = "$(openblas_shapes)" ] || fail "onednn and openblas recorded other shapes"
# the default: oneDNN's bits, each shape recorded once at debug level as the key unset
[ "$(digest_of default)" = "$(digest_of onednn_a)" ] ||
    fail "the default's digest $(digest_of default) is not gemm = onednn's $(digest_of onednn_a)"
[ "$(grep -Ec "debug: cpu backend: $shape: onednn \(gemm unset\)" default_v.out)" = "$n" ] ||
    fail "default: not every one of the $n shapes recorded as onednn (gemm unset): $(cat default_v.out)"
"$FULGUR" devices > devices.out 2>&1 || fail "fulgur devices: $(cat devices.out)"
grep -q "; f32 gemms: onednn (gemm unset); " devices.out ||
    fail "fulgur devices' machine line does not say the default runs oneDNN: $(cat devices.out)"
[ "$(digest_of openblas_a)" != "$(digest_of onednn_a)" ] ||
    fail "openblas and onednn gave the same digest $(digest_of onednn_a): the key changed nothing"

fit auto backend.gemm=auto || fail "auto: $(cat auto.out)"
[ "$(record auto | grep -Ec "$shape: (onednn|openblas) \((OpenBLAS runs generic kernels; )?timed: onednn [0-9.]+ ms, openblas [0-9.]+ ms")" = "$n" ] ||
    fail "auto: not every one of the $n shapes recorded with both times: $(record auto)"
echo "ok: openblas and onednn (the default) each repeat their weights ($(digest_of openblas_a), $(digest_of onednn_a)); auto recorded:"
record auto | grep -E "$shape"
