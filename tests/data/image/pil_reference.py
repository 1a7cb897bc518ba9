#!/usr/bin/env python3
"""Writes PNG and JPEG fixtures with Pillow and what Pillow (and torchvision, when present)
make of them, for `fulgur_test_data_image reference OUT`:

    OUT/images/<class>/*      fixtures of one size (23 x 37): PNG RGB, gray, palette with
                              transparency, RGBA, gray + alpha, 1-bit; JPEG 4:2:0, 4:4:4,
                              gray, progressive
    OUT/sizes/<class>/*       fixtures of several sizes, for resize and center_crop
    OUT/cases.txt             NAME TRAIN_DIR MODE RESIZE CENTER_CROP TOLERANCE COUNT C H W
    OUT/NAME.u8, NAME.labels  expected pixels (COUNT, C, H, W) and labels, in the order of
                              torchvision's ImageFolder

Decoding must match Pillow exactly (tolerance 0); resizing within 1 (Pillow rounds to 8 bits
between its two passes, fulgur once at the end).

    pil_reference.py OUT
"""
import os
import random
import sys

from PIL import Image

try:
    import torchvision
    from torchvision import transforms
except ImportError:  # the order and the crops are then emulated from their definitions
    torchvision = None

H, W = 23, 37


def pattern(w, h, seed):
    """A smooth RGB image with detail: gradients, a few shapes, a little noise."""
    rnd = random.Random(seed)
    img = Image.new("RGB", (w, h))
    px = img.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = ((x * 255 // max(w - 1, 1) + seed * 40) % 256,
                        (y * 255 // max(h - 1, 1) + seed * 70) % 256,
                        ((x + y) * 9 + rnd.randrange(24)) % 256)
    return img


def write_fixtures(out):
    d = os.path.join(out, "images")
    os.makedirs(os.path.join(d, "png"), exist_ok=True)
    os.makedirs(os.path.join(d, "jpeg"), exist_ok=True)
    base = pattern(W, H, 1)
    base.save(os.path.join(d, "png", "rgb.png"))
    base.convert("L").save(os.path.join(d, "png", "gray.png"))
    pal = base.quantize(colors=50)
    pal.info["transparency"] = 3
    pal.save(os.path.join(d, "png", "palette.png"), transparency=3)
    rgba = pattern(W, H, 2).convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize((W, H)))
    rgba.save(os.path.join(d, "png", "rgba.png"))
    la = pattern(W, H, 3).convert("LA")
    la.save(os.path.join(d, "png", "la.png"))
    # 16-bit gray: Pillow opens it as mode I and clips to 255 when converting to L or RGB
    # (not the high byte): values below and above 255 both occur.
    g16 = Image.new("I;16", (W, H))
    g16.putdata([(x * 2111 + y * 977) % 65536 if (x + y) % 3 else (x * 7 + y) % 256
                 for y in range(H) for x in range(W)])
    g16.save(os.path.join(d, "png", "gray16.png"))
    pattern(W, H, 4).convert("1").save(os.path.join(d, "png", "bit1.png"))
    photo = pattern(W, H, 5)
    photo.save(os.path.join(d, "jpeg", "q90_420.jpg"), quality=90)
    photo.save(os.path.join(d, "jpeg", "q95_444.jpg"), quality=95, subsampling=0)
    photo.convert("L").save(os.path.join(d, "jpeg", "gray.jpg"), quality=85)
    pattern(W, H, 6).save(os.path.join(d, "jpeg", "progressive.jpg"), quality=80,
                          progressive=True)

    s = os.path.join(out, "sizes")
    for name, (w, h), seed in [("a/wide.png", (64, 48), 7), ("a/tall.jpg", (50, 70), 8),
                               ("b/square.png", (33, 33), 9), ("b/strip.jpg", (100, 30), 10),
                               ("b/small.png", (12, 9), 11)]:
        os.makedirs(os.path.dirname(os.path.join(s, name)), exist_ok=True)
        pattern(w, h, seed).save(os.path.join(s, name), quality=90)


def image_folder(root):
    """(path, label) in ImageFolder's order: torchvision's own, or its definition."""
    if torchvision is not None:
        return torchvision.datasets.ImageFolder(root).samples
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    samples = []
    for label, c in enumerate(classes):
        for folder, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for n in sorted(names):
                if n.lower().endswith((".png", ".jpg", ".jpeg")):
                    samples.append((os.path.join(folder, n), label))
    return samples


def resize_short(img, n):
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    new_long = int(n * long / short)
    return img.resize((n, new_long) if w <= h else (new_long, n), Image.BILINEAR)


def center_crop(img, ch, cw):
    """torchvision's F.center_crop on a PIL image: zero padding when the crop is larger."""
    w, h = img.size
    if cw > w or ch > h:
        pad = Image.new(img.mode, (max(w, cw), max(h, ch)))
        pad.paste(img, ((cw - w) // 2 if cw > w else 0, (ch - h) // 2 if ch > h else 0))
        img, (w, h) = pad, pad.size
    top, left = int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0))
    return img.crop((left, top, left + cw, top + ch))


def transform(img, resize, crop):
    if torchvision is not None:
        steps = []
        if resize:
            steps.append(transforms.Resize(resize if len(resize) == 2 else resize[0],
                                           interpolation=transforms.InterpolationMode.BILINEAR))
        if crop:
            steps.append(transforms.CenterCrop(crop))
        return transforms.Compose(steps)(img) if steps else img
    if resize:
        img = (resize_short(img, resize[0]) if len(resize) == 1
               else img.resize((resize[1], resize[0]), Image.BILINEAR))
    if crop:
        img = center_crop(img, *crop)
    return img


def chw_bytes(img):
    channels = len(img.getbands())
    w, h = img.size
    hwc = img.tobytes()
    return bytes(hwc[(y * w + x) * channels + c]
                 for c in range(channels) for y in range(h) for x in range(w))


def write_case(out, lines, name, folder, mode, resize, crop, tolerance):
    samples = image_folder(os.path.join(out, folder))
    data, labels, shape = bytearray(), [], None
    for path, label in samples:
        with Image.open(path) as f:
            img = transform(f.convert("RGB" if mode == "rgb" else "L"), resize, crop)
        shape = (len(img.getbands()), img.size[1], img.size[0])
        data += chw_bytes(img)
        labels.append(label)
    with open(os.path.join(out, name + ".u8"), "wb") as f:
        f.write(data)
    with open(os.path.join(out, name + ".labels"), "w") as f:
        f.write("".join(f"{label}\n" for label in labels))
    text = lambda v: ",".join(map(str, v)) if v else "-"
    lines.append(f"{name} {folder} {mode} {text(resize)} {text(crop)} {tolerance} "
                 f"{len(samples)} {shape[0]} {shape[1]} {shape[2]}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write_fixtures(out)
    lines = [f"# Pillow {Image.__version__}, torchvision "
             f"{torchvision.__version__ if torchvision else 'absent (emulated)'}"]
    write_case(out, lines, "decode_rgb", "images", "rgb", None, None, 0)
    write_case(out, lines, "decode_gray", "images", "grayscale", None, None, 0)
    write_case(out, lines, "crop_pad", "sizes", "rgb", None, (40, 30), 0)
    write_case(out, lines, "resize_crop", "sizes", "rgb", (20,), (18, 18), 1)
    write_case(out, lines, "resize_hw", "sizes", "grayscale", (16, 24), None, 1)
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
