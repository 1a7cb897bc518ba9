#!/usr/bin/env python3
"""Runs test_model_loss (mse or bce) and recomputes its mean loss, metric and gradients with
PyTorch in float64: torch.nn.functional.mse_loss / binary_cross_entropy_with_logits (mean
reduction) of a linear layer's single output. Exit 77 when torch cannot be imported.

    loss_torch.py TEST_MODEL_LOSS CPU_PLUGIN mse|bce
"""
import subprocess
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3 cannot import torch (apt-get install python3-torch)")
    sys.exit(77)


def main():
    exe, plugin, kind = sys.argv[1:4]
    out = subprocess.run([exe, plugin, kind], capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stdout + out.stderr)
        sys.exit(1)
    rows = {}
    for line in out.stdout.splitlines():
        name, *vals = line.split()
        if name in ("x", "t", "w", "b", "loss", "metric", "dw", "db"):
            rows[name] = [float(v) for v in vals]
    x = torch.tensor(rows["x"], dtype=torch.float64).view(len(rows["t"]), -1)
    t = torch.tensor(rows["t"], dtype=torch.float64)
    w = torch.tensor(rows["w"], dtype=torch.float64).view(1, -1).requires_grad_()
    b = torch.tensor(rows["b"], dtype=torch.float64).requires_grad_()
    y = (x @ w.t() + b).view(-1)
    if kind == "mse":
        loss = torch.nn.functional.mse_loss(y, t)
        metric = (y - t).abs().mean()
    else:
        loss = torch.nn.functional.binary_cross_entropy_with_logits(y, t)
        metric = ((y > 0) == (t > 0.5)).double().mean()
    loss.backward()
    want = {"loss": [loss.item()], "metric": [metric.item()],
            "dw": w.grad.view(-1).tolist(), "db": b.grad.view(-1).tolist()}
    bad = 0
    for name, ref in want.items():
        for i, (g, r) in enumerate(zip(rows[name], ref)):
            if abs(g - r) > 2e-5 * max(1.0, abs(r)):
                print(f"FAIL {kind} {name}[{i}]: fulgur {g:.9g}, torch {r:.9g}")
                bad += 1
        print(f"{kind} {name}: fulgur {rows[name][:3]} torch {[round(v, 9) for v in ref[:3]]}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
