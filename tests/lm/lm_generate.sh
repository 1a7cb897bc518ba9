#!/usr/bin/env bash
# A byte-level GPT trained on "abcdefgh" repeated, then:
#   greedy (temperature 0) continues the pattern exactly;
#   the KV cache prints the full forward's tokens, greedy and sampled, past the context;
#   sampling with a seed gives the same text twice, another seed other text;
#   an empty prompt generates from nothing (12 bytes of the pattern);
#   an invalid UTF-8 prompt byte prints as U+FFFD;
#   a run stopped at step 100 and resumed from its checkpoint to step 200 ends with the
#   unbroken run's weights (the printed digest) and generates the same text.
# Needs FULGUR.
set -u
: "${FULGUR:?}"
fail() { echo "FAIL [lm.generate]: $*" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf 'abcdefgh%.0s' $(seq 1 2000) >"$WORK/corpus.txt"
cat >"$WORK/g.ini" <<INI
[trainer]
max_epochs = 1
seed = 3
log_every_n_steps = 50
test_after_fit = false
enable_progress_bar = false
default_root_dir = $WORK/runs
[data]
name = text
dir = $WORK
files = corpus.txt
context = 16
val_fraction = 0
train_windows = 3200
batch_size = 16
num_workers = 0
[layer.wte]
type = embedding
num_embeddings = 256
embedding_dim = 32
init_std = 0.02
[layer.wpe]
type = position_embedding
max_positions = 16
init_std = 0.02
[layer.h]
type = transformer_block
heads = 2
repeat = 2
init_std = 0.02
[layer.ln_f]
type = layernorm
[layer.lm_head]
type = linear
out_features = 256
bias = false
tie = wte
[optimizer]
name = adamw
lr = 0.01
[callback.checkpoint]
every_n_train_steps = 100
save_top_k = -1
INI
F() { "$FULGUR" "$@" 2>"$WORK/err" || { cat "$WORK/err" >&2; fail "exit $? from fulgur $*"; }; }
F fit "$WORK/g.ini" trainer.final_checkpoint="$WORK/full.safetensors" >"$WORK/full.log"
gen() { F generate "$WORK/g.ini" --ckpt-path "$WORK/full.safetensors" "$@" | tail -n 1; }
out=$(gen --prompt cdef --max-new-tokens 20 --temperature 0)
[ "$out" = cdefghabcdefghabcdefghab ] || fail "greedy continuation '$out', expected cdefghabcdefghabcdefghab"
# (issue 30, defect 11) stdout is the text alone, and a call leaves no run folder behind
runs_before=$(find "$WORK/runs" -mindepth 2 -maxdepth 2 -type d | wc -l)
whole=$("$FULGUR" generate "$WORK/g.ini" --ckpt-path "$WORK/full.safetensors" --prompt cdef \
    --max-new-tokens 20 --temperature 0 2>"$WORK/gen.err")
[ "$whole" = cdefghabcdefghabcdefghab ] || fail "stdout is not the text alone: '$whole'"
grep -q "^model: " "$WORK/gen.err" || fail "the run's lines are not on stderr: $(cat "$WORK/gen.err")"
[ "$(find "$WORK/runs" -mindepth 2 -maxdepth 2 -type d | wc -l)" = "$runs_before" ] ||
    fail "generate made a run folder: $(find "$WORK/runs" -mindepth 2 -maxdepth 2 -type d)"
# the text streams: a reader that stops after 3 bytes ends a long generation (SIGPIPE at the
# next token; printing everything at the end would finish all 5000 tokens and exit 0)
"$FULGUR" generate "$WORK/g.ini" --ckpt-path "$WORK/full.safetensors" --prompt cdef \
    --max-new-tokens 5000 --temperature 0 2>/dev/null | head -c 3 >"$WORK/head.txt"
codes=("${PIPESTATUS[@]}")
[ "$(cat "$WORK/head.txt")" = cde ] || fail "head read '$(cat "$WORK/head.txt")'"
[ "${codes[0]}" = 141 ] || fail "generate exited ${codes[0]} after its reader left (want 141, SIGPIPE)"
# a text that cannot be written is a failure (exit 4), not a success
rc=0
"$FULGUR" generate "$WORK/g.ini" --ckpt-path "$WORK/full.safetensors" --prompt cdef \
    --max-new-tokens 5 --temperature 0 >/dev/full 2>"$WORK/full.err" || rc=$?
[ "$rc" = 4 ] && grep -q "cannot write the text" "$WORK/full.err" ||
    fail "generate into /dev/full: exit $rc, $(cat "$WORK/full.err")"
a=$(gen --prompt xyz --max-new-tokens 40 --temperature 1.5 --seed 5)
b=$(gen --prompt xyz --max-new-tokens 40 --temperature 1.5 --seed 5)
c=$(gen --prompt xyz --max-new-tokens 40 --temperature 1.5 --seed 6)
[ "$a" = "$b" ] || fail "the same seed gave '$a' and '$b'"
[ "$a" != "$c" ] || fail "seeds 5 and 6 gave the same text '$a'"
k=$(gen --prompt xyz --max-new-tokens 40 --temperature 1.5 --top-k 1 --seed 7)
g=$(gen --prompt xyz --max-new-tokens 40 --temperature 0)
[ "$k" = "$g" ] || fail "top-k 1 ('$k') is not greedy ('$g')"
# the KV cache (the default) prints exactly the full forward's tokens (generate.kv_cache =
# false), greedy and sampled, over runs longer than the context of 16 (the window slides)
for args in "--prompt cdef --max-new-tokens 40 --temperature 0" \
            "--prompt xyz --max-new-tokens 60 --temperature 1.5 --seed 5" \
            "--prompt abcdefghabcdefgha --max-new-tokens 30 --temperature 2 --top-k 5 --seed 9" \
            "--prompt q --max-new-tokens 25 --temperature 3 --seed 11"; do
    # shellcheck disable=SC2086
    kv=$(gen $args)
    # shellcheck disable=SC2086
    full=$(gen $args generate.kv_cache=false)
    [ "$kv" = "$full" ] || fail "$args: the KV cache gave '$kv', the full forward '$full'"
done
# an empty prompt (issue 30 defect 21) starts from nothing: greedy continues the pattern
empty=$(gen --prompt "" --max-new-tokens 12 --temperature 0)
[[ "$empty" =~ ^[a-h]{12}$ ]] || fail "the empty prompt gave '$empty', expected 12 of a-h"
bad=$(gen --prompt "$(printf 'a\377b')" --max-new-tokens 1 --temperature 0)
want=$(printf 'a\357\277\275b')
[[ "$bad" == "$want"* ]] || fail "invalid UTF-8 not replaced: '$bad'"
# stop at 100, resume to 200: the unbroken run's weights
F fit "$WORK/g.ini" trainer.max_steps=100 trainer.default_root_dir="$WORK/part" >"$WORK/part.log"
ck=$(ls "$WORK"/part/default/version_0/checkpoints/*step=100*.safetensors 2>/dev/null | head -n 1)
[ -n "$ck" ] || { ls -R "$WORK/part" >&2; fail "no step-100 checkpoint"; }
F fit "$WORK/g.ini" --ckpt-path "$ck" trainer.final_checkpoint="$WORK/resumed.safetensors" \
    trainer.default_root_dir="$WORK/resume" >"$WORK/resumed.log"
d1=$(grep -o 'digest [0-9a-f]*' "$WORK/full.log")
d2=$(grep -o 'digest [0-9a-f]*' "$WORK/resumed.log")
[ -n "$d1" ] && [ "$d1" = "$d2" ] || fail "resumed run '$d2' != unbroken run '$d1'"
r=$("$FULGUR" generate "$WORK/g.ini" --ckpt-path "$WORK/resumed.safetensors" --prompt xyz \
    --max-new-tokens 40 --temperature 1.5 --seed 5 2>/dev/null | tail -n 1)
[ "$r" = "$a" ] || fail "the resumed model generates '$r', the unbroken one '$a'"
echo "lm.generate: greedy '$out'; seeded '$a'; resumed at step 100 to the same $d1"
