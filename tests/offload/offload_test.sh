#!/usr/bin/env bash
# offload.* tests: [strategy] offload_optimizer = host (ZeRO-Offload) on the CPU backend's
# devices: the f32 master and the optimizer state in host memory, updated there by
# plugins/common's host update (kernels/cpu), against the same run without offload.
# Environment (from ctest): FULGUR, PLUGIN_DIR, OFFLOAD_TESTS (this folder), SHARDED_INI
# (tests/sharded/sharded.ini, the base run), COMPARE (tests/ddp/compare_safetensors.py, 0:
# bitwise over every tensor of the files, the optimizer state included), OFFLOAD_WORK, PYTHON.
#
# single      AdamW with clipping, SGD with Nesterov momentum (fp32), bf16-mixed and
#             fp16-mixed (grad_dtype = half, as offload keeps them): 50 steps bitwise equal
#             to the run without offload (weights, optimizer state, every logged loss); the
#             memory line has no optimizer or master bytes left, and the setup line says
#             how many bytes left the device (8 bytes per parameter for fp32 AdamW); a
#             4.5M-parameter model (two buckets of the host update) bitwise too, fp32 and bf16
# ddp         2 ranks, AdamW with clipping and SGD momentum: bitwise == ddp without offload
# sharded     stages 1 and 2 on 2 ranks, fp32 with clipping and bf16-mixed: bitwise ==
#             the same stage without offload
# checkpoint  single, ddp (2 ranks) and sharded stage 2 (bf16-mixed, 2 ranks): a run
#             offloaded to step 25, resumed offloaded to 50 == the unbroken run without
#             offload (the state was saved from host memory); the non-offloaded step-25
#             checkpoint resumed with offload, and the offloaded one without, the same
# refusals    stage 3, ddp under a mixed mode, a 'true' half mode, weight-decay groups,
#             grad_dtype = fp32 under a mixed mode, dp and model-parallel: each refused
#             with its message
# memory_limit  under backend.memory_limit_mb = 3, a 160-wide model whose AdamW state does
#             not fit trains 5 steps with offload (without: out of memory, naming the limit)
set -u

step=${1:?usage: offload_test.sh STEP}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${SHARDED_INI:?}" "${OFFLOAD_WORK:?}" "${COMPARE:?}" "${PYTHON:?}"
fail() {
    echo "FAIL [offload.$step]: $*" >&2
    exit 1
}
skip() {
    echo "SKIP [offload.$step]: $*"
    exit 77
}

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=$OFFLOAD_WORK/$step
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK"
# the base run under each strategy (single and ddp do not know the sharded keys)
grep -v -e '^stage' "$SHARDED_INI" | sed 's/^name = sharded/name = ddp/' >"$WORK/ddp.ini"
grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' -e '^stage' -e '^bucket_mb' \
    -e '^name = sharded' "$SHARDED_INI" | sed 's/^\[strategy\]/[strategy]\nname = single/' \
    >"$WORK/single.ini"
cp "$SHARDED_INI" "$WORK/sharded.ini"

must() { # must LOG CMD...: runs the command, output to LOG; on failure shows LOG and fails
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }
}
run() { # run N ARGS...: N = 1 in this process, else under mpirun
    local n=$1
    shift
    if [ "$n" = 1 ]; then
        "$FULGUR" --plugin-path "$PLUGIN_DIR" "$@"
        return
    fi
    local flags=(--oversubscribe)
    [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
    "$MPIRUN" "${flags[@]}" -n "$n" "$FULGUR" --plugin-path "$PLUGIN_DIR" "$@"
}
need_mpi() { MPIRUN=$(command -v mpirun) || skip "mpirun not found (install openmpi-bin)"; }
losses() { grep '^epoch .* step ' "$1"; }

# same N INI NAME OVERRIDES...: the run with and without offload, 50 steps: bitwise equal
# files (weights and optimizer state), the same losses, and the offloaded run's memory line
# without optimizer bytes.
same() {
    local n=$1 ini=$2 name=$3 out
    shift 3
    must "$WORK/$name.ref.log" run "$n" fit "$WORK/$ini" "$@" \
        trainer.final_checkpoint="$WORK/$name.ref.safetensors"
    must "$WORK/$name.off.log" run "$n" fit "$WORK/$ini" "$@" strategy.offload_optimizer=host \
        trainer.final_checkpoint="$WORK/$name.off.safetensors"
    grep -q 'after 50 steps' "$WORK/$name.off.log" || { cat "$WORK/$name.off.log"; fail "$name: no 50 steps"; }
    grep -q 'offload_optimizer = host: 50 steps, host update' "$WORK/$name.off.log" ||
        { cat "$WORK/$name.off.log"; fail "$name: the host update did not run 50 steps"; }
    diff <(losses "$WORK/$name.ref.log") <(losses "$WORK/$name.off.log") ||
        fail "$name: the logged losses differ with offload (without <, with >)"
    out=$("$PYTHON" "$COMPARE" "$WORK/$name.off.safetensors" "$WORK/$name.ref.safetensors" 0) ||
        fail "$name: weights or optimizer state differ with offload: $out"
    grep -q '^memory (device 0):.* master 0.00 MiB,.* optimizer 0.00 MiB' "$WORK/$name.off.log" ||
        { grep '^memory' "$WORK/$name.off.log"; fail "$name: optimizer or master bytes left on the device"; }
    grep -q '^memory (device 0):.* optimizer 0.00 MiB' "$WORK/$name.ref.log" &&
        fail "$name: the run without offload shows no optimizer bytes either"
    echo "ok: $name with offload == without (bitwise, $(losses "$WORK/$name.off.log" | wc -l) loss lines): $out"
}

step_single() {
    same 1 single.ini single_adamw_clip trainer.gradient_clip_val=0.5
    same 1 single.ini single_sgd optimizer.name=sgd optimizer.lr=0.05 optimizer.momentum=0.9 \
        optimizer.nesterov=true optimizer.weight_decay=0.001
    same 1 single.ini single_bf16 precision.name=bf16-mixed precision.grad_dtype=half
    same 1 single.ini single_fp16 precision.name=fp16-mixed precision.grad_dtype=half
    # 29770 parameters: AdamW's m and v (8 bytes each) left the device; under bf16-mixed the
    # f32 master too (12 bytes each)
    grep -q 'adamw state of 29770 parameters \[0, 29770) in pinned host memory, 0.45 MiB on the host, 0.23 MiB less on device 0' \
        "$WORK/single_adamw_clip.off.log" || { cat "$WORK/single_adamw_clip.off.log"; fail "no setup line with the bytes saved"; }
    grep -q '0.34 MiB less on device 0' "$WORK/single_bf16.off.log" ||
        { cat "$WORK/single_bf16.off.log"; fail "bf16-mixed: the master is not counted as saved"; }
    # 860 wide: 4507306 parameters, two buckets of the host update (4194304 floats each)
    sed -e 's/^out_features = 64/out_features = 860/' "$WORK/single.ini" >"$WORK/big.ini"
    local p out
    for p in fp32 bf16-mixed; do
        local keys=(precision.name=$p trainer.max_steps=4 data.batch_size=8)
        [ $p = fp32 ] || keys+=(precision.grad_dtype=half)
        must "$WORK/big.ref.log" run 1 fit "$WORK/big.ini" "${keys[@]}" \
            trainer.final_checkpoint="$WORK/big.ref.safetensors"
        must "$WORK/big.off.log" run 1 fit "$WORK/big.ini" "${keys[@]}" strategy.offload_optimizer=host \
            trainer.final_checkpoint="$WORK/big.off.safetensors"
        grep -q 'state of 4507306 parameters' "$WORK/big.off.log" || { cat "$WORK/big.off.log"; fail "not the 2-bucket model"; }
        out=$("$PYTHON" "$COMPARE" "$WORK/big.off.safetensors" "$WORK/big.ref.safetensors" 0) ||
            fail "two buckets ($p): weights or optimizer state differ with offload: $out"
        echo "ok: two buckets of the host update ($p, 4 steps) == without offload: $out"
    done
    must "$WORK/check.log" run 1 check "$WORK/single.ini" strategy.offload_optimizer=host
    grep -q '0.23 MiB less on device 0' "$WORK/check.log" && grep -q 'optimizer 0.00 MiB' "$WORK/check.log" ||
        { cat "$WORK/check.log"; fail "fulgur check does not show the bytes offloaded"; }
    echo "ok: fulgur check: $(grep -o '[0-9.]* MiB less on device 0' "$WORK/check.log")"
}

step_ddp() {
    need_mpi
    same 2 ddp.ini ddp_adamw_clip trainer.gradient_clip_val=0.5
    same 2 ddp.ini ddp_sgd optimizer.name=sgd optimizer.lr=0.05 optimizer.momentum=0.9 \
        optimizer.weight_decay=0
}

step_sharded() {
    need_mpi
    local s
    for s in 1 2; do
        same 2 sharded.ini "stage${s}_clip" strategy.stage=$s trainer.gradient_clip_val=0.5
        same 2 sharded.ini "stage${s}_bf16" strategy.stage=$s precision.name=bf16-mixed
    done
}

# resume N INI NAME OVERRIDES...: offloaded to 25, resumed offloaded to 50 == unbroken;
# the crossed resumes too.
resume() {
    local n=$1 ini=$2 name=$3 out a b
    shift 3
    must "$WORK/$name.full.log" run "$n" fit "$WORK/$ini" "$@" \
        trainer.final_checkpoint="$WORK/$name.full.safetensors"
    for a in off ref; do
        local opt=()
        [ $a = off ] && opt=(strategy.offload_optimizer=host)
        must "$WORK/$name.$a.half.log" run "$n" fit "$WORK/$ini" "$@" "${opt[@]}" trainer.max_steps=25 \
            trainer.final_checkpoint="$WORK/$name.$a.half.safetensors"
    done
    for a in off ref; do
        for b in off ref; do
            [ $a = ref ] && [ $b = ref ] && continue
            local opt=()
            [ $b = off ] && opt=(strategy.offload_optimizer=host)
            must "$WORK/$name.$a.$b.log" run "$n" fit "$WORK/$ini" "$@" "${opt[@]}" \
                --ckpt-path "$WORK/$name.$a.half.safetensors" \
                trainer.final_checkpoint="$WORK/$name.$a.$b.safetensors"
            grep -q 'resuming at epoch 1, batch 25, step 25' "$WORK/$name.$a.$b.log" ||
                { cat "$WORK/$name.$a.$b.log"; fail "$name: no resume at step 25"; }
            out=$("$PYTHON" "$COMPARE" "$WORK/$name.$a.$b.safetensors" "$WORK/$name.full.safetensors" 0) ||
                fail "$name: checkpoint ($a) resumed ($b) differs from the unbroken run: $out"
            echo "ok: $name: step 25 written ${a/ref/without offload}, resumed ${b/ref/without offload} to 50 == unbroken: $out"
        done
    done
}

step_checkpoint() {
    resume 1 single.ini single trainer.gradient_clip_val=0.5
    resume 1 single.ini single_bf16 precision.name=bf16-mixed precision.grad_dtype=half
    need_mpi
    resume 2 ddp.ini ddp
    resume 2 sharded.ini stage2_bf16 strategy.stage=2 precision.name=bf16-mixed
}

# refused N INI TEXT OVERRIDES...: the run fails (exit 2) and says TEXT
refused() {
    local n=$1 ini=$2 text=$3 rc=0
    shift 3
    run "$n" fit "$WORK/$ini" strategy.offload_optimizer=host "$@" >"$WORK/refused.log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { cat "$WORK/refused.log"; fail "accepted: $*"; }
    grep -qF -- "$text" "$WORK/refused.log" || { cat "$WORK/refused.log"; fail "no '$text' for: $*"; }
    echo "ok: refused ($*): $(grep -m1 -F -- "$text" "$WORK/refused.log")"
}

step_refusals() {
    refused 1 single.ini "offload_optimizer = host with [optimizer] no_decay = *.bias is not supported" \
        optimizer.no_decay='*.bias'
    refused 1 single.ini "[optimizer] weight_decay_params = matrices is not supported" \
        optimizer.weight_decay_params=matrices
    refused 1 single.ini "a 'true' half precision mode does not have; use bf16-mixed" precision.name=bf16-true
    refused 1 single.ini "[precision] grad_dtype = fp32 asks for f32 ones" precision.name=bf16-mixed \
        precision.grad_dtype=fp32
    refused 1 single.ini "unknown key" strategy.name=dp
    need_mpi
    refused 2 sharded.ini "offload_optimizer = host with stage = 3 is not supported" strategy.stage=3
    refused 2 ddp.ini "offload_optimizer = host under ddp runs fp32 parameters only" precision.name=bf16-mixed
}

# A 160-wide, 8-layer MLP: 166570 parameters. fp32 AdamW on the device: params 0.64 MiB,
# grads 0.64, optimizer 1.27, activations 0.98 = 3.52 MiB, over a 3 MiB device; offloaded,
# 2.25 MiB fits.
step_memory_limit() {
    sed -e 's/^out_features = 64/out_features = 160/' "$WORK/single.ini" >"$WORK/wide.ini"
    local rc=0
    run 1 fit "$WORK/wide.ini" backend.memory_limit_mb=3 trainer.max_steps=5 >"$WORK/plain.log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] && grep -q 'memory_limit_mb = 3' "$WORK/plain.log" ||
        { cat "$WORK/plain.log"; fail "the model fits without offload: make it wider"; }
    must "$WORK/offload.log" run 1 fit "$WORK/wide.ini" backend.memory_limit_mb=3 trainer.max_steps=5 \
        strategy.offload_optimizer=host
    grep -q 'after 5 steps' "$WORK/offload.log" || { cat "$WORK/offload.log"; fail "no 5 steps"; }
    echo "ok: under memory_limit_mb = 3: out of memory without offload, 5 steps with it ($(grep -m1 '^memory' "$WORK/offload.log"))"
}

"step_$step"
