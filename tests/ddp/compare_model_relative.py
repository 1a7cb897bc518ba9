#!/usr/bin/env python3
"""Max difference between the model tensors of two safetensors files, relative to the model.

    compare_model_relative.py A B TOLERANCE

max |a - b| over every f32 value of every model tensor (optimizer state left out), divided
by max |b| over all of them: one scale for the whole model, where compare_safetensors.py
divides per tensor (a tensor of small values whose gradient cancels, a batch norm's bias
after a conv, makes its own ratio large while its values barely move). Prints the ratio and
the tensor of the largest difference; exit 1 above TOLERANCE, when the files hold different
tensors or when a file is not safetensors. Standard library only."""
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
    header, data, tensors = json.loads(blob[8:8 + n]), blob[8 + n:], {}
    for name, t in header.items():
        if name == "__metadata__" or name.startswith("optimizer.") or t["dtype"] != "F32":
            continue
        lo, hi = t["data_offsets"]
        values = array.array("f")
        values.frombytes(data[lo:hi])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = values
    if not tensors:
        sys.exit(f"{path}: no f32 model tensors")
    return tensors


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    a, b, tol = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
    if sorted(a) != sorted(b):
        sys.exit(f"different tensors: {sorted(set(a) ^ set(b))}")
    scale = max(abs(v) for t in b.values() for v in t) or 1.0
    worst, where = 0.0, ""
    for name in sorted(a):
        if len(a[name]) != len(b[name]):
            sys.exit(f"{name}: {len(a[name])} values against {len(b[name])}")
        d = max((abs(x - y) for x, y in zip(a[name], b[name])), default=0.0)
        if d >= worst:
            worst, where = d, name
    ratio = worst / scale
    print(f"max difference {ratio:.3e} of the model's largest value ({where}, {len(a)} tensors)")
    sys.exit(0 if ratio <= tol else 1)


main()
