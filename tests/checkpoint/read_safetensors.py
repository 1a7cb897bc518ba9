#!/usr/bin/env python3
"""An independent safetensors reader (stdlib only: struct + json) for checkpoint.python_reader.

Lists the tensors of FILE and checks what the format requires: the header length, a JSON
object header padded to a multiple of 8, known dtypes, offsets inside the data section that
match shape x dtype size, no overlap, string metadata. Tensors named arange.* must hold
0, 1, 2, ... in little-endian order. --count N and --meta KEY=VALUE add expectations.
Exits 1 with a message on the first violation."""
import argparse
import json
import struct
import sys

SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I32": 4, "I64": 8, "U8": 1}
FORMATS = {"F32": "f", "F16": "e", "F64": "d", "I32": "i", "I64": "q", "U8": "B"}


def fail(msg):
    print(f"read_safetensors: {msg}", file=sys.stderr)
    sys.exit(1)


def values(dtype, raw, n):
    if dtype == "BF16":  # the top half of a binary32
        halves = struct.unpack(f"<{n}H", raw)
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    return list(struct.unpack(f"<{n}{FORMATS[dtype]}", raw))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--count", type=int)
    ap.add_argument("--meta", action="append", default=[])
    args = ap.parse_args()

    blob = open(args.file, "rb").read()
    if len(blob) < 8:
        fail(f"{args.file}: {len(blob)} bytes, no header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        fail(f"{args.file}: header length {n} beyond the file")
    if (8 + n) % 8:
        fail(f"{args.file}: data does not start on a multiple of 8 ({8 + n})")
    text = blob[8:8 + n].decode("utf-8")
    if not text.rstrip(" ").endswith("}"):
        fail(f"{args.file}: the header object is not followed by spaces alone")
    header = json.loads(text)
    if not isinstance(header, dict):
        fail(f"{args.file}: header is not an object")
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    for k, v in meta.items():
        if not isinstance(v, str):
            fail(f"{args.file}: metadata {k!r} is not a string")

    spans = []
    for name, e in header.items():
        dtype, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
        if dtype not in SIZES:
            fail(f"{name!r}: unknown dtype {dtype}")
        numel = 1
        for d in shape:
            if not isinstance(d, int) or d < 0:
                fail(f"{name!r}: bad shape {shape}")
            numel *= d
        if not (0 <= begin <= end <= len(data)):
            fail(f"{name!r}: offsets [{begin}, {end}] outside {len(data)} data bytes")
        if end - begin != numel * SIZES[dtype]:
            fail(f"{name!r}: offsets [{begin}, {end}] do not hold {shape} of {dtype}")
        spans.append((begin, end, name))
        print(f"{name!r:32} {dtype:5} {str(tuple(shape)):12} [{begin}, {end}]")
        if name.startswith("arange."):
            got = values(dtype, data[begin:end], numel)
            if got != [float(i) if dtype in ("F32", "F16", "BF16", "F64") else i
                       for i in range(numel)]:
                fail(f"{name!r}: holds {got}, expected 0..{numel - 1}")
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0 and b1 != e1:
            fail(f"{n1!r} [{b1}, {e1}] overlaps {n0!r} [{b0}, {e0}]")
    if spans and max(e for _, e, _ in spans) != len(data):
        fail(f"{args.file}: {len(data)} data bytes but tensors end at "
             f"{max(e for _, e, _ in spans)}")

    if args.count is not None and len(spans) != args.count:
        fail(f"{args.file}: {len(spans)} tensors, expected {args.count}")
    for kv in args.meta:
        k, _, v = kv.partition("=")
        if meta.get(k) != v:
            fail(f"{args.file}: metadata {k!r} is {meta.get(k)!r}, expected {v!r}")
    print(f"{args.file}: {len(spans)} tensors, {len(meta)} metadata entries, all checks passed")


if __name__ == "__main__":
    main()
