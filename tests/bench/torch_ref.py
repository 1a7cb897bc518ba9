#!/usr/bin/python3
"""PyTorch reference for tests/bench/bench_cpu.sh: trains the same model as
examples/fashion_mnist_{mlp,cnn}.ini on Fashion-MNIST and prints its samples/s.

Data are read once into memory as float tensors (x/255, as fulgur's idx plugin) and shuffled
once, all before the timed region. The timed region is the training loop over batches only:
forward, loss, backward, optimizer step. A few warm-up batches run first, untimed.

  torch_ref.py --model mlp --batches 200 --threads 2   -> one line "RESULT samples_per_s=..."
  torch_ref.py --blas                                  -> the BLAS libraries torch mapped
"""
import argparse
import gzip
import os
import sys
import time

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    p.add_argument("--batches", type=int, default=200, help="timed batches")
    p.add_argument("--warmup", type=int, default=20, help="untimed batches before the timed ones")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data-dir", default=DATA_DIR)
    p.add_argument("--blas", action="store_true",
                   help="run one matmul and print the BLAS libraries mapped into this process")
    a = p.parse_args(argv)
    for name in ("batches", "batch_size", "threads"):
        if getattr(a, name) < 1:
            p.error("--%s must be >= 1, got %d" % (name.replace("_", "-"), getattr(a, name)))
    if a.warmup < 0:
        p.error("--warmup must be >= 0, got %d" % a.warmup)
    return a


def mapped_blas_libraries():
    """Paths of BLAS-like shared objects mapped into this process, resolved through links:
    what torch really calls, whatever the alternatives system says."""
    keys = ("blas", "blis", "mkl", "atlas", "lapack")
    seen = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6:
                continue
            path = parts[5]
            if any(k in os.path.basename(path).lower() for k in keys):
                real = os.path.realpath(path)
                entry = path if real == path else "%s -> %s" % (path, real)
                if entry not in seen:
                    seen.append(entry)
    return seen


def mapping_of(address):
    """The file mapped at address in this process, or None."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(v, 16) for v in parts[0].split("-"))
            if lo <= address < hi:
                return parts[5] if len(parts) >= 6 else None
    return None


def sgemm_provider():
    """The library whose sgemm_ libtorch_cpu calls: dlsym through libtorch_cpu's own handle
    resolves the symbol as its calls do, and the maps say which file holds that address.
    Several BLAS libraries can be mapped at once (OpenBLAS's liblapack next to netlib's
    libblas), so the list of mapped libraries alone does not tell."""
    import ctypes
    with open("/proc/self/maps") as f:
        torch_libs = [l.split()[5] for l in f if len(l.split()) >= 6 and "libtorch_cpu" in l]
    if not torch_libs:
        return None
    try:
        fn = ctypes.CDLL(torch_libs[0]).sgemm_
    except (OSError, AttributeError):
        return None
    path = mapping_of(ctypes.cast(fn, ctypes.c_void_p).value)
    if path is None:
        return None
    real = os.path.realpath(path)
    return path if real == path else "%s -> %s" % (path, real)


def read_idx(path, header):
    with gzip.open(path, "rb") as f:
        data = f.read()
    return bytearray(data[header:])


def load_train(torch, data_dir):
    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 16)
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 8)
    n = len(labels)
    x = torch.frombuffer(images, dtype=torch.uint8).reshape(n, 1, 28, 28).float().div_(255.0)
    y = torch.frombuffer(labels, dtype=torch.uint8).long()
    return x, y


def build_model(nn, kind):
    if kind == "mlp":  # examples/fashion_mnist_mlp.ini
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                             nn.ReLU(), nn.Linear(256, 10))
    # examples/fashion_mnist_cnn.ini: 28 -> conv3 26 -> pool 13 -> conv3 11 -> pool 5
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128),
                         nn.ReLU(), nn.Linear(128, 10))


def main(argv):
    a = parse_args(argv)
    import torch
    from torch import nn

    torch.set_num_threads(a.threads)
    if a.blas:
        m = torch.randn(512, 512)
        (m @ m).sum().item()
        for lib in mapped_blas_libraries():
            print("MAPPED %s" % lib)
        print("SGEMM %s" % (sgemm_provider() or "unknown"))
        print("TORCH %s threads=%d" % (torch.__version__, torch.get_num_threads()))
        return 0

    torch.manual_seed(a.seed)
    x, y = load_train(torch, a.data_dir)
    perm = torch.randperm(x.shape[0])
    x, y = x[perm].contiguous(), y[perm].contiguous()
    per_epoch = x.shape[0] // a.batch_size
    batches = [(x[i * a.batch_size:(i + 1) * a.batch_size], y[i * a.batch_size:(i + 1) * a.batch_size])
               for i in range(per_epoch)]

    model = build_model(nn, a.model)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    def step(i):
        xb, yb = batches[i % per_epoch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for i in range(a.warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(a.warmup, a.warmup + a.batches):
        loss = step(i)
    secs = time.perf_counter() - t0
    rate = a.batches * a.batch_size / secs
    print("RESULT samples_per_s=%.1f seconds=%.4f batches=%d last_loss=%.4f threads=%d"
          % (rate, secs, a.batches, loss.item(), torch.get_num_threads()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
