#!/bin/sh
# [backend] cudnn_benchmark on the emulated CUDA backend: CONFIG (a CNN) fitted for BATCHES
# batches in PRECISION three times, twice with the default (cuDNN's heuristics,
# deterministic algorithms first) and once timed (cudnn_benchmark = true). Asserts: the two
# default runs end with the same weights bit for bit (digest); their plugins.log names each
# conv's algorithms "by heuristics", the backward-filter one deterministic (the emulated
# heuristics list the non-deterministic ALGO_0 first, so the deterministic ALGO_1 must have
# been picked over it); the timed run's log names them "by timing (cudnn_benchmark)" with
# a time, the backward filter the non-deterministic ALGO_0 the emulated Find reports
# fastest; each pass's choice is logged once per conv shape (N_CONVS lines, one fewer for
# backward data: the first conv has no dx), not per step;
# the timed run's train loss is within TOL (relative) of the default's.
#   emu_conv_algo.sh FULGUR EMU_PLUGIN_DIR CONFIG PRECISION DATA_DIR BATCHES N_CONVS TOL
# (batches of 16 samples: the emulated convolutions are slow)
set -u
fulgur=$1 plugins=$2 cfg=$3 precision=$4 data=$5 batches=$6 nconv=$7 tol=$8
[ -d "$data" ] || { echo "skip: no $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
run() { # run NAME [KEY=VALUE...]: NAME.out, NAME.log (its plugins.log)
  name=$1
  shift
  "$fulgur" --plugin-path "$plugins" fit "$cfg" backend.name=cuda precision.name="$precision" \
    data.dir="$data" trainer.max_epochs=1 trainer.limit_train_batches="$batches" \
    trainer.limit_val_batches=1 trainer.test_after_fit=false \
    trainer.log_every_n_steps="$batches" data.num_workers=0 data.batch_size=16 \
    trainer.default_root_dir="$tmp/$name" "$@" >"$name.out" 2>&1 ||
    { cat "$name.out"; echo "FAIL: run $name"; exit 1; }
  grep -q "backend cuda" "$name.out" || { cat "$name.out"; echo "FAIL: $name did not use backend cuda"; exit 1; }
  log=$(find "$tmp/$name" -name plugins.log | head -n 1)
  [ -n "$log" ] || { cat "$name.out"; echo "FAIL: $name wrote no plugins.log"; exit 1; }
  cp "$log" "$name.log"
}
digest() { grep -o 'digest [0-9a-f]*' "$1.out"; }
loss() { awk '/train loss/ { for (i = 1; i <= NF; i++) if ($i == "loss") { print $(i + 1); exit } }' "$1.out"; }
lines() { grep -c -- "$2" "$1.log"; }
run fixed1
run fixed2
run timed backend.cudnn_benchmark=true
status=0
check() { # check WHAT COND
  if [ "$2" = 1 ]; then echo "ok: $1"; else echo "FAIL: $1"; status=1; fi
}
d1=$(digest fixed1) d2=$(digest fixed2)
check "the default runs end with the same weights bit for bit ($d1 / $d2)" \
  "$([ -n "$d1" ] && [ "$d1" = "$d2" ] && echo 1)"
for pass in forward backward-data backward-filter; do
  want=$nconv
  [ $pass = backward-data ] && want=$((nconv - 1)) # the first conv computes no dx
  n=$(lines fixed1 "$pass algorithm .* by heuristics")
  check "default: $want $pass choices logged by heuristics (got $n)" "$([ "$n" = "$want" ] && echo 1)"
  n=$(lines timed "$pass algorithm .* ms) by timing (cudnn_benchmark)")
  check "timed: $want $pass choices logged by timing (got $n)" "$([ "$n" = "$want" ] && echo 1)"
done
n=$(lines fixed1 "backward-filter algorithm 1 (.*, deterministic) by heuristics")
check "default: the deterministic backward-filter ALGO_1 ($n of $nconv)" "$([ "$n" = "$nconv" ] && echo 1)"
n=$(lines timed "backward-filter algorithm 0 (.*, non-deterministic, .* ms) by timing")
check "timed: the fastest backward-filter ALGO_0, non-deterministic ($n of $nconv)" \
  "$([ "$n" = "$nconv" ] && echo 1)"
a=$(loss fixed1) b=$(loss timed)
check "train loss default $a, timed $b within $tol" \
  "$(awk -v a="$a" -v b="$b" -v t="$tol" 'BEGIN { d = a - b; if (d < 0) d = -d; if (a != "" && b != "" && d <= t * (a < 0 ? -a : a)) print 1 }')"
[ $status = 0 ] || { grep -h "conv2d" fixed1.log timed.log; cat timed.out; }
exit $status
