#!/bin/sh
# fp8-mixed's amax histories under strategy.dp (one process, 2 emulated devices) on
# tests/cudaemu/fp8_gpt_lm.ini (one GPT-2 block, four fp8 projections, 12 histories of 16):
#   - the dp run says its histories are max-reduced across the 2 replicas, a single run
#     says nothing of the kind;
#   - after 3 steps at batch 8 (4 + 4) every history equals one device's at batch 8:
#     step 1's entries exactly, all 12 (the same weights give the same rows; dp scales
#     each shard's loss gradient by its share, so dy's amax is the whole batch's too),
#     steps 2 and 3 within REL_TOL (the weights differ in the last bits: replica 0's
#     gradient plus replica 1's is not the one device's sum).
#     Replica 0's own histories (what dp copied to the other replica before the max
#     reduction, and a build without it) miss step 1's: each is its half's amax.
#   emu_fp8_dp.sh FULGUR EMU_PLUGIN_DIR CONFIG REL_TOL
# Exits 77 (skipped) without Debian's fortunes.
set -u
fulgur=$1 plugins=$2 cfg=$3 tol=$4
[ -d /usr/share/games/fortunes ] || { echo "skip: no /usr/share/games/fortunes"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { # NAME ARGS...: 3 steps at batch 8 on the emulated backend, output in $tmp/NAME.out
  name=$1; shift
  rc=0
  "$fulgur" --plugin-path "$plugins" fit "$cfg" trainer.default_root_dir="$tmp/$name" \
    trainer.final_checkpoint="$tmp/$name.safetensors" precision.amax_history_len=16 \
    trainer.log_every_n_steps=4 trainer.max_steps=3 data.batch_size=8 "$@" \
    >"$tmp/$name.out" 2>&1 || rc=$?
  [ $rc = 0 ] || { cat "$tmp/$name.out"; fail "the $name run exited $rc"; }
}
run single
FGEMU_DEVICES=2 run dp strategy.name=dp
grep -qF "strategy dp" "$tmp/dp.out" || { cat "$tmp/dp.out"; fail "the dp run is not strategy dp"; }
grep -qF "fp8: the amax histories (192 floats) are max-reduced across the 2 replicas once per optimizer step (through the host, after a queue sync)" \
  "$tmp/dp.out" || { cat "$tmp/dp.out"; fail "dp does not say it reduces the histories"; }
grep -qF "max-reduced" "$tmp/single.out" && fail "one device claims a reduction"
python3 "$(dirname "$0")/fp8_histories_cmp.py" "$tmp/single.safetensors" "$tmp/dp.safetensors" \
  "$tol" 12 "dp at 4 + 4" ||
  fail "dp's reduced histories are not one device's at the whole batch"
echo "ok: dp on 2 emulated devices max-reduces the amax histories as one device at the whole batch"
