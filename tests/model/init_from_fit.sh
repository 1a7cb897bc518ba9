#!/usr/bin/env bash
# fulgur fit with [model] init_from on the Fashion-MNIST MLP: the weights of a PyTorch
# state dict are loaded (one line says how many), a file without fc3.bias is refused
# naming it (exit 2), and init_strict = false keeps fc3.bias at its initialisation and
# says so. Needs FULGUR and EXAMPLES; skips (77) without Debian's python3-torch or the
# Fashion-MNIST package.
set -uo pipefail
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null || exit 77
[ -d /usr/share/datasets/fashion-mnist ] || exit 77
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir" <<'PY' || exit 1
import json, struct, sys, torch
torch.manual_seed(0)
sd = {}
for name, (o, i) in {"fc1": (256, 784), "fc2": (256, 256), "fc3": (10, 256)}.items():
    lin = torch.nn.Linear(i, o)
    sd[f"{name}.weight"], sd[f"{name}.bias"] = lin.weight.detach(), lin.bias.detach()
def save(path, tensors):
    header, blobs, off = {}, [], 0
    for k, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[k] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
save(sys.argv[1] + "/mlp.safetensors", sd)
save(sys.argv[1] + "/partial.safetensors", {k: v for k, v in sd.items() if k != "fc3.bias"})
PY
fit() {
  "$FULGUR" fit "$EXAMPLES/fashion_mnist_mlp.ini" trainer.max_epochs=1 \
    trainer.limit_train_batches=2 trainer.limit_val_batches=1 trainer.test_after_fit=false \
    data.num_workers=0 trainer.default_root_dir="$dir/runs" trainer.enable_progress_bar=false \
    "$@" >"$dir/out" 2>&1
}
fail=0
fit model.init_from="$dir/mlp.safetensors"; rc=$?
grep -q "init_from $dir/mlp.safetensors: 6 tensors loaded (fulgur names)" "$dir/out" && [ $rc = 0 ] ||
  { echo "FAIL: loading the whole file (exit $rc)"; cat "$dir/out"; fail=1; }
fit model.init_from="$dir/partial.safetensors"; rc=$?
grep -q "the model's tensor 'fc3.bias' is not in the file" "$dir/out" && [ $rc = 2 ] ||
  { echo "FAIL: a missing tensor must exit 2 naming it (exit $rc)"; cat "$dir/out"; fail=1; }
fit model.init_from="$dir/partial.safetensors" model.init_strict=false; rc=$?
grep -q "5 tensors loaded (fulgur names); kept at their initialisation: fc3.bias" "$dir/out" &&
  [ $rc = 0 ] || { echo "FAIL: init_strict = false (exit $rc)"; cat "$dir/out"; fail=1; }
[ $fail = 0 ] && echo "init_from_fit: all checks passed"
exit $fail
