#!/usr/bin/env python3
"""PyTorch side of bench_lm_cuda.sh on one CUDA GPU: GPT-2 small's architecture (the layers
of examples/gpt2_124m.ini: tied embedding, pre-norm blocks, GELU tanh) trained with AdamW
on random tokens, as nanoGPT writes it (F.scaled_dot_product_attention, causal: PyTorch's
flash kernel). Prints "RESULT tokens_per_s=X" over the timed steps after warm-up steps.

  torch_gpt_cuda_ref.py --precision fp32|bf16-mixed [--compile] --batch 8 --steps 20
fp32 runs without TF32 (fulgur's allow_tf32 = false default); bf16-mixed is autocast to
bfloat16 with f32 weights, as fulgur's bf16-mixed."""
import argparse
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(c), torch.nn.LayerNorm(c)
        self.qkv, self.proj = torch.nn.Linear(c, 3 * c), torch.nn.Linear(c, c)
        self.fc, self.fc_proj = torch.nn.Linear(c, 4 * c), torch.nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, width, heads, layers, context):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, width), torch.nn.Embedding(context, width)
        self.h = torch.nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(width)
        self.lm_head = torch.nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--precision", choices=("fp32", "bf16-mixed"), default="fp32")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Gpt(a.vocab, a.width, a.heads, a.layers, a.context).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, betas=(0.9, 0.95),
                            fused=True)
    fwd = torch.compile(model) if a.compile else model
    n = a.warmup + a.steps
    data = torch.randint(0, a.vocab, (n * a.batch, a.context + 1)).pin_memory()
    half = a.precision == "bf16-mixed"

    def step(i):
        xy = data[i * a.batch:(i + 1) * a.batch].to(dev, non_blocking=True)
        x, y = xy[:, :-1], xy[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=half):
            loss = F.cross_entropy(fwd(x).view(-1, a.vocab).float(), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(a.warmup, n):
        loss = step(i)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"RESULT tokens_per_s={a.steps * a.batch * a.context / dt:.1f} "
          f"last_loss={loss.item():.4f}")


if __name__ == "__main__":
    main()
