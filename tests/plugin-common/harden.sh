# harden.outputs (issue 30, defect 1), sourced by tests/common/harden_test.sh: no output
# path replaces, unlinks or writes through anything but a regular file. Every output a run
# or a verb writes at a path the user can choose is put in place of a FIFO, a character
# device (mknod as root, else a link to /dev/null), a link to /dev/null and a folder: the
# command exits 2 naming the path and its kind, and the node is still what it was.
# (config.ini, status.json, plugins.log and predictions.csv go into a fresh run folder
# through the same helper, plugins/common/output_file.c, whose unit test is
# plugin_common.output_file.)

# The nodes, made afresh in $1: fifo, dev, devlink, dir.
make_nodes() {
    rm -rf "$1" && mkdir -p "$1"
    mkfifo "$1/fifo"
    mknod "$1/dev" c 1 3 2>/dev/null || ln -s /dev/null "$1/dev"
    ln -s /dev/null "$1/devlink"
    mkdir "$1/dir"
}

# The node at $1 (named $2) is unchanged; the last command exited 2 naming it.
expect_refused() {
    local path=$1 node=$2 kind
    case $node in
    fifo) kind="a FIFO"; [ -p "$path" ] || fail "$path is no longer a FIFO: $(ls -ld "$path")" ;;
    dev | devlink) kind="a character device"
        [ -c "$path" ] || fail "$path is no longer a device: $(ls -ld "$path")"
        [ -c /dev/null ] || fail "/dev/null is no longer a device" ;;
    dir) kind="a folder"; [ -d "$path" ] && [ ! -L "$path" ] || fail "$path is no longer a folder" ;;
    esac
    [ "$node" != devlink ] || [ "$(readlink "$path")" = /dev/null ] || fail "$path is no longer a link to /dev/null"
    expect_rc 2
    expect_err "$path: is $kind, not a regular file: refusing to replace it"
    ls "$(dirname "$path")" | grep -q '\.tmp\.' && fail "a temporary file was left beside $path: $(ls "$(dirname "$path")")"
}

group_outputs() {
    write_ok_config "$TMP/ok.ini"
    local N=$TMP/nodes node
    runp base fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" trainer.final_checkpoint="$TMP/ok.safetensors"
    expect_rc 0
    for node in fifo dev devlink dir; do
        make_nodes "$N"
        runp "final_checkpoint_$node" fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" \
            trainer.final_checkpoint="$N/$node"
        expect_refused "$N/$node" $node
        # a checkpoint of the checkpoint callback, and its second name last.safetensors
        for file in epoch=0-step=8.safetensors last.safetensors; do
            make_nodes "$N"
            mv "$N/$node" "$N/$file"
            { cat "$TMP/ok.ini"; printf '[callback.checkpoint]\ndirpath = %s\nsave_last = true\n' "$N"; } >"$TMP/ck.ini"
            runp "checkpoint_${file}_$node" fit "$TMP/ck.ini" trainer.default_root_dir="$TMP/runs"
            expect_refused "$N/$file" $node
        done
        for key in callback.report.filename callback.lr_monitor.filename callback.csv_logger.filename; do
            make_nodes "$N"
            runp "${key}_$node" fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" "$key=$N/$node"
            expect_refused "$N/$node" $node
        done
        # hparams.yaml beside metrics.csv
        make_nodes "$N"
        mv "$N/$node" "$N/hparams.yaml"
        runp "hparams_$node" fit "$TMP/ok.ini" trainer.default_root_dir="$TMP/runs" \
            callback.csv_logger.filename="$N/metrics.csv"
        expect_refused "$N/hparams.yaml" $node
        make_nodes "$N"
        run "merge_$node" ckpt merge "$TMP/ok.safetensors" -o "$N/$node"
        expect_refused "$N/$node" $node
        make_nodes "$N"
        runp "runs_report_$node" runs "$TMP/runs" --report "$N/$node"
        expect_refused "$N/$node" $node
    done
}
