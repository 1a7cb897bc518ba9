#!/usr/bin/env python3
"""Compares the float32 tensors of two safetensors files (stdlib only).

usage: compare_safetensors.py A B TOLERANCE [PREFIX]
Prints the largest relative difference, max|a-b| / max(max|a|, 1e-12) per tensor, and
exits 1 when any tensor (whose name starts with PREFIX, default: all but optimizer.*)
differs by more than TOLERANCE, or when the files hold different tensors.
"""
import array
import json
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            continue
        begin, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(blob[8 + n + begin:8 + n + end])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = values
    return tensors


def main():
    a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
    prefix = sys.argv[4] if len(sys.argv) > 4 else None
    names = sorted(n for n in a if (n.startswith(prefix) if prefix else not n.startswith("optimizer.")))
    if not names or set(names) - set(b):
        print(f"FAIL: tensors differ: {sorted(set(names) ^ set(n for n in b if n in names))}")
        return 1
    worst = 0.0
    for name in names:
        x, y = a[name], b[name]
        if len(x) != len(y):
            print(f"FAIL: {name}: {len(x)} vs {len(y)} values")
            return 1
        scale = max(max(abs(v) for v in x), 1e-12)
        rel = max(abs(p - q) for p, q in zip(x, y)) / scale
        worst = max(worst, rel)
        if rel > tol:
            print(f"FAIL: {name}: relative difference {rel:.3g} > {tol:g}")
            return 1
    print(f"ok: {len(names)} tensors, largest relative difference {worst:.3g} <= {tol:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
