#!/usr/bin/env python3
"""Writes Fashion-MNIST (the IDX files of Debian's dataset-fashion-mnist) out as PNG class
folders, the layout torchvision's ImageFolder and fulgur's image_folder plugin read:

    OUT/train/0_tshirt_top/00000.png ... OUT/test/9_ankle_boot/09999.png

Class folders sort in label order, so class index = label. Python's standard library only
(gzip, struct, zlib): no fulgur, no PIL. 8-bit grayscale PNGs, 28 x 28.

    python3 examples/fashion_mnist_to_png.py OUT [--limit N] [--src DIR]
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

CLASSES = ["0_tshirt_top", "1_trouser", "2_pullover", "3_dress", "4_coat", "5_sandal",
           "6_shirt", "7_sneaker", "8_bag", "9_ankle_boot"]
SPLITS = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
          "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


def read_idx(path, rank):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    if magic != 0x800 | rank:
        sys.exit(f"{path}: magic {magic:#x}, expected {0x800 | rank:#x}")
    dims = struct.unpack(f">{rank}I", data[4:4 + 4 * rank])
    return dims, data[4 + 4 * rank:]


def png_chunk(kind, payload):
    body = kind + payload
    return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body))


def gray_png(pixels, height, width):
    """An 8-bit grayscale PNG: every row with filter type 0 (none)."""
    raw = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header)
            + png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b""))


def export(src, out, split, limit):
    images_name, labels_name = SPLITS[split]
    (count, rows, cols), pixels = read_idx(os.path.join(src, images_name), 3)
    (label_count,), labels = read_idx(os.path.join(src, labels_name), 1)
    if label_count != count:
        sys.exit(f"{split}: {count} images but {label_count} labels")
    n = count if limit is None else min(limit, count)
    for name in CLASSES:
        os.makedirs(os.path.join(out, split, name), exist_ok=True)
    size = rows * cols
    for i in range(n):
        path = os.path.join(out, split, CLASSES[labels[i]], f"{i:05d}.png")
        with open(path, "wb") as f:
            f.write(gray_png(pixels[i * size:(i + 1) * size], rows, cols))
    print(f"{split}: {n} images in {os.path.join(out, split)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder to write train/ and test/ into")
    ap.add_argument("--src", default="/usr/share/datasets/fashion-mnist",
                    help="folder of the IDX files (default: Debian's dataset-fashion-mnist)")
    ap.add_argument("--limit", type=int, default=None,
                    help="the first N images of each split only")
    args = ap.parse_args()
    for split in SPLITS:
        export(args.src, args.out, split, args.limit)


if __name__ == "__main__":
    main()
