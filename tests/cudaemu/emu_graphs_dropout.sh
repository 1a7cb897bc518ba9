#!/bin/sh
# [backend] cuda_graphs with dropout layers on the emulated CUDA backend (ABI 1.10's
# dropout_forward_dev: each dropout layer's step offset is a device counter its op advances).
#   emu_graphs_dropout.sh FULGUR EMU_PLUGIN_DIR MODEL PRECISION OPTIMIZER DATA_DIR A B [KEY=VALUE...]
# MODEL: mlp (examples/fashion_mnist_mlp.ini with dropout 0.5 after relu1 and 0.2 after
# relu2) or lm (examples/char_lm.ini with dropout 0.1 on the embeddings, nanoGPT's `drop`).
# Asserts, on that model:
# - emu_graphs.sh's checks: captured A- and B-step fits end with the uncaptured fits'
#   weights bit for bit, B - 3 steps replayed, 0 host syncs of any kind in the B - A
#   steady replayed steps;
# - a fit of B steps logging every step: every logged loss of the captured fit equals the
#   uncaptured one's digit for digit, and the weights too (a replay that drew the captured
#   step's mask again, or a counter advanced twice, gives other losses from step 4 on);
# - the dropout is not a no-op: the same fit without the dropout layers ends elsewhere;
# - (lm) attention dropout (transformer_block attn_dropout), whose offset is still passed by
#   value, is refused at setup with its message.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
fulgur=$1 plugins=$2 model=$3 precision=$4 optimizer=$5 data=$6 A=$7 B=$8
shift 8
[ -d "$data" ] || { echo "skip: no $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $model in
  mlp) base=$root/examples/fashion_mnist_mlp.ini
       # dropout before fc2 and before fc3
       awk '$0 == "[layer.fc2]" { print "[layer.drop1]\ntype = dropout\np = 0.5\n" }
            $0 == "[layer.fc3]" { print "[layer.drop2]\ntype = dropout\np = 0.2\n" }
            { print }' "$base" >"$tmp/model.ini" ;;
  lm)  base=$root/examples/char_lm.ini
       awk '$0 == "[layer.h]" { print "[layer.drop]\ntype = dropout\np = 0.1\n" }
            { print }' "$base" >"$tmp/model.ini" ;;
  *)   echo "MODEL: mlp or lm, not $model"; exit 2 ;;
esac
n=$(grep -c "^type = dropout" "$tmp/model.ini")
[ "$n" -ge 1 ] || { echo "FAIL: no dropout layer inserted into $base"; exit 1; }
status=0
sh "$here/emu_graphs.sh" "$fulgur" "$plugins" "$tmp/model.ini" "$precision" "$optimizer" \
  "$data" "$A" "$B" "$@" || status=1

# The same [optimizer] rewrite as emu_graphs.sh, then fits logging every step.
rewrite_opt() { # IN OUT
  awk -v opt="$optimizer" '
    /^\[/ { in_opt = ($0 == "[optimizer]") }
    in_opt && /^(name|lr|momentum|weight_decay|beta1|beta2|eps|nesterov|dampening) *=/ { next }
    { print }
    $0 == "[optimizer]" {
      if (opt == "sgd") print "name = sgd\nlr = 0.02\nmomentum = 0.9\nweight_decay = 0.0001"
      else print "name = adamw\nlr = 0.001\nweight_decay = 0.01"
    }' "$1" >"$2"
}
rewrite_opt "$tmp/model.ini" "$tmp/run.ini"
rewrite_opt "$base" "$tmp/nodrop.ini"
fit() { # NAME CONFIG [KEY=VALUE...]: NAME.out, the run's metrics in NAME.csv
  name=$1 cfg=$2
  shift 2
  "$fulgur" --plugin-path "$plugins" fit "$cfg" backend.name=cuda precision.name="$precision" \
    data.dir="$data" trainer.max_epochs=1 trainer.limit_train_batches="$B" \
    trainer.limit_val_batches=2 trainer.test_after_fit=false trainer.log_every_n_steps=1 \
    trainer.gradient_clip_val=0.5 data.num_workers=0 data.drop_last=true \
    trainer.default_root_dir="$tmp/runs.$name" callback.csv_logger.filename=metrics.csv \
    "$@" >"$tmp/$name.out" 2>&1 ||
    { cat "$tmp/$name.out"; echo "FAIL: fit $name"; exit 1; }
  csv=$(find "$tmp/runs.$name" -name metrics.csv | head -1)
  [ -n "$csv" ] || { cat "$tmp/$name.out"; echo "FAIL: $name wrote no metrics.csv"; exit 1; }
  # the loss columns of the rows that have a train loss, in order
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /loss/) c[i] = 1; next }
           { row = ""; for (i = 1; i <= NF; i++) if (i in c) row = row " " $i; print row }' \
    "$csv" >"$tmp/$name.csv"
}
digest() { grep -o 'digest [0-9a-f]*' "$tmp/$1.out" | head -1; }
# shellcheck disable=SC2068
fit eager "$tmp/run.ini" $@
fit graph "$tmp/run.ini" backend.cuda_graphs=true $@
fit nodrop "$tmp/nodrop.ini" backend.cuda_graphs=true $@
rows=$(grep -c . "$tmp/eager.csv")
if [ "$rows" -lt "$B" ]; then
  cat "$tmp/eager.csv"; echo "FAIL: $rows metrics rows for $B steps logged every step"; status=1
elif ! cmp -s "$tmp/eager.csv" "$tmp/graph.csv"; then
  diff "$tmp/eager.csv" "$tmp/graph.csv" | head -20
  echo "FAIL: the captured fit's logged losses differ from the uncaptured fit's"; status=1
else
  echo "ok: $rows logged rows of losses equal, captured and uncaptured ($(sed -n "${rows}p" "$tmp/graph.csv"))"
fi
we=$(digest eager) wg=$(digest graph) wn=$(digest nodrop)
if [ -z "$we" ] || [ "$we" != "$wg" ]; then
  echo "FAIL: logging every step: weights uncaptured '$we', captured '$wg'"; status=1
else
  echo "ok: logging every step: the same weights captured and uncaptured ($wg)"
fi
grep -q "cuda graphs: step 3 of the fit captured, $((B - 3)) step(s) replayed" "$tmp/graph.out" ||
  { echo "FAIL: the logging fit did not replay $((B - 3)) steps"; status=1; }
if [ "$wn" = "$wg" ]; then
  echo "FAIL: the fit without dropout ends with the same weights ($wn): dropout did nothing"
  status=1
else
  echo "ok: without the dropout layers the weights differ ($wn)"
fi
if [ "$model" = lm ]; then
  # shellcheck disable=SC2068
  if "$fulgur" --plugin-path "$plugins" fit "$tmp/nodrop.ini" backend.name=cuda \
       backend.cuda_graphs=true layer.h.attn_dropout=0.1 data.dir="$data" \
       trainer.max_epochs=1 trainer.limit_train_batches=2 data.num_workers=0 \
       data.drop_last=true trainer.default_root_dir="$tmp/runs.attn" $@ >"$tmp/attn.out" 2>&1 ||
     ! grep -qF "[backend] cuda_graphs: [layer.h]: attention dropout" "$tmp/attn.out"; then
    cat "$tmp/attn.out"; echo "FAIL: attention dropout under cuda_graphs not refused"; status=1
  else
    echo "ok: $(grep -F -m1 "attention dropout" "$tmp/attn.out")"
  fi
fi
[ $status = 0 ] || cat "$tmp/graph.out"
exit $status
