# Sourced by the scripts that drive the `fulgur` command in a scratch folder (the ux.* tests
# of callbacks/, callbacks/output/ and runs/): a scratch folder, a small config, checks.
#   FULGUR: the command; the scripts set it from their first argument.
set -u

CLI_TMP=$(mktemp -d "${TMPDIR:-/tmp}/fulgur-cli.XXXXXX") || exit 1
trap 'rm -rf "$CLI_TMP"' EXIT
trap 'exit 130' INT TERM
HOME=$CLI_TMP/home # no user plugin folder leaks in
export HOME
unset FULGUR_PLUGIN_PATH NO_COLOR
mkdir -p "$HOME"
cd "$CLI_TMP" || exit 1
CLI_FAILED=0

fail() {
    echo "FAIL: $*" >&2
    CLI_FAILED=1
}

# write_config FILE [EPOCHS]: synthetic data, a linear model, a validation split, a
# step event every 2 steps; runs go under ./runs/NAME.
write_config() {
    cat > "$1" <<INI
[trainer]
max_epochs = ${2:-3}
log_every_n_steps = 2
default_root_dir = runs

[data]
name = synthetic
train_size = 512
val_size = 128
test_size = 256
batch_size = 32
num_workers = 0

[layer.flat]
type = flatten

[layer.fc1]
type = linear
out_features = 10
INI
}

# poll_for SECONDS COMMAND...: runs COMMAND until it succeeds, at most SECONDS (a bound on
# waiting for content, not a timing assumption).
poll_for() {
    limit=$1
    shift
    start=$(date +%s)
    until "$@"; do
        [ $(($(date +%s) - start)) -lt "$limit" ] || return 1
        sleep 0.05
    done
}

finish() {
    if [ "$CLI_FAILED" -ne 0 ]; then
        echo "failed: see the messages above" >&2
        exit 1
    fi
    echo "ok"
    exit 0
}
