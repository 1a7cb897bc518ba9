#!/usr/bin/env bash
# How long ddp's gradient all-reduces take between the two nodes of tests/cluster and how
# much of it the buckets hide behind backward: tests/ddp/overlap.ini (five 512-wide layers,
# 1,055,754 parameters, 4.2 MB of gradients a step) on 2 nodes x 1 rank, 30 steps, at two
# bucket sizes, on unshaped veths and on 1 Gbit/s (tbf; + 1 ms netem where the kernel has it).
# The unshaped run is the reference, in the same invocation; the ratio is shaped / unshaped.
#   tests/cluster/cluster.sh up && tests/cluster/link_bench.sh BUILD_DIR [STEPS]
set -u
build=${1:?usage: link_bench.sh BUILD_DIR [STEPS]}
steps=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
C=$here/cluster.sh
W=${FULGUR_BENCH_WORK:-/var/tmp/fulgur-link-bench}
rm -rf "$W" && mkdir -p "$W" || exit 1
trap '"$C" shape off' EXIT
run() { # run BUCKET_MB: one sbatch'd fit; prints "step_s inflight_s hidden_pct wait_s"
    local job out
    job=$("$C" run env CONFIG="$src/tests/ddp/overlap.ini" FULGUR="$build/bin/fulgur" \
        FULGUR_PLUGIN_PATH="$build/lib/fulgur/plugins" sbatch --wait --parsable --chdir="$W" \
        --output="$W/job-%j.out" -N2 --ntasks-per-node=1 --cpus-per-task=1 \
        "$src/examples/slurm/train.sbatch" strategy.bucket_mb="$1" trainer.max_steps="$steps" \
        trainer.log_every_n_steps="$steps") || { echo "link_bench: job failed" >&2; exit 1; }
    out=$W/job-$job.out
    awk -v n="$steps" '
        /^epoch 1\/1 / { for (i = 1; i <= NF; i++) if ($i ~ /^\(/) { t = substr($i, 2) } }
        /gradient all-reduce in flight/ { f = $9; h = $11; sub(/%/, "", h); w = $18 }
        END { printf "%.2f %.3f %s %.3f\n", 1e3 * t / n, f / n * 1e3, h, w / n * 1e3 }' "$out"
}
printf '%-10s %-9s %12s %18s %8s %16s\n' link bucket_mb 'step ms' 'all-reduce ms/step' hidden 'wait ms/step'
for bucket in 0.01 25; do
    "$C" shape off
    read -r s0 f0 h0 w0 < <(run "$bucket")
    printf '%-10s %-9s %12s %18s %7s%% %16s\n' unshaped "$bucket" "$s0" "$f0" "$h0" "$w0"
    shaped=$("$C" shape on) || exit 1
    read -r s1 f1 h1 w1 < <(run "$bucket")
    printf '%-10s %-9s %12s %18s %7s%% %16s   step ratio shaped/unshaped %s\n' 1gbit "$bucket" "$s1" "$f1" "$h1" "$w1" \
        "$(awk -v a="$s1" -v b="$s0" 'BEGIN { printf "%.2f", a / b }')"
done
echo "$shaped"
