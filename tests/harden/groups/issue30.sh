# Issue 30's hostile-user defects 16, 20 and 21.

# Defect 21: `section.key=` (an empty value) clears a string key, as `key =` does in a
# file; a key whose type has no empty value refuses it naming the key (exit 2), not as an
# "invalid override".
group_empty_override() {
    write_ok_config "$TMP/ok.ini"
    sed 's/^max_epochs = 1$/max_epochs = 1\nmax_time = not-a-time/' "$TMP/ok.ini" >"$TMP/mt.ini"
    runp bad_max_time check "$TMP/mt.ini"
    expect_rc 2
    expect_err "max_time"
    runp clear_max_time check "$TMP/mt.ini" trainer.max_time=
    expect_rc 0
    grep -qF "invalid override" "$ERR" && fail "an empty value was refused as an invalid override"
    runp empty_int check "$TMP/ok.ini" trainer.max_epochs=
    expect_rc 2
    expect_err "max_epochs"
    grep -qF "invalid override" "$ERR" && fail "an empty int was refused as an invalid override"
    runp no_key check "$TMP/ok.ini" trainer.=1
    expect_rc 2
    expect_err "invalid override 'trainer.=1': empty key"
}

# Defect 20: a message longer than fg_error's 512 bytes loses its middle, not its end: a
# 600-byte path to a missing config or data file still ends with the reason.
group_long_path_reason() {
    write_ok_config "$TMP/ok.ini"
    seg=$(printf 'p%.0s' $(seq 1 99))
    long=$TMP/$seg/$seg/$seg/$seg/$seg/$seg
    runp missing_config check "$long/missing.ini"
    expect_rc 2
    [[ "$(tail -n 1 "$ERR")" == *": cannot open: No such file or directory" ]] ||
        fail "the message does not end with the reason"
    expect_err "fulgur: $TMP/"
    expect_err " ... "
    expect_err "/missing.ini: cannot open"
    printf '[trainer]\nmax_epochs = 1\n[data]\nname = text\ndir = %s\nfiles = c.txt\n[layer.fc]\ntype = linear\nout_features = 4\n' \
        "$long" >"$TMP/text.ini"
    runp missing_data check "$TMP/text.ini"
    expect_rc 2
    [[ "$(tail -n 1 "$ERR")" == *": cannot open: No such file or directory" ]] ||
        fail "the data plugin's message does not end with the reason"
    expect_err "/c.txt: cannot open"
}

# Defect 16: a control character in trainer.name is refused naming the key (exit 2), before
# a run folder or its config.ini is written; `fulgur runs` prints the control characters of
# folder names it reads from disk escaped (\x1b), never raw.
group_name_controls() {
    write_ok_config "$TMP/ok.ini"
    runp name_newline fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/nl" \
        trainer.name="$(printf 'a\nb')"
    expect_rc 2
    expect_err "[trainer] name holds the control character 0x0a at byte 1"
    [ ! -e "$TMP/nl" ] || fail "a refused name wrote $(find "$TMP/nl" | head -3)"
    printf '[trainer]\nname = x\033[31my\n' >"$TMP/esc.ini"
    sed '1d' "$TMP/ok.ini" >>"$TMP/esc.ini"
    runp name_escape check "$TMP/esc.ini"
    expect_rc 2
    expect_err "esc.ini:2: [trainer] name holds the control character 0x1b at byte 1"
    grep -q "$(printf '\033')" "$ERR" && fail "the message printed the escape raw"
    runp name_empty check "$TMP/ok.ini" trainer.name=
    expect_rc 2
    expect_err "[trainer] name = '': a run name is one folder name, not empty"
    runp fit_plain fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" trainer.name=plain
    expect_rc 0
    mv "$TMP/runs/plain" "$TMP/runs/$(printf 'x\033[31my')"
    runp runs_escaped runs "$TMP/runs"
    expect_rc 0
    expect_out 'x\x1b[31my'
    expect_out 'finished'
    grep -q "$(printf '\033')" "$OUT" && fail "fulgur runs printed the escape raw"
}
