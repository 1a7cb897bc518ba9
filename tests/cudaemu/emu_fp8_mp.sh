#!/bin/sh
# fp8-mixed's amax histories under strategy.model-parallel with dp_replicas = 2 (one
# process, emulated devices), 3 steps at batch 8 (a shard of 4 per pipeline, chunks = 1):
#   single-stage: fp8_gpt_lm.ini (one GPT-2 block, 12 histories of 16) on 1 stage x 2
#     replicas against one device at batch 8: the run says its 192 floats are max-reduced
#     across the 2 replicas, the one device claims no reduction, and pipeline 0's histories
#     (the checkpoint's) equal the one device's: step 1's entries exactly, every one, steps
#     2 and 3 within REL_TOL. Pipeline 0's own histories (what the other pipeline copied
#     before the reduction, and a build without it) miss step 1's: each is its shard's amax.
#   two-stage: fp8_char_lm.ini split at proj (fc's histories on stage 0, proj's and
#     lm_head's on stage 1) on 2 stages x 2 replicas: refused at start-up, since pipeline
#     stages do not run in half precision (core/src/model/replica.c's message), before any
#     step (no checkpoint, no reduction claimed), rather than training with histories
#     copied from pipeline 0. The groups such a run would reduce: ctest workflow.fp8_amax_plan.
#   emu_fp8_mp.sh FULGUR EMU_PLUGIN_DIR CONFIG_DIR REL_TOL single-stage|two-stage
# Exits 77 (skipped) without Debian's fortunes.
set -u
fulgur=$1 plugins=$2 dir=$3 tol=$4 mode=$5
[ -d /usr/share/games/fortunes ] || { echo "skip: no /usr/share/games/fortunes"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
fit() { # NAME ARGS...: 3 steps at batch 8 on the emulated backend, output in $tmp/NAME.out
  name=$1; shift
  rc=0
  "$fulgur" --plugin-path "$plugins" fit "$cfg" trainer.default_root_dir="$tmp/$name" \
    trainer.final_checkpoint="$tmp/$name.safetensors" precision.amax_history_len=16 \
    trainer.log_every_n_steps=4 trainer.max_steps=3 data.batch_size=8 "$@" \
    >"$tmp/$name.out" 2>&1 || rc=$?
}
run() { # NAME ARGS...: fit, which must succeed
  fit "$@"
  [ $rc = 0 ] || { cat "$tmp/$1.out"; fail "the $1 run exited $rc"; }
}
says() { # NAME LINE: the run's output holds LINE
  grep -qF "$2" "$tmp/$1.out" || { cat "$tmp/$1.out"; fail "the $1 run does not say: $2"; }
}
mp="strategy.name=model-parallel strategy.chunks=1 strategy.dp_replicas=2"
case $mode in
single-stage)
  cfg=$dir/fp8_gpt_lm.ini
  run ref
  # shellcheck disable=SC2086
  FGEMU_DEVICES=2 run mp $mp strategy.stages=1
  says mp "the same stages on the next devices for each further pipeline (dp_replicas)"
  says mp "fp8: the amax histories (192 floats) are max-reduced across the 2 replicas once per optimizer step (through the host, after a queue sync)"
  grep -qF "max-reduced" "$tmp/ref.out" && { cat "$tmp/ref.out"; fail "one device claims a reduction"; }
  python3 "$dir/fp8_histories_cmp.py" "$tmp/ref.safetensors" "$tmp/mp.safetensors" "$tol" \
    12 "1 stage x 2 replicas" || fail "the reduced histories are not one device's at the whole batch"
  echo "ok: model-parallel (1 stage x 2 replicas) max-reduces the amax histories as one device at the whole batch" ;;
two-stage)
  cfg=$dir/fp8_char_lm.ini
  # shellcheck disable=SC2086
  FGEMU_DEVICES=4 fit mp $mp strategy.split=proj
  [ $rc != 0 ] || { cat "$tmp/mp.out"; fail "2 stages x 2 replicas ran in fp8-mixed"; }
  says mp "stage 1 (device 1): proj..lm_head"
  says mp "bf16 activations are not supported for a replica of part of the model (pipeline stages, sharded parameters): only whole replicas run in half precision"
  grep -qF "max-reduced" "$tmp/mp.out" && fail "the refused run claims a reduction"
  [ ! -e "$tmp/mp.safetensors" ] || fail "the refused run wrote a checkpoint"
  echo "ok: model-parallel (2 stages x 2 replicas) in fp8-mixed is refused at start-up" ;;
*) fail "unknown mode $mode" ;;
esac
