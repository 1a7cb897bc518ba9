#!/usr/bin/env bash
# Weight decay per tensor against PyTorch: the tiny GPT of gpt_vs_torch.sh (2 blocks, width
# 32) trained 50 fp32 AdamW steps (lr 1e-3, weight_decay 0.5) by fulgur with
# [optimizer] weight_decay_params = matrices, and by torch.optim.AdamW with nanoGPT's two
# parameter groups (dim >= 2 decayed, biases and norm gains not). Asserts, for the fused
# step (the CPU backend's adamw_fused) and the plain one (FULGUR_TEST_UNFUSED_STEP=1), and
# for no_decay = *.bias, *ln_* (the same split by name):
#   - the logged groups: nanoGPT's counts (tensors with dim >= 2 and their values) and the
#     names of each group, as fulgur prints them;
#   - the per-step losses within 1e-5 relative; each final weight tensor within 1e-5
#     relative in the L2 norm (|a - b| / |b|) and every value within 5e-5 of its tensor's
#     largest (Adam turns the two libraries' different roundings of near-zero gradients into
#     steps of up to lr: 1.6e-5 of a tensor's scale after 50 steps); attn.qkv.bias left out:
#     its key third has a zero gradient in exact arithmetic, rounding noise that Adam scales
#     to full steps, different in each library;
#   - the same weights differ from torch's decay-every-tensor run by more than 1e-3 (the
#     check can fail).
# Needs FULGUR; skips (77) without Debian's python3-torch.
set -uo pipefail
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null || exit 77
here=$(cd "$(dirname "$0")" && pwd)
. "$here/torch_run_head.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL [lm.decay_vs_torch]: $*" >&2; exit 1; }
/usr/bin/python3 "$here/gpt_torch.py" init "$dir" decay || exit 1
/usr/bin/python3 "$here/gpt_torch.py" train "$dir" decay >"$dir/torch.txt" || exit 1
/usr/bin/python3 "$here/gpt_torch.py" train "$dir" decay_all >"$dir/torch_all.txt" || exit 1
{ torch_run_head "$dir"
    cat <<INI
[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = 32
[layer.wpe]
type = position_embedding
max_positions = 16
[layer.h]
type = transformer_block
heads = 4
repeat = 2
[layer.ln_f]
type = layernorm
[layer.lm_head]
type = linear
out_features = 256
bias = false
[optimizer]
name = adamw
lr = 0.001
weight_decay = 0.5
[callback.csv_logger]
INI
} > "$dir/gpt.ini"
# run NAME ENV... -- OVERRIDES...: fits into $dir/NAME.{log,safetensors}, runs_NAME
run() {
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" "$FULGUR" fit "$dir/gpt.ini" trainer.default_root_dir="$dir/runs_$name" \
    trainer.final_checkpoint="$dir/$name.safetensors" "$@" >"$dir/$name.log" 2>&1 ||
    { cat "$dir/$name.log"; fail "fulgur fit ($name) failed"; }
}
run fused -- optimizer.weight_decay_params=matrices
run plain FULGUR_TEST_UNFUSED_STEP=1 -- optimizer.weight_decay_params=matrices
run glob -- "optimizer.no_decay=*.bias, *ln_*"
/usr/bin/python3 - "$dir" <<'PY' || exit 1
import csv, glob, json, struct, sys
d = sys.argv[1]

def read(path):
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    out = {}
    for name, t in json.loads(blob[8:8 + n]).items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        vals = struct.unpack(f"<{(b - a) // 4}f", blob[8 + n + a:8 + n + b])
        out[name] = (t["shape"], vals)
    return out

def worst(a, b, skip=("attn.qkv.bias",)):
    """(largest per-tensor L2 relative difference, its tensor, largest max-abs difference
    over the tensor's largest value)"""
    w, where, m = 0.0, "", 0.0
    for name, (shape, ref) in b.items():
        if any(s in name for s in skip):
            continue
        scale = max(abs(x) for x in ref) or 1.0
        m = max(m, max(abs(x - y) for x, y in zip(a[name][1], ref)) / scale)
        norm = sum(y * y for y in ref) ** 0.5 or 1.0
        dev = sum((x - y) ** 2 for x, y in zip(a[name][1], ref)) ** 0.5 / norm
        if dev > w:
            w, where = dev, name
    return w, where, m

ref = read(f"{d}/torch_decay.safetensors")
ref_all = read(f"{d}/torch_decay_all.safetensors")
losses = [float(x) for x in open(f"{d}/torch.txt")]
# nanoGPT's groups for this model, from torch's tensors: dim >= 2 decays
decayed = sorted(n for n, (s, _) in ref.items() if len(s) >= 2)
kept = sorted(n for n, (s, _) in ref.items() if len(s) < 2)
count = lambda names: sum(len(ref[n][1]) for n in names)
want = (f"num decayed parameter tensors: {len(decayed)}, with {count(decayed)} parameters; "
        f"num non-decayed parameter tensors: {len(kept)}, with {count(kept)} parameters")
fails = []
for run in ("fused", "plain", "glob"):
    log = open(f"{d}/{run}.log").read().splitlines()
    line = [l for l in log if "num decayed parameter tensors" in l]
    if len(line) != 1 or want not in line[0]:
        fails.append(f"{run}: logged {line!r}, nanoGPT's rule gives '{want}'")
    for label, names in (("decayed", decayed), ("not decayed", kept)):
        got = [l for l in log if l.startswith(f"weight decay: {label}:")]
        got = sorted(x.strip() for x in got[0].split(":", 2)[2].split(",")) if got else []
        if got != names:
            fails.append(f"{run}: '{label}' lists {got}, nanoGPT's rule {names}")
    metrics = glob.glob(f"{d}/runs_{run}/default/version_*/metrics.csv")[0]
    ours = [float(r["train/step_loss"]) for r in csv.DictReader(open(metrics))
            if r.get("train/step_loss")]
    if len(ours) != len(losses):
        fails.append(f"{run}: {len(ours)} losses, torch {len(losses)}")
        continue
    lw = max(abs(a - b) / abs(b) for a, b in zip(ours, losses))
    mine = read(f"{d}/{run}.safetensors")
    ww, where, wm = worst(mine, ref)
    aw, _, _ = worst(mine, ref_all)
    print(f"decay_vs_torch ({run}): losses {lw:.2e}, weights {ww:.2e} L2 ({where}), "
          f"{wm:.2e} of a tensor's scale, of torch's two groups (limits 1e-5, 1e-5, 5e-5); "
          f"{aw:.2e} L2 from torch's decay-all run (must be > 1e-3)")
    if lw > 1e-5 or ww > 1e-5 or wm > 5e-5 or aw < 1e-3:
        fails.append(f"{run}: losses {lw:.2e}, weights {ww:.2e} ({where}) / {wm:.2e}, "
                     f"decay-all {aw:.2e}")
if fails:
    sys.exit("FAIL [lm.decay_vs_torch]: " + "; ".join(fails))
PY
