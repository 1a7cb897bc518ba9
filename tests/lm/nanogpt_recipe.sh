#!/usr/bin/env bash
# examples/nanogpt_shakespeare_char.ini against nanoGPT's rules (train.py, its
# train_shakespeare_char config and README's CPU variant), written out here:
#   - the example states nanoGPT's values (learning_rate 1e-3, min_lr 1e-4, warmup_iters 100,
#     lr_decay_iters 2000, max_iters 2000, beta2 0.99, weight_decay 0.1, grad_clip 1.0,
#     block_size 64, batch_size 12, n_layer 4, n_head 4, n_embd 128);
#   - the learning rate of each of its 2000 steps (lr_monitor, every step) equals get_lr(it)
#     within 1e-7 relative, the example's [optimizer], [scheduler] and [trainer] run on a tiny
#     model (the lr does not depend on the model);
#   - fulgur check of the example's own model logs nanoGPT's decay groups (dim >= 2: the
#     embeddings and the blocks' four weight matrices; lm_head is tied to wte), names and
#     counts; with no_decay = wpe.* wpe.weight moves to the other group.
# Needs FULGUR; python3 (standard library).
set -uo pipefail
: "${FULGUR:?}"
example=${1:?usage: nanogpt_recipe.sh EXAMPLE.ini}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$example" "$dir" <<'PY' || exit 1
import configparser, struct, sys
example, d = sys.argv[1:]
cfg = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
cfg.optionxform = str
cfg.read(example)
want = {("optimizer", "lr"): 1e-3, ("scheduler", "min_lr"): 1e-4,
        ("scheduler", "warmup_steps"): 100, ("scheduler", "decay_steps"): 2000,
        ("trainer", "max_steps"): 2000, ("optimizer", "beta2"): 0.99,
        ("optimizer", "weight_decay"): 0.1, ("trainer", "gradient_clip_val"): 1.0,
        ("data", "context"): 64, ("data", "batch_size"): 12, ("layer.h", "repeat"): 4,
        ("layer.h", "heads"): 4, ("layer.wte", "embedding_dim"): 128}
bad = [f"[{s}] {k} = {cfg.get(s, k, fallback=None)}, nanoGPT's {v}" for (s, k), v in want.items()
       if cfg.get(s, k, fallback=None) is None or float(cfg.get(s, k)) != v]
for s, k, v in (("scheduler", "name", "cosine_with_warmup"), ("scheduler", "warmup_form", "nanogpt"),
                ("optimizer", "weight_decay_params", "matrices"), ("model", "scaled_residual_init", "true")):
    if cfg.get(s, k, fallback=None) != v:
        bad.append(f"[{s}] {k} = {cfg.get(s, k, fallback=None)}, want {v}")
if bad:
    sys.exit("FAIL [lm.nanogpt_recipe]: the example is not nanoGPT's recipe: " + "; ".join(bad))
# 40000 ids below 65, the same every run: the example's data stands-in
open(f"{d}/ids.bin", "wb").write(struct.pack("<40000H", *[(i * 29 + i // 7) % 65 for i in range(40000)]))
# the lr run: the example's trainer, optimizer and scheduler on a tiny model
out = configparser.ConfigParser()
out.optionxform = str
for s in ("trainer", "backend", "precision", "strategy", "optimizer", "scheduler"):
    out[s] = dict(cfg[s])
out["trainer"].update({"default_root_dir": f"{d}/runs", "enable_progress_bar": "false",
                       "log_every_n_steps": "1"})
out["data"] = dict(cfg["data"])
out["data"].update({"dir": d, "train_file": "ids.bin", "val_file": "ids.bin", "context": "8",
                    "batch_size": "2", "train_windows": "4000", "val_windows": "2",
                    "num_workers": "0"})
out["layer.wte"] = {"type": "embedding", "num_embeddings": "65", "embedding_dim": "8"}
out["layer.head"] = {"type": "linear", "out_features": "65"}
out["callback.lr_monitor"] = {"logging_interval": "step", "filename": f"{d}/lr.csv"}
with open(f"{d}/lr.ini", "w") as f:
    out.write(f)
PY
"$FULGUR" fit "$dir/lr.ini" >"$dir/lr.log" 2>&1 || { cat "$dir/lr.log"; echo "FAIL: fit"; exit 1; }
"$FULGUR" check "$example" data.dir="$dir" data.train_file=ids.bin data.val_file=ids.bin \
  >"$dir/check.log" 2>&1 || { cat "$dir/check.log"; echo "FAIL: check"; exit 1; }
"$FULGUR" check "$example" data.dir="$dir" data.train_file=ids.bin data.val_file=ids.bin \
  "optimizer.no_decay=wpe.*" >"$dir/glob.log" 2>&1 || { cat "$dir/glob.log"; echo "FAIL: check glob"; exit 1; }
python3 - "$dir" <<'PY'
import csv, math, sys
d = sys.argv[1]
fails = []

# nanoGPT's train.py, as of its current master
learning_rate, min_lr, warmup_iters, lr_decay_iters = 1e-3, 1e-4, 100, 2000
def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)

rows = list(csv.DictReader(open(f"{d}/lr.csv")))
# row `step` s: the rate of the s-th optimizer step, nanoGPT's iteration it = s - 1
got = {int(r["step"]): float(r["lr"]) for r in rows}
if sorted(got) != list(range(1, 2001)):
    fails.append(f"lr.csv has {len(got)} steps ({min(got, default=0)}..{max(got, default=0)}), want 1..2000")
worst, at = 0.0, 0
for s, lr in got.items():
    rel = abs(lr - get_lr(s - 1)) / get_lr(s - 1)
    if rel > worst:
        worst, at = rel, s - 1
print(f"nanogpt_recipe: {len(got)} steps, lr {got.get(1)} .. {got.get(101)} (peak) .. "
      f"{got.get(2000)}; worst relative difference from get_lr {worst:.2e} at it={at} (limit 1e-7)")
if worst > 1e-7:
    fails.append(f"lr at it={at}: {got[at + 1]}, get_lr {get_lr(at)} ({worst:.2e} relative)")

# nanoGPT's configure_optimizers: dim >= 2 decays. The example's tensors and shapes, as
# nanoGPT's GPT with bias = False has them (no linear or layer-norm biases):
C, V, T, L = 128, 65, 64, 4
shapes = {"wte.weight": (V, C), "wpe.weight": (T, C), "ln_f.weight": (C,)}
for i in range(L):
    p = f"h.{i}."
    shapes.update({p + "ln_1.weight": (C,), p + "attn.qkv.weight": (3 * C, C),
                   p + "attn.proj.weight": (C, C), p + "ln_2.weight": (C,),
                   p + "mlp.fc.weight": (4 * C, C), p + "mlp.proj.weight": (C, 4 * C)})

def check_groups(log, exempt):
    lines = open(f"{d}/{log}").read().splitlines()
    decay = sorted(n for n, s in shapes.items() if len(s) >= 2 and n not in exempt)
    keep = sorted(n for n in shapes if n not in decay)
    numel = lambda names: sum(math.prod(shapes[n]) for n in names)
    want = (f"num decayed parameter tensors: {len(decay)}, with {numel(decay)} parameters; "
            f"num non-decayed parameter tensors: {len(keep)}, with {numel(keep)} parameters")
    line = [l for l in lines if "num decayed parameter tensors" in l]
    if len(line) != 1 or want not in line[0]:
        fails.append(f"{log}: logged {line!r}; nanoGPT's rule: '{want}'")
    for label, names in (("decayed", decay), ("not decayed", keep)):
        got = [l for l in lines if l.startswith(f"weight decay: {label}:")]
        got = sorted(x.strip() for x in got[0].split(":", 2)[2].split(",")) if got else []
        if got != names:
            fails.append(f"{log}: {label} {got}, nanoGPT's rule {names}")
    print(f"nanogpt_recipe ({log}): {want}")

check_groups("check.log", ())
check_groups("glob.log", ("wpe.weight",))
if fails:
    sys.exit("FAIL [lm.nanogpt_recipe]: " + "; ".join(fails))
PY
