#!/bin/sh
# ux.bar_pipe: `fulgur fit` into a file or a pipe prints the plain periodic lines, as
# before the bar existed, and not one control character (no "\r", no escape sequence).
#   bar_pipe.sh FULGUR
FULGUR=$1
. "$(dirname "$0")/../../common/cli_lib.sh"
write_config cfg.ini 3

# check_plain FILE: the trainer's plain lines and nothing a terminal would interpret.
check_plain() {
    grep -q '^epoch 1 step 2/16  loss [0-9.]*  acc [0-9.]*  lr 0.01$' "$1" || fail "$1: no per-step line"
    n=$(grep -c '^epoch [123]/3  train loss' "$1")
    [ "$n" -eq 3 ] || fail "$1: $n epoch lines (want 3)"
    grep -q '^val   loss' "$1" || fail "$1: no validation line"
    grep -q '\[#' "$1" && fail "$1: a progress bar in a file"
    if LC_ALL=C tr -d '\n' < "$1" | LC_ALL=C grep -q '[[:cntrl:]]'; then
        fail "$1: control characters:"
        LC_ALL=C grep -n '[[:cntrl:]]' "$1" | od -c | head -5 >&2
    fi
}

"$FULGUR" fit cfg.ini > file.txt 2>&1 || fail "fit > file: exit $?"
check_plain file.txt
"$FULGUR" fit cfg.ini 2>&1 | cat > pipe.txt
check_plain pipe.txt
finish
