#!/usr/bin/env bash
# Ctrl-C and SIGTERM during a fit (issue 17, defect 4), raised at a known optimizer step by
# the test hook FULGUR_TEST_INTERRUPT_AT=STEP[:SIGNAL] (core/src/train/requeue.c):
#   once   SIGINT at step 50 (mid-epoch) with checkpoint_on_interrupt: exit 130, the message names the
#          checkpoint and the command to resume; resuming it ends bitwise with the unbroken
#          run (the printed digest); status.json says interrupted
#   twice  two SIGINTs: exit 130 at once, nothing written
#   term   SIGTERM without checkpoint_on_interrupt: exit 143, says no checkpoint was written
#   ddp    2 ranks, only rank 1 signalled at step 30, the ranks agreeing every 4 steps
#          (FULGUR_TEST_AGREE_EVERY; about once a second otherwise): both stop after the
#          same step, one checkpoint; resumed under ddp it ends bitwise with the unbroken run
#   final_val   SIGTERM at the first batch of the fit's last validation (hook
#          FULGUR_TEST_INTERRUPT_AT=val:SIGTERM; issue 30, defect 6): the pass stops there,
#          exit 143, no val line, no final checkpoint, no test, status.json "interrupted"
#   final_test  the same during test_after_fit (test:SIGTERM): exit 143, no test line,
#          status.json "interrupted"; and under ddp on 2 ranks, rank 1 alone signalled:
#          both end the pass and stop, exit 143
# Environment: FULGUR, PLUGIN_DIR.
set -u
step=${1:?usage: interrupt_test.sh once|twice|term|ddp}
: "${FULGUR:?}" "${PLUGIN_DIR:?}"
fail() { echo "FAIL [interrupt.$step]: $*" >&2; exit 1; }
WORK=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
cat >"$WORK/fit.ini" <<INI
[trainer]
max_epochs = 2
seed = 4
log_every_n_steps = 1000
test_after_fit = false
enable_progress_bar = false
[backend]
name = cpu
threads = 1
[strategy]
name = single
[data]
name = synthetic
shape = 16
train_size = 2560
test_size = 64
batch_size = 32
num_workers = 1
shuffle = true
[layer.fc1]
type = linear
out_features = 32
[layer.relu]
type = relu
[layer.fc2]
type = linear
out_features = 10
[optimizer]
name = adamw
lr = 0.01
INI
run() { # run NAME [ENV...] -- ARGS...: exit code in $rc, output in $WORK/NAME.log
    local name=$1
    shift
    local -a env=()
    while [ "$1" != -- ]; do env+=("$1"); shift; done
    shift
    env "${env[@]}" "$FULGUR" --plugin-path "$PLUGIN_DIR" "$@" >"$WORK/$name.log" 2>&1
    rc=$?
}
digest() { grep -o 'digest [0-9a-f]*' "$1"; }
case $step in
once)
    run full -- fit "$WORK/fit.ini" trainer.default_root_dir="$WORK/a"
    [ $rc = 0 ] || { cat "$WORK/full.log"; fail "the unbroken run exited $rc"; }
    run int FULGUR_TEST_INTERRUPT_AT=50 -- fit "$WORK/fit.ini" trainer.checkpoint_on_interrupt=true \
        trainer.default_root_dir="$WORK/b"
    [ $rc = 130 ] || { cat "$WORK/int.log"; fail "exit $rc after SIGINT, expected 130"; }
    ck=$WORK/b/default/version_0/checkpoints/interrupted.safetensors
    grep -q "interrupted by SIGINT after step 50; resume with: fulgur fit .* --ckpt-path $ck" \
        "$WORK/int.log" || { cat "$WORK/int.log"; fail "no resume line naming $ck"; }
    grep -q '"status": "interrupted"' "$WORK/b/default/version_0/status.json" ||
        fail "status.json does not say interrupted"
    run res -- fit "$WORK/fit.ini" --ckpt-path "$ck" trainer.default_root_dir="$WORK/c"
    [ $rc = 0 ] || { cat "$WORK/res.log"; fail "the resumed run exited $rc"; }
    [ "$(digest "$WORK/res.log")" = "$(digest "$WORK/full.log")" ] ||
        fail "resumed $(digest "$WORK/res.log") != unbroken $(digest "$WORK/full.log")" ;;
twice)
    run int FULGUR_TEST_INTERRUPT_AT=30:SIGINT2 -- fit "$WORK/fit.ini" \
        trainer.checkpoint_on_interrupt=true trainer.default_root_dir="$WORK/b"
    [ $rc = 130 ] || { cat "$WORK/int.log"; fail "exit $rc after two SIGINTs, expected 130"; }
    grep -q "interrupted again: exiting now" "$WORK/int.log" || fail "no 'exiting now' line"
    [ ! -e "$WORK/b/default/version_0/checkpoints/interrupted.safetensors" ] ||
        fail "a checkpoint was written after the second SIGINT" ;;
term)
    run int FULGUR_TEST_INTERRUPT_AT=30:SIGTERM -- fit "$WORK/fit.ini" trainer.default_root_dir="$WORK/b"
    [ $rc = 143 ] || { cat "$WORK/int.log"; fail "exit $rc after SIGTERM, expected 143"; }
    grep -q "interrupted by SIGTERM after step 30; no checkpoint written" "$WORK/int.log" ||
        { cat "$WORK/int.log"; fail "no 'no checkpoint written' line"; } ;;
ddp)
    MPIRUN=$(command -v mpirun) || { echo "SKIP: no mpirun"; exit 77; }
    flags=(--oversubscribe)
    [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
    export OPENBLAS_NUM_THREADS=1
    mpi() { "$MPIRUN" "${flags[@]}" -n 2 "$@"; }
    common=(strategy.name=ddp comm.name=mpi data.batch_size=16)
    mpi "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/fit.ini" "${common[@]}" \
        trainer.default_root_dir="$WORK/a" >"$WORK/full.log" 2>&1 || { cat "$WORK/full.log"; fail "ddp run failed"; }
    mpi -x FULGUR_TEST_INTERRUPT_AT=30 -x FULGUR_TEST_INTERRUPT_RANK=1 -x FULGUR_TEST_AGREE_EVERY=4 "$FULGUR" --plugin-path "$PLUGIN_DIR" \
        fit "$WORK/fit.ini" "${common[@]}" trainer.checkpoint_on_interrupt=true \
        trainer.default_root_dir="$WORK/b" >"$WORK/int.log" 2>&1
    rc=$?
    [ $rc = 130 ] || { cat "$WORK/int.log"; fail "ddp exit $rc after SIGINT on rank 1, expected 130"; }
    # rank 0 reports; had rank 1 stopped elsewhere, the checkpoint's collectives would hang
    # and the resumed run below would not match
    grep -q "interrupted by SIGINT: stopping after step" "$WORK/int.log" ||
        { cat "$WORK/int.log"; fail "rank 0 did not stop"; }
    ck=$WORK/b/default/version_0/checkpoints/interrupted.safetensors
    [ -f "$ck" ] || fail "no $ck"
    mpi "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/fit.ini" "${common[@]}" --ckpt-path "$ck" \
        trainer.default_root_dir="$WORK/c" >"$WORK/res.log" 2>&1 || { cat "$WORK/res.log"; fail "resumed ddp run failed"; }
    [ "$(digest "$WORK/res.log" | head -n 1)" = "$(digest "$WORK/full.log" | head -n 1)" ] ||
        fail "resumed ddp $(digest "$WORK/res.log") != unbroken $(digest "$WORK/full.log")" ;;
final_val)
    run int FULGUR_TEST_INTERRUPT_AT=val:SIGTERM -- fit "$WORK/fit.ini" trainer.max_epochs=1 \
        data.val_size=640 trainer.test_after_fit=true \
        trainer.final_checkpoint=final.safetensors trainer.default_root_dir="$WORK/b"
    [ $rc = 143 ] || { cat "$WORK/int.log"; fail "exit $rc after SIGTERM in the last validation, expected 143"; }
    grep -q "interrupted by SIGTERM after the last step (80), before the end of the fit's validation" \
        "$WORK/int.log" || { cat "$WORK/int.log"; fail "no line saying where it stopped"; }
    ! grep -q "^val \|^test \|^weights:" "$WORK/int.log" || { cat "$WORK/int.log"; fail "it validated, saved or tested after SIGTERM"; }
    [ ! -e "$WORK/b/default/version_0/final.safetensors" ] || fail "a final checkpoint was written"
    grep -q '"status": "interrupted"' "$WORK/b/default/version_0/status.json" ||
        fail "status.json does not say interrupted: $(cat "$WORK/b/default/version_0/status.json")"
    grep -q '"exit_code": 143' "$WORK/b/default/version_0/status.json" ||
        fail "status.json does not hold exit code 143" ;;
final_test)
    run int FULGUR_TEST_INTERRUPT_AT=test:SIGTERM -- fit "$WORK/fit.ini" trainer.max_epochs=1 \
        trainer.test_after_fit=true data.test_size=640 trainer.default_root_dir="$WORK/b"
    [ $rc = 143 ] || { cat "$WORK/int.log"; fail "exit $rc after SIGTERM in the test, expected 143"; }
    grep -q "^weights:" "$WORK/int.log" || fail "the fit did not end before the test"
    ! grep -q "^test " "$WORK/int.log" || { cat "$WORK/int.log"; fail "the test ran to its end after SIGTERM"; }
    grep -q '"status": "interrupted"' "$WORK/b/default/version_0/status.json" ||
        fail "status.json does not say interrupted"
    MPIRUN=$(command -v mpirun) || { echo "interrupt.final_test: ok (no mpirun: ddp part skipped)"; exit 0; }
    flags=(--oversubscribe)
    [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
    OPENBLAS_NUM_THREADS=1 "$MPIRUN" "${flags[@]}" -n 2 -x FULGUR_TEST_INTERRUPT_AT=test:SIGTERM \
        -x FULGUR_TEST_INTERRUPT_RANK=1 "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/fit.ini" \
        strategy.name=ddp comm.name=mpi data.batch_size=16 trainer.max_epochs=1 \
        trainer.test_after_fit=true data.test_size=640 trainer.default_root_dir="$WORK/d" >"$WORK/ddp.log" 2>&1
    rc=$?
    [ $rc = 143 ] || { cat "$WORK/ddp.log"; fail "ddp exit $rc after SIGTERM on rank 1 in the test, expected 143"; }
    grep -q '"status": "interrupted"' "$WORK/d/default/version_0/status.json" ||
        fail "ddp: status.json does not say interrupted" ;;
*) fail "unknown step" ;;
esac
echo "interrupt.$step: ok"
