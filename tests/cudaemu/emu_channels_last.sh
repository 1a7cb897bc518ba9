#!/bin/sh
# [model] memory_format = channels_last on the emulated CUDA backend (layout.h). CONFIG (a
# CNN ending in flatten and linear layers) is fitted for BATCHES batches of 16 in PRECISION
# twice, contiguous (NCHW) and channels_last, each saving its weights. Asserts:
#   - the channels_last run says which layers run NHWC and where the transposes are
#     (NCHW -> NHWC at the first conv, NHWC -> NCHW at the flatten), its plugins.log names
#     NHWC convolutions, and the contiguous run's output and log name neither;
#   - both runs end with the same weights bit for bit (the emulated cuDNN sums in one order
#     whatever the layout; on a GPU the orders differ), and the train and val losses are
#     within TOL (relative) of each other (the check a GPU run would keep);
#   - the channels_last checkpoint tested (2 batches of the test split) contiguous and
#     channels_last on the emulated device and contiguous on the CPU backend gives the same
#     accuracy and test losses within PRED_TOL: the weights mean the same in either layout
#     (a flatten without its transpose feeds the linear layer another feature order);
#   - the contiguous checkpoint tested channels_last gives the contiguous run's numbers;
#   - on the CPU backend the key fails at setup (exit 2) naming [model] memory_format and
#     the backend, before any step.
#   emu_channels_last.sh FULGUR EMU_PLUGIN_DIR CONFIG PRECISION DATA_DIR BATCHES TOL PRED_TOL
set -u
fulgur=$1 plugins=$2 cfg=$3 precision=$4 data=$5 batches=$6 tol=$7 ptol=$8
[ -d "$data" ] || { echo "skip: no $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
status=0
check() { # check WHAT COND
  if [ "$2" = 1 ]; then echo "ok: $1"; else echo "FAIL: $1"; status=1; fi
}
common="data.dir=$data data.num_workers=0 data.batch_size=16 trainer.default_root_dir=$tmp/runs"
fit() { # fit NAME FORMAT: NAME.out, NAME.log (its plugins.log), NAME.safetensors
  name=$1 format=$2
  # shellcheck disable=SC2086
  "$fulgur" --plugin-path "$plugins" fit "$cfg" backend.name=cuda precision.name="$precision" \
    model.memory_format="$format" trainer.max_epochs=1 trainer.limit_train_batches="$batches" \
    trainer.limit_val_batches=1 trainer.test_after_fit=false \
    trainer.log_every_n_steps="$batches" trainer.final_checkpoint="$tmp/$name.safetensors" \
    trainer.name="$name" $common >"$name.out" 2>&1 ||
    { cat "$name.out"; echo "FAIL: fit $name"; exit 1; }
  grep -q "backend cuda" "$name.out" || { cat "$name.out"; echo "FAIL: $name did not use backend cuda"; exit 1; }
  log=$(find "$tmp/runs/$name" -name plugins.log | head -n 1)
  [ -n "$log" ] || { cat "$name.out"; echo "FAIL: $name wrote no plugins.log"; exit 1; }
  cp "$log" "$name.log"
}
evaluate() { # evaluate NAME BACKEND FORMAT CKPT: NAME.out of fulgur test
  # shellcheck disable=SC2086
  "$fulgur" --plugin-path "$plugins" test "$cfg" backend.name="$2" precision.name="$precision" \
    model.memory_format="$3" trainer.limit_test_batches=2 trainer.name="$1" $common \
    --ckpt-path "$tmp/$4.safetensors" >"$1.out" 2>&1 || { cat "$1.out"; echo "FAIL: test $1"; exit 1; }
}
loss() { awk -v k="$2" '$0 ~ k { for (i = 1; i <= NF; i++) if ($i == "loss") { print $(i + 1); exit } }' "$1"; }
acc() { awk '/^test/ { for (i = 1; i <= NF; i++) if ($i == "acc") { print $(i + 1); exit } }' "$1"; }
near() { # near A B TOL: 1 when |A - B| <= TOL |A|
  awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; if (a != "" && b != "" && d <= t * (a < 0 ? -a : a)) print 1 }'
}

fit contig contiguous
fit last channels_last
check "the channels_last run lists its NHWC layers" \
  "$(grep -q 'memory_format = channels_last: NHWC activations in \[layer.conv1\]' last.out && echo 1)"
check "the channels_last run transposes at the first conv and at flatten" \
  "$(grep -q 'NCHW -> NHWC at \[layer.conv1\]; NHWC -> NCHW at \[layer.flatten\]' last.out && echo 1)"
check "the contiguous run says nothing of a memory format" \
  "$(grep -q 'memory_format' contig.out || echo 1)"
n=$(grep -c 'conv2d .* NHWC:' last.log) m=$(grep -c 'NHWC' contig.log)
check "plugins.log: NHWC convolutions channels_last ($n lines), none contiguous ($m)" \
  "$([ "$n" -gt 0 ] && [ "$m" = 0 ] && echo 1)"
digest() { grep -o 'digest [0-9a-f]*' "$1.out" | cut -d' ' -f2; }
d1=$(digest contig) d2=$(digest last)
# the emulated cuDNN sums each output in one order whatever the layout, and the transposes
# move bits: on this device the two layouts train to the same weights (a GPU's differ)
check "the same weights after $batches steps on the emulated device: contiguous $d1, channels_last $d2" \
  "$([ -n "$d1" ] && [ "$d1" = "$d2" ] && echo 1)"
for what in "train loss" "^val "; do
  a=$(loss contig.out "$what") b=$(loss last.out "$what")
  check "$precision $what: contiguous $a, channels_last $b within $tol" "$(near "$a" "$b" "$tol")"
done

evaluate last_on_last cuda channels_last last
evaluate last_on_nchw cuda contiguous last
evaluate last_on_cpu cpu contiguous last
evaluate contig_on_last cuda channels_last contig
evaluate contig_on_nchw cuda contiguous contig
ref=$(loss last_on_cpu.out "^test") refacc=$(acc last_on_cpu.out)
for run in last_on_last last_on_nchw; do
  l=$(loss $run.out "^test") a=$(acc $run.out)
  check "channels_last checkpoint, $run: test loss $l, acc $a; CPU contiguous $ref, $refacc (tol $ptol)" \
    "$([ -n "$a" ] && [ "$a" = "$refacc" ] && near "$ref" "$l" "$ptol")"
done
l=$(loss contig_on_last.out "^test") r=$(loss contig_on_nchw.out "^test")
check "contiguous checkpoint: channels_last test loss $l, contiguous $r (tol $ptol)" \
  "$([ "$(acc contig_on_last.out)" = "$(acc contig_on_nchw.out)" ] && near "$r" "$l" "$ptol")"

"$fulgur" check "$cfg" backend.name=cpu model.memory_format=channels_last $common >cpu.out 2>&1
rc=$?
check "the CPU backend refuses channels_last at setup (exit $rc)" \
  "$([ $rc = 2 ] && grep -q 'backend.cpu lacks: transpose_batched(.*) for \[model\] memory_format = channels_last' cpu.out && echo 1)"
[ $status = 0 ] || cat last.out cpu.out
exit $status
