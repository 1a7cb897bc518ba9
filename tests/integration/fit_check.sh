#!/usr/bin/env bash
# End-to-end checks through the fulgur command. Usage:
#   fit_check.sh accuracy CONFIG FLOOR   test accuracy after the config's epochs >= FLOOR
#   fit_check.sh determinism             same seed -> same weights, with 0 and 2 workers
#   fit_check.sh bad_data                broken data inputs fail with a clear message, exit 2
set -u
: "${FULGUR:?FULGUR must name the fulgur binary}" "${EXAMPLES:?EXAMPLES must name the examples folder}"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1 # run folders (runs/) land in the temporary folder
fail() { echo "FAIL: $*"; exit 1; }

digest_of() { grep -o 'digest [0-9a-f]*' "$1" | awk '{print $2}'; }

accuracy() {
  local cfg=$1 floor=$2
  "$FULGUR" fit "$EXAMPLES/$cfg" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "fit $cfg exited $?"; }
  cat "$tmp/out"
  local acc
  acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/out")
  [ -n "$acc" ] || fail "no test accuracy line in the output of $cfg"
  awk -v a="$acc" -v f="$floor" 'BEGIN { exit !(a >= f) }' || fail "$cfg: test accuracy $acc < floor $floor"
  echo "ok: $cfg test accuracy $acc >= $floor"
}

determinism() {
  local cfg="$EXAMPLES/fashion_mnist_mlp.ini" common=(trainer.max_epochs=1 trainer.test_after_fit=false
        trainer.check_val_every_n_epoch=0 trainer.limit_train_batches=300)
  "$FULGUR" fit "$cfg" "${common[@]}" trainer.default_root_dir="$tmp/runs" data.num_workers=0 >"$tmp/w0" 2>&1 || fail "fit (0 workers) failed: $(cat "$tmp/w0")"
  "$FULGUR" fit "$cfg" "${common[@]}" data.num_workers=2 data.prefetch=3 >"$tmp/w2" 2>&1 || fail "fit (2 workers) failed"
  "$FULGUR" fit "$cfg" "${common[@]}" data.num_workers=2 trainer.seed=7 >"$tmp/s7" 2>&1 || fail "fit (seed 7) failed"
  local d0 d2 d7
  d0=$(digest_of "$tmp/w0"); d2=$(digest_of "$tmp/w2"); d7=$(digest_of "$tmp/s7")
  [ -n "$d0" ] && [ -n "$d2" ] && [ -n "$d7" ] || fail "no weights digest printed"
  [ "$d0" = "$d2" ] || fail "same seed, 0 vs 2 workers: digests differ ($d0 vs $d2)"
  [ "$d0" != "$d7" ] || fail "seed 1 and seed 7 gave the same weights ($d0): the seed is ignored"
  echo "ok: 0 and 2 workers -> $d0; seed 7 -> $d7"
}

expect_exit2() {
  local what=$1 fragment=$2; shift 2
  "$@" >"$tmp/bad" 2>&1
  local rc=$?
  [ $rc -eq 2 ] || { cat "$tmp/bad"; fail "$what: exit $rc, expected 2"; }
  grep -qF -- "$fragment" "$tmp/bad" || { cat "$tmp/bad"; fail "$what: message lacks '$fragment'"; }
  echo "ok: $what -> $(head -c 300 "$tmp/bad")"
}

bad_data() {
  local cfg="$EXAMPLES/fashion_mnist_mlp.ini"
  mkdir -p "$tmp/empty"
  expect_exit2 "missing data folder" "install the Debian package dataset-fashion-mnist" \
    "$FULGUR" fit "$cfg" data.dir="$tmp/empty"
  expect_exit2 "labels outside the model's classes" "label" \
    "$FULGUR" fit "$cfg" data.num_classes=5
  printf 'not an idx file at all' > "$tmp/empty/train-images-idx3-ubyte.gz"
  expect_exit2 "wrong magic" "train-images-idx3-ubyte.gz" \
    "$FULGUR" fit "$cfg" data.dir="$tmp/empty"
  head -c 5000 /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz > "$tmp/empty/train-images-idx3-ubyte.gz"
  cp /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz "$tmp/empty/"
  expect_exit2 "truncated gzip" "train-images-idx3-ubyte.gz" \
    "$FULGUR" fit "$cfg" data.dir="$tmp/empty"
}

# Resume is exact: 2 epochs straight == 1 epoch + resume, and == a resume from inside
# epoch 2 (checkpoint at step 150 of 200): same weights bit for bit, same epoch metrics.
resume() {
  # The cosine period is fixed so the 1-epoch and 150-step runs share the 2-epoch schedule.
  local cfg="$EXAMPLES/fashion_mnist_mlp.ini" common=(trainer.limit_train_batches=100 scheduler.t_max=200
        trainer.log_every_n_steps=25 trainer.default_root_dir="$tmp/runs" trainer.max_epochs=2)
  "$FULGUR" fit "$cfg" "${common[@]}" >"$tmp/straight" 2>&1 || fail "straight run: $(cat "$tmp/straight")"
  "$FULGUR" fit "$cfg" "${common[@]}" trainer.max_epochs=1 trainer.final_checkpoint="$tmp/e1.safetensors" >"$tmp/a" 2>&1 || fail "epoch 1: $(cat "$tmp/a")"
  "$FULGUR" fit "$cfg" "${common[@]}" --ckpt-path "$tmp/e1.safetensors" >"$tmp/b" 2>&1 || fail "resume: $(cat "$tmp/b")"
  "$FULGUR" fit "$cfg" "${common[@]}" trainer.max_steps=150 trainer.final_checkpoint="$tmp/s150.safetensors" >"$tmp/c" 2>&1 || fail "150 steps: $(cat "$tmp/c")"
  "$FULGUR" fit "$cfg" "${common[@]}" --ckpt-path "$tmp/s150.safetensors" >"$tmp/d" 2>&1 || fail "mid-epoch resume: $(cat "$tmp/d")"
  local d0 d1 d2
  d0=$(digest_of "$tmp/straight"); d1=$(digest_of "$tmp/b"); d2=$(digest_of "$tmp/d")
  [ -n "$d0" ] && [ "$d0" = "$d1" ] || fail "1 epoch + resume: digest $d1, straight $d0"
  [ "$d0" = "$d2" ] || fail "resume inside epoch 2: digest $d2, straight $d0"
  grep -qF "resuming at epoch 2, batch 50, step 150" "$tmp/d" || fail "mid-epoch resume did not start at batch 50: $(cat "$tmp/d")"
  local e0 e2
  e0=$(grep '^epoch 2/2  train loss' "$tmp/straight" | awk '{print $5, $7}')
  e2=$(grep '^epoch 2/2  train loss' "$tmp/d" | awk '{print $5, $7}')
  [ -n "$e0" ] && [ "$e0" = "$e2" ] || fail "epoch 2 metrics differ after a mid-epoch resume: '$e0' vs '$e2'"
  ls "$tmp/runs/default" | grep -q version_4 || fail "expected run folders version_0..4 in $tmp/runs/default"
  grep -qF "max_steps = 150" "$tmp/runs/default/version_3/config.ini" || fail "the run folder lacks the resolved config"
  echo "ok: straight, resumed after epoch 1 and resumed at step 150 all give $d0; epoch 2 metrics $e0"
}

# Accumulation is exact: 4 micro-batches of 32 == one batch of 128 (SGD with momentum).
accumulate() {
  command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
  local cfg="$EXAMPLES/fashion_mnist_mlp.ini" common=(trainer.max_epochs=1 trainer.test_after_fit=false
        trainer.check_val_every_n_epoch=0 trainer.num_sanity_val_steps=0 trainer.default_root_dir="$tmp/runs")
  "$FULGUR" fit "$cfg" "${common[@]}" data.batch_size=128 trainer.limit_train_batches=20 \
    trainer.final_checkpoint="$tmp/b128.safetensors" >"$tmp/a" 2>&1 || fail "batch 128: $(cat "$tmp/a")"
  "$FULGUR" fit "$cfg" "${common[@]}" data.batch_size=32 trainer.accumulate_grad_batches=4 \
    trainer.limit_train_batches=80 trainer.final_checkpoint="$tmp/b32x4.safetensors" >"$tmp/b" 2>&1 || fail "32x4: $(cat "$tmp/b")"
  grep -qF "after 20 steps" "$tmp/b" || fail "accumulating 80 batches by 4 should make 20 optimizer steps: $(grep weights "$tmp/b")"
  python3 "$here/../ddp/compare_safetensors.py" "$tmp/b128.safetensors" "$tmp/b32x4.safetensors" 1e-5 || fail "accumulated weights differ"
}

# Trainer keys that shape the run.
trainer_keys() {
  local cfg="$EXAMPLES/fashion_mnist_mlp.ini" root=(trainer.default_root_dir="$tmp/runs")
  "$FULGUR" fit "$cfg" "${root[@]}" trainer.fast_dev_run=3 >"$tmp/f" 2>&1 || fail "fast_dev_run: $(cat "$tmp/f")"
  grep -qF "after 3 steps" "$tmp/f" || fail "fast_dev_run=3 should train 3 steps: $(cat "$tmp/f")"
  grep -qE "^test +loss .*\(192 samples" "$tmp/f" || fail "fast_dev_run=3 should test 3 batches of 64: $(cat "$tmp/f")"
  "$FULGUR" fit "$cfg" "${root[@]}" trainer.max_steps=7 trainer.max_epochs=5 trainer.test_after_fit=false >"$tmp/m" 2>&1 || fail "max_steps"
  grep -qF "after 7 steps" "$tmp/m" || fail "max_steps=7: $(grep weights "$tmp/m")"
  "$FULGUR" fit "$cfg" "${root[@]}" trainer.limit_train_batches=0.01 trainer.test_after_fit=false trainer.max_epochs=1 \
    trainer.check_val_every_n_epoch=0 >"$tmp/l" 2>&1 || fail "limit fraction"
  # the example holds 5000 of the 60000 train samples out (data.val_split): 860 batches of 64
  grep -qF "after 8 steps" "$tmp/l" || fail "1% of 860 batches is 8 steps: $(grep weights "$tmp/l")"
  "$FULGUR" fit "$cfg" "${root[@]}" trainer.max_epochs=1 trainer.limit_train_batches=20 trainer.val_check_interval=5 \
    trainer.limit_val_batches=2 trainer.test_after_fit=false >"$tmp/v" 2>&1 || fail "val_check_interval"
  [ "$(grep -c '^val ' "$tmp/v")" -eq 4 ] || fail "val_check_interval=5 over 20 batches should validate 4 times: $(cat "$tmp/v")"
  "$FULGUR" fit "$cfg" "${root[@]}" trainer.max_epochs=1 trainer.limit_train_batches=30 trainer.log_every_n_steps=10 \
    optimizer.lr=0.01 scheduler.name=step scheduler.interval=step scheduler.step_size=10 scheduler.gamma=0.5 \
    trainer.test_after_fit=false trainer.check_val_every_n_epoch=0 >"$tmp/s" 2>&1 || fail "scheduler: $(cat "$tmp/s")"
  grep -q "step 10/30 .*lr 0.01$" "$tmp/s" && grep -q "step 20/30 .*lr 0.005$" "$tmp/s" && grep -q "step 30/30 .*lr 0.0025$" "$tmp/s" \
    || fail "step schedule (x0.5 every 10 steps) not followed: $(grep step "$tmp/s")"
  "$FULGUR" fit "$cfg" "${root[@]}" trainer.limit_train_batches=5 trainer.gradient_clip_val=0.5 \
    trainer.test_after_fit=false >"$tmp/c" 2>&1 || fail "clipping: $(cat "$tmp/c")"
  "$FULGUR" fit "$cfg" "${root[@]}" scheduler.name=cosine scheduler.step_size=3 >"$tmp/x" 2>&1
  [ $? -eq 2 ] && grep -qF "step_size does not apply to name = cosine" "$tmp/x" || fail "a key of another schedule must be refused: $(cat "$tmp/x")"
  echo "ok: fast_dev_run, max_steps, limit fraction, val_check_interval, step schedule, clipping"
}

# Evaluating checkpoints: test/validate need one; a broken one is refused by name.
eval_checkpoints() {
  local cfg="$EXAMPLES/fashion_mnist_mlp.ini" root=(trainer.default_root_dir="$tmp/runs")
  expect_exit2 "test without a checkpoint" "--ckpt-path" "$FULGUR" test "$cfg" "${root[@]}"
  "$FULGUR" fit "$cfg" "${root[@]}" trainer.limit_train_batches=50 trainer.final_checkpoint="$tmp/w.safetensors" >"$tmp/f" 2>&1 || fail "fit: $(cat "$tmp/f")"
  local fit_acc test_acc
  fit_acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/f")
  "$FULGUR" test "$cfg" "${root[@]}" --ckpt-path "$tmp/w.safetensors" >"$tmp/t" 2>&1 || fail "test: $(cat "$tmp/t")"
  test_acc=$(awk '/^test /{for (i = 1; i <= NF; i++) if ($i == "acc") print $(i + 1)}' "$tmp/t")
  [ -n "$fit_acc" ] && [ "$fit_acc" = "$test_acc" ] || fail "test of the saved weights gives $test_acc, fit ended with $fit_acc"
  printf 'not a checkpoint' > "$tmp/junk.safetensors"
  expect_exit2 "a broken checkpoint" "junk.safetensors" "$FULGUR" test "$cfg" "${root[@]}" --ckpt-path "$tmp/junk.safetensors"
  expect_exit2 "a checkpoint of another model" "fc1.weight" "$FULGUR" test "$cfg" "${root[@]}" \
    layer.fc1.out_features=128 --ckpt-path "$tmp/w.safetensors"
  echo "ok: test --ckpt-path reproduces fit's test accuracy $fit_acc"
}

# The batch-size tuner finds the boundary under a CPU memory limit: N fits, N + 1 does not.
tune() {
  local cfg="$EXAMPLES/fashion_mnist_mlp.ini" lim=backend.memory_limit_mb=20 n
  "$FULGUR" tune batch-size "$cfg" "$lim" >"$tmp/t" 2>&1 || fail "tune: $(cat "$tmp/t")"
  n=$(awk '/^largest batch_size that fits:/{print $NF}' "$tmp/t")
  [ -n "$n" ] && [ "$n" -gt 64 ] || fail "no plausible result: $(cat "$tmp/t")"
  "$FULGUR" fit "$cfg" "$lim" trainer.fast_dev_run=1 data.batch_size="$n" data.eval_batch_size="$n" >"$tmp/a" 2>&1 \
    || fail "batch $n was reported to fit but does not: $(cat "$tmp/a")"
  "$FULGUR" fit "$cfg" "$lim" trainer.fast_dev_run=1 data.batch_size=$((n + 1)) data.eval_batch_size=$((n + 1)) >"$tmp/b" 2>&1
  local rc=$?
  [ $rc -eq 1 ] && grep -qF "memory_limit_mb = 20" "$tmp/b" || fail "batch $((n + 1)) should run out of memory (exit 1): rc $rc, $(cat "$tmp/b")"
  grep -qF "linearly scaled learning rate" "$tmp/t" || fail "no scaled learning rate in: $(cat "$tmp/t")"
  echo "ok: largest batch $n fits, $((n + 1)) does not"
}

# The learning-rate range test suggests a rate inside its range where the loss fell.
tune_lr() {
  "$FULGUR" tune lr "$EXAMPLES/fashion_mnist_mlp.ini" >"$tmp/t" 2>&1 || fail "tune lr: $(cat "$tmp/t")"
  local lr
  lr=$(awk '/^suggested lr:/{print $3}' "$tmp/t")
  [ -n "$lr" ] || fail "no suggestion: $(cat "$tmp/t")"
  awk -v x="$lr" 'BEGIN { exit !(x >= 1e-3 && x <= 0.5) }' || fail "suggested lr $lr is implausible for SGD on this MLP: $(cat "$tmp/t")"
  [ "$(grep -c '^  lr ' "$tmp/t")" -ge 10 ] || fail "the curve is missing: $(cat "$tmp/t")"
  echo "ok: suggested lr $lr"
}

case "${1:-}" in
  accuracy) accuracy "$2" "$3" ;;
  determinism) determinism ;;
  bad_data) bad_data ;;
  resume) resume ;;
  accumulate) accumulate ;;
  trainer_keys) trainer_keys ;;
  eval_checkpoints) eval_checkpoints ;;
  tune) tune ;;
  tune_lr) tune_lr ;;
  *) echo "usage: $0 accuracy CONFIG FLOOR | determinism | bad_data"; exit 2 ;;
esac
