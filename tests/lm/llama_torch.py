#!/usr/bin/env python3
"""The tiny Llama-style stack of ctest lm.llama_vs_torch, in PyTorch, written here from the
formulas (Hugging Face Llama's conventions): embedding, then transformer_block x 2 with
norm = rmsnorm, grouped-query attention (4 query heads on 2 key/value heads over a fused
q | k | v projection), rotary embedding of q and k (rotate_half, theta 10000), SwiGLU MLP
(down(silu(gate(x)) * up(x)), 64 hidden), no biases; a final RMSNorm and an untied lm_head.
Tensor names as fulgur's: h.N.ln_1.weight, h.N.attn.qkv.weight, h.N.mlp.gate_proj.weight...
  llama_torch.py init FOLDER    writes FOLDER/corpus.txt and FOLDER/init.safetensors
  llama_torch.py train FOLDER   trains 50 AdamW steps on the windows fulgur's text plugin
                                draws (seed 7, epoch 0, in order), one loss per line
Exit 77 (skip) without torch."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)
from gpt_torch import adamw_losses, corpus, load_safetensors, save  # noqa: E402  (the GPT test's helpers)

V, C, H, KV, L, T, B, HIDDEN, STEPS, SEED = 256, 32, 4, 2, 2, 16, 4, 64, 50, 7
D, EPS, THETA = C // H, 1e-5, 10000.0


class RmsNorm(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(c))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rotate_half(x):
    return torch.cat((-x[..., D // 2:], x[..., :D // 2]), dim=-1)


def rope(x):
    """x (B, heads, T, D) rotated at positions 0..T-1, as Hugging Face Llama."""
    inv_freq = 1.0 / (THETA ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    freqs = torch.outer(torch.arange(x.shape[2]).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


class Attn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(C, (H + 2 * KV) * D, bias=False)
        self.proj = torch.nn.Linear(C, C, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split([H * D, KV * D, KV * D], dim=2)
        q = q.view(b, t, H, D).transpose(1, 2)
        k = k.view(b, t, KV, D).transpose(1, 2)
        v = v.view(b, t, KV, D).transpose(1, 2)
        q, k = rope(q), rope(k)
        k = k.repeat_interleave(H // KV, dim=1)  # query head h reads key/value head h // 2
        v = v.repeat_interleave(H // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / (D ** 0.5)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, C))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = torch.nn.Linear(C, HIDDEN, bias=False)
        self.up_proj = torch.nn.Linear(C, HIDDEN, bias=False)
        self.down_proj = torch.nn.Linear(HIDDEN, C, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = RmsNorm(C), Attn()
        self.ln_2, self.mlp = RmsNorm(C), Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Llama(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(V, C)
        self.h = torch.nn.ModuleList(Block() for _ in range(L))
        self.norm = RmsNorm(C)
        self.lm_head = torch.nn.Linear(C, V, bias=False)

    def forward(self, idx):
        x = self.wte(idx)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.norm(x))


def init(folder):
    torch.manual_seed(0)
    model = Llama()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.05)
            else:  # the norms' gains away from 1, so that a lost gain shows
                p.copy_(1 + 0.2 * torch.randn_like(p))
    with open(f"{folder}/corpus.txt", "wb") as f:
        f.write(corpus())
    save(f"{folder}/init.safetensors", model.state_dict())


def train(folder):
    model = Llama()
    model.load_state_dict(load_safetensors(f"{folder}/init.safetensors"))
    adamw_losses(model, model.parameters(), V)


if __name__ == "__main__":
    torch.set_num_threads(1)
    {"init": init, "train": train}[sys.argv[1]](sys.argv[2])
