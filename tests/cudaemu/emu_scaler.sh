#!/bin/sh
# precision.fp16-mixed's loss scaler on the emulated device (backend ops loss_scale_update,
# softmax_xent_backward_scaled, the fused updates' skip flag): `fulgur fit` of CONFIG
# (OPTIMIZER sgd | adamw) for A and then B batches of one epoch, clipping by norm, no log
# step before the epoch's end.
# 1. Overflows forced all along (init_scale 2^24 and growth_interval 1: the scale doubles
#    after every clean step until the loss gradient overflows f16): uncaptured and captured
#    (`[backend] cuda_graphs`: 2 eager steps, the third captured, the rest replayed) end
#    with the same weights (digest), the same final scale and skipped count, the same
#    epoch losses; steps were skipped among the replayed ones (more skipped in B than in
#    A); the B - A steady steps hold no host synchronisation, captured or not; the device
#    path counts every step ("after B steps"), the host path (FULGUR_TEST_UNFUSED_STEP=1:
#    the scaler on the host) counts only the steps it took (B minus its skipped ones).
# 2. No overflow (the default scaler keys): the device path ends with the host path's
#    weights bit for bit, none skipped.
# With EPS, every run has [model] label_smoothing = EPS (classifier_smoothed: the gradient
# from the logits, times the device scaler's scale read on the device); 3. the no-overflow
# run's weights then differ from the same run without the key (the key is not ignored).
#   emu_scaler.sh FULGUR EMU_PLUGIN_DIR CONFIG OPTIMIZER DATA_DIR A B [EPS]
set -u
fulgur=$1 plugins=$2 cfg=$3 optimizer=$4 data=$5 A=$6 B=$7 eps=${8:-}
[ -d "$data" ] || { echo "skip: no $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
awk -v opt="$optimizer" '
  /^\[/ { in_opt = ($0 == "[optimizer]") }
  in_opt && /^(name|lr|momentum|weight_decay|beta1|beta2|eps|nesterov|dampening) *=/ { next }
  { print }
  $0 == "[optimizer]" {
    if (opt == "sgd") print "name = sgd\nlr = 0.02\nmomentum = 0.9\nweight_decay = 0.0001"
    else print "name = adamw\nlr = 0.001\nweight_decay = 0.01"
  }' "$cfg" >run.ini
forced="precision.init_scale=16777216 precision.growth_interval=1"
run() { # run NAME BATCHES [KEY=VALUE...]: NAME.out, NAME.syncs (env from ENV)
  name=$1 batches=$2
  shift 2
  # shellcheck disable=SC2086
  env ${ENV:-} FGEMU_SYNC_LOG="$tmp/$name.syncs" "$fulgur" --plugin-path "$plugins" fit run.ini \
    backend.name=cuda precision.name=fp16-mixed data.dir="$data" trainer.max_epochs=1 \
    trainer.limit_train_batches="$batches" trainer.limit_val_batches=2 \
    trainer.test_after_fit=false trainer.log_every_n_steps=1000 \
    trainer.gradient_clip_val=0.5 data.num_workers=0 data.drop_last=true \
    trainer.enable_progress_bar=false trainer.default_root_dir="$tmp/runs" \
    ${eps:+model.label_smoothing=$eps} "$@" >"$name.out" 2>&1 ||
    { cat "$name.out"; echo "FAIL: run $name"; exit 1; }
  grep -q "backend cuda" "$name.out" || { cat "$name.out"; echo "FAIL: $name did not use backend cuda"; exit 1; }
  [ -s "$name.syncs" ] || { cat "$name.out"; echo "FAIL: $name wrote no FGEMU_SYNC_LOG"; exit 1; }
}
count() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1.syncs"; }
digest() { grep -o 'digest [0-9a-f]*' "$1.out"; }
scale_line() { grep '^loss scale: ' "$1.out"; }
skipped() { sed -n 's/^loss scale: [^,]*, \([0-9]*\) step(s) skipped.*/\1/p' "$1.out"; }
steps_done() { sed -n 's/.*digest [0-9a-f]*, after \([0-9]*\) steps.*/\1/p' "$1.out"; }
# shellcheck disable=SC2086
{ run eagerA "$A" $forced; run eagerB "$B" $forced
  run graphA "$A" $forced backend.cuda_graphs=true; run graphB "$B" $forced backend.cuda_graphs=true
  ENV=FULGUR_TEST_UNFUSED_STEP=1 run hostB "$B" $forced
  run plain "$B"; ENV=FULGUR_TEST_UNFUSED_STEP=1 run plainhost "$B"; }
status=0
bad() { echo "FAIL: $*"; status=1; }
for r in eagerA eagerB graphA graphB plain; do
  grep -q '^loss scaler: on the device' "$r.out" || bad "$r does not say the scaler ran on the device"
done
for r in hostB plainhost; do
  grep -q '^loss scaler: on the device' "$r.out" && bad "$r (FULGUR_TEST_UNFUSED_STEP) says the scaler ran on the device"
done
for n in A B; do
  we=$(digest eager$n) wg=$(digest graph$n)
  [ -n "$we" ] && [ "$we" = "$wg" ] || bad "$n: weights uncaptured '$we', captured '$wg' (want bit for bit)"
  [ "$(scale_line eager$n)" = "$(scale_line graph$n)" ] ||
    bad "$n: uncaptured '$(scale_line eager$n)', captured '$(scale_line graph$n)'"
  le=$(grep '^epoch .* train loss' eager$n.out | sed 's/(.*//') lg=$(grep '^epoch .* train loss' graph$n.out | sed 's/(.*//')
  [ -n "$le" ] && [ "$le" = "$lg" ] || bad "$n: epoch losses uncaptured '$le', captured '$lg'"
done
echo "forced overflows: $(scale_line eagerA) ($A batches); $(scale_line eagerB) ($B batches)"
sa=$(skipped eagerA) sb=$(skipped eagerB) sh=$(skipped hostB)
[ -n "$sa" ] && [ -n "$sb" ] && [ "$sb" -gt "$sa" ] && [ "$sa" -gt 0 ] ||
  bad "skipped steps: $A batches '$sa', $B batches '$sb': want some, and some among the replayed steps"
grep -q "cuda graphs: step 3 of the fit captured, $((B - 3)) step(s) replayed" graphB.out ||
  bad "graphB does not say it replayed $((B - 3)) steps"
[ "$(steps_done eagerB)" = "$B" ] || bad "device path: after $(steps_done eagerB) steps, want $B (a skipped step counts)"
[ -n "$sh" ] && [ "$sh" -gt 0 ] && [ "$(steps_done hostB)" = "$((B - sh))" ] ||
  bad "host path: after $(steps_done hostB) steps with $sh skipped, want $B minus the skipped"
steps=$((B - A))
for kind in host_syncs cudaStreamSynchronize cudaDeviceSynchronize copy_to_pageable copy_from_pageable cudaEventSynchronize; do
  d=$(( $(count graphB $kind) - $(count graphA $kind) ))
  e=$(( $(count eagerB $kind) - $(count eagerA $kind) ))
  echo "$kind in $steps steady-state steps: captured $d, uncaptured $e"
  [ "$d" -eq 0 ] || bad "$d $kind in $steps replayed steps (want 0)"
  [ "$e" -eq 0 ] || bad "$e $kind in $steps uncaptured steps (want 0)"
done
wp=$(digest plain) wh=$(digest plainhost)
[ -n "$wp" ] && [ "$wp" = "$wh" ] || bad "no overflow: weights device path '$wp', host path '$wh' (want bit for bit)"
[ "$(skipped plain)" = 0 ] && [ "$(skipped plainhost)" = 0 ] || bad "the default scale overflowed: the no-skip comparison proves nothing"
[ "$(scale_line plain)" = "$(scale_line plainhost)" ] || bad "no overflow: '$(scale_line plain)' against '$(scale_line plainhost)'"
if [ -n "$eps" ]; then
  smooth=$eps eps=
  run unsmoothed "$B"
  eps=$smooth
  [ "$(digest unsmoothed)" != "$wp" ] || bad "label_smoothing = $eps: the weights equal the unsmoothed run's"
fi
[ $status = 0 ] && echo "ok: captured = uncaptured with $sb skipped steps; no-overflow device = host ($wp)"
[ $status = 0 ] || cat eagerB.out graphB.out hostB.out
exit $status
