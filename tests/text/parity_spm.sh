#!/usr/bin/env bash
# SentencePiece parity of `fulgur tokenize --tokenizer X.model` with Debian's spm_encode
# (the same libsentencepiece, its own command-line reader), on make_corpus.js's seeded
# 10.5 MB corpus (English, contractions, accented Latin, Cyrillic, Greek, CJK, Arabic,
# Devanagari, numbers, white-space runs, punctuation, emoji). Two models are trained here with
# spm_train on the corpus's first 1.5 MB (vocab 2000, seconds each):
#   nfkc:  SentencePiece's defaults (unigram, nmt_nfkc normalisation, a dummy prefix, extra
#          white space removed, rare characters as <unk>);
#   exact: BPE with byte fallback, identity normalisation, white space kept, no dummy prefix.
# A line is SentencePiece's unit: spm_encode reads a line at a time, and so does fulgur (a
# '\n' is not encoded). Asserts, each a cmp of id lists:
#  1. nfkc, one thread: the shard's ids (after the BOS before the document) are spm_encode's;
#  2. nfkc, two threads, 64 KiB chunks (other split points): the same ids;
#  3. exact, two threads: the same ids as spm_encode's;
#  4. exact: decode(encode(x)) == x with the newlines left out (tok_roundtrip). With the nfkc
#     model it cannot hold: NFKC folds characters (e.g. U+3000 to a space), runs of spaces
#     shrink to one, rare characters become <unk>; SentencePiece guarantees the round trip
#     only for an identity-normalised model whose pieces cover every byte;
#  5. the document is framed as the model declares: its BOS first, its EOS last (<s> 1,
#     </s> 2, as spm_train declares them by default).
# usage: parity_spm.sh FULGUR TOK_ROUNDTRIP WORK_DIR
set -euo pipefail
fulgur=$1 roundtrip=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "parity_spm: FAIL: $*" >&2; exit 1; }
command -v node >/dev/null || fail "node is not installed: run tests/install-deps.sh"
command -v spm_train >/dev/null && command -v spm_encode >/dev/null ||
  fail "spm_train/spm_encode are missing: run tests/install-deps.sh (Debian's sentencepiece)"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

node "$here/make_corpus.js" corpus.txt 10.5 7
size=$(stat -c %s corpus.txt)
[ "$size" -ge 10000000 ] || fail "the corpus is $size bytes, under 10 MB"
head -c 1500000 corpus.txt >sample.txt
spm_train --input=sample.txt --model_prefix=nfkc --vocab_size=2000 --minloglevel=2 \
  >train_nfkc.log 2>&1 || fail "spm_train (nfkc): $(tail -n 3 train_nfkc.log)"
spm_train --input=sample.txt --model_prefix=exact --vocab_size=2000 --model_type=bpe \
  --byte_fallback=true --normalization_rule_name=identity --remove_extra_whitespaces=false \
  --add_dummy_prefix=false --minloglevel=2 >train_exact.log 2>&1 ||
  fail "spm_train (exact): $(tail -n 3 train_exact.log)"

ref_ids() { spm_encode --model="$1" --output_format=id <corpus.txt | tr -s ' \n' '\n\n' | sed '/^$/d'; }
# a shard's ids, one a line, the document's BOS (first) and EOS (last) left out
shard_ids() { od -An -v -t u2 -j 1026 "$1" | tr -s ' ' '\n' | sed '/^$/d' | sed '$d'; }
first_id() { od -An -t u2 -j 1024 -N 2 "$1" | tr -d ' '; }
last_id() { tail -c 2 "$1" | od -An -t u2 | tr -d ' '; }

ref_ids nfkc.model >ref_nfkc.txt
ref_ids exact.model >ref_exact.txt
n=$(wc -l <ref_nfkc.txt)
[ "$n" -gt 1000000 ] || fail "spm_encode gave $n ids"

"$fulgur" tokenize --tokenizer nfkc.model -o n1 --threads 1 corpus.txt
[ "$(first_id n1/train_000000.bin)" = 1 ] || fail "the first id is $(first_id n1/train_000000.bin), not BOS 1"
[ "$(last_id n1/train_000000.bin)" = 2 ] || fail "the last id is $(last_id n1/train_000000.bin), not EOS 2"
shard_ids n1/train_000000.bin >n1.txt
cmp n1.txt ref_nfkc.txt || fail "nfkc, 1 thread: fulgur's ids differ from spm_encode's"
echo "parity_spm: nfkc, 1 thread: $n ids equal spm_encode's"

"$fulgur" tokenize --tokenizer nfkc.model -o n2 --threads 2 --chunk-bytes 65536 corpus.txt
cmp n1/train_000000.bin n2/train_000000.bin || fail "nfkc, 2 threads, 64 KiB chunks: the shard differs"
echo "parity_spm: nfkc, 2 threads, 64 KiB chunks equal"

"$fulgur" tokenize --tokenizer exact.model -o e2 --threads 2 corpus.txt
shard_ids e2/train_000000.bin >e2.txt
cmp e2.txt ref_exact.txt || fail "exact: fulgur's ids differ from spm_encode's"
echo "parity_spm: exact: $(wc -l <e2.txt) ids equal spm_encode's"

"$roundtrip" exact.model corpus.txt e2/train_000000.bin || fail "exact: decode(encode(x)) != x"
"$roundtrip" nfkc.model corpus.txt n1/train_000000.bin >nfkc_roundtrip.log 2>&1 &&
  fail "nfkc: the round trip held, but NFKC and white-space folding should have changed the corpus"
echo "parity_spm: nfkc does not round-trip: $(cat nfkc_roundtrip.log)"
echo "parity_spm: ok"
