#!/usr/bin/env python3
"""Max relative difference between the f32 tensors of two safetensors files.

    compare_safetensors.py A B TOLERANCE

Per tensor: max |a - b| / max |b| (relative to the tensor's scale, so weights near zero do
not blow up the ratio). Prints the largest over all tensors and the tensor it comes from;
exit 1 when it exceeds TOLERANCE, when the files hold different tensors, or when a file is
not safetensors. Standard library only."""
import array
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        sys.exit(f"{path}: {len(blob)} bytes, too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        sys.exit(f"{path}: header of {n} bytes runs past the end ({len(blob)} bytes)")
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    tensors = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            continue
        lo, hi = t["data_offsets"]
        values = array.array("f")
        values.frombytes(data[lo:hi])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = (tuple(t["shape"]), values)
    return tensors


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    a, b, tol = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
    model = sorted(k for k in a if not k.startswith("optimizer."))
    if not model:
        sys.exit(f"{sys.argv[1]}: no f32 model tensors")
    if model != sorted(k for k in b if not k.startswith("optimizer.")):
        sys.exit(f"different tensors: {model} vs {sorted(b)}")
    worst, where = 0.0, model[0]
    for name in model:
        (sa, va), (sb, vb) = a[name], b[name]
        if sa != sb:
            sys.exit(f"{name}: shape {sa} vs {sb}")
        scale = max((abs(x) for x in vb), default=0.0) or 1.0
        diff = max((abs(x - y) for x, y in zip(va, vb)), default=0.0) / scale
        if diff > worst:
            worst, where = diff, name
    print(f"max relative difference {worst:.3e} ({where}, {len(model)} tensors, "
          f"{sum(len(a[k][1]) for k in model)} values)")
    sys.exit(0 if worst <= tol else 1)


main()
