#!/usr/bin/env bash
# A/B of two builds of one plugin: alternating fits of one config, A B, B A, A B ..., each
# with --plugin-path pointing at a folder that holds only that variant's file, so the drift
# of a shared machine hits both alike (this 2-vCPU VM's own spread, 113k-121k samples/s with
# one binary, is as large as the changes it judges). Prints each fit's best samples/s of
# epochs 2.. (epoch 1 warms up), the medians and their ratio B/A.
#
#   tests/bench/bench_ab.sh A.so B.so [options] [-- KEY=VALUE ...]
#     --fulgur PATH   the fulgur binary (default: build-bench/bin/fulgur)
#     --config CFG    the config (default: tests/bench/mlp.ini)
#     --fits N        fits of each variant (default 8)
#     --epochs N      epochs per fit, >= 2 (default 3)
#   KEY=VALUE after -- are overrides for every fit (e.g. data.num_workers=0).
#
# Both files must have the same name (fulgur-KIND-NAME.so, the plugin the config loads):
# e.g. copy build-bench/lib/fulgur/plugins/fulgur-backend-cpu.so aside, rebuild with the
# change, and compare the copy (A) with the new build (B).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
die() { echo "bench_ab: $*" >&2; exit 2; }

(( $# >= 2 )) || die "usage: bench_ab.sh A.so B.so [--fulgur PATH] [--config CFG] [--fits N] [--epochs N] [-- KEY=VALUE ...]"
a=$1 b=$2
shift 2
fulgur=$root/build-bench/bin/fulgur config=$here/mlp.ini fits=8 epochs=3 overrides=()
while (( $# > 0 )); do
    case $1 in
        --) shift; overrides=("$@"); break ;;
        --fulgur|--config|--fits|--epochs) (( $# >= 2 )) || die "$1 needs a value"
            case $1 in --fulgur) fulgur=$2 ;; --config) config=$2 ;; --fits) fits=$2 ;; --epochs) epochs=$2 ;; esac
            shift 2 ;;
        *) die "unknown option '$1'" ;;
    esac
done
[[ $fits =~ ^[1-9][0-9]*$ ]] || die "--fits needs a whole number >= 1, got '$fits'"
[[ $epochs =~ ^[0-9]+$ ]] && (( epochs >= 2 )) || die "--epochs needs a whole number >= 2, got '$epochs'"
[[ -f $a && -f $b ]] || die "no such file: $([[ -f $a ]] && echo "$b" || echo "$a")"
[[ $(basename "$a") == "$(basename "$b")" ]] ||
    die "the two files must share a name (the plugin the config loads): $(basename "$a") and $(basename "$b")"
[[ -x $fulgur ]] || die "no fulgur binary at $fulgur (pass --fulgur)"
[[ -f $config ]] || die "no config at $config"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/A" "$work/B"
cp "$a" "$work/A/" && cp "$b" "$work/B/"

# one fit of variant V: its best samples/s after the first epoch
fit() {
    local v=$1 dir
    dir=$(mktemp -d "$work/run.XXXX")
    (cd "$dir" && "$fulgur" --plugin-path "$work/$v" fit "$config" trainer.name=ab \
        trainer.max_epochs="$epochs" "${overrides[@]}" > fit.out 2>&1) ||
        die "variant $v failed: $(tail -3 "$dir/fit.out")"
    sed -n 's/^epoch \([0-9]*\)\/[0-9]*  .*, \([0-9]*\) samples\/s.*/\1 \2/p' "$dir/fit.out" |
        awk '$1 >= 2 && $2 > best { best = $2 } END { if (best) print best }'
}
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "bench_ab: $(basename "$a"), $fits fits each of $(basename "$config"), $epochs epochs, $(nproc) CPUs, $(date -u +%FT%TZ)"
ra=() rb=()
for ((i = 1; i <= fits; i++)); do
    # the order alternates (A B, B A, ...): the second fit of a pair ran faster (1.075 for
    # one plugin against itself on the MLP, a Zen 4 VM), so a fixed order biases B/A
    if (( i % 2 )); then x=$(fit A) y=$(fit B); else y=$(fit B) x=$(fit A); fi
    [[ -n $x && -n $y ]] || die "a fit printed no epoch line after the first"
    ra+=("$x") rb+=("$y")
    echo "  fit $i: A $x  B $y samples/s"
done
ma=$(median "${ra[@]}") mb=$(median "${rb[@]}")
echo "median: A $ma  B $mb samples/s  B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.3f", b / a }')"
