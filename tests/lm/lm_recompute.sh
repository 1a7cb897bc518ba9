#!/usr/bin/env bash
# Activation recomputation on a tiny GPT (embedding, position embedding, 3 transformer
# blocks with attention dropout 0.2, layernorm, linear; AdamW, 30 steps): a run with
# [model] recompute = true gives bit for bit the weights and logged losses of the same run
# without it, and its memory line shows the activations smaller by the saved tensors of all
# blocks but one: (3 - 1) x 8 windows x (15 T C + (4 + heads) T) x 4 bytes = 0.358 MiB.
#   lm_recompute.sh single      single (f32 and bf16-mixed), the memory figure
#   lm_recompute.sh strategies  ddp on 2 ranks, sharded stage 3 on 2 ranks, model-parallel
#                               over 2 stages: each with recompute against itself without
# Environment: FULGUR, PLUGIN_DIR, COMPARE (tests/ddp/compare_safetensors.py), PYTHON.
set -u
step=${1:?usage: lm_recompute.sh single|strategies}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${COMPARE:?}" "${PYTHON:?}"
fail() { echo "FAIL [lm.recompute_$step]: $*" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for i in $(seq 1 1500); do
    echo "the quick brown fox $((i * 7 % 13)) jumps over the lazy dog $((i % 11)) and sees $i stars"
done >"$WORK/corpus.txt"
T=16 C=24 H=3 BLOCKS=3 BATCH=8
cat >"$WORK/gpt.ini" <<INI
[trainer]
max_epochs = 1
max_steps = 30
seed = 5
log_every_n_steps = 10
test_after_fit = false
enable_progress_bar = false
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
context = $T
val_fraction = 0
train_windows = 2400
batch_size = $BATCH
num_workers = 0
shuffle = true
[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = $C
init_std = 0.02
[layer.wpe]
type = position_embedding
max_positions = $T
init_std = 0.02
[layer.h]
type = transformer_block
heads = $H
repeat = $BLOCKS
attn_dropout = 0.2
init_std = 0.02
[layer.ln_f]
type = layernorm
[layer.lm_head]
type = linear
out_features = 256
bias = false
[optimizer]
name = adamw
lr = 0.003
INI
must() { local log=$1 rc=0; shift; "$@" >"$log" 2>&1 || rc=$?; [ $rc = 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }; }
# run NAME [mpi N] OVERRIDES...: a fit whose final weights go to NAME.safetensors
run() {
    local name=$1 launch=("$FULGUR")
    shift
    if [ "${1:-}" = mpi ]; then
        local flags=(--oversubscribe)
        [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
        launch=("$MPIRUN" "${flags[@]}" -n "$2" "$FULGUR")
        shift 2
    fi
    must "$WORK/$name.log" "${launch[@]}" --plugin-path "$PLUGIN_DIR" fit "$WORK/gpt.ini" "$@" \
        trainer.final_checkpoint="$WORK/$name.safetensors"
    grep -q 'after 30 steps' "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name did not run 30 steps"; }
}
# bitwise A B: B's weights and losses are A's, bit for bit
bitwise() {
    local out
    diff <(grep '^epoch .* step ' "$WORK/$1.log") <(grep '^epoch .* step ' "$WORK/$2.log") ||
        fail "$2: the logged losses differ from $1's"
    out=$("$PYTHON" "$COMPARE" "$WORK/$2.safetensors" "$WORK/$1.safetensors" 0) ||
        fail "$2 and $1 weights differ: $out"
    [ "$(grep -o 'digest [0-9a-f]*' "$WORK/$1.log")" = "$(grep -o 'digest [0-9a-f]*' "$WORK/$2.log")" ] ||
        fail "$2: the weights digest differs from $1's"
    echo "ok: $2 == $1 bitwise (tiny GPT, attention dropout 0.2, AdamW, 30 steps): $out"
}
# pair NAME RUN-ARGS...: NAME without and NAME_rc with recompute, bitwise
pair() {
    local name=$1
    shift
    run "$name" "$@"
    run "${name}_rc" "$@" model.recompute=true
    bitwise "$name" "${name}_rc"
}
activations() { sed -n 's/^memory (device 0): .* activations \([0-9.]*\) MiB.*/\1/p' "$WORK/$1.log"; }

case $step in
single)
    pair single
    pair bf16 precision.name=bf16-mixed
    # the block keeps nothing; one shared set of its saved tensors remains in the workspace
    a=$(activations single) b=$(activations single_rc)
    [ -n "$a" ] && [ -n "$b" ] || fail "no memory line (single: '$a', recompute: '$b')"
    "$PYTHON" - "$a" "$b" "$T" "$C" "$H" "$BLOCKS" "$BATCH" <<'PY' || fail "the activation memory did not drop by the saved tensors of $((BLOCKS - 1)) blocks"
import sys
a, b = float(sys.argv[1]), float(sys.argv[2])
T, C, H, blocks, batch = map(int, sys.argv[3:])
expected = (blocks - 1) * batch * (15 * T * C + (4 + H) * T) * 4 / 2**20
print(f"activations {a:.2f} MiB, {b:.2f} MiB with recompute: {a - b:.2f} saved, expected {expected:.3f}")
sys.exit(abs((a - b) - expected) > 0.0101)  # two figures rounded to 0.01 MiB
PY
    ;;
strategies)
    MPIRUN=$(command -v mpirun) || { echo "SKIP: no mpirun"; exit 77; }
    pair ddp mpi 2 strategy.name=ddp comm.name=mpi data.batch_size=4
    pair stage3 mpi 2 strategy.name=sharded strategy.stage=3 comm.name=mpi data.batch_size=4
    pair pipeline strategy.name=model-parallel backend.devices=2 ;;
*) fail "unknown step" ;;
esac
