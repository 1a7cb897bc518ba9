#!/bin/sh
# [model] sync_batchnorm = true on the emulated CUDA backend, which lacks the ABI 1.8 split
# batch-norm ops (batchnorm_stats, _apply, _backward_reduce, _backward_apply): `fulgur
# check` refuses the config at setup (exit 2) naming each of them, and passes it without the
# key (the fused batch norm the backend has).
#   emu_sync_batchnorm.sh FULGUR EMU_PLUGIN_DIR CONFIG
set -u
fulgur=$1 plugins=$2 cfg=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' -e '^threads' "$cfg" >single.ini
rc=0
"$fulgur" --plugin-path "$plugins" check single.ini backend.name=cuda strategy.name=single \
  model.sync_batchnorm=true >on.out 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat on.out; echo "FAIL: exit $rc with sync_batchnorm on backend cuda, want 2"; exit 1; }
for op in batchnorm_stats batchnorm_apply batchnorm_backward_reduce batchnorm_backward_apply; do
  grep -q "$op" on.out || { cat on.out; echo "FAIL: the refusal does not name $op"; exit 1; }
done
"$fulgur" --plugin-path "$plugins" check single.ini backend.name=cuda strategy.name=single \
  >off.out 2>&1 || { cat off.out; echo "FAIL: without sync_batchnorm the check failed"; exit 1; }
grep -q "backend cuda" off.out || { cat off.out; echo "FAIL: the check did not use backend cuda"; exit 1; }
echo "ok: sync_batchnorm refused on backend cuda: $(grep -m1 batchnorm_stats on.out)"
