# estimate.alpha_beta: hand-made times for tests/ddp/overlap.ini (five linear layers, 512
# wide, then 10 outputs; relus free), chosen so the expected step times are sums a reader
# can redo: 1 ms forward and 2 ms backward a linear layer, 1 ms optimizer.
device = a made-up device
samples = 64
memory_mb = 100
optimizer_ms = 1
layer fc1 1 2
layer relu1 0 0
layer fc2 1 2
layer relu2 0 0
layer fc3 1 2
layer relu3 0 0
layer fc4 1 2
layer relu4 0 0
layer out 1 2
