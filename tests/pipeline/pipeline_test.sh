#!/usr/bin/env bash
# pipeline.* tests: strategy.model-parallel with 2 stages on 2 CPU virtual devices against
# strategy.single on the same batches, one step per run, named by $1. Environment (from
# ctest): FULGUR, PLUGIN_DIR, PIPE_TESTS (this folder), PIPE_WORK (scratch), COMPARE, PYTHON.
#
# equivalence      MLP with dropout (pipeline.ini), split = fc2, chunks = 1 and 4 (also with
#                  a final batch of 63): weights <= 1e-5 relative after 50 steps, the same
#                  logged losses and test metrics. Dropout draws per sample position, so
#                  micro-batches draw what the whole batch does. Also 6 one-layer stages
#                  on 6 devices with 3 micro-batches.
# cnn              CNN with AdamW (cnn.ini, no batch norm: micro-batches would normalise over
#                  fewer samples), cut before conv2 (chunks 2), before flatten (chunks 4) and
#                  balanced automatically by FLOPs and by bytes (chunks 3): the same
#                  weights, and the two plans differ as the layers' costs say
# accumulate_clip  accumulate_grad_batches = 2 with gradient clipping by the global norm
# memory_limit     a model of 25 MB with its gradients and momentum on 16 MiB devices:
#                  single stops with the backend's out-of-memory message, the balanced
#                  pipeline trains with each device's total under the limit
# checkpoint       10 steps under model-parallel then 20 under single, and the reverse,
#                  both end where an unbroken single run does (AdamW state crosses too)
# dp_replicas      2 pipelines x 2 stages on 4 devices (data parallel across pipelines),
#                  chunks 1 and 4, and with accumulation and clipping: the same as single
# sync_batchnorm   [model] sync_batchnorm = true on an MLP with batch norm after fc1 and fc2
#                  (tests/ddp/batchnorm.ini) cut before fc2, chunks = 1: every
#                  batch norm sees the whole batch on its stage, so the weights after 50 steps
#                  are single's (within 1e-6 of the model's largest value, the same logged
#                  losses); chunks = 2 and dp_replicas = 2 are refused (a micro-batch's or a
#                  pipeline's statistics would need the others' in mid-forward)
# refusals         an unknown split layer, layers out of order, more stages (or pipelines)
#                  than devices, split and stages disagreeing, one stage per device
#                  with more devices than layers
set -u

step=${1:?usage: pipeline_test.sh STEP}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${PIPE_TESTS:?}" "${PIPE_WORK:?}" "${COMPARE:?}" "${PYTHON:?}"
fail() {
    echo "FAIL [pipeline.$step]: $*" >&2
    exit 1
}
WORK=$PIPE_WORK/$step
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK" # runs/ folders land here
CFG=$PIPE_TESTS/pipeline.ini

fit() { "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$CFG" "$@"; }
must() { # must LOG CMD...: runs the command, output to LOG; on failure shows LOG and fails
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }
}
compare() { # compare A B: weights of two checkpoints within 1e-5
    "$PYTHON" "$COMPARE" "$1" "$2" 1e-5
}

# reference NAME KEYS...: the single run every variant of NAME is compared with
reference() {
    local name=$1
    shift
    must "$WORK/$name.single.log" fit strategy.name=single trainer.test_after_fit=true "$@" \
        trainer.final_checkpoint="$WORK/$name.single.safetensors"
}

# same NAME TAG "PIPELINE KEYS" KEYS...: model-parallel with PIPELINE KEYS and KEYS against
# the reference NAME run with KEYS: weights, logged losses and test metrics.
same() {
    local name=$1 tag=$2 out
    local -a mp
    read -r -a mp <<<"$3"
    shift 3
    must "$WORK/$name.$tag.log" fit strategy.name=model-parallel "${mp[@]}" \
        trainer.test_after_fit=true "$@" trainer.final_checkpoint="$WORK/$name.$tag.safetensors"
    grep -q '^memory (device 1)' "$WORK/$name.$tag.log" || fail "$tag: no memory line for device 1"
    grep -q 'stages busy .* bubble' "$WORK/$name.$tag.log" || fail "$tag: no bubble summary"
    diff <(grep -e '^epoch .* step ' -e '^test ' "$WORK/$name.single.log") \
        <(grep -e '^epoch .* step ' -e '^test ' "$WORK/$name.$tag.log") ||
        fail "$name $tag: the logged losses or test metrics differ (above: single <, pipeline >)"
    out=$(compare "$WORK/$name.$tag.safetensors" "$WORK/$name.single.safetensors") ||
        fail "$name $tag (${mp[*]}): weights differ from single: $out"
    echo "ok: $name ${mp[*]} $*: $out"
}

step_equivalence() {
    reference base
    same base c1 "strategy.split=fc2 strategy.chunks=1"
    same base c4 "strategy.split=fc2 strategy.chunks=4"
    reference final63 data.train_size=3199 # 49 * 64 + 63
    same final63 c4 "strategy.split=fc2 strategy.chunks=4" data.train_size=3199
    # six one-layer stages (relu-only and dropout-only ones among them) on 6 devices
    same base s6c3 "strategy.stages=6 strategy.chunks=3" backend.devices=6
    grep -q 'stage 5 (device 5): fc3\.\.fc3' "$WORK/base.s6c3.log" || fail "no 6-stage plan"
}

step_cnn() {
    CFG=$PIPE_TESTS/cnn.ini
    reference cnn
    same cnn conv2 "strategy.split=conv2 strategy.chunks=2"
    same cnn flatten "strategy.split=flatten strategy.chunks=4"
    same cnn balanced "strategy.chunks=3"
    same cnn bytes "strategy.chunks=3 strategy.balance=memory"
    # the convolutions hold few bytes but most FLOPs: balanced by FLOPs (the default) the
    # first stage runs through relu1 (14.8k of 38.8k FLOPs per sample; relu1 runs after
    # pool1, layer_order.c), by bytes it stops after pool1 (conv1's activations weigh)
    grep -q 'stage 0 (device 0): conv1\.\.relu1, .*0.0148 MFLOP/sample' "$WORK/cnn.balanced.log" ||
        { grep 'stage 0' "$WORK/cnn.balanced.log"; fail "no FLOP-balanced plan line"; }
    grep -q 'stage 0 (device 0): conv1\.\.pool1,' "$WORK/cnn.bytes.log" ||
        { grep 'stage 0' "$WORK/cnn.bytes.log"; fail "no byte-balanced plan line"; }
}

step_accumulate_clip() {
    local keys=(trainer.accumulate_grad_batches=2 trainer.gradient_clip_val=0.05 data.train_size=6371)
    reference acc "${keys[@]}"
    same acc c2 "strategy.split=fc2 strategy.chunks=2" "${keys[@]}"
}

step_memory_limit() {
    local log=$WORK/single.log rc=0 mib
    CFG=$PIPE_TESTS/big.ini
    fit strategy.name=single >"$log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { cat "$log"; fail "single trained a model larger than its device"; }
    grep -q 'cannot allocate .* limit 16777216 bytes (memory_limit_mb = 16)' "$log" ||
        { cat "$log"; fail "single did not stop with the backend's out-of-memory message"; }
    must "$WORK/mp.log" fit strategy.balance=memory
    grep -q 'after 5 steps' "$WORK/mp.log" || { cat "$WORK/mp.log"; fail "the pipeline did not train 5 steps"; }
    for dev in 0 1; do
        mib=$(sed -n "s/^memory (device $dev): .* total \([0-9.]*\) MiB$/\1/p" "$WORK/mp.log")
        [ -n "$mib" ] || fail "no memory line for device $dev"
        awk -v m="$mib" 'BEGIN { exit !(m > 6 && m < 16) }' ||
            fail "device $dev holds $mib MiB: want the model split about evenly under 16 MiB"
    done
    echo "ok: single: $(grep -o 'cannot allocate [0-9]* bytes' "$log"); pipeline: $(grep '^memory' "$WORK/mp.log" | sed 's/.*: params/params/' | tr '\n' ';')"
}

step_checkpoint() {
    local out
    CFG=$PIPE_TESTS/cnn.ini
    must "$WORK/full.log" fit strategy.name=single trainer.final_checkpoint="$WORK/full.safetensors"
    must "$WORK/a1.log" fit strategy.split=conv2 strategy.chunks=2 trainer.max_steps=10 \
        trainer.final_checkpoint="$WORK/a10.safetensors"
    must "$WORK/a2.log" fit strategy.name=single --ckpt-path "$WORK/a10.safetensors" \
        trainer.final_checkpoint="$WORK/a30.safetensors"
    must "$WORK/b1.log" fit strategy.name=single trainer.max_steps=10 \
        trainer.final_checkpoint="$WORK/b10.safetensors"
    must "$WORK/b2.log" fit strategy.chunks=2 --ckpt-path "$WORK/b10.safetensors" \
        trainer.final_checkpoint="$WORK/b30.safetensors"
    grep -q 'resuming at epoch 1, batch 10, step 10' "$WORK/b2.log" ||
        { cat "$WORK/b2.log"; fail "the pipeline did not resume at step 10"; }
    for f in a30 b30; do
        out=$(compare "$WORK/$f.safetensors" "$WORK/full.safetensors") ||
            fail "$f (resumed across strategies) differs from the unbroken run: $out"
        echo "ok: $f: $out"
    done
}

# refused "KEYS" PATTERN: the run fails, exit 2 or 1, with a message matching PATTERN.
refused() {
    local -a keys
    read -r -a keys <<<"$1"
    local log=$WORK/refused.log rc=0
    fit "${keys[@]}" trainer.max_steps=1 >"$log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { cat "$log"; fail "$1 was not refused"; }
    grep -q "$2" "$log" || { cat "$log"; fail "$1: no message matching '$2'"; }
    echo "ok: $1: $(grep -m1 "$2" "$log")"
}

step_dp_replicas() {
    local dp=(backend.devices=4 strategy.dp_replicas=2)
    local keys=(trainer.accumulate_grad_batches=2 trainer.gradient_clip_val=0.05 data.train_size=6371)
    reference base
    same base r2c1 "strategy.split=fc2 strategy.chunks=1" "${dp[@]}"
    same base r2c4 "strategy.split=fc2 strategy.chunks=4" "${dp[@]}"
    grep -q '^memory (device 3)' "$WORK/base.r2c4.log" || fail "no memory line for device 3"
    reference acc "${keys[@]}"
    same acc r2c2 "strategy.chunks=2" "${dp[@]}" "${keys[@]}"
}

step_sync_batchnorm() {
    grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' "$PIPE_TESTS/../ddp/batchnorm.ini" >"$WORK/sync.ini"
    CFG=$WORK/sync.ini
    local keys=(backend.devices=2 data.batch_size=64 model.sync_batchnorm=true) near
    must "$WORK/single.log" fit strategy.name=single "${keys[@]}" model.sync_batchnorm=false \
        trainer.final_checkpoint="$WORK/single.safetensors"
    must "$WORK/sync.log" fit strategy.name=model-parallel strategy.split=fc2 "${keys[@]}" \
        trainer.final_checkpoint="$WORK/sync.safetensors"
    grep -q 'after 50 steps' "$WORK/sync.log" || { cat "$WORK/sync.log"; fail "model-parallel did not run 50 steps"; }
    diff <(grep '^epoch .* step ' "$WORK/single.log") <(grep '^epoch .* step ' "$WORK/sync.log") ||
        fail "the logged training losses differ (above: single <, model-parallel >)"
    near=$("$PYTHON" "$PIPE_TESTS/../ddp/compare_model_relative.py" "$WORK/sync.safetensors" "$WORK/single.safetensors" 1e-6) ||
        fail "model-parallel with sync_batchnorm is not single: $near"
    echo "ok: model-parallel (2 stages, chunks 1) with sync_batchnorm vs single: $near"
    local why='sync_batchnorm = true: \[strategy\] model-parallel offers no replica all-reduce to 2 stage(s) holding a batchnorm layer'
    refused "strategy.name=model-parallel strategy.split=fc2 strategy.chunks=2 ${keys[*]}" "$why"
    refused "strategy.name=model-parallel strategy.split=fc2 strategy.dp_replicas=2 backend.devices=4 data.batch_size=64 model.sync_batchnorm=true" \
        'sync_batchnorm = true: \[strategy\] model-parallel offers no replica all-reduce to 4 stage(s) holding a batchnorm layer'
}

step_refusals() {
    refused "strategy.split=fc9" "split = fc9: the model has no layer 'fc9'"
    refused "strategy.split=fc2,relu1" "'relu1' does not come after the previous stage's first layer"
    refused "strategy.split=fc2,fc3" '3 stages x 1 pipeline need 3 devices, the backend has 2'
    refused "strategy.split=fc2 strategy.dp_replicas=2" '2 stages x 2 pipelines need 4 devices, the backend has 2'
    refused "strategy.stages=2 strategy.split=fc2,fc3" 'makes 3 stages but stages = 2'
    refused "backend.devices=8" '8 stages (one per device: stages = 0), but the model has only 6 layers'
}

"step_$step"
