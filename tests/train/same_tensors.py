#!/usr/bin/env python3
"""Bitwise comparison of every tensor (model and optimizer.*) of two safetensors files,
and a finiteness check of one.

    same_tensors.py A B       exit 0 when both hold the same tensor names, dtypes, shapes
                              and bytes; prints the count and names the first difference
    same_tensors.py --finite A   exit 0 when every F32 value of A is finite

Standard library only; the header metadata (trainer state) is not compared."""
import array
import json
import math
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        out[name] = (t["dtype"], tuple(t["shape"]), data[lo:hi])
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "--finite":
        bad = []
        for name, (dtype, _, raw) in sorted(read(argv[2]).items()):
            if dtype == "F32":
                values = array.array("f")
                values.frombytes(raw)
                if not all(math.isfinite(v) for v in values):
                    bad.append(name)
        print("non-finite tensors: %s" % (", ".join(bad) if bad else "none"))
        return 1 if bad else 0
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    a, b = read(argv[1]), read(argv[2])
    if sorted(a) != sorted(b):
        print("different tensors: %s vs %s" % (sorted(a), sorted(b)))
        return 1
    for name in sorted(a):
        if a[name] != b[name]:
            print("%s differs" % name)
            return 1
    optimizer = sum(1 for k in a if k.startswith("optimizer."))
    print("%d tensors bitwise equal (%d of them optimizer state)" % (len(a), optimizer))
    return 0


sys.exit(main(sys.argv))
