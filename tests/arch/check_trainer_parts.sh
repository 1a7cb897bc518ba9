#!/bin/sh
# The trainer in parts (issue 25): no function outside train/trainer*.c takes the trainer.
#   check_trainer_parts.sh SRC_DIR
# Every function declared, defined or typed as a function pointer in a .c or .h under
# SRC_DIR whose parameters name `fg_trainer *` (or `struct fg_trainer *`) is listed, except
# in train/trainer*.c and train/trainer*.h (the trainer itself, which builds each part's own
# struct: train/trainer_parts.c). A function declared in a header and defined in its .c
# counts once; nor does a file outside them include train/trainer_internal.h. Prints
# `ok: ...` or a FAIL line per include and per function, and the functions' count.
set -u
src=${1:?usage: $0 SRC_DIR}
[ -d "$src" ] || { echo "FAIL: $src is not a folder" >&2; exit 1; }
list=$(find "$src" -name '*.[ch]' | LC_ALL=C sort | while read -r f; do
    case "$f" in
        */train/trainer*.c | */train/trainer*.h) continue ;;
    esac
    rel=${f#"$src"/}
    # comments out, the file on one line, then every `name(params)` (and `(*name)(params)`)
    # whose params hold fg_trainer by pointer; keyed by the file's path without .c/.h
    UNIT=${rel%.[ch]} perl -0777 -ne '
        s{/\*.*?\*/}{ }gs; s{//[^\n]*}{ }g; s/\s+/ /g;
        while (/(?:\(\s*\*\s*(\w+)\s*\)|(\w+))\s*\(((?!\s*\*)[^(){};]*)\)/g) {
            my ($name, $params) = ($1 // $2, $3);
            next if $name =~ /^(if|while|for|switch|return|sizeof)$/;
            print "$ENV{UNIT} $name\n" if $params =~ /\bfg_trainer\s*\*/;
        }' "$f"
done | LC_ALL=C sort -u)
files=$(find "$src" -name '*.[ch]' | wc -l)
# the trainer's struct (train/trainer_internal.h) is not included outside it either
inside=$(find "$src" -name '*.[ch]' | LC_ALL=C sort | while read -r f; do
    case "$f" in
        */train/trainer*.c | */train/trainer*.h) continue ;;
    esac
    grep -q '^[[:space:]]*#[[:space:]]*include[[:space:]]*"trainer_internal.h"' "$f" &&
        echo "FAIL: ${f#"$src"/} includes trainer_internal.h (the trainer's struct)"
done)
[ -n "$inside" ] && echo "$inside"
if [ -n "$list" ]; then
    echo "$list" | while read -r unit name; do
        echo "FAIL: $unit: $name takes fg_trainer * (give it its own struct, built in train/trainer_parts.c)"
    done
    echo "FAIL: $(echo "$list" | wc -l) functions outside train/trainer*.c take fg_trainer *"
    exit 1
fi
[ -n "$inside" ] && exit 1
echo "ok: $files files, no function outside train/trainer*.c takes fg_trainer * or includes trainer_internal.h"
