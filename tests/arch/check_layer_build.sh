#!/bin/sh
# The build itself refuses an upward include: a file compiled with one core/src folder's
# include path (the object library's, from core/CMakeLists.txt) cannot find a header of a
# folder its layers.txt line does not name, and finds one of every folder it names.
#   check_layer_build.sh CC SRC_DIR FOLDER -I... (the folder's include flags)
set -u
cc=${1:?usage: $0 CC SRC_DIR FOLDER -I...}
src=${2:?}
dir=${3:?}
shift 3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
line=$(grep "^$dir\( \|\$\)" "$src/layers.txt" | head -n 1)
[ -n "$line" ] || { echo "FAIL: $dir has no line in $src/layers.txt" >&2; exit 1; }
status=0
refused=0
found=0
for d in "$src"/*/; do
    other=$(basename "$d")
    [ "$other" = "$dir" ] && continue
    h=$(cd "$d" && ls *.h 2>/dev/null | head -n 1)
    [ -n "$h" ] || continue
    printf '#include "%s"\n' "$h" > "$tmp/probe.c"
    "$cc" -fsyntax-only "$@" "$tmp/probe.c" > "$tmp/out" 2>&1
    case " $line " in
    *" $other "*)
        if grep -q "$h: No such file" "$tmp/out"; then
            echo "FAIL: $dir/'s include path misses $other/ ($h), which layers.txt lets it include" >&2
            status=1
        else
            found=$((found + 1))
        fi ;;
    *)
        if grep -q "$h: No such file" "$tmp/out"; then
            refused=$((refused + 1))
        else
            echo "FAIL: $dir/'s include path reaches $other/ ($h), which is not below it" >&2
            status=1
        fi ;;
    esac
done
[ "$status" -eq 0 ] &&
    echo "ok: $dir/: the include path refuses $refused folder(s) above or beside it, finds the $found below it"
exit $status
