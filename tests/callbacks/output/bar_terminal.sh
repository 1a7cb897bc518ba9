#!/bin/sh
# ux.bar_terminal: `fulgur fit` on a real terminal (a tmux pane) shows the progress bar
# without any [callback.progress] section: while an epoch runs, one line with the epoch
# count ("epoch 1/3 [###...] 120/3125  ... it/s  ETA 0:04  loss ... acc ..."), then one
# summary line per epoch, coloured unless NO_COLOR is set, fitted to a narrow terminal;
# [trainer] enable_progress_bar = false, or a start by an MPI launcher (mpirun gives each
# rank a pseudo-terminal of its own), gives the plain lines back. The screen is read with
# capture-pane after the command ended (tmux wait-for), or polled for the live line with a
# bound, never after a sleep.
# Skips (77) when tmux is not installed.
#   bar_terminal.sh FULGUR
FULGUR=$1
. "$(dirname "$0")/../../common/cli_lib.sh"
command -v tmux > /dev/null 2>&1 || { echo "SKIP: tmux is not installed"; exit 77; }
SOCK="fulgur-cli-$$"
tm() { tmux -L "$SOCK" -f /dev/null "$@"; }
trap 'tm kill-server > /dev/null 2>&1; rm -rf "$CLI_TMP"' EXIT

write_config cfg.ini 3

# on_terminal NAME COLUMNS COMMAND: runs COMMAND in a fresh pane COLUMNS wide; NAME.txt is
# the screen (wrapped lines joined), NAME.esc the same with its colour escapes.
on_terminal() {
    name=$1 cols=$2
    shift 2
    tm new-session -d -s "$name" -x "$cols" -y 60 -c "$CLI_TMP" \
        "$*; echo \"rc=\$?\"; tmux -L '$SOCK' wait-for -S $name; exec cat"
    timeout 60 tmux -L "$SOCK" wait-for "$name" || fail "$name: the command did not end"
    tm capture-pane -p -J -t "$name" > "$name.txt"
    tm capture-pane -p -J -e -t "$name" > "$name.esc"
}

# --- the default: a bar on a terminal -----------------------------------------------
on_terminal bar 150 "'$FULGUR' fit cfg.ini"
grep -q '^rc=0$' bar.txt || fail "bar: fulgur fit failed"
for e in 1 2 3; do
    n=$(grep -c "^epoch $e/3 \[####################\] 16/16 .* loss [0-9.]* acc [0-9.]*  val loss [0-9.]* acc [0-9.]*$" bar.txt)
    [ "$n" -eq 1 ] || fail "bar: $n summary lines of epoch $e/3 (want 1)"
done
grep -q '^epoch [0-9]* step' bar.txt && fail "bar: the plain per-step lines are printed under the bar"
grep -q 'train loss' bar.txt && fail "bar: the trainer's epoch line is printed under the bar"
grep -q '^val ' bar.txt && fail "bar: the trainer's validation line is printed under the bar"
grep -q '^test  loss' bar.txt || fail "bar: no test line after the fit"
ESC=$(printf '\033')
grep "^epoch 1/3" bar.esc | grep -q "${ESC}\[32m#" || fail "bar: the finished bar is not coloured"

# --- the live bar, before the epoch ends: count, it/s, ETA, the latest metrics -----------
tm new-session -d -s live -x 150 -y 20 -c "$CLI_TMP" \
    "'$FULGUR' fit cfg.ini data.train_size=100000 trainer.log_every_n_steps=10; exec cat"
live_bar() {
    tm capture-pane -p -t live > live.txt
    grep -q '^epoch 1/3 \[[#.]*\] [0-9]*/3125  [0-9.]* it/s  ETA [0-9:]*  loss [0-9.]* acc [0-9.]*$' live.txt
}
poll_for 60 live_bar || { fail "live: no bar with ETA while the first epoch runs"; cat live.txt; }
tm kill-session -t live

# --- NO_COLOR: the same line, no colour ------------------------------------------------
on_terminal nocolor 150 "NO_COLOR=1 '$FULGUR' fit cfg.ini"
grep -q "^epoch 3/3 \[####################\] 16/16" nocolor.txt || fail "nocolor: no bar"
grep "^epoch" nocolor.esc | grep -q "$ESC" && fail "nocolor: escape sequences with NO_COLOR=1"

# --- a narrow terminal: the line is fitted (parts dropped), never wrapped ---------------
on_terminal narrow 48 "'$FULGUR' fit cfg.ini"
n=$(grep -c '^epoch [123]/3 .*16/16 .* loss [0-9.]*' narrow.txt)
[ "$n" -eq 3 ] || fail "narrow: $n epoch lines with the count and the loss (want 3)"
long=$(grep '^epoch [123]/3' narrow.txt | awk 'length($0) > 47' | head -1)
[ -z "$long" ] || fail "narrow: a bar line wider than the terminal: $long"

# --- enable_progress_bar = false: the plain lines ----------------------------------------
on_terminal plain 100 "'$FULGUR' fit cfg.ini trainer.enable_progress_bar=false"
grep -q '^epoch 1 step 2/16  loss' plain.txt || fail "plain: no per-step lines"
grep -q '^epoch 1/3  train loss' plain.txt || fail "plain: no epoch line"
grep -q '\[#' plain.txt && fail "plain: a bar with enable_progress_bar = false"

# --- under an MPI launcher (its pseudo-terminal is not the user's): the plain lines ------
on_terminal mpi 100 "OMPI_COMM_WORLD_SIZE=1 '$FULGUR' fit cfg.ini"
grep -q '^epoch 1 step 2/16  loss' mpi.txt || fail "mpi: no per-step lines under a launcher"
grep -q '\[#' mpi.txt && fail "mpi: a bar under an MPI launcher"

if [ "$CLI_FAILED" -ne 0 ]; then
    for f in bar nocolor narrow plain mpi; do echo "--- $f"; cat "$f.txt"; done
fi
finish
