#!/bin/sh
# [backend] cuda_graphs refused at setup, before any step, with a message naming the key,
# wherever a step cannot be captured (never a crash, never a silently eager run): each case
# below must fail `fulgur fit` with its text.
#   emu_graphs_refusals.sh FULGUR EMU_PLUGIN_DIR CONFIG [DATA_DIR]
set -u
fulgur=$1 plugins=$2 cfg=$3
data=${4:-/usr/share/datasets/fashion-mnist}
[ -d "$data" ] || { echo "skip: no $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
status=0 n=0
# refused WANT [ENV=V ...] -- [KEY=VALUE...]: the fit must fail and print WANT
refused() {
  want=$1
  shift
  envs=""
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs="$envs $1"; shift; done
  shift
  n=$((n + 1))
  # shellcheck disable=SC2086
  env $envs "$fulgur" --plugin-path "$plugins" fit "$cfg" backend.name=cuda \
    backend.cuda_graphs=true data.dir="$data" trainer.max_epochs=1 \
    trainer.limit_train_batches=4 trainer.limit_val_batches=1 trainer.test_after_fit=false \
    data.num_workers=0 data.drop_last=true trainer.default_root_dir="$tmp/runs" "$@" \
    >out.$n 2>&1
  rc=$?
  if [ $rc -eq 0 ] || ! grep -qF -- "$want" out.$n; then
    cat out.$n; echo "FAIL: case $n ($*): exit $rc, want a failure saying '$want'"; status=1
  elif grep -q "weights:" out.$n; then
    cat out.$n; echo "FAIL: case $n ($*) trained before refusing"; status=1
  else
    echo "ok: case $n ($*): $(grep -F -m1 -- "$want" out.$n)"
  fi
}
refused "[backend] cuda_graphs: a CUDA key: backend cpu cannot capture" -- backend.name=cpu
# fp16-mixed's scaler on the host (here: the update unfused, so it cannot run on the
# device); on the device it is captured (emu_scaler.sh)
refused "[backend] cuda_graphs: [precision] fp16-mixed: dynamic loss scaling checks the gradients for inf/NaN on the host" \
  FULGUR_TEST_UNFUSED_STEP=1 -- precision.name=fp16-mixed
refused "[backend] cuda_graphs: [data] drop_last is false" -- data.drop_last=false
refused "[backend] cuda_graphs: trainer.accumulate_grad_batches = 2" -- \
  trainer.accumulate_grad_batches=2
refused "[backend] cuda_graphs: the optimizer update is not fused" \
  FULGUR_TEST_UNFUSED_STEP=1 -- trainer.gradient_clip_val=0
refused "[backend] cuda_graphs: [model] ignore_index" -- model.ignore_index=3
# a batch norm (after the logits here) in batch groups adds the groups' sums on the host
refused "[backend] cuda_graphs: [model] batch_groups = 2: batch norm adds its groups' sums on the host" \
  -- model.batch_groups=2 layer.zbn.type=batchnorm
exit $status
