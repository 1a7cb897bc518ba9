#!/usr/bin/env bash
# PCRE2 stays in the tokenizer: core/src/text/pretokenizer.c is the only source that
# includes pcre2.h, and no plugin links libpcre2 (libfulgur does, for tokenize and generate).
# usage: check_pcre2.sh SOURCE_DIR PLUGIN_DIR
set -u
src=$1 plugins=$2
found=0
includes=$(grep -rlE '#[[:space:]]*include[[:space:]]*[<"]pcre2\.h[">]' "$src/core" "$src/plugins" "$src/sdk" "$src/kernels" 2>/dev/null)
if [ "$includes" != "$src/core/src/text/pretokenizer.c" ]; then
  echo "check_pcre2: pcre2.h is included by: ${includes:-nothing} (only core/src/text/pretokenizer.c may)"
  found=1
fi
n=0
for so in "$plugins"/fulgur-*.so; do
  [ -e "$so" ] || continue
  n=$((n + 1))
  if ldd "$so" 2>/dev/null | grep -q pcre2; then
    echo "check_pcre2: $so links PCRE2"
    found=1
  fi
done
[ "$n" -gt 0 ] || { echo "check_pcre2: no plugin in $plugins"; found=1; }
[ "$found" -eq 0 ] && echo "check_pcre2: ok ($n plugins without PCRE2)"
exit $found
