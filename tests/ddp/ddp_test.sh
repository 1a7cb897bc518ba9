#!/usr/bin/env bash
# ddp.* tests: strategy.ddp and comm.mpi under mpirun, one step per run, named by $1.
# Environment (from ctest): FULGUR, PLUGIN_DIR, COMM_DRIVER, DDP_TESTS (this folder),
# DDP_WORK (scratch), PYTHON; for local_sgd also FULGUR_SRC, FULGUR_BUILD, CMAKE, CC.
#
# comm_collectives     every collective and dtype of comm.mpi, 2 and 3 ranks (comm_driver.c); the
#                      same with ordered_sums = true on 2, 3 and 4 ranks: its sums in rank order
#                      (values whose rounding tells orders apart), half sums refused
# comm_timeout         a rank that skips a collective: the others name it and abort, exit 3
# equivalence          ddp -n 2, batch 64 per rank == single, batch 128, after 50 steps
# equivalence_accumulate   the same with accumulate_grad_batches = 2 (batch 32 per rank)
# overlap              bucket all-reduces start before backward ends (debug timestamps)
# stuck_rank           SIGSTOP rank 1: the job ends within timeout_s + 30 s naming it
# killed_rank          SIGKILL rank 1: the job ends promptly, non-zero
# lost_rank_status     SIGSTOP rank 1 (a lost peer): the job ends with exit 3, and rank 0's
#                      status.json says "failed" with the timeout line naming rank 1 as its
#                      message and exit_code 3 (issue 30, defect 12: it stayed "running", then
#                      said 1); the same after SIGKILL of rank 1 when mpirun does not end the
#                      job itself (orte_abort_on_non_zero_status 0); and SIGKILL under plain
#                      mpirun, which SIGTERMs then SIGKILLs rank 0 before any timeout: "failed",
#                      "SIGTERM received after step N ...", exit_code 137, and `fulgur runs`
#                      lists it as failed
# failed_rank          rank 1 alone fails in setup (a missing checkpoint): the job ends at
#                      once (not after timeout_s) with rank 1's message and exit 2
# test_accuracy        ddp's test loss/acc/sample count == single's on the same training
# local_sgd            examples/local-sgd built against an installed fulgur trains on 2 ranks
# batchnorm_buffers    batch norm under ddp -n 2: both ranks end with the same running statistics
#                      (debug digests), evaluate like single from the checkpoint (rank 0's)
# sync_batchnorm       [model] sync_batchnorm = true, a residual CNN with 2-D and 1-D batch norm
#                      (sync_batchnorm.ini): ddp -n 2 at batch 32 per rank == single at batch 64
#                      with the fused per-device batch norm after 50 steps (the model within
#                      1e-6 of its largest value, every tensor within 1e-5 of its own, the same
#                      logged losses); each rank keeps its own running statistics (no broadcast
#                      after setup's) and they are equal; without the key ddp is far from single;
#                      single at 64 with [model] batch_groups = 2 has ddp's bits (its digest)
# batch_groups         [model] batch_groups = 2 on examples/fashion_mnist_resnet.ini (relu, max
#                      pooling, AdamW; Debian's fashion-mnist idx files, resnet_ini.sh): one
#                      device at batch 64 ends 50 steps with bitwise the weights of ddp -n 2 at
#                      32 with sync_batchnorm (the digests, and 0 in compare_model_relative.py)
#                      and of dp on 2 devices and of model-parallel's one stage (the graph model
#                      has no pipeline split); without the key one device is more than 1e-6 off;
#                      char_gpt.ini (transformer blocks on README.md's text) the same in fp32 and
#                      bf16-mixed (ddp -n 2 at 8 against one device at 16 in 2 groups); ddp -n 4
#                      at 16 with comm.ordered_sums against one device in 4 groups (and apart
#                      without the key: Open MPI's ring adds in another order);
#                      the key's refusals (ddp, 3 groups of 64, accumulation, a pipeline of
#                      ddp.ini's MLP, dropout, sharded's mapped layers on one rank)
# dropout_streams      dropout on a one-sample set (every rank trains on the same sample): without
#                      dropout ddp == single bitwise, with it they differ (each rank its own masks)
# staging             comm.stage_device_buffers = true on the CPU backend (buffers copied through
#                      the backend's pinned host memory): the driver's collectives hold on 2 and 3
#                      ranks, and ddp -n 2 ends with bitwise the weights of the unstaged run
set -u

step=${1:?usage: ddp_test.sh STEP}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${DDP_TESTS:?}" "${DDP_WORK:?}"
fail() {
    echo "FAIL [ddp.$step]: $*" >&2
    exit 1
}
skip() {
    echo "SKIP [ddp.$step]: $*"
    exit 77
}

MPIRUN=$(command -v mpirun) || skip "mpirun not found (install openmpi-bin)"
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
# One BLAS thread per rank: two ranks share the machine's cores.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=$DDP_WORK/$step
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK" # runs/ folders land here
CFG=$DDP_TESTS/ddp.ini

mpi() { # mpi N ARGS...: runs N ranks
    local n=$1
    shift
    "$MPIRUN" "${MPI_FLAGS[@]}" -n "$n" "$@"
}
fit_ddp() { # fit_ddp N OVERRIDES...
    local n=$1
    shift
    mpi "$n" "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$CFG" "$@"
}
fit_single() { # fit_single OVERRIDES...: the same config under strategy.single, no [comm]
    grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' "$CFG" >"$WORK/single.ini"
    "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/single.ini" strategy.name=single "$@"
}
must() { # must LOG CMD...: runs the command, output to LOG; on failure shows LOG and fails
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

step_comm_collectives() {
    : "${COMM_DRIVER:?}"
    for n in 2 3; do
        must "$WORK/driver$n.log" mpi "$n" "$COMM_DRIVER" "$PLUGIN_DIR/fulgur-comm-mpi.so"
        [ "$(grep -c 'every collective checked' "$WORK/driver$n.log")" = "$n" ] ||
            { cat "$WORK/driver$n.log"; fail "not every one of $n ranks checked its collectives"; }
    done
    # ordered_sums on 4 ranks too, where Open MPI's own order (a ring) fails the order checks
    for n in 2 3 4; do
        must "$WORK/ordered$n.log" mpi "$n" "$COMM_DRIVER" "$PLUGIN_DIR/fulgur-comm-mpi.so" ordered
        [ "$(grep -c 'every collective checked' "$WORK/ordered$n.log")" = "$n" ] ||
            { cat "$WORK/ordered$n.log"; fail "not every one of $n ranks checked its ordered collectives"; }
    done
    echo "ok: all_reduce (sum/avg/max; f32/f64/i32/i64), started all_reduce + test/wait, reduce_scatter, all_gather, broadcast, send/recv, barrier on 2 and 3 ranks; the same with ordered_sums on 2, 3 and 4 ranks, whose sums keep rank order"
}

step_comm_timeout() {
    : "${COMM_DRIVER:?}"
    local log=$WORK/laggard.log t0 rc
    t0=$(now)
    COMM_DRIVER_TIMEOUT_S=2 mpi 3 -x COMM_DRIVER_TIMEOUT_S "$COMM_DRIVER" \
        "$PLUGIN_DIR/fulgur-comm-mpi.so" laggard >"$log" 2>&1
    rc=$?
    cat "$log"
    [ "$rc" -ne 0 ] || fail "the job exited 0 although rank 2 never arrived"
    grep -qE 'fulgur: comm\.mpi: rank [01]: all_reduce of 4 floats \(collective #1\) timed out after 2 s; ranks that did not arrive: 2 \(at collective #0\)' "$log" ||
        fail "no timeout line naming rank 2 and collective #1"
    # MPI_Abort's error code is the job's exit status (Open MPI's help text about it may be
    # lost when two ranks abort at once).
    [ "$rc" -eq 3 ] || fail "exit $rc, want 3 (MPI_Abort(MPI_COMM_WORLD, 3))"
    echo "ok: exit $rc after $(elapsed "$t0") s, rank 2 named as at collective #0"
}

# equivalence CHECKPOINT_NAME RANK_BATCH OVERRIDES...: ddp -n 2 against single at batch 128.
equivalence() {
    local name=$1 rank_batch=$2 out
    shift 2
    : "${PYTHON:?}"
    # SINGLE_ARGS: keys both runs share (clipping), as an array name.
    local -a shared=()
    [ -n "${SINGLE_ARGS:-}" ] && read -r -a shared <<<"$SINGLE_ARGS"
    must "$WORK/single.log" fit_single data.batch_size=128 "${shared[@]}" \
        trainer.final_checkpoint="$WORK/single.safetensors"
    must "$WORK/ddp.log" fit_ddp 2 data.batch_size="$rank_batch" "$@" \
        trainer.final_checkpoint="$WORK/$name.safetensors"
    grep -q 'after 50 steps' "$WORK/single.log" || { cat "$WORK/single.log"; fail "single did not run 50 steps"; }
    grep -q 'after 50 steps' "$WORK/ddp.log" || { cat "$WORK/ddp.log"; fail "ddp did not run 50 steps"; }
    # The per-step losses agree to the printed precision too.
    diff <(grep '^epoch .* step ' "$WORK/single.log") <(grep '^epoch .* step ' "$WORK/ddp.log") ||
        fail "the logged training losses differ (above: single <, ddp >)"
    out=$("$PYTHON" "$DDP_TESTS/compare_safetensors.py" "$WORK/$name.safetensors" "$WORK/single.safetensors" 1e-5) ||
        fail "ddp and single weights differ: $out"
    echo "ok: ddp -n 2 at batch $rank_batch per rank ${*:-} vs single at batch 128: $out"
}

step_equivalence() { equivalence ddp 64; }
step_equivalence_accumulate() { equivalence ddp_acc2 32 trainer.accumulate_grad_batches=2; }
# Clipping by the global norm after the average: ddp clips what single clips.
step_equivalence_clip() {
    SINGLE_ARGS="trainer.gradient_clip_val=0.05" equivalence ddp_clip 64 trainer.gradient_clip_val=0.05
}

# grad_comm_dtype = bf16 (PyTorch's bf16_compress_hook): the buckets travel as bf16, so the
# weights stay near the f32 run's (bf16 keeps 8 mantissa bits) but are not equal to them.
step_grad_comm_bf16() {
    : "${PYTHON:?}"
    local near far
    must "$WORK/comm_f32.log" fit_ddp 2 trainer.final_checkpoint="$WORK/comm_f32.safetensors"
    must "$WORK/comm_bf16.log" fit_ddp 2 strategy.grad_comm_dtype=bf16 \
        trainer.final_checkpoint="$WORK/comm_bf16.safetensors"
    grep -q 'gradients travel in bf16' "$WORK/comm_bf16.log" ||
        { cat "$WORK/comm_bf16.log"; fail "no line saying the gradients travel in bf16"; }
    near=$("$PYTHON" "$DDP_TESTS/compare_safetensors.py" "$WORK/comm_bf16.safetensors" \
        "$WORK/comm_f32.safetensors" 5e-2) || fail "bf16 gradients moved the weights too far: $near"
    if far=$("$PYTHON" "$DDP_TESTS/compare_safetensors.py" "$WORK/comm_bf16.safetensors" \
        "$WORK/comm_f32.safetensors" 1e-6); then
        fail "the weights equal the f32 run's ($far): the gradients did not travel in bf16"
    fi
    local l32 l16
    l32=$(awk '/^epoch .* step 50\//{print $6}' "$WORK/comm_f32.log")
    l16=$(awk '/^epoch .* step 50\//{print $6}' "$WORK/comm_bf16.log")
    awk -v a="$l32" -v b="$l16" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d < 2e-3 && d > -2e-3) }' ||
        fail "the training loss at step 50: f32 '$l32', bf16 '$l16' (want within 2e-3)"
    echo "ok: bf16 vs f32 gradient all-reduce after 50 steps: $near; loss at step 50 $l32 (f32), $l16 (bf16)"
}

# Five wide linear layers and buckets smaller than a layer (overlap.ini): every layer's
# gradients are their own bucket, and each bucket's all-reduce must start while the layers
# below it still run backward.
step_overlap() {
    local log=$WORK/overlap.log
    must "$log" mpi 2 "$FULGUR" --plugin-path "$PLUGIN_DIR" -v fit "$DDP_TESTS/overlap.ini"
    # rank 0's lines: "bucket K [lo, hi) started t=T" and "backward ended t=T; ..."
    awk '
        /\[strategy\.ddp\] debug: rank 0 step [0-9]+: bucket [0-9]+ / {
            s = $6 + 0; sub(/:$/, "", s); split($NF, a, "="); start[s] = start[s] " " a[2]; n[s]++ }
        /\[strategy\.ddp\] debug: rank 0 step [0-9]+: backward ended t=/ {
            s = $6; sub(/:$/, "", s); split($9, a, "="); sub(/;$/, "", a[2]); end[s] = a[2] + 0 }
        END {
            steps = 0; bad = 0; lead = 0
            for (s in end) {
                steps++
                k = split(start[s], t, " ")
                if (k < 5) { printf "step %s: %d buckets, want 5 (one per linear layer)\n", s, k; bad++; continue }
                early = 0
                for (i = 1; i <= k; i++) if (t[i] + 0 < end[s]) early++
                if (early < k) { printf "step %s: %d of %d buckets started after backward ended\n", s, k - early, k; bad++ }
                if (!(t[1] + 0 < t[k] + 0)) { printf "step %s: the first bucket did not start first\n", s; bad++ }
                lead += end[s] - t[1]
            }
            if (steps < 10) { printf "%d steps logged, want 10\n", steps; bad++ }
            if (!bad) printf "ok: %d steps, every bucket started before backward ended; the first one %.3f ms before it on average\n", steps, 1e3 * lead / steps
            exit bad != 0
        }' "$log" || { grep 'strategy.ddp' "$log" | head -40; fail "buckets did not overlap backward"; }
    grep 'rank 0 step 10: backward ended' "$log"
    grep 'gradient all-reduce' "$log" || fail "no summary line of the gradient all-reduce"
}

# Starts a long ddp run in the background, waits until rank 0 logs training steps, and
# sets MPIRUN_PID and RANK1_PID.
start_long_run() {
    local log=$1
    shift
    # mpirun itself in the background (not a shell function): its children are the ranks.
    # shellcheck disable=SC2086 # LONG_RUN_MPI_FLAGS: extra mpirun words
    "$MPIRUN" "${MPI_FLAGS[@]}" ${LONG_RUN_MPI_FLAGS:-} -n 2 "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$CFG" \
        trainer.max_steps=-1 trainer.max_epochs=100000 "$@" >"$log" 2>&1 &
    MPIRUN_PID=$!
    trap 'kill -KILL "$MPIRUN_PID" ${RANK1_PID:+"$RANK1_PID"} 2>/dev/null' EXIT
    local deadline=$(($(date +%s) + 60))
    until grep -q '^epoch 1 step 20/' "$log"; do
        kill -0 "$MPIRUN_PID" 2>/dev/null || { cat "$log"; fail "the run ended before training"; }
        [ "$(date +%s)" -lt "$deadline" ] || { cat "$log"; fail "no training step logged within 60 s"; }
        sleep 0.1 # polling the log of a run in progress
    done
    RANK1_PID=
    local p
    for p in $(pgrep -P "$MPIRUN_PID"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
            RANK1_PID=$p
        fi
    done
    [ -n "$RANK1_PID" ] || fail "cannot find rank 1 among mpirun's children"
}

# Waits for mpirun to exit within $1 seconds; sets RC.
wait_mpirun() {
    local limit=$1 deadline
    deadline=$(awk -v a="$(now)" -v l="$limit" 'BEGIN { printf "%d", a + l + 1 }')
    while kill -0 "$MPIRUN_PID" 2>/dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "mpirun still runs $limit s after the signal"
        sleep 0.1 # polling the run's end
    done
    wait "$MPIRUN_PID"
    RC=$?
}

step_stuck_rank() {
    local log=$WORK/stuck.log t0 timeout=5
    start_long_run "$log" comm.timeout_s=$timeout
    t0=$(now)
    kill -STOP "$RANK1_PID"
    wait_mpirun $((timeout + 30))
    echo "mpirun exited $RC $(elapsed "$t0") s after SIGSTOP of rank 1 (timeout_s = $timeout)"
    grep 'fulgur: comm.mpi' "$log"
    [ "$RC" -ne 0 ] || fail "mpirun exited 0"
    grep -qE "^fulgur: comm\.mpi: rank 0: all_reduce of [0-9]+ (floats|doubles) \(collective #[0-9]+\) timed out after $timeout s; ranks that did not arrive: 1 \(no answer" "$log" ||
        { cat "$log"; fail "no line naming rank 1 and the collective"; }
    echo "ok: stuck rank 1 named, job ended with exit $RC"
}

step_killed_rank() {
    local log=$WORK/killed.log t0
    start_long_run "$log" comm.timeout_s=600
    t0=$(now)
    kill -KILL "$RANK1_PID"
    wait_mpirun 30
    echo "mpirun exited $RC $(elapsed "$t0") s after SIGKILL of rank 1"
    [ "$RC" -ne 0 ] || { cat "$log"; fail "mpirun exited 0"; }
    grep -q 'rank 1 .*exited on signal 9' "$log" || { cat "$log"; fail "mpirun did not report rank 1's death"; }
    echo "ok: killed rank 1 ended the job with exit $RC (comm timeout 600 s not needed)"
}

# rank 0's status.json of the run under $1 says "failed", the timeout line naming rank 1
check_lost_status() {
    local status
    status=$(ls "$1"/*/version_0/status.json 2>/dev/null | head -n 1)
    [ -n "$status" ] || fail "no status.json under $1"
    python3 - "$status" "$2" <<'PY' || { cat "$status"; fail "status.json after the lost rank ($1)"; }
import json, re, sys
doc = json.load(open(sys.argv[1]))
assert doc.get('status') == 'failed', 'status %r' % doc.get('status')
msg = doc.get('message') or ''
pattern = r'comm\.mpi: rank 0: all_reduce of [0-9]+ (floats|doubles) \(collective #[0-9]+\) timed out after %s s; ranks that did not arrive: 1 \(no answer' % sys.argv[2]
assert re.search(pattern, msg), 'message %r' % msg
# the code the job ends with (README "Exit status": 3, peer failure), not FG_FATAL's 1
assert doc.get('exit_code') == 3, 'exit_code %r, want 3' % doc.get('exit_code')
PY
    echo "ok: exit_code 3, $(grep -o '"message": "[^"]*"' "$status")"
}

# Rank 0's status.json after mpirun itself ended the job (its default: a rank that dies makes
# it send the others SIGTERM, then SIGKILL a second later): "failed", naming the signal and
# the step, exit_code 137, written by the signal handler before the SIGKILL.
check_signal_status() {
    local status
    status=$(ls "$1"/*/version_0/status.json 2>/dev/null | head -n 1)
    [ -n "$status" ] || fail "no status.json under $1"
    python3 - "$status" <<'PY' || { cat "$status"; fail "status.json after mpirun ended the job ($1)"; }
import json, re, sys
doc = json.load(open(sys.argv[1]))
assert doc.get('status') == 'failed', 'status %r' % doc.get('status')
msg = doc.get('message') or ''
m = re.match(r'SIGTERM received after step ([0-9]+); the process ended before it stopped at a '
             r'step boundary \(killed: under mpirun', msg)
assert m, 'message %r' % msg
assert int(m.group(1)) >= 20 and doc.get('global_step') == int(m.group(1)), \
    'step %s, global_step %r' % (m.group(1), doc.get('global_step'))
assert doc.get('exit_code') == 137, 'exit_code %r, want 137' % doc.get('exit_code')
assert isinstance(doc.get('end_unix'), int) and doc['end_unix'] >= int(doc['start_unix']), doc
PY
    echo "ok: $(grep -o '"message": "[^"]*"' "$status")"
}

step_lost_rank_status() {
    local timeout=3
    start_long_run "$WORK/stopped.log" comm.timeout_s=$timeout trainer.default_root_dir="$WORK/stopped"
    kill -STOP "$RANK1_PID"
    wait_mpirun $((timeout + 30))
    [ "$RC" -eq 3 ] || { cat "$WORK/stopped.log"; fail "mpirun exited $RC after SIGSTOP of rank 1, not 3 (peer failure)"; }
    check_lost_status "$WORK/stopped" $timeout
    # SIGKILL, mpirun told not to end the job itself: rank 0 finds rank 1 gone at its timeout
    LONG_RUN_MPI_FLAGS="--mca orte_abort_on_non_zero_status 0" \
        start_long_run "$WORK/killed.log" comm.timeout_s=$timeout trainer.default_root_dir="$WORK/killed"
    kill -KILL "$RANK1_PID"
    wait_mpirun $((timeout + 30))
    [ "$RC" -ne 0 ] || fail "mpirun exited 0 after SIGKILL of rank 1"
    check_lost_status "$WORK/killed" $timeout
    # SIGKILL under plain mpirun (its defaults): mpirun ends rank 0 itself, long before the
    # comm timeout (600 s here); rank 0's record must not stay "running"
    start_long_run "$WORK/plain.log" comm.timeout_s=600 trainer.default_root_dir="$WORK/plain"
    kill -KILL "$RANK1_PID"
    wait_mpirun 30
    [ "$RC" -ne 0 ] || fail "mpirun exited 0 after SIGKILL of rank 1"
    check_signal_status "$WORK/plain"
    "$FULGUR" runs "$WORK/plain" >"$WORK/plain_runs.txt" 2>&1 ||
        { cat "$WORK/plain_runs.txt"; fail "fulgur runs failed"; }
    grep -q 'failed' "$WORK/plain_runs.txt" && ! grep -q 'running' "$WORK/plain_runs.txt" ||
        { cat "$WORK/plain_runs.txt"; fail "fulgur runs does not list the run as failed"; }
}

step_failed_rank() {
    local log=$WORK/failed.log t0 rc=0
    t0=$(now)
    # Rank 0 goes on to the parameter broadcast; rank 1 cannot open its checkpoint.
    timeout 60 "$MPIRUN" "${MPI_FLAGS[@]}" -n 2 bash -c \
        'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then set -- "$@" trainer.ckpt_path=/nonexistent/x.safetensors; fi; exec "$@"' \
        fulgur "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$CFG" comm.timeout_s=600 >"$log" 2>&1 || rc=$?
    local secs
    secs=$(elapsed "$t0")
    echo "mpirun exited $rc $secs s after start"
    [ "$rc" = 2 ] || { cat "$log"; fail "exit $rc, want 2 (rank 1's bad input)"; }
    grep -q '^fulgur: rank 1 of 2 failed, ending the job: .*/nonexistent/x.safetensors' "$log" ||
        { cat "$log"; fail "no line naming rank 1 and its error"; }
    awk -v s="$secs" 'BEGIN { exit !(s < 30) }' || fail "the job took $secs s to end"
    echo "ok: rank 1's setup failure ended the job in $secs s with its message"
}

# One short epoch under single (batch 128) and ddp -n 2 (batch 64), then the test set: the
# same weights must give the same test line, over the whole set exactly once.
step_test_accuracy() {
    local common=(trainer.max_steps=-1 trainer.limit_train_batches=30 trainer.test_after_fit=true)
    must "$WORK/single.log" fit_single data.batch_size=128 "${common[@]}"
    must "$WORK/ddp.log" fit_ddp 2 data.batch_size=64 "${common[@]}"
    local a b
    a=$(grep '^test ' "$WORK/single.log")
    b=$(grep '^test ' "$WORK/ddp.log")
    [ -n "$a" ] || { cat "$WORK/single.log"; fail "no test line from single"; }
    [ "$a" = "$b" ] || fail "test lines differ: single '$a', ddp '$b'"
    case $b in *"(1001 samples"*) ;; *) fail "ddp tested '$b', want the whole set of 1001 samples" ;; esac
    echo "ok: single and ddp -n 2 both print '$b'"
}

step_local_sgd() {
    : "${FULGUR_BUILD:?}" "${FULGUR_SRC:?}" "${CMAKE:?}"
    local prefix=$WORK/prefix bdir=$WORK/build log=$WORK/fit.log
    must "$WORK/install.log" "$CMAKE" --install "$FULGUR_BUILD" --prefix "$prefix"
    must "$WORK/configure.log" "$CMAKE" -S "$FULGUR_SRC/examples/local-sgd" -B "$bdir" \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
        -DCMAKE_C_COMPILER="${CC:-cc}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-Werror
    must "$WORK/build.log" "$CMAKE" --build "$bdir"
    local so=$bdir/fulgur-strategy-local_sgd.so
    [ "$(nm -D --defined-only "$so" | awk '{print $NF}')" = fulgur_plugin_v1 ] ||
        fail "$so exports more than fulgur_plugin_v1"
    # The installed fulgur, its installed comm.mpi, and the example from its build folder.
    must "$log" mpi 2 "$prefix/bin/fulgur" --plugin-path "$bdir" fit "$CFG" \
        strategy.name=local_sgd strategy.k=4 trainer.max_steps=300 trainer.log_every_n_steps=50 \
        trainer.max_epochs=10
    cat "$log"
    grep -q 'local SGD on 2 ranks: parameters averaged every 4 steps' "$log" || fail "local_sgd did not start"
    grep -q '300 steps, 75 parameter averages' "$log" || fail "not 75 averages in 300 steps"
    awk '/^epoch [0-9]+ step / { for (i = 1; i <= NF; i++) if ($i == "loss") l[n++] = $(i + 1) }
         END { if (n < 2) exit 1; printf "loss %s -> %s\n", l[0], l[n - 1]; exit !(l[n - 1] < 0.8 * l[0]) }' "$log" ||
        fail "the training loss did not fall by 20%"
    echo "ok: examples/local-sgd built against $prefix and trained on 2 ranks"
}

# Rank 0's running statistics reach every rank: the test line of ddp (each rank evaluates
# its shard with its own copy) equals single's from the checkpoint ddp wrote.
step_batchnorm_buffers() {
    CFG=$DDP_TESTS/batchnorm.ini
    must "$WORK/ddp.log" fit_ddp 2 -v trainer.test_after_fit=true \
        trainer.final_checkpoint="$WORK/bn.safetensors"
    local d0 d1 a b rc=0
    d0=$(grep -aoE 'rank 0: model buffers \(256 floats\) digest [0-9a-f]+' "$WORK/ddp.log" | awk '{print $NF}')
    d1=$(grep -aoE 'rank 1: model buffers \(256 floats\) digest [0-9a-f]+' "$WORK/ddp.log" | awk '{print $NF}')
    [ -n "$d0" ] && [ "$d0" = "$d1" ] || { grep -a 'model buffers' "$WORK/ddp.log"; fail "running statistics differ between ranks: '$d0' '$d1'"; }
    grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' "$CFG" >"$WORK/single.ini"
    must "$WORK/single.log" "$FULGUR" --plugin-path "$PLUGIN_DIR" test "$WORK/single.ini" \
        strategy.name=single --ckpt-path "$WORK/bn.safetensors"
    a=$(grep -a '^test ' "$WORK/ddp.log" | sed 's/, after step [0-9]*)/)/')
    b=$(grep -a '^test ' "$WORK/single.log" | sed 's/, after step [0-9]*)/)/')
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "ddp tested '$a', single from the checkpoint '$b'"
    echo "ok: both ranks hold running statistics $d0; ddp '$a' == single from the checkpoint"
}

step_sync_batchnorm() {
    : "${PYTHON:?}"
    CFG=$DDP_TESTS/sync_batchnorm.ini
    local near tensors off d0 d1
    must "$WORK/single.log" fit_single data.batch_size=64 model.sync_batchnorm=false \
        trainer.final_checkpoint="$WORK/single.safetensors"
    must "$WORK/sync.log" fit_ddp 2 -v trainer.final_checkpoint="$WORK/sync.safetensors"
    must "$WORK/nosync.log" fit_ddp 2 model.sync_batchnorm=false \
        trainer.final_checkpoint="$WORK/nosync.safetensors"
    must "$WORK/groups.log" fit_single data.batch_size=64 model.batch_groups=2
    grep -q 'after 50 steps' "$WORK/single.log" || { cat "$WORK/single.log"; fail "single did not run 50 steps"; }
    grep -aq 'after 50 steps' "$WORK/sync.log" || { cat "$WORK/sync.log"; fail "ddp did not run 50 steps"; }
    diff <(grep '^epoch .* step ' "$WORK/single.log") <(grep -a '^epoch .* step ' "$WORK/sync.log") ||
        fail "the logged training losses differ (above: single <, ddp >)"
    near=$("$PYTHON" "$DDP_TESTS/compare_model_relative.py" "$WORK/sync.safetensors" "$WORK/single.safetensors" 1e-6) ||
        fail "ddp with sync_batchnorm is not single at twice the batch: $near"
    tensors=$("$PYTHON" "$DDP_TESTS/compare_safetensors.py" "$WORK/sync.safetensors" "$WORK/single.safetensors" 1e-5) ||
        fail "ddp with sync_batchnorm: a tensor is not single's: $tensors"
    if off=$("$PYTHON" "$DDP_TESTS/compare_model_relative.py" "$WORK/nosync.safetensors" "$WORK/single.safetensors" 1e-3); then
        fail "without sync_batchnorm ddp still equals single ($off): the key changed nothing"
    fi
    # every rank updated its running statistics from the same sums: equal without a broadcast
    d0=$(grep -aoE 'rank 0: model buffers \(128 floats\) digest [0-9a-f]+, 1 broadcast\(s\)' "$WORK/sync.log" | awk '{sub(/,$/, "", $8); print $8}')
    d1=$(grep -aoE 'rank 1: model buffers \(128 floats\) digest [0-9a-f]+, 1 broadcast\(s\)' "$WORK/sync.log" | awk '{sub(/,$/, "", $8); print $8}')
    [ -n "$d0" ] && [ "$d0" = "$d1" ] ||
        { grep -a 'model buffers' "$WORK/sync.log"; fail "running statistics differ between ranks or were broadcast after setup: '$d0' '$d1'"; }
    d0=$(grep -a '^weights:' "$WORK/sync.log" | head -1) d1=$(grep '^weights:' "$WORK/groups.log")
    [ "$d0" = "$d1" ] || fail "single at batch 64 in 2 batch groups is not ddp's bits: '$d1' against '$d0'"
    echo "ok: ddp -n 2 batch 32 with sync_batchnorm vs single batch 64 after 50 steps: $near; per tensor $tensors; running statistics equal on both ranks; without the key: $off; single in 2 batch groups: ddp's $d0"
}

step_batch_groups() {
    : "${PYTHON:?}" "${FULGUR_SRC:?}"
    local data=/usr/share/datasets/fashion-mnist one=(backend.threads=1 trainer.max_steps=50
        trainer.num_sanity_val_steps=0 trainer.check_val_every_n_epoch=0
        trainer.test_after_fit=false) w near off a a4 b c m p
    [ -f "$data/train-images-idx3-ubyte.gz" ] ||
        fail "$data is missing: Debian's dataset-fashion-mnist (tests/install-deps.sh installs it)"
    CFG=$WORK/resnet.ini
    sh "$DDP_TESTS/resnet_ini.sh" "$FULGUR_SRC/examples/fashion_mnist_resnet.ini" relu maxpool2d \
        adamw >"$CFG" || fail "resnet_ini.sh failed"
    printf '\n[comm]\nname = mpi\ntimeout_s = 300\n' >>"$CFG"
    must "$WORK/groups.log" fit_single "${one[@]}" model.batch_groups=2 \
        trainer.final_checkpoint="$WORK/groups.safetensors"
    must "$WORK/plain.log" fit_single "${one[@]}" trainer.final_checkpoint="$WORK/plain.safetensors"
    must "$WORK/ddp.log" fit_ddp 2 "${one[@]}" strategy.name=ddp data.batch_size=32 \
        model.sync_batchnorm=true \
        trainer.final_checkpoint="$WORK/ddp.safetensors"
    must "$WORK/dp.log" "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/single.ini" "${one[@]}" \
        strategy.name=dp backend.devices=2 model.sync_batchnorm=true model.batch_groups=2
    must "$WORK/mp.log" "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$WORK/single.ini" "${one[@]}" \
        strategy.name=model-parallel backend.devices=1 model.sync_batchnorm=true \
        model.batch_groups=2
    a=$(grep '^weights:' "$WORK/groups.log") b=$(grep -a '^weights:' "$WORK/ddp.log" | head -1)
    c=$(grep '^weights:' "$WORK/dp.log") m=$(grep '^weights:' "$WORK/mp.log")
    case $a in *"after 50 steps") ;; *) cat "$WORK/groups.log"; fail "one device did not run 50 steps" ;; esac
    [ "$a" = "$b" ] || fail "one device in 2 batch groups is not ddp -n 2: '$a' against '$b'"
    [ "$a" = "$c" ] || fail "one device in 2 batch groups is not dp on 2 devices: '$a' against '$c'"
    [ "$a" = "$m" ] || fail "model-parallel (one stage) in 2 batch groups is not single: '$m' against '$a'"
    near=$("$PYTHON" "$DDP_TESTS/compare_model_relative.py" "$WORK/ddp.safetensors" "$WORK/groups.safetensors" 0) ||
        fail "ddp against one device in batch groups: $near"
    if off=$("$PYTHON" "$DDP_TESTS/compare_model_relative.py" "$WORK/ddp.safetensors" "$WORK/plain.safetensors" 1e-6); then
        fail "one device without batch groups is within 1e-6 of ddp ($off): the test shows nothing"
    fi
    w=$WORK/single.ini
    refused() { # refused WANT OVERRIDES...: the fit fails naming the key and saying WANT
        local want=$1 log=$WORK/refused.log
        shift
        ! "$@" >"$log" 2>&1 || { cat "$log"; fail "accepted: $*"; }
        grep -aq "batch_groups = .*$want" "$log" || { cat "$log"; fail "no '$want' in the refusal of: $*"; }
    }
    refused "does not divide \[data\] batch_size = 64" "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$w" \
        "${one[@]}" model.batch_groups=3
    refused "accumulate_grad_batches = 2" "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$w" "${one[@]}" \
        model.batch_groups=2 trainer.accumulate_grad_batches=2
    refused "whose ranks are the groups already" fit_ddp 2 "${one[@]}" strategy.name=ddp \
        data.batch_size=32 model.batch_groups=2
    grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' "$DDP_TESTS/ddp.ini" >"$WORK/mlp.ini"
    refused "cannot take the batch's sums group by group" "$FULGUR" --plugin-path "$PLUGIN_DIR" \
        fit "$WORK/mlp.ini" model.batch_groups=2 strategy.name=model-parallel backend.devices=2
    refused "dropout masks from one stream" "$FULGUR" --plugin-path "$PLUGIN_DIR" fit "$w" \
        "${one[@]}" model.batch_groups=2 layer.b2_relu2.type=dropout layer.b2_relu2.p=0.1
    refused "maps the layers' parameters and gradients (sharded)" fit_ddp 1 "${one[@]}" \
        strategy.name=sharded model.batch_groups=2
    # 4 ranks: equal with comm.ordered_sums (rank-order sums), apart without
    CFG=$WORK/resnet.ini
    must "$WORK/groups4.log" fit_single "${one[@]}" model.batch_groups=4
    must "$WORK/ddp4.log" fit_ddp 4 "${one[@]}" strategy.name=ddp data.batch_size=16 \
        model.sync_batchnorm=true comm.ordered_sums=true
    must "$WORK/ddp4mpi.log" fit_ddp 4 "${one[@]}" strategy.name=ddp data.batch_size=16 \
        model.sync_batchnorm=true
    a4=$(grep '^weights:' "$WORK/groups4.log") b=$(grep -a '^weights:' "$WORK/ddp4.log" | head -1)
    c=$(grep -a '^weights:' "$WORK/ddp4mpi.log" | head -1)
    [ "$a4" = "$b" ] || fail "one device in 4 batch groups '$a4', ddp -n 4 with ordered_sums '$b'"
    [ "$a4" != "$c" ] || fail "ddp -n 4 without ordered_sums has the groups' bits too: the check shows nothing"
    # the char GPT (embeddings, transformer blocks, layernorm) in fp32 and bf16-mixed
    CFG=$DDP_TESTS/char_gpt.ini
    for p in fp32 bf16-mixed; do
        must "$WORK/gpt_ddp_$p.log" fit_ddp 2 data.dir="$FULGUR_SRC" precision.name=$p
        must "$WORK/gpt_groups_$p.log" fit_single data.dir="$FULGUR_SRC" precision.name=$p \
            data.batch_size=16 model.batch_groups=2
        b=$(grep -a '^weights:' "$WORK/gpt_ddp_$p.log" | head -1) c=$(grep '^weights:' "$WORK/gpt_groups_$p.log")
        case $b in *"after 30 steps") ;; *) cat "$WORK/gpt_ddp_$p.log"; fail "the GPT's ddp did not run 30 steps" ;; esac
        [ "$b" = "$c" ] || fail "$p GPT: one device in 2 batch groups '$c', ddp -n 2 '$b'"
    done
    echo "ok: one device at batch 64 in 2 batch groups == ddp -n 2 at 32 == dp on 2 devices == model-parallel's one stage: $a ($near); without the groups: $off; ddp -n 4 with ordered_sums = 4 groups: $a4; the char GPT in fp32 and bf16-mixed: ddp's bits"
}

step_dropout_streams() {
    CFG=$DDP_TESTS/dropout.ini
    local p a b
    for p in 0 0.5; do
        local o=(trainer.max_epochs=50 layer.drop1.p=$p layer.drop2.p=$p)
        must "$WORK/single$p.log" fit_single "${o[@]}"
        must "$WORK/ddp$p.log" fit_ddp 2 "${o[@]}"
        a=$(grep '^weights:' "$WORK/single$p.log") b=$(grep '^weights:' "$WORK/ddp$p.log")
        case $b in *"after 50 steps") ;; *) cat "$WORK/ddp$p.log"; fail "ddp did not run 50 steps" ;; esac
        if [ "$p" = 0 ]; then
            [ "$a" = "$b" ] || fail "without dropout ddp and single should agree: '$a' vs '$b'"
        else
            [ "$a" != "$b" ] || fail "with dropout p = 0.5 ddp equals single ('$a'): every rank drew the same masks"
        fi
    done
    echo "ok: same sample on both ranks: p = 0 ddp == single; p = 0.5 they differ ($b)"
}

# Every rank's "staged N calls, B bytes in" debug line of comm.mpi, N and B > 0, in LOG.
staged_on_every_rank() {
    local log=$1 n=$2 lines
    lines=$(grep -aoE 'rank [0-9]+: staged [1-9][0-9]* calls, [1-9][0-9]* bytes in' "$log" | sort -u)
    [ "$(printf '%s\n' "$lines" | grep -c staged)" = "$n" ] ||
        { cat "$log"; fail "not every one of $n ranks staged its buffers: '$lines'"; }
}

step_staging() {
    : "${COMM_DRIVER:?}"
    local n a b
    for n in 2 3; do
        COMM_DRIVER_STAGE=true COMM_DRIVER_BACKEND=$PLUGIN_DIR/fulgur-backend-cpu.so \
            must "$WORK/driver$n.log" mpi "$n" -x COMM_DRIVER_STAGE -x COMM_DRIVER_BACKEND \
            "$COMM_DRIVER" "$PLUGIN_DIR/fulgur-comm-mpi.so"
        [ "$(grep -c 'every collective checked' "$WORK/driver$n.log")" = "$n" ] ||
            { cat "$WORK/driver$n.log"; fail "not every one of $n ranks checked its staged collectives"; }
        staged_on_every_rank "$WORK/driver$n.log" "$n"
    done
    must "$WORK/plain.log" fit_ddp 2 -v
    must "$WORK/staged.log" fit_ddp 2 -v comm.stage_device_buffers=true
    ! grep -aq 'staging device buffers' "$WORK/plain.log" ||
        fail "stage_device_buffers = auto staged on the cpu backend"
    staged_on_every_rank "$WORK/staged.log" 2
    a=$(grep -a '^weights:' "$WORK/plain.log") b=$(grep -a '^weights:' "$WORK/staged.log")
    case $a in *"after 50 steps") ;; *) cat "$WORK/plain.log"; fail "ddp did not run 50 steps" ;; esac
    [ "$a" = "$b" ] || fail "staging changed the weights: '$a' unstaged, '$b' staged"
    grep -a 'rank 0: staged' "$WORK/staged.log"
    echo "ok: staged collectives checked on 2 and 3 ranks; ddp -n 2 staged == unstaged: $b"
}

"step_$step"
