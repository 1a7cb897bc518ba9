#!/bin/sh
# No two files of a folder include each other's headers both ways.
#   check_include_cycles.sh DIR [pairs]
# A file's header is the .h of the same name beside it (trainer_loop.c: trainer_loop.h). The
# check fails when a.c includes b.h and b.c includes a.h. Headers without a .c of their own
# (a struct shared by a folder's files, as train/trainer_internal.h) belong to no file, so
# they may declare none of the folder's functions: a function is declared in the header of
# the file that defines it, where the include shows who calls whom.
# With `pairs`, only the both-ways includes are checked (a folder whose shared header is its
# interface: tests/arch/CMakeLists.txt names them).
# A folder whose files include each other both ways has no order to read them in and no part
# that can be tested alone: every core/src folder is kept free of such pairs (core/README.md).
set -u
dir=${1:?usage: $0 DIR [pairs]}
mode=${2:-all}
[ -d "$dir" ] || { echo "FAIL: $dir is not a folder" >&2; exit 1; }

units=$(for f in "$dir"/*.c; do [ -e "$f" ] && basename "$f" .c; done)

# The files of this folder whose headers $1.c includes, one a line.
includes() {
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"/]*\)\.h".*/\1/p' "$dir/$1.c" |
        while read -r h; do
            [ "$h" != "$1" ] && [ -e "$dir/$h.c" ] && [ -e "$dir/$h.h" ] && echo "$h"
        done | sort -u
}

status=0
pairs=0
for a in $units; do
    for b in $(includes "$a"); do
        pairs=$((pairs + 1))
        # each pair once: a < b
        [ "$(printf '%s\n%s\n' "$a" "$b" | sort | head -n 1)" = "$a" ] || continue
        if includes "$b" | grep -qx "$a"; then
            echo "FAIL: $dir: $a includes $b.h and $b includes $a.h" >&2
            status=1
        fi
    done
done
for h in "$dir"/*.h; do
    [ "$mode" = pairs ] && break
    [ -e "${h%.h}.c" ] && continue
    for fn in $(sed -n 's/^[a-zA-Z].*[ *]\(fg_[a-z0-9_]*\)(.*/\1/p' "$h" | sort -u); do
        def=$(grep -l "^[a-zA-Z].*[ *]$fn(.*[^;]\$" "$dir"/*.c 2>/dev/null | head -n 1)
        if [ -n "$def" ]; then
            echo "FAIL: $h declares $fn, defined in $(basename "$def"): declare it in" \
                "$(basename "$def" .c).h" >&2
            status=1
        fi
    done
done
[ "$status" -eq 0 ] && echo "ok: $dir: $pairs include(s) between its files, none both ways"
exit $status
