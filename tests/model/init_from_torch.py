#!/usr/bin/env python3
"""Writes weights-only safetensors files from a PyTorch model's state dict, the way
safetensors.torch.save_file lays them out (8-byte header length, JSON header, packed data;
no fulgur metadata), for ctest model.init_from:
  full.safetensors      every tensor (conv and fc in f32, bn in bf16 and f16, plus
                        bn.num_batches_tracked as I64, which no fulgur tensor takes)
  expected.f32          the values fulgur must load, as float32, in state-dict order
  missing.safetensors   without fc.bias
  misshaped.safetensors fc.weight transposed
Exit 77 (skip) without torch."""
import json
import struct
import sys

try:
    import torch
except ImportError:
    sys.exit(77)

TAGS = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
        torch.int64: "I64"}


def save(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 \
            else t.numpy().tobytes()
        header[name] = {"dtype": TAGS[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main(folder):
    torch.manual_seed(3)
    model = torch.nn.ModuleDict({
        "conv": torch.nn.Conv2d(3, 4, 3),
        "bn": torch.nn.BatchNorm2d(4),
        "fc": torch.nn.Linear(4 * 4 * 4, 5),
    })
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-2, 2)
        model["bn"].running_mean.uniform_(-1, 1)
        model["bn"].running_var.uniform_(0.5, 2)
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for k in ("bn.weight", "bn.bias"):
        sd[k] = sd[k].to(torch.bfloat16)
    for k in ("bn.running_mean", "bn.running_var"):
        sd[k] = sd[k].to(torch.float16)
    save(f"{folder}/full.safetensors", sd)
    order = ["conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean",
             "bn.running_var", "fc.weight", "fc.bias"]
    with open(f"{folder}/expected.f32", "wb") as f:
        for k in order:
            f.write(sd[k].to(torch.float32).numpy().tobytes())
    save(f"{folder}/missing.safetensors", {k: v for k, v in sd.items() if k != "fc.bias"})
    bad = dict(sd)
    bad["fc.weight"] = sd["fc.weight"].t().contiguous()
    save(f"{folder}/misshaped.safetensors", bad)


if __name__ == "__main__":
    main(sys.argv[1])
