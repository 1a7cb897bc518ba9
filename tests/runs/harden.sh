# harden.runs_fifo (issue 30), sourced by tests/common/harden_test.sh: `fulgur runs`, a
# reader that a file swapped for a FIFO cannot block.

# Defect 5: `fulgur runs` on a run folder whose status.json, metrics.csv or report.html is a
# FIFO lists every run, with a note on the one it could not read, instead of waiting for a
# writer forever (timeout 60 would end such a wait with 124).
group_runs_fifo() {
    write_ok_config "$TMP/ok.ini"
    printf '[callback.csv_logger]\n' >>"$TMP/ok.ini"
    runp base fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" trainer.name=base
    expect_rc 0
    local base=$TMP/runs/base/version_0 v
    for v in fifo_status fifo_csv fifo_html; do
        mkdir -p "$TMP/root/$v" && cp -r "$base" "$TMP/root/$v/version_0"
    done
    rm "$TMP/root/fifo_status/version_0/status.json" && mkfifo "$TMP/root/fifo_status/version_0/status.json"
    rm "$TMP/root/fifo_csv/version_0/report.html" "$TMP/root/fifo_csv/version_0/metrics.csv"
    mkfifo "$TMP/root/fifo_csv/version_0/metrics.csv"
    rm "$TMP/root/fifo_html/version_0/report.html" && mkfifo "$TMP/root/fifo_html/version_0/report.html"
    CASE=runs_fifo
    timeout 60 "$FULGUR" --plugin-path "$PLUGINS" runs "$TMP/root" >"$OUT" 2>"$ERR"
    RC=$?
    LAST_CMD="timeout 60 fulgur runs $TMP/root"
    expect_rc 0
    grep -q '^fifo_status .*status.json: not a regular file (a FIFO, device or folder): not read' "$OUT" ||
        fail "no line for fifo_status with the note on status.json"
    grep -q '^fifo_csv  *version_0  *finished .*metrics.csv: not a regular file (a FIFO, device or folder): not read' "$OUT" ||
        fail "no line for fifo_csv with the note on metrics.csv"
    # report.html unreadable: the metrics come from metrics.csv, and the note says why
    grep -q '^fifo_html  *version_0  *finished  *8  *train/loss [0-9.]* .*report.html: not a regular file' "$OUT" ||
        fail "no line for fifo_html with its metrics from metrics.csv and the note on report.html"
    for v in fifo_status fifo_csv fifo_html; do
        [ -n "$(find "$TMP/root/$v/version_0" -type p)" ] || fail "$v: the FIFO is gone"
    done
}
