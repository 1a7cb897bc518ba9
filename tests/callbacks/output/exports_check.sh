#!/bin/sh
# callback2.exports: every plugin given exports exactly one dynamic symbol, its descriptor.
# usage: exports_check.sh NM PLUGIN.so...
set -eu
nm=$1
shift
for so in "$@"; do
    syms=$("$nm" -D --defined-only "$so" | awk '{print $NF}')
    if [ "$syms" != "fulgur_plugin_v1" ]; then
        echo "FAIL: $so must export fulgur_plugin_v1 alone; it exports:" >&2
        echo "$syms" >&2
        exit 1
    fi
    echo "ok: $(basename "$so") exports fulgur_plugin_v1 alone"
done
