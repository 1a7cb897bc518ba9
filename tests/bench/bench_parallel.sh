#!/usr/bin/env bash
# One-process multi-device benchmark on CPU virtual devices ([backend] devices = 2), the
# CNN of tests/bench/cnn.ini on Fashion-MNIST:
#   - throughput (samples/s, median of --runs) of single (2 threads and 1 thread) against
#     strategy.dp on 2 devices (1 and 2 threads), with dp's reduce + broadcast ms a step;
#   - the pipeline bubble of strategy.model-parallel (2 stages, balanced plan, 1 thread per
#     device) for chunks = 1, 2, 4: ms a step against the ideal, the slowest stage's busy
#     time (every stage busy all the time with this plan), and against half of single's
#     1-thread step (a perfectly balanced 2-stage plan), with GPipe's bubble (S-1)/(M+S-1).
# Appends one row per configuration to tests/bench/results_parallel.csv.
#
#   tests/bench/bench_parallel.sh [--fulgur PATH] [--batches N] [--runs R] [--wait-load X]
#                                 [--results FILE | --no-results]
#
# Not a ctest test: timings depend on the machine and its load (printed with the results).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
fulgur="$root/build-bench/bin/fulgur"
batches=60 runs=3 wait_load="" results="$here/results_parallel.csv"

die() { echo "bench_parallel: $*" >&2; exit 2; }
while (( $# > 0 )); do
    case $1 in
        --help|-h) sed -n '2,17p' "$0"; exit 0 ;;
        --no-results) results=""; shift; continue ;;
    esac
    (( $# >= 2 )) || die "$1 needs a value (see --help)"
    case $1 in
        --fulgur) fulgur=$2 ;;
        --batches) [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--batches needs a positive number"; batches=$2 ;;
        --runs) [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"; runs=$2 ;;
        --wait-load) wait_load=$2 ;;
        --results) results=$2 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
    shift 2
done
fulgur=$(cd "$(dirname "$fulgur")" && pwd)/$(basename "$fulgur")
[ -x "$fulgur" ] || die "no fulgur at $fulgur (build it, or give --fulgur)"
plugins="$(dirname "$(dirname "$fulgur")")/lib/fulgur/plugins"
[ -d /usr/share/datasets/fashion-mnist ] || die "no Fashion-MNIST (Debian: dataset-fashion-mnist)"

if [ -n "$wait_load" ]; then
    for _ in $(seq 120); do
        awk -v l="$wait_load" '{ exit !($1 < l) }' /proc/loadavg && break
        sleep 10
    done
fi
load=$(cut -d' ' -f1-3 /proc/loadavg)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

common=(trainer.max_epochs=1 trainer.limit_train_batches="$batches" trainer.test_after_fit=false
        trainer.log_every_n_steps=1000 trainer.num_sanity_val_steps=0
        trainer.check_val_every_n_epoch=0 data.num_workers=1)

# run LOG KEYS...: one training run; its samples/s on stdout
run() {
    local log=$1
    shift
    "$fulgur" --plugin-path "$plugins" fit "$here/cnn.ini" "${common[@]}" "$@" >"$log" 2>&1 ||
        { cat "$log" >&2; die "fulgur failed: $*"; }
    sed -n 's/^epoch 1\/1 .*, \([0-9]*\) samples\/s.*/\1/p' "$log"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# The configurations, measured in rounds (each round runs every one once, so a change in
# the machine's load hits all alike); a configuration's figure is its median over rounds.
names=(single_t2 single_t1 dp_t1 dp_t2 mp_c1 mp_c2 mp_c4)
declare -A keys=(
    [single_t2]="strategy.name=single backend.threads=2"
    [single_t1]="strategy.name=single backend.threads=1"
    [dp_t1]="strategy.name=dp backend.devices=2 backend.threads=1"
    [dp_t2]="strategy.name=dp backend.devices=2 backend.threads=2"
    [mp_c1]="strategy.name=model-parallel backend.devices=2 backend.threads=1 strategy.chunks=1"
    [mp_c2]="strategy.name=model-parallel backend.devices=2 backend.threads=1 strategy.chunks=2"
    [mp_c4]="strategy.name=model-parallel backend.devices=2 backend.threads=1 strategy.chunks=4")
for r in $(seq "$runs"); do
    for name in "${names[@]}"; do
        read -r -a k <<<"${keys[$name]}"
        run "$work/$name.$r.log" "${k[@]}" >>"$work/$name.rates"
    done
done
load="$load -> $(cut -d' ' -f1-3 /proc/loadavg)" # before and after the rounds
# measure NAME: the median samples/s; NAME.log is the log of the median run
measure() {
    local name=$1 m r
    m=$(median <"$work/$name.rates")
    for r in $(seq "$runs"); do
        [ "$(sed -n "${r}p" "$work/$name.rates")" = "$m" ] && { cp "$work/$name.$r.log" "$work/$name.log"; break; }
    done
    echo "$m"
}

row() { [ -z "$results" ] && return 0
    [ -s "$results" ] || echo "date,machine,config,samples_per_s,ms_per_step,extra,load_1_5_15,batches,runs" >"$results"
    echo "$(date -u +%FT%TZ),\"$(nproc) x $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1 | cut -c1-30)\",$1,$2,$3,\"$4\",\"$load\",$batches,$runs" >>"$results"
}

bs=$(sed -n 's/^batch_size = //p' "$here/cnn.ini")
ms() { awk -v s="$1" -v b="$bs" 'BEGIN { printf "%.2f", 1e3 * b / s }'; }

echo "bench_parallel: CNN, batch $bs, $batches batches x $runs runs, load $load"
s2=$(measure single_t2)
s1=$(measure single_t1)
d1=$(measure dp_t1)
sync1=$(sed -n 's/.*(\([0-9.]*\) ms a step, nothing overlapped.*/\1/p' "$work/dp_t1.log")
d2=$(measure dp_t2)
sync2=$(sed -n 's/.*(\([0-9.]*\) ms a step, nothing overlapped.*/\1/p' "$work/dp_t2.log")
printf '%-28s %8s samples/s  %7s ms/step\n' "single, 2 threads" "$s2" "$(ms "$s2")" \
    "single, 1 thread" "$s1" "$(ms "$s1")"
printf '%-28s %8s samples/s  %7s ms/step  (reduce + broadcast %s ms)\n' \
    "dp, 2 devices x 1 thread" "$d1" "$(ms "$d1")" "$sync1" \
    "dp, 2 devices x 2 threads" "$d2" "$(ms "$d2")" "$sync2"
row single_t2 "$s2" "$(ms "$s2")" ""
row single_t1 "$s1" "$(ms "$s1")" ""
row dp2_t1 "$d1" "$(ms "$d1")" "reduce+broadcast ${sync1} ms"
row dp2_t2 "$d2" "$(ms "$d2")" "reduce+broadcast ${sync2} ms"

half=$(awk -v s="$s1" -v b="$bs" 'BEGIN { printf "%.2f", 0.5e3 * b / s }')
for m in 1 2 4; do
    p=$(measure "mp_c$m")
    line=$(grep 'ms a step in the pipeline' "$work/mp_c$m.log")
    step=$(sed -n 's/.*: \([0-9.]*\) ms a step in the pipeline.*/\1/p' <<<"$line")
    bubble=$(sed -n 's/.*(bubble \([0-9]*\)%.*/\1/p' <<<"$line")
    gpipe=$(sed -n 's/.* micro-batch[es]* is \([0-9]*\)%.*/\1/p' <<<"$line")
    busy=$(sed -n 's/.*by stage: \(.*\)$/\1/p' <<<"$line")
    ideal=$(awk '{ m = $1; for (i = 2; i <= NF; i++) if ($i > m) m = $i; print m }' <<<"$busy")
    plan=$(sed -n 's/.*info: \(stage 0 .*\); [0-9]* micro-batch.*/\1/p' "$work/mp_c$m.log")
    printf 'pipeline, chunks %d: %6s samples/s, %s ms a step (pipeline part), ideal %s ms (slowest stage), %s ms (half of single 1 thread); bubble %s%% (GPipe %s%%); stage busy ms %s\n' \
        "$m" "$p" "$step" "$ideal" "$half" "$bubble" "$gpipe" "$busy"
    row "mp2_chunks$m" "$p" "$step" "ideal ${ideal} ms; half single ${half} ms; bubble ${bubble}%; gpipe ${gpipe}%; busy ${busy}"
done
echo "plan: $plan"
