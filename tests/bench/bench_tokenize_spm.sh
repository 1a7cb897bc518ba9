#!/usr/bin/env bash
# `fulgur tokenize --tokenizer X.model` against Debian's spm_encode (the same
# libsentencepiece) on the same text, in one invocation: tokens/s of each, fulgur on one
# thread and on all cores, and the ratios. The models are trained here by spm_train on the
# first 1.5 MB of the text (SentencePiece's defaults: unigram, nmt_nfkc; vocab 8000 for
# fortunes, 2000 for the mixed corpus, whose small word pools allow no more).
# Texts: English prose (Debian's fortunes, once, about 2.6 MB) and the mixed corpus of the
# parity test (tests/text/make_corpus.js, 10.5 MB). Both sides must give the same number of
# ids (fulgur's count less the document's BOS and EOS; the script stops otherwise).
# fulgur's figure is its summary line's (reading, encoding, writing shards; the model's load
# excluded); spm_encode's is the whole command's wall time (loading the model, reading,
# encoding, printing the ids as text to /dev/null). Each figure is the best of 3 runs.
# usage: tests/bench/bench_tokenize_spm.sh [BUILD_DIR]   (tests/install-deps.sh first)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
fulgur=$build/bin/fulgur
[ -x "$fulgur" ] && command -v spm_encode >/dev/null && command -v node >/dev/null ||
  { echo "bench_tokenize_spm: needs $fulgur, spm_encode and node (tests/install-deps.sh)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cores=$(nproc)

fulgur_rate() { # MODEL FILE THREADS -> best tokens/s of 3 runs, and the token count
  local best=0 line rate tokens
  for r in 1 2 3; do
    rm -rf "$work/out"
    line=$("$fulgur" tokenize --tokenizer "$1" -o "$work/out" --threads "$3" "$2" 2>&1 | grep 'tokens/s' | tail -n 1)
    rate=$(echo "$line" | sed -E 's/.* ([0-9]+) tokens\/s.*/\1/')
    tokens=$(echo "$line" | sed -E 's/.* MB, ([0-9]+) tokens.*/\1/')
    [ "$rate" -gt "$best" ] && best=$rate
  done
  echo "$best $tokens"
}

spm_rate() { # MODEL FILE -> best tokens/s of 3 runs, and the id count
  local best=0 t0 t1 rate ids
  ids=$(spm_encode --model="$1" --output_format=id <"$2" | wc -w)
  for r in 1 2 3; do
    t0=$(date +%s.%N)
    spm_encode --model="$1" --output_format=id <"$2" >/dev/null
    t1=$(date +%s.%N)
    rate=$(echo "$ids / ($t1 - $t0)" | bc -l | cut -d. -f1)
    [ "$rate" -gt "$best" ] && best=$rate
  done
  echo "$best $ids"
}

run() { # NAME FILE VOCAB
  head -c 1500000 "$2" >"$work/sample.txt"
  spm_train --input="$work/sample.txt" --model_prefix="$work/$1" --vocab_size="$3" \
    --minloglevel=2 >"$work/spm_train.log" 2>&1 ||
    { echo "bench_tokenize_spm: spm_train: $(tail -n 2 "$work/spm_train.log")" >&2; exit 1; }
  local model=$work/$1.model ref ref_tokens t1 tn tokens
  read -r ref ref_tokens < <(spm_rate "$model" "$2")
  read -r t1 tokens < <(fulgur_rate "$model" "$2" 1)
  read -r tn _ < <(fulgur_rate "$model" "$2" "$cores")
  [ "$((tokens - 2))" -eq "$ref_tokens" ] ||
    { echo "bench_tokenize_spm: $1: fulgur made $((tokens - 2)) ids, spm_encode $ref_tokens" >&2; exit 1; }
  printf '%-8s %6.1f MB %9s ids | spm_encode %9s tok/s | fulgur 1 thread %9s tok/s (%.2fx) | fulgur %d threads %9s tok/s (%.2fx)\n' \
    "$1" "$(echo "$(stat -c %s "$2") / 1000000" | bc -l)" "$ref_tokens" "$ref" "$t1" \
    "$(echo "$t1 / $ref" | bc -l)" "$cores" "$tn" "$(echo "$tn / $ref" | bc -l)"
}

echo "bench_tokenize_spm: $(lscpu | sed -n 's/^Model name: *//p'), $cores cores, $(date -u +%Y-%m-%dT%H:%MZ)"
cat /usr/share/games/fortunes/*.u8 >"$work/fortunes.txt"
node "$here/../text/make_corpus.js" "$work/mixed.txt" 10.5 7
run fortunes "$work/fortunes.txt" 8000
run mixed "$work/mixed.txt" 2000
