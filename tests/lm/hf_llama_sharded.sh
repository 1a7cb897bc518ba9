#!/usr/bin/env bash
# Hugging Face's sharded checkpoints in and out (model.safetensors.index.json + shards):
#  1. PyTorch (tests/lm/hf_llama_torch.py's tensors) writes the folder as save_pretrained
#     does with a small max_shard_size: model-0000K-of-0000N.safetensors and the index;
#     [model] init_from = the index reads it: `fulgur export` from it is byte for byte the
#     export from the one-file folder, and fit logs the same 50 losses bit for bit;
#  2. `fulgur export --max-shard-size 20KB` writes shards and an index PyTorch reads back:
#     every tensor in the file the weight_map names, total_size the data's bytes, no shard
#     over 20000 bytes unless one tensor alone is, the values the one-file export's;
#     importing that index and exporting one file again gives the same bytes;
#  3. broken indexes fail naming the index and the tensor or file: a shard file missing, a
#     tensor the weight_map puts in the wrong shard, a shard tensor it does not name; and a
#     max_shard_size that is no size.
# Needs FULGUR; skips (77) without Debian's python3-torch.
set -uo pipefail
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null || exit 77
here=$(cd "$(dirname "$0")" && pwd)
. "$here/torch_run_head.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
/usr/bin/python3 "$here/hf_llama_torch.py" init "$dir" || exit 1
# shard SRC DST MAX: SRC's model.safetensors as save_pretrained's shards in DST (python)
shard() {
    mkdir -p "$2" && cp "$1/config.json" "$2/"
    /usr/bin/python3 - "$here" "$1" "$2" "$3" <<'PY' || fail "python sharding"
import json, sys
sys.path.insert(0, sys.argv[1])
from hf_llama_torch import load, save
src, dst, limit = sys.argv[2], sys.argv[3], int(sys.argv[4])
tensors = load(f"{src}/model.safetensors")
shards, size = [], 0
for name, t in tensors.items():  # transformers' rule: a new shard once the next would overflow
    nbytes = t.numel() * t.element_size()
    if not shards or size + nbytes > limit:
        shards.append({})
        size = 0
    shards[-1][name] = t
    size += nbytes
weight_map = {}
for k, part in enumerate(shards):
    file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
    save(f"{dst}/{file}", part, "F32")
    weight_map.update({name: file for name in part})
total = sum(t.numel() * t.element_size() for t in tensors.values())
json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
          open(f"{dst}/model.safetensors.index.json", "w"), indent=2)
print(f"python: {len(tensors)} tensors in {len(shards)} shards")
PY
}
# ini WEIGHTS NAME: a run from the weights file (or index) WEIGHTS in $dir
ini() {
    { torch_run_head "$dir" "$1"
      printf '[optimizer]\nname = adamw\nlr = 0.001\nweight_decay = 0.01\n[callback.csv_logger]\n'
    } | sed "s|default_root_dir = .*|default_root_dir = $dir/runs_$2|" > "$dir/$2.ini"
}
run() { "$FULGUR" "$@" >"$dir/last.log" 2>&1 || { cat "$dir/last.log"; fail "fulgur $*"; }; }
mkdir -p "$dir/one" && cp "$dir/model.safetensors" "$dir/config.json" "$dir/one/"
shard "$dir/one" "$dir/py" 12000
[ "$(ls "$dir/py"/model-*-of-*.safetensors | wc -l)" -ge 3 ] || fail "python wrote fewer than 3 shards"
ini one/model.safetensors one
ini py/model.safetensors.index.json py
run export "$dir/one.ini" --out "$dir/e_one"
run export "$dir/py.ini" --out "$dir/e_py"
cmp "$dir/e_one/model.safetensors" "$dir/e_py/model.safetensors" ||
    fail "the export from PyTorch's shards differs from the one-file export"
run fit "$dir/one.ini"
run fit "$dir/py.ini"
grep -q "init_from $dir/py/model.safetensors.index.json: [0-9]* tensors loaded (Hugging Face Llama names)" "$dir/last.log" ||
    { cat "$dir/last.log"; fail "fit did not say it read the index's tensors"; }
a=$(ls "$dir"/runs_one/default/version_*/metrics.csv) b=$(ls "$dir"/runs_py/default/version_*/metrics.csv)
losses() { /usr/bin/python3 -c "import csv, sys; print('\n'.join(r['train/step_loss'] for r in csv.DictReader(open(sys.argv[1])) if r.get('train/step_loss')))" "$1"; }
losses "$a" >"$dir/a.txt"; losses "$b" >"$dir/b.txt"
[ "$(wc -l <"$dir/a.txt")" -eq 50 ] || fail "not 50 logged step losses"
cmp "$dir/a.txt" "$dir/b.txt" || fail "training from the shards logs other losses than from one file"
echo "ok: PyTorch's shards read: export identical, 50 losses identical"

# 2. fulgur's own shards
run export "$dir/one.ini" --out "$dir/e_sh" --max-shard-size 20KB
grep -q "export: $dir/e_sh/model.safetensors.index.json + [0-9]* shards (21 tensors, f32" "$dir/last.log" ||
    { cat "$dir/last.log"; fail "export's line"; }
/usr/bin/python3 - "$here" "$dir" <<'PY' || exit 1
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch
from hf_llama_torch import load
d = sys.argv[2]
index = json.load(open(f"{d}/e_sh/model.safetensors.index.json"))
one = load(f"{d}/e_one/model.safetensors")
files = sorted(set(index["weight_map"].values()))
n = len(files)
assert n >= 3 and files == [f"model-{k:05d}-of-{n:05d}.safetensors" for k in range(1, n + 1)], files
seen, total = {}, 0
for f in files:
    part = load(f"{d}/e_sh/{f}")
    size = sum(t.numel() * t.element_size() for t in part.values())
    assert size <= 20000 or len(part) == 1, f"{f}: {size} bytes in {len(part)} tensors"
    for name, t in part.items():
        assert index["weight_map"][name] == f, f"{name} is in {f}, the map says {index['weight_map'][name]}"
        seen[name] = t
    total += size
assert sorted(seen) == sorted(one) == sorted(index["weight_map"]), "tensor sets"
assert index["metadata"]["total_size"] == total, (index["metadata"], total)
for name, t in one.items():
    assert torch.equal(seen[name], t), f"{name} differs"
print(f"ok: fulgur's {n} shards: map, sizes, total_size {total} and values as the one-file export")
PY
ini e_sh/model.safetensors.index.json sh
run export "$dir/sh.ini" --out "$dir/e_back"
cmp "$dir/e_one/model.safetensors" "$dir/e_back/model.safetensors" || fail "shards -> one file changed bytes"
echo "ok: fulgur's shards read back: the one-file export is byte for byte the same"

# 3. refusals
expect() { # NAME EXPECTED: fulgur check of $dir/NAME.ini exits 2 with EXPECTED
    "$FULGUR" check "$dir/$1.ini" >"$dir/$1.log" 2>&1
    local rc=$?
    [ $rc -eq 2 ] && grep -qF -- "$2" "$dir/$1.log" || { cat "$dir/$1.log"; fail "$1: exit $rc, expected 2 and: $2"; }
    echo "ok: $1: $(grep -F -- "$2" "$dir/$1.log" | head -1)"
}
broken() { # NAME PYTHON-EDIT-OF-index: a copy of py/ with the index edited as `x`
    rm -rf "$dir/$1" && cp -r "$dir/py" "$dir/$1"
    /usr/bin/python3 -c "import json, sys; p = sys.argv[1]; x = json.load(open(p)); $2; json.dump(x, open(p, 'w'))" \
        "$dir/$1/model.safetensors.index.json" || fail "edit $1"
    ini "$1/model.safetensors.index.json" "$1"
}
broken no_shard 'x["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors"'
expect no_shard "$dir/no_shard/model.safetensors.index.json: weight_map names $dir/no_shard/model-00009-of-00009.safetensors, which cannot be opened: No such file or directory"
broken wrong_shard 'm = x["weight_map"]; k = "model.norm.weight"; m[k] = [f for f in sorted(set(m.values())) if f != m[k]][0]'
expect wrong_shard "$dir/wrong_shard/model.safetensors.index.json: weight_map puts 'model.norm.weight' in $dir/wrong_shard/model-0000"
broken unnamed 'del x["weight_map"]["model.layers.0.post_attention_layernorm.weight"]'
expect unnamed "holds 'model.layers.0.post_attention_layernorm.weight', which weight_map does not name"
broken no_map 'del x["weight_map"]'
expect no_map "$dir/no_map/model.safetensors.index.json: no \"weight_map\" object"
"$FULGUR" export "$dir/one.ini" --out "$dir/e_bad" --max-shard-size 20XB >"$dir/bad.log" 2>&1
[ $? -eq 2 ] && grep -qF "[export] max_shard_size = 20XB is not a size" "$dir/bad.log" ||
    { cat "$dir/bad.log"; fail "max_shard_size 20XB"; }
echo "ok: max_shard_size 20XB refused"
