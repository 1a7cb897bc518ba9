#!/usr/bin/env python3
"""A Llama in PyTorch with Hugging Face's module names and formulas (LlamaForCausalLM:
model.embed_tokens, model.layers.N.self_attn.{q,k,v,o}_proj, model.layers.N.mlp.{gate,up,
down}_proj, model.layers.N.{input,post_attention}_layernorm, model.norm, lm_head; rotate_half
rope on q and k as stored; repeat_kv), written here without the transformers package, and
the files a Hugging Face checkpoint folder holds: model.safetensors (written by hand: an
8-byte little-endian header length, the JSON header, the raw data) and config.json.
  hf_llama_torch.py init FOLDER [key=value ...]   corpus.txt, model.safetensors, config.json
      keys: vocab hidden inter layers heads kv_heads theta eps tied (0/1) dtype (F32/BF16)
            rope (none/llama3/linear: config.json's rope_scaling, factor 8, low_freq_factor
            1, high_freq_factor 4, original_max_position_embeddings 128: pair 0 kept,
            pair 1 blended, pairs 2-3 divided at head_dim 8; linear: factor 4)
  hf_llama_torch.py train FOLDER [FILE]           50 AdamW steps (lr 1e-3, wd 0.01) from FILE
      (default FOLDER/model.safetensors) on the windows fulgur's text plugin draws (seed 7,
      context 16, batch 4, in order), one loss per line
  hf_llama_torch.py loss FOLDER TOKENS T B SEED   the loss of the first batch fulgur's tokens
      plugin draws from the llm.c shard TOKENS (windows of T + 1, seeded, in order)
HF_ROPE=interleaved in the environment rotates adjacent pairs (Meta's original layout, which
Hugging Face's conversion permutes q_proj and k_proj away from) instead: the control that
shows the comparison tells the two conventions apart. HF_ROPE=unscaled ignores config.json's
rope_scaling (the control of the scaled runs). HF_STEPS=N trains N steps.
Exit 77 (skip) without torch."""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)
from gpt_torch import adamw_losses, corpus, window_start  # noqa: E402
from gpt_torch import load_safetensors as load  # noqa: E402

T, B, SEED = 16, 4, 7
STEPS = int(os.environ.get("HF_STEPS", "50"))
INTERLEAVED = os.environ.get("HF_ROPE") == "interleaved"
UNSCALED = os.environ.get("HF_ROPE") == "unscaled"
DEFAULTS = dict(vocab=256, hidden=32, inter=64, layers=2, heads=4, kv_heads=2, theta=10000.0,
                eps=1e-5, tied=0, dtype="F32", rope="none")
SCALINGS = {"none": None,
            "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 128},
            "linear": {"type": "linear", "factor": 4.0}}


def scaled_inv_freq(inv_freq, scaling):
    """Hugging Face's rope scaling, re-implemented from transformers' modeling_rope_utils
    (_compute_llama3_parameters; linear: inv_freq / factor), in float32 as there."""
    if scaling is None or UNSCALED:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type"))
    factor = scaling["factor"]
    if kind == "linear":
        return inv_freq / factor
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context_len / low, old_context_len / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)


class RmsNorm(torch.nn.Module):
    def __init__(self, c, eps):
        super().__init__()
        self.weight, self.eps = torch.nn.Parameter(torch.ones(c)), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    d = x.shape[-1]
    return torch.cat((-x[..., d // 2:], x[..., :d // 2]), dim=-1)


class Attention(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, h, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.h, self.kv, self.d, self.theta = h, kv, c // h, cfg["rope_theta"]
        self.scaling = cfg.get("rope_scaling")
        self.q_proj = torch.nn.Linear(c, h * self.d, bias=False)
        self.k_proj = torch.nn.Linear(c, kv * self.d, bias=False)
        self.v_proj = torch.nn.Linear(c, kv * self.d, bias=False)
        self.o_proj = torch.nn.Linear(h * self.d, c, bias=False)

    def rope(self, x):
        d = self.d
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        inv_freq = scaled_inv_freq(inv_freq, self.scaling)
        freqs = torch.outer(torch.arange(x.shape[2]).float(), inv_freq)
        if INTERLEAVED:  # pairs (2i, 2i + 1) turn by freqs[:, i]
            cos, sin = freqs.cos().repeat_interleave(2, -1), freqs.sin().repeat_interleave(2, -1)
            pairs = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
            return x * cos + pairs * sin
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos() + rotate_half(x) * emb.sin()

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        q, k = self.rope(q), self.rope(k)
        k = k.repeat_interleave(self.h // self.kv, dim=1)  # Hugging Face's repeat_kv
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        att = (q @ k.transpose(-2, -1)) / (self.d ** 0.5)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.o_proj((att @ v).transpose(1, 2).reshape(b, t, self.h * self.d))


class Mlp(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, f = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = torch.nn.Linear(c, f, bias=False)
        self.up_proj = torch.nn.Linear(c, f, bias=False)
        self.down_proj = torch.nn.Linear(f, c, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.input_layernorm, self.self_attn = RmsNorm(c, eps), Attention(cfg)
        self.post_attention_layernorm, self.mlp = RmsNorm(c, eps), Mlp(cfg)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = torch.nn.ModuleList(DecoderLayer(cfg)
                                          for _ in range(cfg["num_hidden_layers"]))
        self.norm = RmsNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class LlamaForCausalLM(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.model = Body(cfg)
        self.lm_head = torch.nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        if cfg["tie_word_embeddings"]:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, idx):
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


def hf_config(o):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": o["vocab"], "hidden_size": o["hidden"],
            "intermediate_size": o["inter"], "num_hidden_layers": o["layers"],
            "num_attention_heads": o["heads"], "num_key_value_heads": o["kv_heads"],
            "rms_norm_eps": o["eps"], "rope_theta": o["theta"],
            "rope_scaling": SCALINGS[o["rope"]],
            "max_position_embeddings": 2048, "tie_word_embeddings": bool(o["tied"]),
            "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0,
            "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}


def save(path, tensors, dtype):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        raw = (t.to(torch.bfloat16).view(torch.int16) if dtype == "BF16" else t).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def init(folder, args):
    o = dict(DEFAULTS)
    for a in args:
        k, v = a.split("=")
        o[k] = type(DEFAULTS[k])(v)
    cfg = hf_config(o)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.05)
            else:  # the norms' gains away from 1, so that a lost gain shows
                p.copy_(1 + 0.2 * torch.randn_like(p))
    state = model.state_dict()
    if cfg["tie_word_embeddings"]:  # as Hugging Face saves a tied model: no lm_head
        del state["lm_head.weight"]
    with open(f"{folder}/corpus.txt", "wb") as f:
        f.write(corpus())
    save(f"{folder}/model.safetensors", state, o["dtype"])
    with open(f"{folder}/config.json", "w") as f:
        json.dump(cfg, f, indent=2)


def train(folder, path):
    cfg = json.load(open(f"{folder}/config.json"))
    model = LlamaForCausalLM(cfg)
    state = load(path)
    if cfg["tie_word_embeddings"]:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state)
    adamw_losses(model, model.parameters(), cfg["vocab_size"], steps=STEPS)


def first_loss(folder, tokens, t, b, seed):
    import numpy
    cfg = json.load(open(f"{folder}/config.json"))
    model = LlamaForCausalLM(cfg)
    state = load(f"{folder}/model.safetensors")
    if cfg["tie_word_embeddings"]:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state)
    ids = torch.from_numpy(numpy.fromfile(tokens, dtype=numpy.uint16)[512:].astype("int64"))
    starts = len(ids) - t
    idx = [window_start(seed, 0, i, starts) for i in range(b)]
    x = torch.stack([ids[s:s + t] for s in idx])
    y = torch.stack([ids[s + 1:s + t + 1] for s in idx])
    with torch.no_grad():
        print(f"{F.cross_entropy(model(x).view(-1, cfg['vocab_size']), y.view(-1)).item():.9g}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    if sys.argv[1] == "init":
        init(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "loss":
        first_loss(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    else:
        train(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else f"{sys.argv[2]}/model.safetensors")
