# harden.{messages,exit_codes,disk_full,long_path_reason,name_controls}: hostile-user
# defects of what the `fulgur` command says and how it exits (issue 17, defects 10 and 12;
# issue 30, defects 7, 16 and 20). Sourced by tests/common/harden_test.sh.

# Defect 12: the weak messages.
group_messages() {
    write_ok_config "$TMP/ok.ini"
    # trainer.name with a path separator would write outside default_root_dir.
    for name in ../../x a/b ..; do
        runp "name_$name" check "$TMP/ok.ini" trainer.name="$name"
        expect_rc 2
        expect_err "[trainer] name = '$name': a run name is one folder name"
    done
    [ ! -e "$TMP/x" ] || fail "a run folder was made outside default_root_dir"
    # val_check_interval = 0 is refused like 0.0.
    for v in 0 0.0; do
        runp "val_check_$v" check "$TMP/ok.ini" trainer.val_check_interval=$v
        expect_rc 2
        expect_err "val_check_interval must be above 0"
    done
    # IDX: a gzip file with garbage after the stream, and images of the wrong shape.
    python3 - "$TMP" <<'EOP'
import gzip, struct, sys
d = sys.argv[1]
def idx(dims, payload):
    return struct.pack(">I", 0x800 | len(dims)) + b"".join(struct.pack(">I", x) for x in dims) + payload
imgs = idx([4, 28, 28], bytes(4 * 28 * 28))
labels = idx([4], bytes([0, 1, 2, 3]))
open(d + "/imgs.gz", "wb").write(gzip.compress(imgs) + b"garbage after the stream")
open(d + "/labels", "wb").write(labels)
open(d + "/imgs-ok.gz", "wb").write(gzip.compress(imgs) + gzip.compress(b""))
open(d + "/small", "wb").write(idx([4, 14, 14], bytes(4 * 14 * 14)))
EOP
    idx_config() {
        cat >"$TMP/idx.ini" <<EOC
[trainer]
max_epochs = 1
[data]
name = idx
train_images = $1
train_labels = $TMP/labels
test_images = $2
test_labels = $TMP/labels
batch_size = 2
num_workers = 0
[layer.flat]
type = flatten
[layer.fc1]
type = linear
out_features = 10
EOC
    }
    idx_config "$TMP/imgs.gz" "$TMP/imgs-ok.gz"
    runp gzip_trailing check "$TMP/idx.ini"
    expect_rc 2
    expect_err "imgs.gz: 24 bytes of trailing garbage after the gzip stream"
    idx_config "$TMP/imgs-ok.gz" "$TMP/imgs-ok.gz"
    runp gzip_members check "$TMP/idx.ini"
    expect_rc 0
    idx_config "$TMP/imgs-ok.gz" "$TMP/small"
    runp wrong_shape check "$TMP/idx.ini"
    expect_rc 2
    expect_err "small"
    expect_err "(14, 14)"
    expect_err "(28, 28)"
}

# Defect 10: a checkpoint that cannot be written for lack of space is an I/O error (exit 4),
# not a config error (2). A file size limit (ulimit -f, SIGXFSZ ignored) makes the write
# fail with EFBIG exactly as a full disk fails it with ENOSPC.
group_exit_codes() {
    write_ok_config "$TMP/ok.ini"
    CASE=disk_full
    (
        trap '' XFSZ
        ulimit -f 8 # 8 KiB: the config and logs fit, a 31 KiB checkpoint does not
        exec "$FULGUR" --plugin-path "$PLUGINS" fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" \
            trainer.final_checkpoint="$TMP/final.safetensors" callback.report.enabled=false
    ) >"$OUT" 2>"$ERR"
    RC=$?
    LAST_CMD="ulimit -f 8; fulgur fit ... trainer.final_checkpoint=..."
    expect_rc 4
    expect_err "final.safetensors.tmp."
    expect_err "File too large"
    [ ! -e "$TMP/final.safetensors" ] || fail "a torn final checkpoint was left"
}

# Issue 30, defect 7: a full disk is exit 4 wherever the write fails: config.ini (was 2),
# report.html and metrics.csv (were 1), and status.json then says "failed", not "running".
# A file size limit (ulimit -f, SIGXFSZ ignored) fails each write with EFBIG as a full disk
# fails it with ENOSPC; the limit picks which file is the first too large.
disk_full_run() { # CASE KIB ARGS...
    CASE=$1
    local kib=$2
    shift 2
    # stderr through a pipe: a file under the limit could not hold the message
    (
        trap '' XFSZ
        ulimit -f "$kib"
        exec "$FULGUR" --plugin-path "$PLUGINS" "$@"
    ) 2>&1 >/dev/null | cat >"$ERR"
    RC=${PIPESTATUS[0]}
    : >"$OUT"
    LAST_CMD="ulimit -f $kib; fulgur $*"
}

group_disk_full() {
    write_ok_config "$TMP/ok.ini"
    disk_full_run config_ini 0 fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/r0"
    expect_rc 4
    expect_err "config.ini.tmp."
    expect_err "File too large"
    disk_full_run report 16 fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/r1"
    expect_rc 4
    expect_err "report.html.tmp."
    expect_err "File too large"
    grep -q '"status": "failed"' "$TMP/r1/default/version_0/status.json" ||
        fail "status.json after the report's failure: $(cat "$TMP/r1/default/version_0/status.json")"
    printf '[callback.csv_logger]\n' >>"$TMP/ok.ini"
    disk_full_run csv_logger 8 fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/r2" \
        callback.report.enabled=false trainer.max_epochs=30 trainer.log_every_n_steps=1
    expect_rc 4
    expect_err "metrics.csv"
    expect_err "File too large"
    grep -q '"status": "failed"' "$TMP/r2/default/version_0/status.json" ||
        fail "status.json after the csv_logger's failure: $(cat "$TMP/r2/default/version_0/status.json")"
}

# Issue 30, defect 20: a message longer than fg_error's 512 bytes loses its middle, not its
# end: a 600-byte path to a missing config or data file still ends with the reason.
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

# Issue 30, defect 16: a control character in trainer.name is refused naming the key (exit
# 2), before a run folder or its config.ini is written; `fulgur runs` prints the control
# characters of folder names it reads from disk escaped (\x1b), never raw.
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
