#!/bin/sh
# callback2.progress.terminal: the progress bar on a real terminal. The tty_driver case of
# the progress test runs inside a detached tmux session (its stdout a tmux pty); the screen
# is then read with capture-pane, which shows what a person sees after every "\r" redraw.
# Checks: each epoch's bar is one screen line (redrawn in place, not one line per step),
# the finished line has no stale tail from a longer earlier draw, a line another callback
# prints lands on its own line above the bar, and each epoch leaves one summary line. Skips (77) only when tmux is not installed.
# usage: progress_tmux.sh DRIVER WORK_DIR
set -eu
driver=$1 work=$2
command -v tmux > /dev/null 2>&1 || { echo "SKIP: tmux is not installed"; exit 77; }
mkdir -p "$work"
sock="fulgur-cb2-$$"
tm() { tmux -L "$sock" -f /dev/null "$@"; }
cleanup() { tm kill-server > /dev/null 2>&1 || true; }
trap cleanup EXIT

# The pane stays open after the driver (exec cat waits on the terminal) until captured;
# wait-for is told when the driver is done, and remembers a signal sent before the wait.
tm new-session -d -s cb2 -x 120 -y 20 \
    "'$driver' tty_driver '$work' 2>&1; tmux -L '$sock' wait-for -S cb2done; exec cat"
timeout 20 tmux -L "$sock" wait-for cb2done
tm capture-pane -p -t cb2 > "$work/screen.raw"
# Drop trailing blank lines; the wall-clock epoch time reads as T.
sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$work/screen.raw" |
    sed 's/time [0-9:]*/time T/' > "$work/screen.txt"
cat > "$work/expected.txt" <<'TXT'
checkpoint: a line of another callback
epoch 1/? [####################] 8/8  50.0 it/s  time T  loss 0.4000 acc 0.60  val loss 0.3500 acc 0.75
epoch 2/? [##########..........] 4/8  50.0 it/s  time T  loss 0.2800 acc 0.69
driver done
tty_driver: all checks passed
TXT
if ! diff -u "$work/expected.txt" "$work/screen.txt"; then
    echo "FAIL: the terminal shows something else (screen above, as captured)" >&2
    exit 1
fi
echo "ok: the bar redraws in place and each finished line stands alone"
