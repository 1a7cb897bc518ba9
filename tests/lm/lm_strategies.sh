#!/usr/bin/env bash
# A tiny GPT (embedding, position embedding, 2 transformer blocks, layernorm, linear; SGD
# with momentum, gradient clipping, 30 steps) on every strategy against single at the same
# global batch of 8 windows: the final weights within 1e-5 of each tensor's scale (the
# equivalence tests' tolerance; the sums' order differs) and the same logged losses. Not
# AdamW: the key bias of attention has a zero gradient in exact arithmetic (softmax ignores
# a shift shared by every key), so its computed gradient is rounding noise that Adam scales
# up to full-size steps, different for every summation order.
#   lm_strategies.sh ddp       ddp on 2 ranks (4 windows each)
#   lm_strategies.sh sharded   ZeRO stages 1, 2, 3 on 2 ranks and stage 3 on 4 ranks
#   lm_strategies.sh dp        dp over 2 virtual devices in one process
#   lm_strategies.sh pipeline  model-parallel over 2 stages, 2 micro-batches
#   lm_strategies.sh tied      ddp and sharded stage 1 with lm_head tied to wte
#   lm_strategies.sh decay     weight decay per tensor (weight_decay = 0.5 on matrices only,
#                              wpe.weight exempt by no_decay): ddp on 2 ranks, sharded
#                              stages 1-3 on 2 ranks (the decay runs follow the shard),
#                              dp and pipeline; and single without the decay differs
#   lm_strategies.sh llama     the same on a tiny Llama (rmsnorm, SwiGLU, 3 query heads on one
#                              key/value head, rope with Llama 3's rope_scaling, no biases,
#                              untied head): ddp, sharded stages 1-3 on 2 ranks, dp and
#                              pipeline
# Environment: FULGUR, PLUGIN_DIR, COMPARE (tests/ddp/compare_safetensors.py), PYTHON.
set -u
step=${1:?usage: lm_strategies.sh STEP}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${COMPARE:?}" "${PYTHON:?}"
fail() { echo "FAIL [lm.strategies_$step]: $*" >&2; exit 1; }
MPIRUN=$(command -v mpirun) || { echo "SKIP: no mpirun"; exit 77; }
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# 40 KB of words, the same every run
for i in $(seq 1 1500); do
    echo "the quick brown fox $((i * 7 % 13)) jumps over the lazy dog $((i % 11)) and sees $i stars"
done >"$WORK/corpus.txt"
tie="" decay="" model=GPT
[ "$step" = llama ] && model=Llama
[ "$step" = tied ] && tie="tie = wte"
[ "$step" = decay ] && decay="weight_decay = 0.5
weight_decay_params = matrices
no_decay = wpe.weight"
layers=$(cat <<INI
[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = 24
init_std = 0.02
[layer.wpe]
type = position_embedding
max_positions = 16
init_std = 0.02
[layer.h]
type = transformer_block
heads = 3
repeat = 2
init_std = 0.02
[layer.ln_f]
type = layernorm
[layer.lm_head]
type = linear
out_features = 256
bias = false
$tie
INI
)
[ "$step" = llama ] && layers=$(cat <<INI
[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = 24
init_std = 0.02
[layer.h]
type = transformer_block
heads = 3
kv_heads = 1
repeat = 2
init_std = 0.02
norm = rmsnorm
mlp = swiglu
mlp_hidden = 48
position = rope
rope_scaling = llama3
rope_factor = 8
rope_low_freq_factor = 1
rope_high_freq_factor = 4
rope_original_max_position_embeddings = 128
bias = false
[layer.norm]
type = rmsnorm
[layer.lm_head]
type = linear
out_features = 256
bias = false
INI
)
cat >"$WORK/gpt.ini" <<INI
[trainer]
max_epochs = 1
max_steps = 30
seed = 5
log_every_n_steps = 10
test_after_fit = false
enable_progress_bar = false
gradient_clip_val = 0.5
default_root_dir = $WORK/runs
[backend]
name = cpu
threads = 1
[strategy]
name = single
[data]
name = text
dir = $WORK
files = corpus.txt
context = 16
val_fraction = 0
train_windows = 2400
batch_size = 8
num_workers = 0
shuffle = true
$layers
[optimizer]
name = sgd
lr = 0.1
momentum = 0.9
$decay
INI
must() { local log=$1 rc=0; shift; "$@" >"$log" 2>&1 || rc=$?; [ $rc = 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }; }
mpi() { local n=$1; shift; "$MPIRUN" "${MPI_FLAGS[@]}" -n "$n" "$FULGUR" --plugin-path "$PLUGIN_DIR" "$@"; }
losses() { grep '^epoch .* step ' "$1"; }
must "$WORK/single.log" "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/gpt.ini" \
    trainer.final_checkpoint="$WORK/single.safetensors"
grep -q 'after 30 steps' "$WORK/single.log" || { cat "$WORK/single.log"; fail "single did not run 30 steps"; }
# same NAME LOG: the run's losses and final weights against single's
same() {
    local name=$1 out
    grep -q 'after 30 steps' "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name did not run 30 steps"; }
    diff <(losses "$WORK/single.log") <(losses "$WORK/$name.log") ||
        fail "$name: the logged losses differ from single's (single <, $name >)"
    out=$("$PYTHON" "$COMPARE" "$WORK/$name.safetensors" "$WORK/single.safetensors" 1e-5) ||
        fail "$name and single weights differ: $out"
    echo "ok: $name == single (tiny ${model}, SGD, clip 0.5, 30 steps): $out"
}
run_mpi() { # run_mpi NAME N OVERRIDES...
    local name=$1 n=$2
    shift 2
    must "$WORK/$name.log" mpi "$n" fit "$WORK/gpt.ini" comm.name=mpi "$@" \
        trainer.final_checkpoint="$WORK/$name.safetensors"
    same "$name"
}
run_one() { # run_one NAME OVERRIDES...
    local name=$1
    shift
    must "$WORK/$name.log" "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/gpt.ini" "$@" \
        trainer.final_checkpoint="$WORK/$name.safetensors"
    same "$name"
}
case $step in
ddp) run_mpi ddp 2 strategy.name=ddp data.batch_size=4 ;;
sharded)
    for s in 1 2 3; do run_mpi "stage${s}_n2" 2 strategy.name=sharded strategy.stage=$s data.batch_size=4; done
    run_mpi stage3_n4 4 strategy.name=sharded strategy.stage=3 data.batch_size=2 ;;
dp) run_one dp strategy.name=dp backend.devices=2 ;;
pipeline) run_one pipeline strategy.name=model-parallel backend.devices=2 ;;
tied)
    run_mpi ddp_tied 2 strategy.name=ddp data.batch_size=4
    run_mpi stage1_tied 2 strategy.name=sharded strategy.stage=1 data.batch_size=4 ;;
decay)
    grep -q 'num decayed parameter tensors: 10,' "$WORK/single.log" || fail "single: no decay groups logged"
    run_mpi ddp_decay 2 strategy.name=ddp data.batch_size=4
    for s in 1 2 3; do run_mpi "stage${s}_decay" 2 strategy.name=sharded strategy.stage=$s data.batch_size=4; done
    run_one dp_decay strategy.name=dp backend.devices=2
    run_one pipeline_decay strategy.name=model-parallel backend.devices=2
    must "$WORK/nodecay.log" "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/gpt.ini" \
        optimizer.weight_decay=0 trainer.final_checkpoint="$WORK/nodecay.safetensors"
    if out=$("$PYTHON" "$COMPARE" "$WORK/nodecay.safetensors" "$WORK/single.safetensors" 1e-3); then
        fail "the weight decay made no difference to the weights: $out"
    fi
    echo "ok: without the decay the weights differ from single's: $out" ;;
llama)
    run_mpi llama_ddp 2 strategy.name=ddp data.batch_size=4
    for s in 1 2 3; do run_mpi "llama_stage${s}" 2 strategy.name=sharded strategy.stage=$s data.batch_size=4; done
    run_one llama_dp strategy.name=dp backend.devices=2
    run_one llama_pipeline strategy.name=model-parallel backend.devices=2 ;;
*) fail "unknown step" ;;
esac
