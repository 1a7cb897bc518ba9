#!/usr/bin/env bash
# End-to-end checks of issue 4's workflow pieces through the fulgur command, on
# Fashion-MNIST (tests/integration covers accuracy, resume of the weights, accumulation,
# the trainer keys and the tuner). Usage: workflow_check.sh CASE
#   nan_layer          a huge lr: nan_guard stops at the first non-finite loss/gradient,
#                      naming the step and the layer, before that step's update
#   save_on_exception  a run that fails mid-epoch writes on_exception.safetensors, and a run
#                      resumed from it ends bitwise where an unbroken run ends
#   save_last          last.safetensors is the top-k file's second name (same inode) and loads
#   resume_state       2 epochs == 1 epoch + resume: every tensor, optimizer state included,
#                      bitwise (not just the weights digest)
#   throughput         the throughput line splits the step; csv_logger and tensorboard carry
#                      the time/... metrics and the hparams
#   ddp_throughput     under mpirun -n 2 ddp: grad sync and the communication line
set -u
: "${FULGUR:?FULGUR must name the fulgur binary}" "${EXAMPLES:?EXAMPLES must name the examples folder}"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
need_python() { command -v python3 >/dev/null || { echo "SKIP: python3 missing"; exit 77; }; }
digest_of() { grep -o 'digest [0-9a-f]*' "$1" | awk '{print $2}'; }
cfg="$EXAMPLES/fashion_mnist_mlp.ini"
quick=(trainer.max_epochs=1 trainer.limit_train_batches=50 trainer.test_after_fit=false
       trainer.check_val_every_n_epoch=0 trainer.num_sanity_val_steps=0 trainer.default_root_dir="$tmp/runs")

nan_layer() {
  need_python
  local bad=(optimizer.lr=1000 trainer.final_checkpoint="$tmp/final.safetensors")
  "$FULGUR" fit "$cfg" "${quick[@]}" "${bad[@]}" callback.nan_guard.action=stop >"$tmp/stop" 2>&1 \
    || fail "action = stop must end the run normally: $(cat "$tmp/stop")"
  local line step done
  line=$(grep '^stopping: \[callback.nan_guard\]' "$tmp/stop") || fail "no nan_guard stop: $(cat "$tmp/stop")"
  echo "$line" | grep -qE 'step [0-9]+ \(epoch 1\): the loss is nan; non-finite gradients in layer fc3 \(the first in backward order, 3 layers affected\)$' \
    || fail "the reason must name the step and the layer: $line"
  step=$(echo "$line" | sed -E 's/.* step ([0-9]+) \(epoch.*/\1/')
  done=$(grep -o 'after [0-9]* steps' "$tmp/stop" | awk '{print $2}')
  [ "$done" -eq $((step - 1)) ] || fail "step $step was not finite, yet $done steps were applied"
  python3 "$here/same_tensors.py" --finite "$tmp/final.safetensors" >"$tmp/fin" \
    || fail "the non-finite step reached the weights: $(cat "$tmp/fin")"
  # Checked every 2 steps: caught at the first even step from there on.
  "$FULGUR" fit "$cfg" "${quick[@]}" "${bad[@]}" callback.nan_guard.check_every_n_steps=2 >"$tmp/two" 2>&1 || fail "every 2: $(cat "$tmp/two")"
  grep -qE "step $(( (step + 1) / 2 * 2 )) \(epoch 1\):.*layer fc3" "$tmp/two" || fail "every 2 steps: $(grep stopping "$tmp/two")"
  # action = error: the run fails (exit 1) with the same words.
  "$FULGUR" fit "$cfg" "${quick[@]}" "${bad[@]}" callback.nan_guard.action=error >"$tmp/err" 2>&1
  local rc=$?
  [ $rc -eq 1 ] && grep -qE "step $step \(epoch 1\): the loss is nan; non-finite gradients in layer fc3" "$tmp/err" \
    || fail "action = error: rc $rc, $(cat "$tmp/err")"
  echo "ok: $line; $done steps applied, weights finite"
}

save_on_exception() {
  # Validation at batch 50 makes the checkpoint callback able to rank; at step 60 its
  # monitor, which no event reports, fails the run in the middle of the epoch.
  local common=("${quick[@]}" trainer.limit_train_batches=100 trainer.log_every_n_steps=10
                trainer.check_val_every_n_epoch=1 trainer.val_check_interval=50 trainer.limit_val_batches=2)
  "$FULGUR" fit "$cfg" "${common[@]}" >"$tmp/straight" 2>&1 || fail "straight: $(cat "$tmp/straight")"
  "$FULGUR" fit "$cfg" "${common[@]}" trainer.save_on_exception=true callback.checkpoint.monitor=val/nonexistent \
    callback.checkpoint.every_n_train_steps=60 callback.checkpoint.every_n_epochs=0 >"$tmp/dies" 2>&1
  local rc=$? ckpt
  [ $rc -ne 0 ] || fail "the run should fail, rc $rc: $(cat "$tmp/dies")"
  grep -qF "val/nonexistent" "$tmp/dies" || fail "the failure should name the metric: $(cat "$tmp/dies")"
  ckpt=$(sed -n 's/.*the last completed step is saved in \(.*on_exception.safetensors\)$/\1/p' "$tmp/dies")
  [ -n "$ckpt" ] && [ -f "$ckpt" ] || fail "no on_exception checkpoint: $(cat "$tmp/dies")"
  "$FULGUR" fit "$cfg" "${common[@]}" --ckpt-path "$ckpt" >"$tmp/resumed" 2>&1 || fail "resume: $(cat "$tmp/resumed")"
  grep -qF "resuming at epoch 1, batch 60, step 60" "$tmp/resumed" || fail "not resumed at step 60: $(cat "$tmp/resumed")"
  local d0 d1
  d0=$(digest_of "$tmp/straight"); d1=$(digest_of "$tmp/resumed")
  [ -n "$d0" ] && [ "$d0" = "$d1" ] || fail "resumed from on_exception: digest $d1, unbroken run $d0"
  echo "ok: failed at step 60, saved $ckpt, resumed to digest $d1 (= unbroken run)"
}

save_last() {
  "$FULGUR" fit "$cfg" "${quick[@]}" trainer.check_val_every_n_epoch=1 trainer.limit_val_batches=5 \
    callback.checkpoint.monitor=val/loss callback.checkpoint.save_last=true >"$tmp/fit" 2>&1 || fail "fit: $(cat "$tmp/fit")"
  local dir top
  dir=$(sed -n 's/^run folder: //p' "$tmp/fit")/checkpoints
  top=$(ls "$dir" | grep -v '^last.safetensors$')
  [ "$(ls "$dir" | wc -l)" -eq 2 ] && [ -f "$dir/last.safetensors" ] || fail "want the top file and last in $dir: $(ls "$dir")"
  [ "$(stat -c %i "$dir/$top")" = "$(stat -c %i "$dir/last.safetensors")" ] || fail "last.safetensors is not $top's second name"
  grep -qF "checkpoint: $dir/last.safetensors (the same as $dir/$top)" "$tmp/fit" || fail "no line for the second name: $(grep checkpoint "$tmp/fit")"
  ls "$dir" | grep -q 'tmp' && fail "a temporary file was left: $(ls "$dir")"
  "$FULGUR" test "$cfg" trainer.default_root_dir="$tmp/runs" trainer.limit_test_batches=5 --ckpt-path "$dir/last.safetensors" >"$tmp/test" 2>&1 \
    || fail "last.safetensors does not load: $(cat "$tmp/test")"
  echo "ok: $dir/last.safetensors = $top (one inode), and it loads"
}

resume_state() {
  need_python
  local common=(trainer.limit_train_batches=60 scheduler.t_max=120 trainer.max_epochs=2 trainer.test_after_fit=false
                trainer.check_val_every_n_epoch=0 trainer.default_root_dir="$tmp/runs")
  "$FULGUR" fit "$cfg" "${common[@]}" trainer.final_checkpoint="$tmp/straight.safetensors" >"$tmp/s" 2>&1 || fail "straight: $(cat "$tmp/s")"
  "$FULGUR" fit "$cfg" "${common[@]}" trainer.max_epochs=1 trainer.final_checkpoint="$tmp/e1.safetensors" >"$tmp/a" 2>&1 || fail "epoch 1: $(cat "$tmp/a")"
  "$FULGUR" fit "$cfg" "${common[@]}" trainer.final_checkpoint="$tmp/resumed.safetensors" --ckpt-path "$tmp/e1.safetensors" >"$tmp/b" 2>&1 || fail "resume: $(cat "$tmp/b")"
  python3 "$here/same_tensors.py" "$tmp/straight.safetensors" "$tmp/resumed.safetensors" >"$tmp/cmp" || fail "$(cat "$tmp/cmp")"
  grep -q "optimizer state)" "$tmp/cmp" && ! grep -q "(0 of them" "$tmp/cmp" || fail "no optimizer state compared: $(cat "$tmp/cmp")"
  local e0 e1
  e0=$(grep '^epoch 2/2  train loss' "$tmp/s" | awk '{print $5, $7}'); e1=$(grep '^epoch 2/2  train loss' "$tmp/b" | awk '{print $5, $7}')
  [ -n "$e0" ] && [ "$e0" = "$e1" ] || fail "epoch 2 metrics differ: '$e0' vs '$e1'"
  echo "ok: $(cat "$tmp/cmp"); epoch 2 metrics $e0"
}

throughput() {
  need_python
  "$FULGUR" fit "$cfg" "${quick[@]}" trainer.log_every_n_steps=25 callback.throughput.split=true \
    callback.csv_logger.flush_every_n_events=1 callback.tensorboard.subdir=tb >"$tmp/fit" 2>&1 || fail "fit: $(cat "$tmp/fit")"
  grep -qE '^throughput: [0-9.]+k? samples/s; step [0-9.]+ (ms|us) = data wait .* \+ h2d .* \+ forward .* \+ backward .* \+ optimizer .* \+ other ' "$tmp/fit" \
    || fail "no split throughput line: $(grep throughput "$tmp/fit")"
  grep -qE '^throughput: memory: param 1.03 MiB, master 0.00 MiB, grad 1.03 MiB, optimizer 1.03 MiB, activation [0-9.]+ MiB, total [0-9.]+ MiB$' "$tmp/fit" \
    || fail "no memory line: $(grep throughput "$tmp/fit")"
  grep -q '^throughput: run mean over 50 steps' "$tmp/fit" || fail "no run mean: $(grep throughput "$tmp/fit")"
  local run header
  run=$(sed -n 's/^run folder: //p' "$tmp/fit")
  header=$(head -1 "$run/metrics.csv")
  for m in time/step_s time/data_wait_s time/h2d_s time/forward_s time/backward_s time/optimizer_s; do
    echo "$header" | grep -q "$m" || fail "metrics.csv lacks $m: $header"
  done
  # The forward time of a step is positive and below the step's time.
  python3 - "$run/metrics.csv" <<'PY' || fail "time/forward_s is not within (0, time/step_s) in $run/metrics.csv"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("time/forward_s")]
assert rows and all(0 < float(r["time/forward_s"]) < float(r["time/step_s"]) for r in rows)
PY
  grep -qx '  max_epochs: 1' "$run/hparams.yaml" && grep -qx '  name: "idx"' "$run/hparams.yaml" \
    || fail "hparams.yaml: $(cat "$run/hparams.yaml")"
  python3 "$here/../callbacks/output/decode_tfevents.py" "$run"/tb/events.out.tfevents.* >"$tmp/tb" || fail "tensorboard file: $(cat "$tmp/tb")"
  grep -qx '0 _hparams_/session_start_info trainer.max_epochs = 1.0' "$tmp/tb" && grep -qx '0 _hparams_/session_end_info status SUCCESS' "$tmp/tb" \
    && grep -q ' time/forward_s ' "$tmp/tb" || fail "tensorboard lacks hparams or time metrics: $(head -40 "$tmp/tb")"
  echo "ok: $(grep '^throughput: run mean' "$tmp/fit")"
}

ddp_throughput() {
  local mpirun
  mpirun=$(command -v mpirun) || { echo "SKIP: mpirun missing"; exit 77; }
  local root=()
  [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
  "$mpirun" --oversubscribe "${root[@]}" -n 2 "$FULGUR" fit "$cfg" "${quick[@]}" trainer.log_every_n_steps=25 \
    strategy.name=ddp strategy.bucket_mb=0.25 comm.name=mpi backend.threads=1 callback.throughput.split=true >"$tmp/fit" 2>&1 \
    || fail "ddp fit: $(cat "$tmp/fit")"
  grep -qE '^throughput: .* \+ backward .* \+ grad sync [0-9.]+ (ms|us) \([0-9]+%\) \+ optimizer ' "$tmp/fit" \
    || fail "no grad sync in the split: $(grep throughput "$tmp/fit")"
  grep -qE '^throughput: communication [0-9.]+ (ms|us) per step: [0-9.]+ (ms|us) \([0-9]+%\) hidden behind backward, [0-9.]+ (ms|us) exposed$' "$tmp/fit" \
    || fail "no communication line: $(grep throughput "$tmp/fit")"
  [ "$(grep -c '^throughput: communication' "$tmp/fit")" -eq 3 ] || fail "rank 1 printed too, or lines are missing: $(grep throughput "$tmp/fit")"
  echo "ok: $(grep '^throughput: communication' "$tmp/fit" | tail -1)"
}

case "${1:-}" in
  nan_layer|save_on_exception|save_last|resume_state|throughput|ddp_throughput) "$1" ;;
  *) echo "usage: $0 nan_layer|save_on_exception|save_last|resume_state|throughput|ddp_throughput"; exit 2 ;;
esac
