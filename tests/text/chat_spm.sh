#!/usr/bin/env bash
# A SentencePiece tokenizer end to end, then `fulgur chat`:
#  1. spm_train on two short dialogues in the chat template ("User: ...\nAssistant: ..."),
#     `fulgur tokenize` of 160 one-dialogue files: each document framed by the model's BOS
#     (1) and EOS (2);
#  2. `fulgur fit` of a tiny Llama-style model on the shards;
#  3. `fulgur generate --tokenizer X.model --prompt " User: hello"`, greedy: the prompt's
#     leading space survives the command line (the text printed starts with it);
#  4. `fulgur chat`, greedy, two turns through stdin: the first reply is the trained one,
#     " hi there, friend.", ended by EOS (not by max_new_tokens); the second turn's context
#     is the first turn's, its reply, EOS and the new turn;
#  5. the same two turns with [generate] kv_cache = false (every token a full forward of the
#     whole context): the same replies and the same token ids, turn by turn, as the KV
#     cache kept across turns gives.
# usage: chat_spm.sh FULGUR WORK_DIR
set -euo pipefail
fulgur=$1 work=$2
fail() { echo "chat_spm: FAIL: $*" >&2; exit 1; }
command -v spm_train >/dev/null || fail "spm_train is missing: run tests/install-deps.sh"
rm -rf "$work" && mkdir -p "$work/docs" && cd "$work"
one="User: hello
Assistant: hi there, friend."
two="User: how are you
Assistant: fine, thanks."
for i in $(seq -w 1 80); do printf '%s' "$one" >"docs/a$i.txt"; printf '%s' "$two" >"docs/b$i.txt"; done
cat docs/a01.txt <(echo) docs/b01.txt <(echo) >train.txt
spm_train --input=train.txt --model_prefix=chat --vocab_size=48 --hard_vocab_limit=false \
  --model_type=bpe --minloglevel=2 >spm.log 2>&1 || fail "spm_train: $(tail -n 3 spm.log)"
vocab=$(wc -l <chat.vocab)

"$fulgur" tokenize --tokenizer chat.model -o shards --threads 2 docs 2>tok.err ||
  { cat tok.err >&2; fail "tokenize exited $?"; }
first=$(od -An -t u2 -j 1024 -N 2 shards/train_000000.bin | tr -d ' ')
[ "$first" = 1 ] || fail "the first id is $first, not BOS 1"
ends=$(od -An -v -t u2 -j 1024 shards/train_000000.bin | tr -s ' ' '\n' | grep -cx 2)
[ "$ends" = 160 ] || fail "$ends EOS ids, not one after each of the 160 documents"

cat >c.ini <<INI
[trainer]
max_epochs = 1
seed = 5
log_every_n_steps = 50
test_after_fit = false
enable_progress_bar = false
default_root_dir = $work/runs
[data]
name = tokens
train_file = $work/shards/train_*.bin
vocab_size = $vocab
context = 48
train_windows = 3200
batch_size = 16
num_workers = 0
[layer.wte]
type = embedding
num_embeddings = $vocab
embedding_dim = 32
init_std = 0.02
[layer.h]
type = transformer_block
heads = 2
kv_heads = 1
repeat = 1
norm = rmsnorm
mlp = swiglu
mlp_hidden = 64
position = rope
bias = false
init_std = 0.02
[layer.norm]
type = rmsnorm
[layer.lm_head]
type = linear
out_features = $vocab
bias = false
[optimizer]
name = adamw
lr = 0.01
INI
"$fulgur" fit c.ini trainer.final_checkpoint="$work/m.safetensors" >fit.log 2>&1 ||
  { tail -20 fit.log >&2; fail "fit exited $?"; }

out=$("$fulgur" generate c.ini --ckpt-path m.safetensors --tokenizer chat.model \
      --prompt " User: hello" --max-new-tokens 3 --temperature 0 2>gen.err) ||
  { cat gen.err >&2; fail "generate failed"; }
[[ "$out" == " User: hello"* ]] || fail "generate --prompt ' User: hello' printed '$out'"

chat() { # KV_CACHE: two turns; replies to chat_KV.txt, the turn lines to chat_KV.ids
  printf 'hello\nhow are you\n' | "$fulgur" chat c.ini --ckpt-path m.safetensors \
    --tokenizer chat.model --temperature 0 --max-new-tokens 24 generate.kv_cache="$1" \
    >"chat_$1.txt" 2>"chat_$1.err" || { cat "chat_$1.err" >&2; fail "chat (kv_cache $1) failed"; }
  grep '^fulgur chat: turn' "chat_$1.err" >"chat_$1.ids" || true
}
chat true
chat false
[ "$(sed -n 1p chat_true.txt)" = " hi there, friend." ] ||
  fail "the first reply is '$(sed -n 1p chat_true.txt)', not ' hi there, friend.'"
[ "$(wc -l <chat_true.txt)" = 2 ] || fail "$(wc -l <chat_true.txt) replies to two turns"
grep -q "turn 1: .*(ended by EOS)" chat_true.ids || fail "turn 1 did not end at EOS: $(cat chat_true.ids)"
grep -q "turn 2: " chat_true.ids || fail "no second turn: $(cat chat_true.ids)"
grep -q "KV cache on" chat_true.err && grep -q "KV cache off" chat_false.err ||
  fail "the KV cache setting did not take"
cmp chat_true.ids chat_false.ids ||
  fail "the KV cache across turns changed the tokens: $(cat chat_true.ids chat_false.ids)"
cmp chat_true.txt chat_false.txt || fail "the KV cache across turns changed the replies"
echo "chat_spm: replies $(tr '\n' '|' <chat_true.txt); $(tr '\n' ' ' <chat_true.ids)"
echo "chat_spm: ok"
