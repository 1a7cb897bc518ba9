#!/bin/sh
# fp8-mixed's amax histories on the emulated CUDA device (tests/cudaemu/fp8_gpt_lm.ini, one
# GPT-2 block whose four projections and their amax histories are fp8's; amax_history_len =
# 16), read from the final checkpoint's fp8_amax_* tensors:
#   - a Llama block's five projections run in fp8 (the plan line), its MLP's stay bf16 at
#     mlp_hidden = 168 (not a multiple of 16);
#   - a Llama (fp8_llama_lm.ini) trained 2 steps in fp8 exports to Hugging Face's layout
#     without its fp8 state, and init_from loads that export in fp8-mixed;
#   - accumulate_grad_batches = 2: after 5 optimizer steps (10 micro-batches) every history
#     holds exactly 5 amaxes ([0..4] > 0, [5..15] 0): it advances once per step, not per
#     micro-batch;
#   - ddp on 2 ranks (emulated NCCL) at batch 4: the run says the histories are
#     max-reduced across the ranks, on the device; after 3 steps every history equals the
#     one device's at batch 8 (the same samples, each amax the max over all of them): step
#     1's entries exactly (the same weights give the same rows; dy's amax is exactly twice
#     the one device's, each rank's loss being the mean over its own half), steps 2 and 3's
#     within REL_TOL (the weights differ in the last bits). Rank 0's own amaxes (a build
#     without the reduction) miss step 1's.
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
# the checkpoints' histories, read as fp8_histories_cmp.py reads them
cp "$(dirname "$0")/fp8_histories_cmp.py" "$tmp/"
# Llama's block (SwiGLU, GQA, rope, RMSNorm) takes the same path: its five projections, or
# those whose features are multiples of 16
llama="layer.h.norm=rmsnorm layer.h.mlp=swiglu layer.h.kv_heads=2 layer.h.position=rope layer.h.bias=false"
"$fulgur" --plugin-path "$plugins" check "$cfg" $llama layer.h.mlp_hidden=176 >"$tmp/llama.out" 2>&1 ||
  { cat "$tmp/llama.out"; fail "check of the Llama block"; }
grep -qF "fp8: [layer.h] runs the gemms of attn.qkv, attn.proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj in fp8" \
  "$tmp/llama.out" || { cat "$tmp/llama.out"; fail "the Llama block's projections are not fp8"; }
"$fulgur" --plugin-path "$plugins" check "$cfg" $llama layer.h.mlp_hidden=168 >"$tmp/l168.out" 2>&1 ||
  { cat "$tmp/l168.out"; fail "check of the Llama block at mlp_hidden 168"; }
grep -qF "fp8: [layer.h] runs the gemms of attn.qkv, attn.proj in fp8 (x, w e4m3; dy e5m2); attention and the norms stay in the activations' dtype; so do mlp.gate_proj (168 x 64), mlp.up_proj (168 x 64), mlp.down_proj (64 x 168): features must be multiples of 16" \
  "$tmp/l168.out" || { cat "$tmp/l168.out"; fail "mlp_hidden 168 does not leave the MLP in bf16"; }
# a Llama trained in fp8 exports to Hugging Face's layout (no fp8 state in it) and
# init_from loads the export back (the fp8 state starts afresh)
llama_cfg=$(dirname "$cfg")/fp8_llama_lm.ini
"$fulgur" --plugin-path "$plugins" fit "$llama_cfg" trainer.max_steps=2 \
  trainer.default_root_dir="$tmp/lf" trainer.final_checkpoint="$tmp/lf.safetensors" \
  >"$tmp/lf.out" 2>&1 || { cat "$tmp/lf.out"; fail "the Llama fit"; }
"$fulgur" --plugin-path "$plugins" export "$llama_cfg" --ckpt-path "$tmp/lf.safetensors" \
  --out "$tmp/hf" >"$tmp/export.out" 2>&1 || { cat "$tmp/export.out"; fail "export of an fp8 Llama"; }
grep -qF "(12 tensors, f32, Hugging Face Llama names)" "$tmp/export.out" ||
  { cat "$tmp/export.out"; fail "the export does not hold the 12 Llama tensors"; }
grep -aq "fp8_" "$tmp/hf/model.safetensors" && fail "the export holds fp8 state"
"$fulgur" --plugin-path "$plugins" fit "$llama_cfg" trainer.max_steps=1 \
  model.init_from="$tmp/hf/model.safetensors" trainer.default_root_dir="$tmp/li" \
  >"$tmp/li.out" 2>&1 || { cat "$tmp/li.out"; fail "init_from the export in fp8-mixed"; }
grep -qF "10 tensors loaded (Hugging Face Llama names)" "$tmp/li.out" ||
  { cat "$tmp/li.out"; fail "init_from did not load the export's 10 tensors"; }
# gradient accumulation: one history entry per optimizer step
run accum trainer.max_steps=5 trainer.accumulate_grad_batches=2
python3 - "$tmp/accum.safetensors" <<'PY' || fail "the histories do not advance once per step"
import sys; sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0]); from fp8_histories_cmp import histories
h = histories(sys.argv[1])
bad = {k: sum(1 for x in v if x > 0) for k, v in h.items()
       if not (all(x > 0 for x in v[:5]) and all(x == 0 for x in v[5:]))}
print(f"{len(h)} histories after 5 steps of 2 micro-batches; entries recorded: "
      f"{sorted(set(sum(1 for x in v if x > 0) for v in h.values()))}")
for k, n in sorted(bad.items()): print(f"  {k}: {n} entries recorded, want 5")
sys.exit(0 if len(h) == 12 and not bad else 1)
PY
# ddp: amaxes max-reduced across the ranks
run single trainer.max_steps=3 data.batch_size=8
FGEMU_DEVICES=2 "$mpirun" $root --oversubscribe -n 2 -x FGEMU_DEVICES \
  "$fulgur" --plugin-path "$plugins" fit "$cfg" strategy.name=ddp comm.name=nccl \
  comm.timeout_s=120 trainer.default_root_dir="$tmp/ddp" \
  trainer.final_checkpoint="$tmp/ddp.safetensors" trainer.max_steps=3 data.batch_size=4 \
  $fp8 >"$tmp/ddp.out" 2>&1 || { cat "$tmp/ddp.out"; fail "ddp with the emulated comm.nccl"; }
grep -qF "fp8: the amax histories (" "$tmp/ddp.out" &&
  grep -qF "are max-reduced across the 2 ranks once per optimizer step (ordered on the device)" \
    "$tmp/ddp.out" || { cat "$tmp/ddp.out"; fail "ddp does not say it reduces the histories"; }
grep -qF "max-reduced" "$tmp/single.out" && fail "one process claims a reduction"
python3 - "$tmp/single.safetensors" "$tmp/ddp.safetensors" "$tol" <<'PY' ||
import sys; sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0]); from fp8_histories_cmp import histories
one, ddp, tol = histories(sys.argv[1]), histories(sys.argv[2]), float(sys.argv[3])
# [2] is step 1's: the same weights, so the same rows; a rank's dy is twice one device's
exact = [k for k in sorted(one) if ddp[k][2] != one[k][2] * (2 if k.endswith("_dy") else 1)]
worst, where = 0.0, ""
for k in sorted(one):
    f = 2 if k.endswith("_dy") else 1
    for a, b in zip(one[k][:2], ddp[k][:2]):
        r = abs(a * f - b) / (a * f) if a > 0 else 1.0
        if r > worst: worst, where = r, k
print(f"{len(one)} histories of one device at batch 8 against ddp's at 2 x 4 (dy halved): "
      f"step 1's amaxes equal in {len(one) - len(exact)}; steps 2-3 worst relative difference "
      f"{worst:.2e} ({where}), tolerance {tol}")
for k in exact: print(f"  step 1: {k}: one device {one[k][2]!r}, ddp {ddp[k][2]!r}")
sys.exit(0 if len(one) == 12 and not exact and worst <= tol else 1)
PY
  fail "ddp's reduced histories are not one device's at the whole batch"
echo "ok: the Llama block in fp8, its export and init_from; histories advance once per step under accumulation; ddp's equal one device's"
