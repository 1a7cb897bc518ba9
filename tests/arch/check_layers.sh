#!/bin/sh
# The layers of core/src: no folder includes a folder above it, and the folders form no cycle.
#   check_layers.sh SRC_DIR [LAYERS_FILE]      (LAYERS_FILE: SRC_DIR/layers.txt)
# LAYERS_FILE lists the folders bottom first, each with the folders below it that its files
# may include ("model base checkpoint"). The check fails when
#   - a line names a folder that is not on an earlier line (the layers would form a cycle),
#   - a folder of SRC_DIR has no line (every folder has a layer),
#   - two folders hold a header of the same name (headers are included by name),
#   - a .c or .h includes a header of a folder its line does not name (an upward include),
#   - the includes between folders form a cycle (tsort).
# core/CMakeLists.txt reads the same file: each folder's include path holds only its own
# folder and the ones its line names, so the build refuses what this check reports.
set -u
src=${1:?usage: $0 SRC_DIR [LAYERS_FILE]}
layers=${2:-$src/layers.txt}
[ -d "$src" ] || { echo "FAIL: $src is not a folder" >&2; exit 1; }
[ -f "$layers" ] || { echo "FAIL: $layers: no such file" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL: $*" >&2; status=1; }

# folder -> the folders it may include, one line each: "folder allowed..."
grep -v '^[[:space:]]*#' "$layers" | grep -v '^[[:space:]]*$' > "$tmp/layers"
seen=" "
while read -r dir below; do
    for b in $below; do
        case "$seen" in
        *" $b "*) ;;
        *) fail "$layers: $dir may include $b, which is not on an earlier line (not below $dir)" ;;
        esac
    done
    seen="$seen$dir "
done < "$tmp/layers"

for d in "$src"/*/; do
    dir=$(basename "$d")
    case "$seen" in
    *" $dir "*) ;;
    *) fail "$src/$dir has no line in $layers: give it its layer" ;;
    esac
done

# header name -> folder
for h in "$src"/*/*.h; do
    [ -e "$h" ] && echo "$(basename "$h") $(basename "$(dirname "$h")")"
done | sort > "$tmp/headers"
cut -d' ' -f1 "$tmp/headers" | uniq -d | while read -r h; do
    echo "FAIL: $h is a header of several folders: $(grep "^$h " "$tmp/headers" | cut -d' ' -f2 | tr '\n' ' ')" >&2
    echo x
done | grep -q x && status=1

edges=0
: > "$tmp/edges"
while read -r dir below; do
    [ -d "$src/$dir" ] || continue
    for f in "$src/$dir"/*.c "$src/$dir"/*.h; do
        [ -e "$f" ] || continue
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
            while read -r inc; do
                to=$(grep "^$(basename "$inc") " "$tmp/headers" | head -n 1 | cut -d' ' -f2)
                [ -n "$to" ] && [ "$to" != "$dir" ] && echo "$dir $to $f $inc"
            done
    done
done < "$tmp/layers" > "$tmp/includes"
while read -r dir to f inc; do
    edges=$((edges + 1))
    echo "$dir $to" >> "$tmp/edges"
    allowed=$(grep "^$dir\( \|\$\)" "$tmp/layers" | head -n 1)
    case " $allowed " in
    *" $to "*) ;;
    *) below=${allowed#"$dir"}
       fail "$f includes $inc of $to/, which is not below $dir/ (it may include:${below:- nothing})" ;;
    esac
done < "$tmp/includes"

# a cycle between folders, whatever layers.txt says
sort -u "$tmp/edges" | while read -r a b; do echo "$b $a"; done > "$tmp/pairs"
if ! tsort "$tmp/pairs" > /dev/null 2> "$tmp/tsort"; then
    fail "the folders include each other in a cycle:$(awk '/input contains a loop/ { printf " |"; next }
        { sub(/^tsort: /, ""); printf " %s", $0 }' "$tmp/tsort")"
fi

[ "$status" -eq 0 ] && echo "ok: $src: $(wc -l < "$tmp/layers") folders, $edges include(s) between folders, none upward, no cycle"
exit $status
