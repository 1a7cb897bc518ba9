#!/bin/sh
# Architecture checks on the built tree.
#   check_arch.sh deps LIBFULGUR      libfulgur links no device, MPI or BLAS library
#   check_arch.sh exports PLUGIN_DIR  every plugin exports its entry symbol and nothing else
# The core reaches devices only through plugins; a plugin's only interface is its descriptor.
set -u

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

check_deps() {
    lib=$1
    [ -f "$lib" ] || fail "$lib does not exist (build the project first)"
    deps=$(ldd "$lib") || fail "ldd $lib failed"
    # The name before "=>" (or the whole line for the loader itself).
    bad=$(printf '%s\n' "$deps" | awk '{print $1}' |
        grep -Ei 'cuda|cublas|cudnn|nccl|mpi|open-rte|open-pal|blas|lapack|dnnl|mkl' || true)
    if [ -n "$bad" ]; then
        printf '%s\n' "$deps" >&2
        fail "$lib links $(echo $bad | tr '\n' ' '): the core must stay device-agnostic (DESIGN.md 1)"
    fi
    echo "ok: $lib links no device, MPI or BLAS library"
}

check_exports() {
    dir=$1
    [ -d "$dir" ] || fail "plugin folder $dir does not exist (build the project first)"
    count=0
    status=0
    for so in "$dir"/fulgur-*.so; do
        [ -e "$so" ] || continue
        count=$((count + 1))
        syms=$(nm -D --defined-only "$so" | awk '{print $NF}') || fail "nm -D $so failed"
        if [ "$syms" != "fulgur_plugin_v1" ]; then
            echo "FAIL: $so must export fulgur_plugin_v1 alone; it exports:" >&2
            printf '  %s\n' $syms >&2
            status=1
        fi
    done
    [ "$count" -gt 0 ] || fail "no fulgur-*.so in $dir (build the plugins first)"
    [ "$status" -eq 0 ] || exit 1
    echo "ok: $count plugin(s) in $dir export fulgur_plugin_v1 alone"
}

[ $# -eq 2 ] || { echo "usage: $0 deps LIBFULGUR | exports PLUGIN_DIR" >&2; exit 2; }
case $1 in
deps) check_deps "$2" ;;
exports) check_exports "$2" ;;
*) echo "usage: $0 deps LIBFULGUR | exports PLUGIN_DIR" >&2; exit 2 ;;
esac
