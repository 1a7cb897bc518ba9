# harden.{elf,plugin_paths}: hostile-user defects of the plugin loader (issue 17, defects 1
# and 11): plugin files and folders, through the `fulgur` command. Sourced by
# tests/common/harden_test.sh.

# A truncated plugin is refused with the reason, never a SIGBUS inside dlopen, whether or not
# a config names it. The cuts: inside the program headers, inside the first segment, past
# the code (the case found: 54840 bytes of fulgur-backend-cpu.so), and short of the end.
group_elf() {
    src=$PLUGINS/fulgur-backend-cpu.so
    size=$(stat -c %s "$src")
    for cut in 40 200 4096 54840 $((size / 2)); do
        [ "$cut" -lt "$size" ] || continue
        mkdir -p "$TMP/cut$cut"
        head -c "$cut" "$src" >"$TMP/cut$cut/fulgur-backend-cpu.so"
        run "truncated_$cut" --plugin-path "$TMP/cut$cut" plugins
        expect_rc 0
        expect_out "refused $TMP/cut$cut/fulgur-backend-cpu.so: cannot be opened: truncated"
        # Named by a config: an error naming the file, exit 2 (a bad input), no signal.
        printf '[backend]\nname = cpu\n' >"$TMP/cut$cut/c.ini"
        run "truncated_named_$cut" --plugin-path "$TMP/cut$cut" check "$TMP/cut$cut/c.ini"
        [ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] || fail "expected a clean refusal, got $RC"
        expect_err "fulgur-backend-cpu.so: cannot be opened: truncated"
    done
}

# Folders and dangling links named like plugins are reported; a named plugin folder that
# does not exist, or is a file, is an error.
group_plugin_paths() {
    mkdir -p "$TMP/odd/fulgur-backend-dir.so"
    ln -s "$TMP/nowhere.so" "$TMP/odd/fulgur-backend-dangling.so"
    runp odd_entries --plugin-path "$TMP/odd" plugins
    expect_rc 0
    expect_out "refused $TMP/odd/fulgur-backend-dir.so: a folder, not a plugin file"
    expect_out "refused $TMP/odd/fulgur-backend-dangling.so: dangling symbolic link"

    runp missing_folder --plugin-path "$TMP/no-such-folder" plugins
    expect_rc 2
    expect_err "plugin folder $TMP/no-such-folder: No such file or directory"

    : >"$TMP/afile"
    runp file_as_folder --plugin-path "$TMP/afile" plugins
    expect_rc 2
    expect_err "plugin folder $TMP/afile: not a folder"

    printf '[plugins]\npath = no-such-folder\n[backend]\nname = cpu\n' >"$TMP/p.ini"
    runp config_missing_folder check "$TMP/p.ini"
    expect_rc 2
    expect_err "plugin folder $TMP/no-such-folder: No such file or directory"
}
