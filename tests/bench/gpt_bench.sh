# Sourced by bench_lm.sh and bench_lm_bf16.sh: the byte-vocabulary GPT they time, and the
# tokens/s of its second epoch (the first warms up).

# gpt_ini FILE SCRATCH THREADS L H C T B STEPS [BACKEND_LINE]: a GPT of L blocks, H heads,
# width C, context T, batch B on SCRATCH/corpus.txt, STEPS batches an epoch, AdamW.
gpt_ini() {
    local file=$1 scratch=$2 threads=$3 l=$4 h=$5 c=$6 t=$7 b=$8 steps=$9 extra=${10:-}
    cat >"$file" <<INI
[trainer]
max_epochs = 2
seed = 1
log_every_n_steps = 1000
test_after_fit = false
enable_progress_bar = false
num_sanity_val_steps = 0
default_root_dir = $scratch/runs
[backend]
name = cpu
threads = $threads
$extra
[data]
name = text
dir = $scratch
files = corpus.txt
context = $t
val_fraction = 0
train_windows = $((b * steps))
batch_size = $b
num_workers = 1
[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = $c
[layer.wpe]
type = position_embedding
max_positions = $t
[layer.h]
type = transformer_block
heads = $h
repeat = $l
[layer.ln_f]
type = layernorm
[layer.lm_head]
type = linear
out_features = 256
bias = false
[optimizer]
name = adamw
lr = 0.001
INI
}

# epoch2_tokens_per_s SAMPLES T < fit output: tokens/s of the "epoch 2/2" line. That line
# prints "(S s, R samples/s": R rounded to an integer, S to 0.1 s; of the two, the one whose
# rounding costs less (a mid GPT's 8 samples/s is +-6%, its 20 s 0.25%). SAMPLES: the epoch's.
epoch2_tokens_per_s() {
    grep '^epoch 2/2 ' | awk -v n="$1" -v t="$2" '{
        if (!match($0, /\([0-9.]+ s, [0-9.]+ samples\/s/)) exit
        split(substr($0, RSTART + 1, RLENGTH - 1), f, " ")
        secs = f[1]; sps = f[3]
        if (secs > 0 && 0.05 / secs < 0.5 / sps) sps = n / secs
        print sps * t }'
}
