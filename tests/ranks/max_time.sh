#!/usr/bin/env bash
# ranks.max_time_{ddp,sharded} (issue 30, defect 2): under mpirun -n 2 with [trainer]
# max_time, the ranks agree on the step the time runs out at, whatever their clocks: rank 1's
# is put 1.5 s ahead (test hook FULGUR_TEST_CLOCK_SKEW=1:1.5), so on its own clock it would
# stop a second and a half before rank 0 and post the end-of-fit collectives while rank 0 is
# in a gradient all-reduce (it died with MPI_ERR_TRUNCATE, exit 15). Expected: exit 0, the
# max_time line, the final checkpoint, the test metrics, status.json "finished".
# Usage: max_time.sh ddp|sharded. Environment: FULGUR, PLUGIN_DIR.
set -u
strategy=${1:?usage: max_time.sh ddp|sharded}
: "${FULGUR:?}" "${PLUGIN_DIR:?}"
fail() { echo "FAIL [ranks.max_time_$strategy]: $*" >&2; exit 1; }
MPIRUN=$(command -v mpirun) || { echo "SKIP: no mpirun"; exit 77; }
flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1
WORK=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
cat >"$WORK/fit.ini" <<INI
[trainer]
max_epochs = 100000
max_time = 00:00:03
seed = 4
log_every_n_steps = 1000
test_after_fit = true
enable_progress_bar = false
default_root_dir = $WORK/runs
final_checkpoint = final.safetensors
[backend]
name = cpu
threads = 1
[strategy]
name = $strategy
[comm]
name = mpi
timeout_s = 30
[data]
name = synthetic
shape = 16
train_size = 640
test_size = 64
batch_size = 16
num_workers = 0
[layer.fc1]
type = linear
out_features = 32
[layer.act]
type = relu
[layer.fc2]
type = linear
out_features = 10
[optimizer]
name = adamw
lr = 0.01
INI
timeout 120 "$MPIRUN" "${flags[@]}" -n 2 -x FULGUR_TEST_CLOCK_SKEW=1:1.5 \
    "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/fit.ini" >"$WORK/out" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$WORK/out"; fail "exit $rc, expected 0"; }
grep -q "stopping: max_time 3 s reached" "$WORK/out" || { cat "$WORK/out"; fail "no max_time line"; }
run=$WORK/runs/default/version_0
[ -s "$run/final.safetensors" ] || { cat "$WORK/out"; fail "no final checkpoint in $run"; }
grep -q "^test  loss [0-9.]*  acc [0-9.]*  (64 samples" "$WORK/out" || { cat "$WORK/out"; fail "no test metrics"; }
grep -q '"status": "finished"' "$run/status.json" || fail "status.json: $(cat "$run/status.json")"
echo "ranks.max_time_$strategy: ok ($(grep -o 'after [0-9]* steps' "$WORK/out" | head -1))"
