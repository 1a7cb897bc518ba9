#!/usr/bin/env python3
"""The data benchmark's helpers (tests/bench/bench_data.sh):

    bench_data_ref.py make DIR N          N JPEGs (256 x 192, quality 90) in DIR/train/<10 classes>/
    bench_data_ref.py torch DIR W PIN     torchvision ImageFolder + DataLoader with the transforms
                                          of bench_data.ini, W workers, pin_memory PIN (0/1):
                                          prints "torch images/s X" for epoch 2 (epoch 1 warms up)

Needs Pillow (make) and torch + torchvision (torch): Debian's python3-pil, python3-torchvision.
"""
import os
import sys
import time


def make(out, n):
    import random
    from PIL import Image, ImageDraw, ImageFilter
    rnd = random.Random(7)
    for i in range(n):
        cls = i % 10
        d = os.path.join(out, "train", f"class_{cls}")
        os.makedirs(d, exist_ok=True)
        img = Image.new("RGB", (256, 192), tuple(rnd.randrange(256) for _ in range(3)))
        draw = ImageDraw.Draw(img)
        for _ in range(12):  # shapes and noise: JPEG work like a photo's, not a flat field
            box = sorted(rnd.randrange(256) for _ in range(2)), sorted(rnd.randrange(192) for _ in range(2))
            draw.ellipse([box[0][0], box[1][0], box[0][1], box[1][1]],
                         fill=tuple(rnd.randrange(256) for _ in range(3)))
        img = img.filter(ImageFilter.GaussianBlur(1))
        noise = Image.effect_noise((256, 192), 24).convert("RGB")
        Image.blend(img, noise, 0.15).save(os.path.join(d, f"{i:05d}.jpg"), quality=90)


def bench_torch(root, workers, pin):
    import torch
    from torchvision import datasets, transforms
    torch.set_num_threads(1)
    tf = transforms.Compose([
        transforms.Resize(72), transforms.CenterCrop(64),
        transforms.RandomCrop(64, padding=4), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(os.path.join(root, "train"), transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers,
                                     pin_memory=bool(pin), drop_last=True,
                                     persistent_workers=workers > 0)
    rate = 0.0
    for epoch in range(2):
        t0, n = time.perf_counter(), 0
        for x, _ in dl:
            n += x.shape[0]
        rate = n / (time.perf_counter() - t0)
    print(f"torch images/s {rate:.0f}")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    else:
        import warnings
        warnings.filterwarnings("ignore")  # pin_memory without an accelerator
        bench_torch(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
