#!/usr/bin/env python3
"""PyTorch side of bench_lm.sh: the GPT of tests/lm/gpt_torch.py at a benchmark size,
trained with AdamW on random byte windows; prints "tokens/s X" over the timed steps (after
warm-up steps).
  torch_gpt_ref.py LAYERS HEADS WIDTH CONTEXT BATCH THREADS STEPS"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lm"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from gpt_torch import Gpt  # noqa: E402


def main():
    layers, heads, width, context, batch, threads, steps = map(int, sys.argv[1:8])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Gpt(False, vocab=256, width=width, heads=heads, layers=layers, context=context)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, 256, (batch * (steps + 3), context + 1))

    def step(i):
        x, y = data[i * batch:(i + 1) * batch, :-1], data[i * batch:(i + 1) * batch, 1:]
        loss = F.cross_entropy(model(x).view(-1, 256), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for i in range(3):
        step(i)
    t0 = time.perf_counter()
    for i in range(3, 3 + steps):
        step(i)
    dt = time.perf_counter() - t0
    print(f"tokens/s {steps * batch * context / dt:.1f}")


if __name__ == "__main__":
    main()
