#!/usr/bin/env python3
"""compare_losses.py LABEL METRICS_CSV REFERENCE_TXT LIMIT: fulgur's train/step_loss column
against one loss a line; exit 1 unless both have the same number of steps and every step
agrees within LIMIT relative."""
import csv
import sys

label, metrics, reference, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
rows = [r for r in csv.DictReader(open(metrics)) if r.get("train/step_loss")]
ours = [float(r["train/step_loss"]) for r in rows]
ref = [float(x) for x in open(reference)]
if len(ours) != len(ref) or not ref:
    sys.exit(f"FAIL: {label}: fulgur logged {len(ours)} step losses, the reference {len(ref)}")
worst = max(abs(a - b) / abs(b) for a, b in zip(ours, ref))
print(f"{label}: {len(ref)} steps, loss {ref[0]:.5f} -> {ref[-1]:.5f}, worst relative "
      f"difference {worst:.2e} (limit {limit:g})")
print("first losses, fulgur vs reference:",
      [f"{a:.6f}/{b:.6f}" for a, b in zip(ours[:3], ref[:3])])
sys.exit(0 if worst < limit else 1)
