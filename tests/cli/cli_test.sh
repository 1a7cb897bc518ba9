#!/bin/sh
# Tests of the `fulgur` command: exit codes (0 ok, 1 runtime failure, 2 usage or config
# error), help, and the exact fragments of its messages.
#
#   cli_test.sh FULGUR PLUGIN_DIR GROUP
#
# GROUP is one of: usage plugins explain devices check overrides run. Every case runs, and
# each failed expectation is printed with the command's stdout and stderr; the script exits
# 1 when any expectation failed.
set -u

if [ $# -ne 3 ]; then
    echo "usage: $0 FULGUR PLUGIN_DIR GROUP" >&2
    exit 2
fi
FULGUR=$1
PLUGINS=$2
GROUP=$3

[ -x "$FULGUR" ] || { echo "not an executable: $FULGUR" >&2; exit 1; }
[ -d "$PLUGINS" ] || { echo "not a folder: $PLUGINS" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/fulgur-cli.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
# run/runp, fail, expect_rc/out/err/no_out/no_err
# shellcheck source=../common/expect_lib.sh
. "$(dirname "$0")/../common/expect_lib.sh"

# Only the folders a test names may hold plugins: no user or environment folder leaks in.
HOME=$TMP/home
export HOME
unset FULGUR_PLUGIN_PATH
mkdir -p "$HOME"
cd "$TMP" || exit 1 # run folders (runs/) of the fits land here

# A small valid config: synthetic data, flatten + linear, one short epoch.
write_ok_config() {
    cat >"$1" <<'EOF'
[trainer]
max_epochs = 1

[data]
name = synthetic
train_size = 512
test_size = 256
batch_size = 64
num_workers = 0

[layer.flat]
type = flatten

[layer.fc1]
type = linear
out_features = 10
EOF
}

# config_with NAME SED_EXPR: the valid config edited by one sed expression.
config_with() {
    sed "$2" "$TMP/ok.ini" >"$TMP/$1.ini"
}

# prepend NAME TEXT: TEXT (printf format) followed by the valid config.
prepend() {
    { printf '%b' "$2"; cat "$TMP/ok.ini"; } >"$TMP/$1.ini"
}

group_usage() {
    run no_args
    expect_rc 2
    expect_err "usage: fulgur"
    expect_err "commands:"
    expect_no_out

    run help --help
    expect_rc 0
    expect_out "usage: fulgur"
    for cmd in fit validate test predict check plugins explain devices; do
        expect_out "  $cmd "
    done
    expect_out "Exit status: 0 ok, 1 runtime"
    expect_no_err

    run help_short -h
    expect_rc 0
    expect_out "usage: fulgur"

    run version --version
    expect_rc 0
    grep -qE '^fulgur [0-9]+\.[0-9]+\.[0-9]+ \(plugin ABI 1\.11\)$' "$OUT" ||
        fail "stdout is not 'fulgur X.Y.Z (plugin ABI 1.11)'"

    run unknown_command frobnicate
    expect_rc 2
    expect_err "unknown command 'frobnicate'"
    expect_err "fulgur --help"

    run unknown_option --frobnicate
    expect_rc 2
    expect_err "unknown option '--frobnicate'"

    run plugin_path_without_value --plugin-path
    expect_rc 2
    expect_err "--plugin-path needs a folder"

    run plugin_path_empty_value --plugin-path= plugins
    expect_rc 2
    expect_err "--plugin-path needs a folder"

    for cmd in fit validate test predict check; do
        runp "${cmd}_without_config" "$cmd"
        expect_rc 2
        expect_err "'$cmd' needs a CONFIG file"
    done

    runp plugins_with_argument plugins extra
    expect_rc 2
    expect_err "'plugins' takes no argument (got 'extra')"

    runp devices_with_argument devices extra
    expect_rc 2
    expect_err "'devices' takes no argument (got 'extra')"

    runp explain_without_argument explain
    expect_rc 2
    expect_err "'explain' needs one KIND.NAME"
}

group_plugins() {
    runp plugins plugins
    expect_rc 0
    expect_out "# search path (first match wins):"
    expect_out "#   $PLUGINS"
    for kn in "backend    cpu " "precision  fp32 " "strategy   single " "data       idx " \
              "data       synthetic "; do
        grep -F -- "$kn" "$OUT" | grep -qF "abi 1.11" || fail "no line '$kn ... abi 1.11'"
    done
    # Nothing of the build's own folder is refused (an installed copy elsewhere may be
    # reported as shadowed: that is not this test's business).
    ! grep -qF "refused $PLUGINS/" "$OUT" || fail "a built plugin was refused"
    expect_out "refused; host ABI 1.11"

    # A file named like a plugin that is not a shared object: refused with the reason, and
    # the listing still succeeds.
    mkdir -p "$TMP/bogus"
    : >"$TMP/bogus/fulgur-backend-bogus.so"
    runp plugins_refused --plugin-path "$TMP/bogus" plugins
    expect_rc 0
    expect_out "refused $TMP/bogus/fulgur-backend-bogus.so: cannot be opened:"
    expect_out "1 refused"
    expect_out "backend    cpu "

    # A file whose name is not fulgur-<kind>-<name>.so, and one with an unknown kind.
    mkdir -p "$TMP/names"
    : >"$TMP/names/fulgur-widget-x.so"
    runp plugins_unknown_kind --plugin-path "$TMP/names" plugins
    expect_rc 0
    expect_out "refused $TMP/names/fulgur-widget-x.so: unknown plugin kind 'widget' in the file name"
}

group_explain() {
    runp explain_backend_cpu explain backend.cpu
    expect_rc 0
    expect_out "backend.cpu "
    expect_out "(abi 1.11, needs host >= 1.0)"
    expect_out "options:"
    grep -qE '^  threads +int ' "$OUT" || fail "no option line for 'threads' (int)"

    runp explain_data_synthetic explain data.synthetic
    expect_rc 0
    expect_out "options of [data] from the core:"
    grep -qE '^  batch_size +int ' "$OUT" || fail "no core option line for 'batch_size'"
    grep -qE '^  train_size +int ' "$OUT" || fail "no plugin option line for 'train_size'"

    runp explain_trainer explain trainer
    expect_rc 0
    expect_out "[trainer] (core)"
    grep -qE '^  max_epochs +int +default=1 ' "$OUT" || fail "no option line 'max_epochs int default=1'"

    mkdir -p "$TMP/empty"
    runp explain_not_found --plugin-path "$TMP/empty" explain backend.nosuch
    expect_rc 2
    expect_err "plugin backend.nosuch not found: no fulgur-backend-nosuch.so in"
    expect_err "$TMP/empty"
    expect_err "$PLUGINS"
    expect_no_out

    runp explain_nonsense explain nonsense
    expect_rc 2
    expect_err "'nonsense' is neither KIND.NAME"

    runp explain_unknown_kind explain widget.cpu
    expect_rc 2
    expect_err "'widget.cpu' is neither KIND.NAME"
}

group_devices() {
    runp devices devices
    expect_rc 0
    grep -qE '^cpu +1 device\(s\)$' "$OUT" || fail "no line 'cpu 1 device(s)'"
    expect_out "  cpu:0  "
    expect_no_err
}

group_check() {
    C=$TMP/ok.ini

    runp check_ok check "$C"
    expect_rc 0
    expect_out "$C: ok"
    expect_no_err

    runp check_missing_file check "$TMP/nosuch.ini"
    expect_rc 2
    expect_err "$TMP/nosuch.ini: cannot open"

    printf '[trainer\nmax_epochs = 1\n' >"$TMP/syntax.ini"
    runp check_syntax_error check "$TMP/syntax.ini"
    expect_rc 2
    expect_err "$TMP/syntax.ini:1: section header '[trainer' has no closing ']'"

    config_with unknown_key 's/^max_epochs = 1$/max_epoch = 1/'
    runp check_unknown_key check "$TMP/unknown_key.ini"
    expect_rc 2
    expect_err "$TMP/unknown_key.ini:2: unknown key 'max_epoch' in [trainer]; did you mean 'max_epochs'?"

    config_with unknown_section 's/^\[trainer\]$/[trainr]/'
    runp check_unknown_section check "$TMP/unknown_section.ini"
    expect_rc 2
    expect_err "$TMP/unknown_section.ini:1: unknown section [trainr]; did you mean [trainer]?"

    config_with wrong_type 's/^max_epochs = 1$/max_epochs = abc/'
    runp check_wrong_type check "$TMP/wrong_type.ini"
    expect_rc 2
    expect_err "$TMP/wrong_type.ini:2: [trainer] max_epochs = 'abc' is not an integer"

    config_with out_of_range 's/^batch_size = 64$/batch_size = 0/'
    runp check_out_of_range check "$TMP/out_of_range.ini"
    expect_rc 2
    expect_err "$TMP/out_of_range.ini:8: [data] batch_size = 0 is out of range [1, "

    config_with missing_name '/^name = synthetic$/d'
    runp check_missing_required check "$TMP/missing_name.ini"
    expect_rc 2
    expect_err "$TMP/missing_name.ini:4: [data] is missing required key 'name'"

    prepend unknown_plugin '[backend]\nname = cdua\n\n'
    runp check_unknown_plugin check "$TMP/unknown_plugin.ini"
    expect_rc 2
    expect_err "$TMP/unknown_plugin.ini:2: [backend] plugin backend.cdua cannot be used"
    expect_err "plugin backend.cdua not found: no fulgur-backend-cdua.so in $PLUGINS"

    prepend plugin_key '[backend]\nthreadz = 2\n\n'
    runp check_unknown_plugin_key check "$TMP/plugin_key.ini"
    expect_rc 2
    expect_err "$TMP/plugin_key.ini:2: unknown key 'threadz' in [backend]; did you mean 'threads'?"

    config_with data_key 's/^train_size = 512$/train_sise = 512/'
    runp check_unknown_data_plugin_key check "$TMP/data_key.ini"
    expect_rc 2
    expect_err "$TMP/data_key.ini:6: unknown key 'train_sise' in [data]; did you mean 'train_size'?"

    config_with layer_type 's/^type = linear$/type = linaer/'
    runp check_unknown_layer_type check "$TMP/layer_type.ini"
    expect_rc 2
    expect_err "$TMP/layer_type.ini:15: [layer.fc1] unknown layer type 'linaer'; did you mean 'linear'?"

    printf '[trainer]\nmax_epochs = 1\nmax_epochs = 2\n' >"$TMP/dup.ini"
    runp check_duplicate_key check "$TMP/dup.ini"
    expect_rc 2
    expect_err "$TMP/dup.ini:3: duplicate key 'max_epochs' in [trainer]"
}

group_overrides() {
    C=$TMP/ok.ini

    runp override_without_equals check "$C" trainer.max_epochs
    expect_rc 2
    expect_err "invalid override 'trainer.max_epochs': missing '='"

    runp override_unknown_key check "$C" trainer.max_epoch=3
    expect_rc 2
    expect_err "command line: trainer.max_epoch=3: unknown key 'max_epoch' in [trainer]; did you mean 'max_epochs'?"

    runp override_bad_value check "$C" data.batch_size=0
    expect_rc 2
    expect_err "command line: data.batch_size=0"
    expect_err "is out of range"

    config_with wrong_type 's/^max_epochs = 1$/max_epochs = abc/'
    runp override_fixes_error check "$TMP/wrong_type.ini" trainer.max_epochs=1
    expect_rc 0
    expect_out "$TMP/wrong_type.ini: ok"

    runp override_unknown_plugin check "$C" backend.name=cdua
    expect_rc 2
    expect_err "command line: backend.name=cdua: [backend] plugin backend.cdua cannot be used"
}

group_run() {
    C=$TMP/ok.ini

    runp fit_ok fit "$C" trainer.default_root_dir="$TMP/runs" trainer.final_checkpoint="$TMP/ok.safetensors"
    expect_rc 0
    grep -qE '^test  loss [0-9.]+  acc [0-9.]+  \(256 samples, after step [0-9]+\)$' "$OUT" ||
        fail "no line 'test  loss L  acc A  (256 samples, after step N)'"

    # validate/test evaluate a checkpoint: without one, a usage error naming the option.
    for verb in test validate predict; do
        runp "${verb}_needs_checkpoint" "$verb" "$C" trainer.default_root_dir="$TMP/runs"
        expect_rc 2
        expect_err "fulgur $verb evaluates a trained model: give --ckpt-path"
    done
    runp test_with_checkpoint test "$C" trainer.default_root_dir="$TMP/runs" --ckpt-path "$TMP/ok.safetensors"
    expect_rc 0
    expect_out "(256 samples"
    runp predict_with_checkpoint predict "$C" trainer.default_root_dir="$TMP/runs" --ckpt-path "$TMP/ok.safetensors"
    expect_rc 0
    expect_out "predictions: 256 rows in"
    runp ckpt_path_without_value fit "$C" --ckpt-path
    expect_rc 2

    runp fit_missing_file fit "$TMP/nosuch.ini"
    expect_rc 2
    expect_err "$TMP/nosuch.ini: cannot open"

    # A linear layer right after a conv, without a flatten: the shape check (at model
    # build) names the layer section and its file:line.
    cat >"$TMP/shape.ini" <<'EOF'
[data]
name = synthetic
train_size = 128
test_size = 64
num_workers = 0

[layer.conv1]
type = conv2d
out_channels = 4
kernel_size = 3

[layer.fc1]
type = linear
out_features = 10
EOF
    runp fit_shape_mismatch fit "$TMP/shape.ini"
    expect_rc 2
    expect_err "$TMP/shape.ini:12: [layer.fc1] (linear) needs a flat input but [layer.conv1] gives (4, 26, 26)"
    expect_err "add a layer with type = flatten before it"

    # A declared in_features that disagrees with the layer before it.
    config_with in_features 's/^type = linear$/type = linear\nin_features = 100/'
    runp fit_in_features_mismatch fit "$TMP/in_features.ini"
    expect_rc 2
    expect_err "$TMP/in_features.ini:14: [layer.fc1] expects 100 input features but [layer.flat] gives (784) = 784"

    # A runtime failure (the device runs out of memory) exits 1, not 2.
    prepend oom '[backend]\nmemory_limit_mb = 1\n\n'
    sed -i 's/^out_features = 10$/out_features = 1000\n\n[layer.out]\ntype = linear\nout_features = 10/' \
        "$TMP/oom.ini"
    runp fit_out_of_device_memory fit "$TMP/oom.ini"
    expect_rc 1
    expect_err "cannot allocate"
    expect_err "memory_limit_mb = 1"
}

write_ok_config "$TMP/ok.ini"
case $GROUP in
usage | plugins | explain | devices | check | overrides | run) "group_$GROUP" ;;
*)
    echo "unknown group '$GROUP'" >&2
    exit 2
    ;;
esac

if [ "$FAILED" -ne 0 ]; then
    echo "$FAILED expectation(s) failed in group $GROUP"
    exit 1
fi
echo "group $GROUP: all expectations met"
exit 0
