#!/usr/bin/env bash
# The data loader's speed: images/s decoded + augmented + batched from a folder of JPEGs by
# fulgur's image_folder plugin on the loader (num_workers 0, 1, 2; pin_memory on and off)
# against torchvision's ImageFolder + DataLoader with the same transforms (Resize 72,
# CenterCrop 64, RandomCrop 64 padding 4, RandomHorizontalFlip, Normalize), and the data-wait
# share the throughput callback reports for each fulgur run. One invocation:
#
#   tests/bench/bench_data.sh [--images N] [--build DIR]
#
# fulgur: images/s of epoch 2 of `fulgur fit tests/bench/bench_data.ini` (the epoch line),
# which also runs a one-linear model (flatten, linear 10: ~1% of a step); torch: epoch 2 of
# a loop over the DataLoader only. "conv": the same fit with a conv stem (a step about as long
# as decoding a batch on one core), pinned only: its data-wait share (the throughput
# callback's, averaged over epoch 2) is what more workers buy in a decode-bound run. Without /usr/bin/python3 + torchvision the torch column
# reads "-". Results: tests/bench/RESULTS.md ("Data loader").
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
images=1000
build=$root/build
while [ $# -gt 0 ]; do
    case "$1" in
    --images) images=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "usage: $0 [--images N] [--build DIR]" >&2; exit 2 ;;
    esac
done
fulgur=$build/bin/fulgur
python=/usr/bin/python3 # Debian's: python3-pil and python3-torchvision live there
[ -x "$fulgur" ] || { echo "no $fulgur: build first" >&2; exit 2; }
"$python" -c 'import PIL' 2>/dev/null || { echo "$python has no Pillow (apt-get install python3-pil)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" "$here/bench_data_ref.py" make "$work" "$images" || exit 1
have_torch=0
"$python" -c 'import torchvision' 2>/dev/null && have_torch=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# The decode-bound step: a conv stem before the head, a step about as long as the loader's
# work on one core, so that the data-wait share shows what more workers buy.
sed '/^\[layer.flatten\]/i [layer.conv]\ntype = conv2d\nout_channels = 16\nkernel_size = 3\npadding = 1\n\n[layer.relu]\ntype = relu\n\n[layer.pool]\ntype = maxpool2d\nkernel_size = 4\n' \
    "$here/bench_data.ini" >"$work/bench_data_conv.ini"

fulgur_run() { # W PIN [INI] -> "images/s data-wait%"
    local out
    out=$(cd "$work" && "$fulgur" fit "${3:-$here/bench_data.ini}" data.dir="$work" data.num_workers="$1" \
          data.pin_memory="$2" trainer.default_root_dir="$work/runs" 2>&1) || { echo "$out" >&2; return 1; }
    local rate wait
    rate=$(echo "$out" | awk '/^epoch 2\/2  train/ { for (i = 1; i <= NF; i++) if ($i == "samples/s,") print $(i - 1) }')
    # the throughput callback's lines of epoch 2: the mean of their data-wait shares
    wait=$(echo "$out" | awk '/^epoch 2 step/ { e2 = 1 } e2 && /^throughput: [0-9]/' |
           sed -n 's/.*data wait [^(]*(\([0-9.]*\)%).*/\1/p' |
           awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n; else print "-" }')
    echo "$rate $wait"
}

echo "data benchmark: $images JPEGs 256x192 -> 64x64, batch 64, epoch 2 of 2; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu: $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2 }'), $(nproc --all) cpus; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-7s %13s %12s %7s %11s %10s %14s\n' workers pinned "fulgur img/s" "torch img/s" ratio \
    "(data wait)" "conv img/s" "conv data wait"
for w in 0 1 2; do
    for pin in true false; do
        read -r frate fwait < <(fulgur_run "$w" "$pin") || exit 1
        trate=-
        if [ "$have_torch" = 1 ]; then
            trate=$("$python" "$here/bench_data_ref.py" torch "$work" "$w" "$([ $pin = true ] && echo 1 || echo 0)" |
                    awk '{ print $3 }')
        fi
        ratio=$(awk -v a="$frate" -v b="$trate" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "-" }')
        crate=- cwait=-
        [ "$pin" = true ] && { read -r crate cwait < <(fulgur_run "$w" "$pin" "$work/bench_data_conv.ini") || exit 1; }
        printf '%-8s %-7s %13s %12s %7s %10s%% %10s %13s%%\n' "$w" "$pin" "$frate" "$trate" "$ratio" "$fwait" \
            "$crate" "$cwait"
    done
done
