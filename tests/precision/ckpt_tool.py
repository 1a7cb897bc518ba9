#!/usr/bin/env python3
"""Reads fulgur checkpoints (safetensors) for the precision tests. Standard library only.

    ckpt_tool.py meta FILE KEY      print the metadata value (exit 1 when missing)
    ckpt_tool.py same A B           exit 0 when every tensor (optimizer.* included) of A
                                    and B has the same dtype, shape and bytes"""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    return header, blob[8 + n:]


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "meta":
        header, _ = read(sys.argv[2])
        value = header.get("__metadata__", {}).get(sys.argv[3])
        if value is None:
            sys.exit(f"{sys.argv[2]}: no metadata '{sys.argv[3]}'")
        print(value)
        return
    if len(sys.argv) == 4 and sys.argv[1] == "same":
        (ha, da), (hb, db) = read(sys.argv[2]), read(sys.argv[3])
        names = sorted(k for k in ha if k != "__metadata__")
        if names != sorted(k for k in hb if k != "__metadata__"):
            sys.exit("the files hold different tensors")
        for name in names:
            a, b = ha[name], hb[name]
            if a["dtype"] != b["dtype"] or a["shape"] != b["shape"]:
                sys.exit(f"{name}: {a['dtype']}{a['shape']} vs {b['dtype']}{b['shape']}")
            (a0, a1), (b0, b1) = a["data_offsets"], b["data_offsets"]
            if da[a0:a1] != db[b0:b1]:
                sys.exit(f"{name}: the bytes differ")
        print(f"{len(names)} tensors bitwise equal")
        return
    sys.exit(__doc__)


main()
