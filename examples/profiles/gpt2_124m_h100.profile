# fulgur estimate --profile: GPT-2 124M (examples/gpt2_124m.ini: batch 8 x 1024, AdamW,
# clipping) under bf16-mixed on one NVIDIA H100 80GB HBM3, fulgur's CUDA backend (eager).
# Where each number comes from (tests/bench/RESULTS.md, "The CUDA backend on an H100
# (2026-11-26)"):
# - the step: 37,888 tokens/s at 8 x 1024 = 8192 tokens a step -> T = 216.216 ms
#   (bench_lm_cuda.sh --modes eager --steps 20, bf16-mixed row);
# - its split, Nsight Compute's gpu__time_duration shares of the same run
#   (profile_lm_cuda.sh, bf16-mixed column): attention forward 16.6%, attention backward
#   30.3% + 26.3%, cuBLAS(Lt) gemms 11%, embedding backward 5.1%, the rest 10.7%;
# - attention, forward and backward, in equal twelfths to the 12 blocks h.0..h.11;
# - the gemms' 11% shared by matmul flops between the blocks (12 x 12 x 768^2 weights) and
#   lm_head (768 x 50304, the padded vocabulary), a third forward, two thirds backward
#   (an assumption: the profile gives no forward/backward split of the gemms);
# - embedding backward (5.1%) to wte's backward; wpe, ln_f: 0 (in "the rest");
# - optimizer_ms = 1: AdamW over 124M parameters reads and writes about 2.2 GB at about
#   3 TB/s (an estimate, not a measurement);
# - the rest (10.7% less the 1 ms optimizer: layer norms, GELU, residual adds, loss) in
#   equal twelfths to the blocks, a third forward, two thirds backward.
# The layers then add up to T = 216.216 ms.
device = NVIDIA H100 80GB HBM3 (bf16-mixed, fulgur CUDA backend, eager)
memory_mb = 81559
samples = 8
optimizer_ms = 1
layer wte 0 11.0270
layer wpe 0 0
layer h.0 4.0600 12.3361
layer h.1 4.0600 12.3361
layer h.2 4.0600 12.3361
layer h.3 4.0600 12.3361
layer h.4 4.0600 12.3361
layer h.5 4.0600 12.3361
layer h.6 4.0600 12.3361
layer h.7 4.0600 12.3361
layer h.8 4.0600 12.3361
layer h.9 4.0600 12.3361
layer h.10 4.0600 12.3361
layer h.11 4.0600 12.3361
layer ln_f 0 0
layer lm_head 2.4787 4.9573
