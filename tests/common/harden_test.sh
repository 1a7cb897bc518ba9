#!/bin/bash
# harden.*: the hostile-user defects of issues 17 and 30, each as a user met it, run through
# the `fulgur` command in a scratch folder. The groups live beside what they test, in a
# harden.sh of that folder (one shell function group_NAME per ctest harden.NAME); this
# harness gives them run/runp, expect_rc/out/err, fail (expect_lib.sh) and write_ok_config,
# and $HERE, the group file's folder.
#
#   harden_test.sh FULGUR PLUGIN_DIR GROUP_FILE GROUP
#
# Every case of the group runs; each failed expectation is printed with the command's
# output, and the script exits 1 when any failed.
set -u

if [ $# -ne 4 ]; then
    echo "usage: $0 FULGUR PLUGIN_DIR GROUP_FILE GROUP" >&2
    exit 2
fi
FULGUR=$1
PLUGINS=$2
GROUP_FILE=$3
GROUP=$4
HERE=$(cd "$(dirname "$GROUP_FILE")" && pwd) || exit 2
GROUP_FILE=$HERE/$(basename "$GROUP_FILE") # the scratch folder below becomes the cwd

TMP=$(mktemp -d "${TMPDIR:-/tmp}/fulgur-harden.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=expect_lib.sh
. "$(dirname "$0")/expect_lib.sh" || exit 2
HOME=$TMP/home
export HOME
unset FULGUR_PLUGIN_PATH
mkdir -p "$HOME"
cd "$TMP" || exit 1

# A small valid config: synthetic data, flatten + linear, short epochs.
write_ok_config() {
    cat >"$1" <<'EOC'
[trainer]
max_epochs = 1
enable_progress_bar = false

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
EOC
}

# shellcheck source=/dev/null
. "$GROUP_FILE" || exit 2

if ! command -v "group_$GROUP" >/dev/null; then
    echo "unknown group: $GROUP" >&2
    exit 2
fi
"group_$GROUP"
if [ "$FAILED" -ne 0 ]; then
    echo "$FAILED expectation(s) failed in group $GROUP"
    exit 1
fi
echo "group $GROUP: all expectations held"
