#!/bin/sh
# fp8-mixed's amax histories on the emulated CUDA device (tests/cudaemu/fp8_gpt_lm.ini, one
# GPT-2 block whose four projections and their amax histories are fp8's; amax_history_len =
# 16), read from the final checkpoint's fp8_amax_* tensors:
#   - accumulate_grad_batches = 2: after 5 optimizer steps (10 micro-batches) every history
#     holds exactly 5 amaxes ([0..4] > 0, [5..15] 0): it advances once per step, not per
#     micro-batch;
#   - ddp on 2 ranks (emulated NCCL) at batch 4: the run says the histories are
#     max-reduced across the ranks, on the device; after 12 steps every x and w history
#     equals the one device's at batch 8 (the same samples, each amax the max over all of
#     them) within REL_TOL; rank 0's own amaxes (no reduction) miss it. dy's histories are
#     left out: each rank's loss is its own batch's mean, so its dy is twice the one device's.
#   emu_fp8_steps.sh MPIRUN FULGUR EMU_PLUGIN_DIR CONFIG REL_TOL
# Exits 77 (skipped) without Debian's fortunes or mpirun.
set -u
mpirun=$1 fulgur=$2 plugins=$3 cfg=$4 tol=$5
[ -d /usr/share/games/fortunes ] || { echo "skip: no /usr/share/games/fortunes"; exit 77; }
command -v "$mpirun" >/dev/null 2>&1 || { echo "skip: no mpirun"; exit 77; }
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
fp8="precision.amax_history_len=16 trainer.log_every_n_steps=4"
run() { # NAME ARGS...: a fit on the emulated backend, its output in $tmp/NAME.out
  name=$1; shift
  rc=0
  "$fulgur" --plugin-path "$plugins" fit "$cfg" trainer.default_root_dir="$tmp/$name" \
    trainer.final_checkpoint="$tmp/$name.safetensors" $fp8 "$@" >"$tmp/$name.out" 2>&1 || rc=$?
  [ $rc = 0 ] || { cat "$tmp/$name.out"; fail "the $name run exited $rc"; }
}
cat >"$tmp/read.py" <<'PY'
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
PY
# gradient accumulation: one history entry per optimizer step
run accum trainer.max_steps=5 trainer.accumulate_grad_batches=2
python3 - "$tmp/accum.safetensors" <<'PY' || fail "the histories do not advance once per step"
import sys; sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0]); from read import histories
h = histories(sys.argv[1])
bad = {k: sum(1 for x in v if x > 0) for k, v in h.items()
       if not (all(x > 0 for x in v[:5]) and all(x == 0 for x in v[5:]))}
print(f"{len(h)} histories after 5 steps of 2 micro-batches; entries recorded: "
      f"{sorted(set(sum(1 for x in v if x > 0) for v in h.values()))}")
for k, n in sorted(bad.items()): print(f"  {k}: {n} entries recorded, want 5")
sys.exit(0 if len(h) == 12 and not bad else 1)
PY
# ddp: amaxes max-reduced across the ranks
run single trainer.max_steps=12 data.batch_size=8
FGEMU_DEVICES=2 "$mpirun" $root --oversubscribe -n 2 -x FGEMU_DEVICES \
  "$fulgur" --plugin-path "$plugins" fit "$cfg" strategy.name=ddp comm.name=nccl \
  comm.timeout_s=120 trainer.default_root_dir="$tmp/ddp" \
  trainer.final_checkpoint="$tmp/ddp.safetensors" trainer.max_steps=12 data.batch_size=4 \
  $fp8 >"$tmp/ddp.out" 2>&1 || { cat "$tmp/ddp.out"; fail "ddp with the emulated comm.nccl"; }
grep -qF "fp8: the amax histories (" "$tmp/ddp.out" &&
  grep -qF "are max-reduced across the 2 ranks once per optimizer step (ordered on the device)" \
    "$tmp/ddp.out" || { cat "$tmp/ddp.out"; fail "ddp does not say it reduces the histories"; }
grep -qF "max-reduced" "$tmp/single.out" && fail "one process claims a reduction"
python3 - "$tmp/single.safetensors" "$tmp/ddp.safetensors" "$tol" <<'PY' ||
import sys; sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0]); from read import histories
one, ddp, tol = histories(sys.argv[1]), histories(sys.argv[2]), float(sys.argv[3])
worst, where, n = 0.0, "", 0
for k in sorted(one):
    if k.endswith("_dy"): continue
    for a, b in zip(one[k], ddp[k]):
        if a <= 0: continue
        n += 1
        r = abs(a - b) / a
        if r > worst: worst, where = r, k
print(f"{n} x and w amaxes of one device at batch 8 against ddp's at 2 x 4: worst relative "
      f"difference {worst:.2e} ({where}), tolerance {tol}")
sys.exit(0 if n >= 12 * 8 and worst <= tol else 1)
PY
  fail "ddp's reduced histories are not one device's at the whole batch"
echo "ok: histories advance once per step under accumulation; ddp's equal one device's"
