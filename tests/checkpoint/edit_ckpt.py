#!/usr/bin/env python3
"""edit_ckpt.py IN OUT [meta KEY=VALUE]... [nan TENSOR]: a copy of a safetensors file with
metadata values replaced, or the first value of an F32 tensor set to NaN (stdlib only)."""
import json
import struct
import sys

src, dst, *edits = sys.argv[1:]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
body = bytearray(data[8 + n:])
i = 0
while i < len(edits):
    what, arg = edits[i], edits[i + 1]
    i += 2
    if what == "meta":
        key, value = arg.split("=", 1)
        header["__metadata__"][key] = value
    elif what == "nan":
        begin = header[arg]["data_offsets"][0]
        body[begin:begin + 4] = struct.pack("<f", float("nan"))
    else:
        sys.exit("unknown edit " + what)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + bytes(body))
