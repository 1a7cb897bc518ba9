#!/usr/bin/env bash
# lm.gpt2_124m_example: the smoke check examples/gpt2_124m.ini's header comment gives for a
# machine without the data (its "#   $ " lines) runs as written, from a folder holding the
# source's examples/: at least the token-file line and the `fulgur check` line, every line
# exits 0, and the check reports GPT-2 small's 124,439,808 parameters. (Issue 30: the comment
# said "fulgur check examples/gpt2_124m.ini", which fails without data, and not how to make it.)
set -u
: "${FULGUR:?}" "${SRC:?}" "${WORK:?}"
fail() {
    echo "FAIL [lm.gpt2_124m_example]: $*" >&2
    exit 1
}
rm -rf "$WORK" && mkdir -p "$WORK/bin" && cd "$WORK" || fail "cannot make $WORK"
ln -s "$SRC/examples" examples
ln -s "$FULGUR" bin/fulgur
export PATH="$WORK/bin:$PATH"
mapfile -t lines < <(sed -n 's/^#   \$ //p' examples/gpt2_124m.ini)
[ "${#lines[@]}" -ge 2 ] || fail "the example's comment gives ${#lines[@]} command line(s) ('#   \$ ...'), not the data and check lines"
printf '%s\n' "${lines[@]}" | grep -q '^fulgur check examples/gpt2_124m\.ini ' ||
    fail "no 'fulgur check examples/gpt2_124m.ini ...' line among: ${lines[*]}"
for line in "${lines[@]}"; do
    echo "\$ $line"
    bash -c "$line" >out.txt 2>&1 || { cat out.txt; fail "exit $? from: $line"; }
    cat out.txt
done
grep -q ', 124439808 parameters,' out.txt || fail "the check did not report 124439808 parameters"
echo "ok: the comment's smoke check passes"
