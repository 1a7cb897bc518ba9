#!/usr/bin/env bash
# A soak run: does a long fit stay flat? A small model (synthetic data, a linear layer)
# validating every 4 batches with report.html and metrics.csv on, for MINUTES minutes
# ([trainer] max_time); every SAMPLE_S seconds the fit's resident memory (/proc/PID VmRSS)
# and its steps/s over the last window (from metrics.csv's last step), both per wall second
# and per CPU second of the fit (/proc/PID/stat utime + stime: what other processes on a
# shared machine do to the wall rate does not move it). At the end the first and the last
# quarter of the samples (the first sample, the start-up, left out) are compared: "flat" when
# the RSS grew by less than 10 % and the steps per CPU second of the last quarter are at least
# 80 % of the first's, else "NOT flat" (exit 1); the wall rate is printed beside it. A
# benchmark, not a test: ctest runs only its --selftest (bench.soak_selftest).
#   tests/bench/soak.sh FULGUR [MINUTES (10)] [SAMPLE_S (10)]
#   tests/bench/soak.sh --selftest
set -euo pipefail
# verdict FILE: the first and last quarters of FILE's samples (time rss step rate cpu_rate)
# compared
verdict() {
    awk '
        { rss[NR] = $2; wall[NR] = $4; rate[NR] = $5 }
        END {
            q = int((NR - 1) / 4); if (q < 1) { print "too few samples"; exit 2 }
            for (i = 2; i <= q + 1; i++) { r0 += rss[i]; s0 += rate[i]; w0 += wall[i] } # 1st: start-up
            for (i = NR - q + 1; i <= NR; i++) { r1 += rss[i]; s1 += rate[i]; w1 += wall[i] }
            r0 /= q; r1 /= q; s0 /= q; s1 /= q; w0 /= q; w1 /= q
            flat = (r1 < 1.10 * r0) && (s1 >= 0.80 * s0)
            pct = 0; if (s0 > 0) pct = 100 * s1 / s0
            verdict = "NOT flat"; if (flat) verdict = "flat"
            printf "first quarter: RSS %.0f kB, %.1f steps/CPU-s (%.1f steps/s); last quarter: RSS %.0f kB (%+.1f %%), %.1f steps/CPU-s (%.0f %%; %.1f steps/s): %s\n", r0, s0, w0, r1, 100 * (r1 - r0) / r0, s1, pct, w1, verdict
            if (!flat) exit 1
        }' "$1"
}
if [ "${1:-}" = --selftest ]; then # the verdict on made-up samples: flat, leaking, slowing
    t=$(mktemp -d)
    # flat; flat per CPU second although the wall rate halves (a loaded machine); leaking; slowing
    for i in 1 2 3 4 5 6 7 8 9; do echo "$i 1000 $i 100 200" >> "$t/flat"; done
    for i in 1 2 3 4 5 6 7 8 9; do echo "$i 1000 $i $((100 - 10 * i)) 200" >> "$t/loaded"; done
    for i in 1 2 3 4 5 6 7 8 9; do echo "$i $((1000 + 100 * i)) $i 100 200" >> "$t/leak"; done
    for i in 1 2 3 4 5 6 7 8 9; do echo "$i 1000 $i 100 $((200 - 20 * i))" >> "$t/slow"; done
    ok=1
    out=$(verdict "$t/flat") && [[ $out == *': flat' ]] || ok=0
    out=$(verdict "$t/loaded") && [[ $out == *'200.0 steps/CPU-s (100 %; 15.0 steps/s): flat' ]] || ok=0
    out=$(verdict "$t/leak") && ok=0 # exit 1: not flat
    [[ $out == *'RSS 1850 kB (+48.0 %), 200.0 steps/CPU-s (100 %; 100.0 steps/s): NOT flat' ]] || ok=0
    out=$(verdict "$t/slow") && ok=0
    [[ $out == *'30.0 steps/CPU-s (20 %; 100.0 steps/s): NOT flat' ]] || ok=0
    rm -rf "$t"
    [ $ok = 1 ] && echo "soak selftest: ok" && exit 0
    echo "soak selftest: the verdict is wrong" >&2
    exit 1
fi
fulgur=$(realpath "${1:?usage: soak.sh FULGUR [MINUTES] [SAMPLE_S]}")
minutes=${2:-10}
sample_s=${3:-10}
work=$(mktemp -d "${TMPDIR:-/tmp}/fulgur-soak.XXXXXX")
trap 'kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
cat > soak.ini <<INI
[trainer]
max_epochs = 1000000
max_time = 00:$(printf '%02d' "$minutes"):00
log_every_n_steps = 1
val_check_interval = 4
default_root_dir = runs
enable_progress_bar = false

[data]
name = synthetic
train_size = 512
val_size = 64
batch_size = 32
num_workers = 1

[layer.flat]
type = flatten

[layer.fc1]
type = linear
out_features = 10

[callback.csv_logger]
INI
"$fulgur" fit soak.ini > fit.log 2>&1 &
pid=$!
csv=runs/default/version_0/metrics.csv
last_step() { [ -f "$csv" ] && tail -n 1 "$csv" | cut -d, -f2 | tr -cd '0-9' || true; }
# cpu_ticks: the fit's user + system clock ticks so far (fields 14 and 15 of /proc/PID/stat;
# the command name in field 2 is in parentheses and may hold blanks, so count after ")")
cpu_ticks() { sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $12 + $13 }'; }
hz=$(getconf CLK_TCK)
printf '%8s %10s %10s %10s %12s\n' "time_s" "rss_kb" "step" "steps/s" "steps/cpu_s"
t0=$(date +%s) prev_t=$t0 prev_step=0 prev_ticks=0
: > samples.txt
while kill -0 "$pid" 2>/dev/null; do
    sleep "$sample_s" # sampling period of a benchmark, not a wait for an event
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] || break
    now=$(date +%s) step=$(last_step) ticks=$(cpu_ticks)
    step=${step:-0} ticks=${ticks:-$prev_ticks}
    rate=$(awk -v a="$step" -v b="$prev_step" -v t="$((now - prev_t))" 'BEGIN { r = 0; if (t > 0) r = (a - b) / t; printf "%.1f", r }')
    cpu_rate=$(awk -v a="$step" -v b="$prev_step" -v c="$((ticks - prev_ticks))" -v hz="$hz" 'BEGIN { r = 0; if (c > 0) r = (a - b) * hz / c; printf "%.1f", r }')
    printf '%8d %10d %10d %10s %12s\n' "$((now - t0))" "$rss" "$step" "$rate" "$cpu_rate" | tee -a samples.txt
    prev_t=$now prev_step=$step prev_ticks=$ticks
done
wait "$pid" || { cat fit.log; echo "the fit failed" >&2; exit 2; }
verdict samples.txt

