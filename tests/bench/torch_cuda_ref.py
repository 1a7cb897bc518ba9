#!/usr/bin/env python3
"""PyTorch references for tests/bench/bench_cuda.sh on one CUDA GPU: trains the model of
tests/bench/{mlp,cnn}.ini (SGD, lr 0.01, momentum 0.9, cross-entropy) on Fashion-MNIST and
prints its samples/s, in one of three ways:

  eager      plain PyTorch
  compile    torch.compile(model) (default mode); compilation happens in the warm-up
  lightning  a LightningModule under lightning's Trainer (accelerator="gpu", devices=1)

As fulgur does, every batch comes from page-locked host memory and is copied to the GPU
inside the step (non_blocking): the data path is part of what is timed. The timed region is
`--batches` steps after `--warmup` untimed ones, closed by torch.cuda.synchronize().

  torch_cuda_ref.py --mode eager --model mlp --batch-size 128 --batches 300
  -> RESULT samples_per_s=... seconds=... batches=... last_loss=...
"""
import argparse
import gzip
import os
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mode", choices=("eager", "compile", "lightning"), default="eager")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--batches", type=int, default=300, help="timed steps")
    p.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--precision", choices=("fp32", "bf16-mixed"), default="fp32",
                   help="bf16-mixed: forward and loss under torch.autocast(bfloat16)")
    p.add_argument("--channels-last", action="store_true",
                   help="model and batches in torch.channels_last (NHWC) memory format")
    p.add_argument("--cudnn-benchmark", action="store_true",
                   help="torch.backends.cudnn.benchmark = True (algorithms timed per shape)")
    a = p.parse_args(argv)
    if a.batches < 1 or a.batch_size < 1 or a.warmup < 0:
        p.error("--batches and --batch-size must be >= 1, --warmup >= 0")
    return a


def read_idx(path, header):
    with gzip.open(path, "rb") as f:
        return bytearray(f.read()[header:])


def load_train(torch, data_dir):
    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 16)
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 8)
    n = len(labels)
    x = torch.frombuffer(images, dtype=torch.uint8).reshape(n, 1, 28, 28).float().div_(255.0)
    y = torch.frombuffer(labels, dtype=torch.uint8).long()
    return x, y


def build_model(nn, kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                             nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128),
                         nn.ReLU(), nn.Linear(128, 10))


def pinned_batches(torch, a):
    x, y = load_train(torch, a.data_dir)
    perm = torch.randperm(x.shape[0])
    x, y = x[perm].contiguous(), y[perm].contiguous()
    per_epoch = x.shape[0] // a.batch_size
    return [(x[i * a.batch_size:(i + 1) * a.batch_size].pin_memory(),
             y[i * a.batch_size:(i + 1) * a.batch_size].pin_memory()) for i in range(per_epoch)]


def run_plain(torch, nn, a, batches):
    dev = torch.device("cuda")
    model = build_model(nn, a.model).to(dev)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16-mixed")
    if a.mode == "compile":
        model = torch.compile(model)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    def step(i):
        xb, yb = batches[i % len(batches)]
        xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
        xb = xb.contiguous(memory_format=fmt)
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(a.warmup, a.warmup + a.batches):
        loss = step(i)
    torch.cuda.synchronize()
    return time.perf_counter() - t0, loss.item()


def run_lightning(torch, nn, a, batches):
    try:
        import lightning as L
    except ImportError:
        import pytorch_lightning as L
    total = a.warmup + a.batches
    xs = torch.cat([b[0] for b in batches])
    ys = torch.cat([b[1] for b in batches])
    ds = torch.utils.data.TensorDataset(xs, ys)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=False,
                                         drop_last=True, pin_memory=True, num_workers=0)

    class Net(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = build_model(nn, a.model)
            self.loss_fn = nn.CrossEntropyLoss()
            self.last = None

        def training_step(self, batch, i):
            xb, yb = batch
            loss = self.loss_fn(self.net(xb), yb)
            self.last = loss.detach()
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=a.lr, momentum=a.momentum)

    class Clock(L.Callback):
        t0 = None
        t1 = None

        def on_train_batch_start(self, trainer, module, batch, i):
            if trainer.global_step == a.warmup and self.t0 is None:
                torch.cuda.synchronize()
                self.t0 = time.perf_counter()

        def on_train_end(self, trainer, module):
            torch.cuda.synchronize()
            self.t1 = time.perf_counter()

    clock = Clock()
    model = Net()
    trainer = L.Trainer(accelerator="gpu", devices=1, max_steps=total, max_epochs=-1,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[clock])
    trainer.fit(model, loader)
    return clock.t1 - clock.t0, model.last.item()


def main(argv):
    a = parse_args(argv)
    import torch
    from torch import nn

    if not torch.cuda.is_available():
        print("torch_cuda_ref: no CUDA device visible to PyTorch", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False  # fulgur's default: true fp32
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    if a.mode == "lightning" and (a.precision != "fp32" or a.channels_last):
        print("torch_cuda_ref: --precision/--channels-last are for eager and compile",
              file=sys.stderr)
        return 2
    torch.manual_seed(a.seed)
    batches = pinned_batches(torch, a)
    run = run_lightning if a.mode == "lightning" else run_plain
    secs, last = run(torch, nn, a, batches)
    print("RESULT samples_per_s=%.1f seconds=%.4f batches=%d last_loss=%.4f mode=%s torch=%s "
          "precision=%s channels_last=%d cudnn_benchmark=%d"
          % (a.batches * a.batch_size / secs, secs, a.batches, last, a.mode, torch.__version__,
             a.precision, a.channels_last, a.cudnn_benchmark))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
