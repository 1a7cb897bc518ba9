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
