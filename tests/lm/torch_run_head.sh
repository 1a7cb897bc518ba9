# torch_run_head DIR [WEIGHTS]: the part of the fulgur config that every comparison with a
# PyTorch reference in tests/lm shares (one CPU thread, the text corpus in DIR read in order,
# 200 windows of 16, the weights the reference wrote in DIR/WEIGHTS, init.safetensors by
# default); the test appends its [model] keys and layers. Sourced by gpt_vs_torch.sh,
# llama_vs_torch.sh, decay_vs_torch.sh, hf_llama_vs_torch.sh, hf_llama_export.sh.
torch_run_head() {
    cat <<INI
[trainer]
max_epochs = 1
seed = 7
log_every_n_steps = 1
test_after_fit = false
enable_progress_bar = false
default_root_dir = $1/runs
[backend]
name = cpu
threads = 1
[data]
name = text
dir = $1
files = corpus.txt
context = 16
val_fraction = 0
train_windows = 200
batch_size = 4
num_workers = 0
shuffle = false
[model]
init_from = $1/${2:-init.safetensors}
INI
}
