#!/usr/bin/env bash
# dp.* tests: strategy.dp on 2 CPU virtual devices against strategy.single on the same
# global batch, one step per run, named by $1. Environment (from ctest): FULGUR,
# PLUGIN_DIR, DP_TESTS (this folder), DP_WORK (scratch), COMPARE, PYTHON.
#
# equivalence       batch 64 (32 + 32) with dropout: weights after 50 steps <= 1e-5 relative,
#                   the same logged losses and test metrics
# odd_final_batch   a final batch of 63 (32 + 31) and one of 3 (3 on one device): the same
# small_batches_bn  batch norm at batch 3: a batch too small for two shards of >= 2 samples
#                   runs on one device, so even batch statistics equal single's; a final
#                   batch of 3 at batch 64 trains (2 + 1 would hit batch norm's refusal)
# accumulate_clip   accumulate_grad_batches = 2 and gradient_clip_val: the same
# checkpoint        a dp checkpoint resumes under single and the other way round, and a
#                   run resumed under dp from a single checkpoint ends where an unbroken
#                   single run does
# metrics           the step events carry dp's reduce/broadcast times; throughput shows them
# devices           devices = 1 trains like single; more devices than the backend has are
#                   refused naming the key
# sync_batchnorm    [model] sync_batchnorm = true on a residual CNN with batch norm
#                   (tests/ddp/sync_batchnorm.ini): dp at batch 64 (32 + 32) == single at 64
#                   with the fused per-device batch norm after 50 steps (the model within 1e-6
#                   of its largest value, every tensor within 1e-5, the same logged losses);
#                   without the key dp is far from single
set -u

step=${1:?usage: dp_test.sh STEP}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${DP_TESTS:?}" "${DP_WORK:?}" "${COMPARE:?}" "${PYTHON:?}"
fail() {
    echo "FAIL [dp.$step]: $*" >&2
    exit 1
}
WORK=$DP_WORK/$step
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK" # runs/ folders land here
CFG=$DP_TESTS/dp.ini

fit() { "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$CFG" "$@"; }
must() { # must LOG CMD...: runs the command, output to LOG; on failure shows LOG and fails
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }
}

# same NAME OVERRIDES...: dp and single with the same keys; weights, losses, test metrics.
same() {
    local name=$1 out
    shift
    must "$WORK/$name.single.log" fit strategy.name=single trainer.test_after_fit=true "$@" \
        trainer.final_checkpoint="$WORK/$name.single.safetensors"
    must "$WORK/$name.dp.log" fit strategy.name=dp trainer.test_after_fit=true "$@" \
        trainer.final_checkpoint="$WORK/$name.dp.safetensors"
    grep -q 'after 50 steps' "$WORK/$name.dp.log" || { cat "$WORK/$name.dp.log"; fail "$name: dp did not run 50 steps"; }
    grep -q '^memory (device 1)' "$WORK/$name.dp.log" || fail "$name: dp reported no memory for device 1"
    diff <(grep -e '^epoch .* step ' -e '^test ' "$WORK/$name.single.log") \
        <(grep -e '^epoch .* step ' -e '^test ' "$WORK/$name.dp.log") ||
        fail "$name: the logged losses or test metrics differ (above: single <, dp >)"
    out=$("$PYTHON" "$COMPARE" "$WORK/$name.dp.safetensors" "$WORK/$name.single.safetensors" 1e-5) ||
        fail "$name: dp and single weights differ: $out"
    echo "ok: $name ($*): $out"
}

step_equivalence() { same base; }

step_odd_final_batch() {
    # 3199 = 49 * 64 + 63: the 50th batch has 63 samples; 3139 = 49 * 64 + 3.
    same final63 data.train_size=3199
    same final3 data.train_size=3139
}

step_small_batches_bn() {
    # The dropout becomes a batch norm (a copy of the INI: sections keep their order).
    sed -e 's/^\[layer.drop1\]/[layer.bn1]/' -e 's/^type = dropout/type = batchnorm/' \
        -e '/^p = 0.25/d' "$CFG" >"$WORK/bn.ini"
    CFG=$WORK/bn.ini
    grep -q '^type = batchnorm' "$CFG" || fail "no batchnorm layer in $CFG"
    # Batches of 3 cannot make two shards of >= 2 samples: one device runs them, with the
    # whole batch's statistics, so dp equals single even with batch norm.
    same bn3 data.batch_size=3 data.train_size=150
    # 3139 = 49 * 64 + 3: a split 2 + 1 of the last batch would stop the run (batch norm
    # refuses one value per channel); 3 on one device trains.
    must "$WORK/bn64.log" fit strategy.name=dp data.train_size=3139
    grep -q 'after 50 steps' "$WORK/bn64.log" || { cat "$WORK/bn64.log"; fail "dp with batch norm did not finish 50 steps"; }
    grep -q '^epoch 1/1  train loss [0-9]' "$WORK/bn64.log" || { cat "$WORK/bn64.log"; fail "no finite training loss"; }
    echo "ok: a final batch of 3 under batch norm trains on one device: $(grep '^epoch 1/1' "$WORK/bn64.log")"
}

step_accumulate_clip() {
    same acc2_clip trainer.accumulate_grad_batches=2 trainer.gradient_clip_val=0.05 data.train_size=6371
}

step_checkpoint() {
    local out
    # unbroken single run of 50 steps
    must "$WORK/full.log" fit strategy.name=single trainer.final_checkpoint="$WORK/full.safetensors"
    # 20 steps under dp, then 30 more under single from that checkpoint; and the reverse
    must "$WORK/a1.log" fit strategy.name=dp trainer.max_steps=20 trainer.final_checkpoint="$WORK/a20.safetensors"
    must "$WORK/a2.log" fit strategy.name=single --ckpt-path "$WORK/a20.safetensors" trainer.final_checkpoint="$WORK/a50.safetensors"
    must "$WORK/b1.log" fit strategy.name=single trainer.max_steps=20 trainer.final_checkpoint="$WORK/b20.safetensors"
    must "$WORK/b2.log" fit strategy.name=dp --ckpt-path "$WORK/b20.safetensors" trainer.final_checkpoint="$WORK/b50.safetensors"
    grep -q 'resuming at epoch 1, batch 20, step 20' "$WORK/b2.log" || { cat "$WORK/b2.log"; fail "dp did not resume at step 20"; }
    for f in a50 b50; do
        out=$("$PYTHON" "$COMPARE" "$WORK/$f.safetensors" "$WORK/full.safetensors" 1e-5) ||
            fail "$f (resumed across strategies) differs from the unbroken run: $out"
        echo "ok: $f: $out"
    done
}

step_metrics() {
    local log=$WORK/metrics.log
    must "$log" fit strategy.name=dp trainer.max_steps=20 callback.throughput.advise=true
    grep -q '^\[strategy.dp\] info: 20 steps: .* summing gradients on device 0' "$log" ||
        { cat "$log"; fail "no summary line of dp's reduce/broadcast time"; }
    grep -q '^throughput: .* grad sync [0-9.]* [mu]\?s' "$log" ||
        { cat "$log"; fail "the throughput line shows no grad sync time from dp"; }
    grep -q '^throughput: communication .* 0 us (0%) hidden behind backward' "$log" ||
        { cat "$log"; fail "the throughput callback does not show dp's communication as exposed"; }
    grep '^throughput:' "$log" | tail -3
}

step_devices() {
    local log=$WORK/refused.log rc=0 out
    must "$WORK/one.log" fit strategy.name=dp strategy.devices=1 trainer.final_checkpoint="$WORK/one.safetensors"
    must "$WORK/single.log" fit strategy.name=single trainer.final_checkpoint="$WORK/single.safetensors"
    out=$("$PYTHON" "$COMPARE" "$WORK/one.safetensors" "$WORK/single.safetensors" 1e-5) ||
        fail "dp on one device differs from single: $out"
    grep -q '^memory (device 1)' "$WORK/one.log" && fail "dp with devices = 1 reported a second device"
    fit strategy.name=dp strategy.devices=3 trainer.max_steps=1 >"$log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { cat "$log"; fail "devices = 3 on a 2-device backend was not refused"; }
    grep -q 'devices = 3, but the backend has 2 device(s)' "$log" || { cat "$log"; fail "no message naming devices = 3"; }
    echo "ok: devices = 1: $out; $(grep -m1 'devices = 3' "$log")"
}

step_sync_batchnorm() {
    grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' "$DP_TESTS/../ddp/sync_batchnorm.ini" >"$WORK/sync.ini"
    CFG=$WORK/sync.ini
    local keys=(backend.devices=2 data.batch_size=64) near tensors off
    must "$WORK/single.log" fit strategy.name=single "${keys[@]}" model.sync_batchnorm=false \
        trainer.final_checkpoint="$WORK/single.safetensors"
    must "$WORK/sync.log" fit strategy.name=dp "${keys[@]}" trainer.final_checkpoint="$WORK/sync.safetensors"
    must "$WORK/nosync.log" fit strategy.name=dp "${keys[@]}" model.sync_batchnorm=false \
        trainer.final_checkpoint="$WORK/nosync.safetensors"
    grep -q 'after 50 steps' "$WORK/sync.log" || { cat "$WORK/sync.log"; fail "dp did not run 50 steps"; }
    diff <(grep '^epoch .* step ' "$WORK/single.log") <(grep '^epoch .* step ' "$WORK/sync.log") ||
        fail "the logged training losses differ (above: single <, dp >)"
    near=$("$PYTHON" "$DP_TESTS/../ddp/compare_model_relative.py" "$WORK/sync.safetensors" "$WORK/single.safetensors" 1e-6) ||
        fail "dp with sync_batchnorm is not single: $near"
    tensors=$("$PYTHON" "$COMPARE" "$WORK/sync.safetensors" "$WORK/single.safetensors" 1e-5) ||
        fail "dp with sync_batchnorm: a tensor is not single's: $tensors"
    if off=$("$PYTHON" "$DP_TESTS/../ddp/compare_model_relative.py" "$WORK/nosync.safetensors" "$WORK/single.safetensors" 1e-3); then
        fail "without sync_batchnorm dp still equals single ($off): the key changed nothing"
    fi
    echo "ok: dp 32 + 32 with sync_batchnorm vs single batch 64 after 50 steps: $near; per tensor $tensors; without the key: $off"
}

"step_$step"
