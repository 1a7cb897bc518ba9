# harden.{long_lines,config_size,empty_override}: hostile-user defects of the config reader
# and its overrides (issue 17, defects 6 and 8; issue 30, defect 21), through the `fulgur`
# command. Sourced by tests/common/harden_test.sh, which gives run/runp, expect_* and
# write_ok_config.

# Long lines read (a value, a comment, a header's comment), and a config fulgur wrote itself
# with a path longer than 198 characters reads back.
group_long_lines() {
    write_ok_config "$TMP/ok.ini"
    long=$(printf 'd%.0s' $(seq 1 300))
    { cat "$TMP/ok.ini"; printf '; %s\n' "$long"; } >"$TMP/comment.ini"
    runp long_comment check "$TMP/comment.ini"
    expect_rc 0

    seg=$(printf 'd%.0s' $(seq 1 60))
    root=$TMP/$seg/$seg/$seg/$seg/runs
    runp long_root fit "$TMP/ok.ini" trainer.default_root_dir="$root" trainer.max_epochs=1
    expect_rc 0
    written=$(ls "$root"/*/version_0/config.ini 2>/dev/null | head -1)
    [ -n "$written" ] || fail "no config.ini under $root"
    grep -qF "$root" "$written" || fail "config.ini lacks the long root $root"
    runp long_readback check "$written"
    expect_rc 0
    printf '[trainer]\ndefault_root_dir = %s ; a comment\n' "$root" >"$TMP/inline.ini"
    sed -n '/^\[data\]/,$p' "$TMP/ok.ini" >>"$TMP/inline.ini"
    runp long_value_with_comment fit "$TMP/inline.ini" trainer.max_epochs=1
    expect_rc 0
    [ -n "$(ls -d "$root"/*/version_1 2>/dev/null)" ] ||
        fail "the long value with an inline comment did not name $root (no second version)"
    # A broken long line is still refused with its line number.
    { printf '[trainer]\n'; printf 'x%.0s' $(seq 1 300); printf '\n'; } >"$TMP/broken.ini"
    runp long_broken check "$TMP/broken.ini"
    expect_rc 2
    expect_err "broken.ini:2: expected 'key = value'"
}

# A config larger than 16 MB, /dev/zero, a FIFO and a device are refused at once.
group_config_size() {
    write_ok_config "$TMP/ok.ini"
    { cat "$TMP/ok.ini"; head -c 17000000 /dev/zero | tr '\0' ';'; printf '\n'; } >"$TMP/big.ini"
    runp big check "$TMP/big.ini"
    expect_rc 2
    expect_err "big.ini: larger than 16 MB"
    truncate -s 4G "$TMP/sparse.ini"
    runp sparse check "$TMP/sparse.ini"
    expect_rc 2
    expect_err "sparse.ini: larger than 16 MB"
    runp devzero check /dev/zero
    expect_rc 2
    expect_err "/dev/zero: not a regular file"
    mkfifo "$TMP/fifo.ini"
    runp fifo check "$TMP/fifo.ini"
    expect_rc 2
    expect_err "fifo.ini: not a regular file"
    # The same for a checkpoint to resume and a data file.
    runp fifo_ckpt fit "$TMP/ok.ini" --ckpt-path "$TMP/fifo.ini"
    [ "$RC" -ne 0 ] || fail "a FIFO as a checkpoint was accepted"
    expect_err "fifo.ini: not a regular file"
    cat >"$TMP/idx.ini" <<EOC
[trainer]
max_epochs = 1
[data]
name = idx
train_images = $TMP/fifo.ini
train_labels = $TMP/fifo.ini
test_images = $TMP/fifo.ini
test_labels = $TMP/fifo.ini
num_workers = 0
[layer.flat]
type = flatten
[layer.fc1]
type = linear
out_features = 10
EOC
    runp fifo_data check "$TMP/idx.ini"
    [ "$RC" -ne 0 ] || fail "a FIFO as a data file was accepted"
    expect_err "fifo.ini: not a regular file"
    cat >"$TMP/csv.ini" <<EOC
[trainer]
max_epochs = 1
[data]
name = csv
train_file = $TMP/fifo.ini
target = y
num_workers = 0
[layer.fc1]
type = linear
out_features = 2
EOC
    runp fifo_csv check "$TMP/csv.ini"
    [ "$RC" -ne 0 ] || fail "a FIFO as a CSV file was accepted"
    expect_err "fifo.ini: not a regular file"
}

# Issue 30, defect 21: `section.key=` (an empty value) clears a string key, as `key =` does in a
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
