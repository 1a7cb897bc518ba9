#!/usr/bin/env bash
# The fortunes recipe (examples/llama_fortunes.ini): a SentencePiece tokenizer trained on
# Debian's fortunes with spm_train, the text tokenized with `fulgur tokenize`, a small
# Llama trained with `fulgur fit`, then `fulgur generate` (greedy, from [generate] prompt).
# usage: examples/llama_fortunes.sh [WORK_DIR [section.key=value...]]
#   WORK_DIR (default llama_fortunes) is created; the overrides go to fit (e.g.
#   trainer.max_steps=200). FULGUR names the fulgur command (default: fulgur on PATH).
set -euo pipefail
fulgur=${FULGUR:-fulgur}
ini="$(cd "$(dirname "$0")" && pwd)/llama_fortunes.ini"
work=${1:-llama_fortunes}
[ $# -gt 0 ] && shift
fortunes=/usr/share/games/fortunes
names=(art computers cookie definitions disclaimer drugs education food fortunes goedel
       humorists kids law linux literature love magic medicine men-women miscellaneous news
       people pets platitudes politics riddles science songs-poems sports wisdom work)
files=("${names[@]/#/$fortunes/}")
[ -f "$fortunes/fortunes" ] || { echo "llama_fortunes: $fortunes is missing: apt-get install fortunes" >&2; exit 77; }
command -v spm_train >/dev/null ||
  { echo "llama_fortunes: spm_train is missing: apt-get install sentencepiece" >&2; exit 77; }
mkdir -p "$work" && cd "$work"

# 1. the tokenizer: 1024 BPE pieces, unknown characters as bytes
cat "${files[@]}" >fortunes.txt
spm_train --input=fortunes.txt --model_prefix=fortunes --vocab_size=1024 --model_type=bpe \
  --byte_fallback=true --minloglevel=2
# 2. the shards: each file a document (BOS ... EOS), 5% of the 64 KiB chunks for val
rm -rf fortunes_tokens
"$fulgur" tokenize --tokenizer fortunes.model -o fortunes_tokens --val-fraction 0.05 \
  --chunk-bytes 65536 "${files[@]}"
# 3. training
"$fulgur" fit "$ini" "$@"
# 4. a continuation, greedy, ended at EOS or after 60 tokens
"$fulgur" generate "$ini" --ckpt-path last --temperature 0
