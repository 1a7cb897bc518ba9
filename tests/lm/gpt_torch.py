#!/usr/bin/env python3
"""The tiny GPT of ctest lm.gpt_vs_torch, in PyTorch: the same architecture as fulgur's
embedding + position_embedding + transformer_block x L + layernorm + linear, with the same
tensor names.
  gpt_torch.py init FOLDER [tied]   writes FOLDER/corpus.txt and FOLDER/init.safetensors
  gpt_torch.py train FOLDER [tied]  trains 50 AdamW steps on the windows fulgur's text
                                    plugin draws (seed 7, epoch 0, in order) and prints one
                                    loss per line
tied: lm_head.weight is wte.weight (one parameter, as GPT-2). smooth: untied,
F.cross_entropy(label_smoothing=0.1, ignore_index=32), the final weights written to
FOLDER/torch_smooth.safetensors. decay / decay_all: untied,
AdamW with weight_decay 0.5 on two parameter groups (nanoGPT's configure_optimizers: the
tensors with dim >= 2 decay, biases and norm gains do not) or on every tensor, and train
also writes the final weights to FOLDER/torch_MODE.safetensors. hf: tied, and init writes
init.safetensors in Hugging Face's GPT-2 layout (transformer.h.N.attn.c_attn.weight stored
(in, out) as Conv1D, the attn.bias mask buffers, lm_head.weight) and ref.safetensors in
fulgur's names for train.
Exit 77 (skip) without torch."""
import json
import math
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)

V, C, H, L, T, B, STEPS, SEED = 256, 32, 4, 2, 16, 4, 50, 7
M64 = (1 << 64) - 1
GOLDEN = 0x9e3779b97f4a7c15


class Attn(torch.nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.c, self.h = c, h
        self.qkv = torch.nn.Linear(c, 3 * c)
        self.proj = torch.nn.Linear(c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.h)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class Mlp(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc = torch.nn.Linear(c, 4 * c)
        self.proj = torch.nn.Linear(4 * c, c)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.ln_1, self.attn = torch.nn.LayerNorm(c), Attn(c, h)
        self.ln_2, self.mlp = torch.nn.LayerNorm(c), Mlp(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(torch.nn.Module):
    """fulgur's embedding, position_embedding, transformer_block x layers, layernorm and
    linear (lm_head; tied: its weight is wte's), with the same tensor names."""

    def __init__(self, tied, vocab=V, width=C, heads=H, layers=L, context=T):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, width)
        self.wpe = torch.nn.Embedding(context, width)
        self.h = torch.nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(width)
        self.lm_head = torch.nn.Linear(width, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def save(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)


def window_start(seed, epoch, index, starts):
    """plugins/common/token_windows.c: the train split's seeded offsets."""
    k = mix64((seed + GOLDEN) & M64)
    k = mix64(k ^ ((epoch + 2 * GOLDEN) & M64))
    k = mix64(k ^ ((index + 3 * GOLDEN) & M64))
    return k % starts


def corpus():
    words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly box "
             "jackdaws and a sphinx of black quartz judges my vow").split()
    out, state = [], 12345
    for _ in range(3000):
        state = (state * 6364136223846793005 + 1442695040888963407) & M64
        out.append(words[(state >> 33) % len(words)])
    return (" ".join(out) + "\n").encode()


HF_RENAMES = {".attn.qkv.": ".attn.c_attn.", ".attn.proj.": ".attn.c_proj.",
              ".mlp.fc.": ".mlp.c_fc.", ".mlp.proj.": ".mlp.c_proj."}


def hf_layout(state):
    """Hugging Face's GPT2LMHeadModel.state_dict() names and Conv1D (in, out) weights."""
    out = {}
    for name, t in state.items():
        hf = name
        for ours, theirs in HF_RENAMES.items():
            if ours in name:
                hf = name.replace(ours, theirs)
                if name.endswith(".weight"):
                    t = t.t()
        out[hf if name == "lm_head.weight" else "transformer." + hf] = t
    for i in range(L):
        out[f"transformer.h.{i}.attn.bias"] = torch.ones(1, 1, T, T).tril()
    return out


def init(folder, mode):
    torch.manual_seed(0)
    model = Gpt(mode in ("tied", "hf"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".weight") and p.dim() == 2:
                p.normal_(0, 0.02)
    with open(f"{folder}/corpus.txt", "wb") as f:
        f.write(corpus())
    state = model.state_dict()
    if mode == "hf":
        save(f"{folder}/ref.safetensors", state)
        state = hf_layout(state)
    save(f"{folder}/init.safetensors", state)


def load_safetensors(path):
    """A safetensors file's tensors as f32 (F32 or BF16 stored; __metadata__ skipped)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        raw = bytearray(data[a:b])
        if h["dtype"] == "BF16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16).float()
        else:
            t = torch.frombuffer(raw, dtype=torch.float32)
        out[name] = t.view(h["shape"])
    return out


def adamw_losses(model, params, vocab, steps=STEPS, ignore_index=-100, label_smoothing=0.0):
    """STEPS AdamW steps (lr 1e-3, weight decay 0.01 unless the groups say) on the windows
    fulgur's text data gives (seed SEED, epoch 0), each step's loss printed."""
    text = torch.tensor(list(corpus()), dtype=torch.long)
    starts = len(text) - T
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    for step in range(steps):
        idx = [window_start(SEED, 0, step * B + i, starts) for i in range(B)]
        x = torch.stack([text[s:s + T] for s in idx])
        y = torch.stack([text[s + 1:s + T + 1] for s in idx])
        loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1), ignore_index=ignore_index,
                               label_smoothing=label_smoothing)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"{loss.item():.9g}")


def train(folder, mode):
    torch.manual_seed(0)
    tied = mode in ("tied", "hf")
    model = Gpt(tied)
    # mode "ignore": every space byte (32) is a label the loss skips
    ignore_index = 32 if mode == "ignore" else -100
    tensors = load_safetensors(f"{folder}/{'ref' if mode == 'hf' else 'init'}.safetensors")
    if tied:
        tensors["lm_head.weight"] = tensors["wte.weight"]
    model.load_state_dict(tensors)
    # mode "smooth": [model] label_smoothing = 0.1, and space bytes ignored as in "ignore"
    if mode == "smooth":
        ignore_index = 32
    adamw_losses(model, param_groups(model, mode), V, ignore_index=ignore_index,
                 label_smoothing=0.1 if mode == "smooth" else 0.0)
    if mode.startswith("decay") or mode == "smooth":
        save(f"{folder}/torch_{mode}.safetensors", model.state_dict())


def param_groups(model, mode):
    """nanoGPT's two groups (decay: dim >= 2) for mode decay, one decayed group for
    decay_all; PyTorch's default (every parameter at weight_decay 0.01) otherwise."""
    params = list(model.named_parameters())
    if mode == "decay":
        return [{"params": [p for _, p in params if p.dim() >= 2], "weight_decay": 0.5},
                {"params": [p for _, p in params if p.dim() < 2], "weight_decay": 0.0}]
    if mode == "decay_all":
        return [{"params": [p for _, p in params], "weight_decay": 0.5}]
    return [p for _, p in params]


if __name__ == "__main__":
    torch.set_num_threads(1)
    {"init": init, "train": train}[sys.argv[1]](sys.argv[2], (sys.argv[3:] or ["untied"])[0])
