#!/usr/bin/env bash
# [data] val_split end to end (core/src/data/val_split.c), on synthetic data: 1024 train
# samples, a quarter held out. Environment (from ctest): FULGUR, DDP_INI (tests/ddp/ddp.ini),
# FASHION (the Fashion-MNIST IDX folder; idx_stand_in skips without it).
#
# held_out      256 held out, 768 trained (12 steps of 64 per epoch), validation on 256;
#               a bad value names file:line; beside a plugin's own val split it is refused
# resume        2 epochs straight == 1 epoch + resume: same val metrics, same weights
# ddp           `fulgur validate` of one checkpoint on the held-out samples: ddp on 2
#               ranks == single (loss, accuracy, count); another seed holds other samples out
# idx_stand_in  idx validating on its test files (val_fraction = 0) is replaced by val_split
set -u
step=${1:?usage: valsplit_check.sh STEP}
: "${FULGUR:?}" "${DDP_INI:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL [data_valsplit.$step]: $*" >&2; exit 1; }
skip() { echo "SKIP [data_valsplit.$step]: $*"; exit 77; }
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' "$DDP_INI" >"$tmp/single.ini"
COMMON=(data.val_split=0.25 trainer.max_steps=-1 data.train_size=1024 trainer.default_root_dir="$tmp/runs")
run() { # run LOG ARGS...: fulgur ARGS, output to LOG; on failure shows it
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }
}
single() { local log=$1 verb=$2; shift 2; run "$log" "$FULGUR" "$verb" "$tmp/single.ini" strategy.name=single "${COMMON[@]}" "$@"; }
val_line() { grep '^val ' "$1" | tail -n 1 | sed 's/, after step [0-9]*//'; }
digest_of() { grep -o 'digest [0-9a-f]*' "$1" | awk '{print $2}'; }

held_out() {
    single "$tmp/fit" fit trainer.max_epochs=1
    grep -qF "val_split: 256 samples held out of the train split for validation, 768 left to train on" "$tmp/fit" ||
        { cat "$tmp/fit"; fail "no held-out line for 256 / 768"; }
    grep -q '^epoch 1 step 12/12 ' "$tmp/fit" || { cat "$tmp/fit"; fail "not 12 steps of 64 over 768 samples"; }
    grep -q '^val .*(256 samples' "$tmp/fit" || { cat "$tmp/fit"; fail "validation did not run on 256 samples"; }
    local rc=0
    "$FULGUR" fit "$tmp/single.ini" strategy.name=single "${COMMON[@]}" data.val_split=1.5 >"$tmp/bad" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] && grep -qF "[data] val_split = 1.5: a fraction must be in [0, 1)" "$tmp/bad" ||
        { cat "$tmp/bad"; fail "val_split = 1.5: exit $rc"; }
    grep -q "command line\|single.ini" "$tmp/bad" || { cat "$tmp/bad"; fail "the message names no origin"; }
    rc=0
    "$FULGUR" fit "$tmp/single.ini" strategy.name=single "${COMMON[@]}" data.val_split=1024 >"$tmp/all" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] && grep -qF "none would be left to train on" "$tmp/all" || { cat "$tmp/all"; fail "val_split = 1024 of 1024: exit $rc"; }
    rc=0
    "$FULGUR" fit "$tmp/single.ini" strategy.name=single "${COMMON[@]}" data.val_size=100 >"$tmp/own" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] && grep -qF "data.synthetic has a validation split of its own" "$tmp/own" ||
        { cat "$tmp/own"; fail "val_split beside synthetic's val_size: exit $rc"; }
    echo "ok: 256 held out, 768 trained in 12 steps, bad values and a plugin's own val split refused"
}

resume() {
    single "$tmp/s" fit trainer.max_epochs=2 trainer.final_checkpoint="$tmp/straight.safetensors"
    single "$tmp/a" fit trainer.max_epochs=1 trainer.final_checkpoint="$tmp/e1.safetensors"
    single "$tmp/b" fit trainer.max_epochs=2 --ckpt-path "$tmp/e1.safetensors"
    grep -qF "val_split: 256 samples held out" "$tmp/b" || { cat "$tmp/b"; fail "the resumed run held out something else"; }
    local v0 v1 d0 d1
    v0=$(val_line "$tmp/s"); v1=$(val_line "$tmp/b"); d0=$(digest_of "$tmp/s"); d1=$(digest_of "$tmp/b")
    [ -n "$v0" ] && [ "$v0" = "$v1" ] || fail "epoch 2 validation differs after a resume: '$v0' vs '$v1'"
    [ -n "$d0" ] && [ "$d0" = "$d1" ] || fail "weights differ after a resume: $d0 vs $d1"
    echo "ok: straight and resumed runs both end with '$v1', digest $d1"
}

ddp() {
    local mpirun
    mpirun=$(command -v mpirun) || skip "mpirun not found"
    local flags=(--oversubscribe)
    [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
    single "$tmp/fit" fit trainer.max_epochs=1 trainer.final_checkpoint="$tmp/w.safetensors"
    single "$tmp/v1" validate --ckpt-path "$tmp/w.safetensors"
    single "$tmp/v7" validate trainer.seed=7 --ckpt-path "$tmp/w.safetensors"
    run "$tmp/v2" "$mpirun" "${flags[@]}" -n 2 "$FULGUR" validate "$DDP_INI" "${COMMON[@]}" --ckpt-path "$tmp/w.safetensors"
    run "$tmp/f2" "$mpirun" "${flags[@]}" -n 2 "$FULGUR" fit "$DDP_INI" "${COMMON[@]}" trainer.max_epochs=1
    grep -qF "val_split: 256 samples held out" "$tmp/f2" || { cat "$tmp/f2"; fail "ddp fit: no held-out line"; }
    local a b c
    a=$(val_line "$tmp/v1"); b=$(val_line "$tmp/v2"); c=$(val_line "$tmp/v7")
    case "$a" in *"(256 samples"*) ;; *) fail "single validate: '$a'" ;; esac
    [ "$a" = "$b" ] || fail "validation of one checkpoint: single '$a', ddp on 2 ranks '$b'"
    [ "$a" != "$c" ] || fail "seed 7 validated the same samples as seed 3: '$c'"
    echo "ok: single and ddp -n 2 validate '$a'; seed 7 holds other samples out: '$c'"
}

idx_stand_in() {
    [ -n "${FASHION:-}" ] && [ -f "$FASHION/train-images-idx3-ubyte.gz" ] || skip "Fashion-MNIST not installed"
    local cfg=(trainer.max_epochs=1 trainer.limit_train_batches=5 trainer.limit_val_batches=2
               trainer.test_after_fit=false trainer.default_root_dir="$tmp/runs" data.dir="$FASHION")
    run "$tmp/plain" "$FULGUR" fit "$EXAMPLES/fashion_mnist_mlp.ini" data.val_split=0 "${cfg[@]}"
    grep -qF "note: data.idx validates on its test files" "$tmp/plain" || { cat "$tmp/plain"; fail "no note on the stand-in"; }
    run "$tmp/held" "$FULGUR" fit "$EXAMPLES/fashion_mnist_mlp.ini" data.val_split=5000 "${cfg[@]}"
    grep -qF "val_split: 5000 samples held out of the train split for validation, 55000 left" "$tmp/held" ||
        { cat "$tmp/held"; fail "idx's stand-in val split was not replaced"; }
    local rc=0
    "$FULGUR" fit "$EXAMPLES/fashion_mnist_mlp.ini" data.val_split=5000 data.val_fraction=0.1 "${cfg[@]}" >"$tmp/own" 2>&1 || rc=$?
    [ "$rc" -eq 2 ] && grep -qF "data.idx has a validation split of its own" "$tmp/own" || { cat "$tmp/own"; fail "beside val_fraction: exit $rc"; }
    echo "ok: idx's test-file stand-in replaced by 5000 held-out train samples; beside val_fraction refused"
}

case "$step" in
held_out | resume | ddp | idx_stand_in) "$step" ;;
*) fail "unknown step" ;;
esac
