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
python3 - "$tmp/single.safetensors" "$tmp/dp.safetensors" "$tol" <<'PY' ||
import json, struct, sys
def histories(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for name, t in head.items():
        if ".fp8_amax_" in name:
            a, b = t["data_offsets"]
            out[name] = struct.unpack(f"<{(b - a) // 4}f", raw[8 + n + a:8 + n + b])
    return out
one, dp, tol = histories(sys.argv[1]), histories(sys.argv[2]), float(sys.argv[3])
# [2] is step 1's (newest first): the same weights, so the same rows and the same maximum
differ = [k for k in sorted(one) if dp[k][2] != one[k][2]]
worst, where = 0.0, ""
for k in sorted(one):
    for a, b in zip(one[k][:2], dp[k][:2]):
        r = abs(a - b) / a if a > 0 else 1.0
        if r > worst: worst, where = r, k
print(f"{len(one)} histories of one device at batch 8 against dp's at 4 + 4: step 1's amaxes "
      f"equal in {len(one) - len(differ)}; steps 2-3 worst relative difference {worst:.2e} "
      f"({where}), tolerance {tol}")
for k in differ: print(f"  step 1: {k}: one device {one[k][2]!r}, dp {dp[k][2]!r}")
sys.exit(0 if len(one) == 12 and set(one) == set(dp) and not differ and worst <= tol else 1)
PY
  fail "dp's reduced histories are not one device's at the whole batch"
echo "ok: dp on 2 emulated devices max-reduces the amax histories as one device at the whole batch"
