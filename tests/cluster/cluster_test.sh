#!/usr/bin/env bash
# cluster.* tests: fulgur submitted with sbatch (examples/slurm/train.sbatch) to the two-node
# Slurm cluster of cluster.sh, ranks started by `srun --mpi=pmix`, Open MPI over TCP on the
# nodes' veths. One step per run, named by $1 (tests/cluster/README.md):
#
# up / down        the ctest fixture: cluster.sh up (nodes idle) / cluster.sh down
# ddp              2 nodes x 1 rank, batch 64 each == single process at batch 128 after 50 steps
#                  (losses as printed, weights within 1e-5: tests/ddp's equivalence)
# sharded_stage3   ZeRO stage 3, 2 nodes x 2 ranks == stage 3 on 4 ranks of one node (mpirun),
#                  AdamW, clip 0.5, 50 steps (losses as printed, weights bitwise: same digest)
# netem            1 Gbit/s and 1 ms each way on both veths (tc netem): the ping RTT is >= 2 ms
#                  and ddp's gradient all-reduces are in flight >= 1 ms per bucket
# lost_node        node n2's fulgur SIGKILLed mid-epoch: rank 0 names rank 1 and exits 3
#                  within [comm] timeout_s + 10 s
# link_down        n2's veth set down mid-epoch: the same
# requeue          scancel --signal=USR1 (what --signal=USR1@90 sends): fulgur checkpoints,
#                  requeues its job, Slurm starts it again, it resumes and ends bitwise equal to
#                  the unbroken sbatch run; `fulgur runs` shows both versions
# Environment (from ctest): FULGUR, PLUGIN_DIR, CLUSTER (cluster.sh), CLUSTER_WORK (scratch,
# not under /tmp: each node has its own /tmp), DDP_TESTS, SHARDED_TESTS, PYTHON, SBATCH_FILE.
set -u

step=${1:?usage: cluster_test.sh STEP}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${CLUSTER:?}" "${CLUSTER_WORK:?}"
fail() {
    echo "FAIL [cluster.$step]: $*" >&2
    exit 1
}
skip() {
    echo "SKIP [cluster.$step]: $*"
    exit 77
}

case $step in
up) exec "$CLUSTER" up ;;
down) exec "$CLUSTER" down ;;
esac

: "${DDP_TESTS:?}" "${SHARDED_TESTS:?}" "${PYTHON:?}" "${SBATCH_FILE:?}"
"$CLUSTER" run sinfo -h >/dev/null 2>&1 || skip "no cluster running (cluster.up skipped or failed)"
case $CLUSTER_WORK/ in /tmp/*) fail "CLUSTER_WORK=$CLUSTER_WORK is under /tmp, which each node replaces with its own" ;; esac
WORK=$CLUSTER_WORK/$step
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
COMPARE=$DDP_TESTS/compare_safetensors.py
MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
JOB=

must() { # must LOG CMD...
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
losses() { grep '^epoch .* step ' "$1"; }
cleanup() {
    [ -n "$JOB" ] && "$CLUSTER" run scancel "$JOB" 2>/dev/null
    "$CLUSTER" node n2 ip link set eth0 up 2>/dev/null
    return 0
}
trap cleanup EXIT

# sbatch_job NODES TASKS_PER_NODE CONFIG KEY=VALUE...: submits train.sbatch as a user would
# (the environment a site provides: FULGUR, CONFIG); sets JOB and OUT (the job's output).
sbatch_job() {
    local nodes=$1 tasks=$2 cfg=$3
    shift 3
    JOB=$("$CLUSTER" run env CONFIG="$cfg" FULGUR="$FULGUR" FULGUR_PLUGIN_PATH="$PLUGIN_DIR" \
        sbatch --parsable --chdir="$WORK" --output="$WORK/job-%j.out" --job-name="$step" \
        --nodes="$nodes" --ntasks-per-node="$tasks" --cpus-per-task=1 "$SBATCH_FILE" "$@") ||
        fail "sbatch refused the job: $JOB"
    OUT=$WORK/job-$JOB.out
}

job_field() { # job_field NAME: the job's NAME=VALUE from scontrol
    "$CLUSTER" run scontrol -o show job "$JOB" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p"
}

# wait_state LIMIT STATE...: polls scontrol until the job is in one of STATEs (LIMIT seconds).
wait_state() {
    local limit=$1 deadline s
    shift
    deadline=$(($(date +%s) + limit))
    while :; do
        s=$(job_field JobState)
        for want in "$@"; do [ "$s" = "$want" ] && return 0; done
        [ "$(date +%s)" -lt "$deadline" ] || { cat "$OUT" 2>/dev/null; fail "job $JOB is $s after $limit s, want $*"; }
        sleep 0.2 # polling scontrol, bounded by the deadline
    done
}

# wait_line LIMIT PATTERN: until the job's output has a line matching PATTERN.
wait_line() {
    local deadline=$(($(date +%s) + $1))
    until grep -qE "$2" "$OUT" 2>/dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] || { cat "$OUT" 2>/dev/null; fail "no line '$2' within $1 s (job $(job_field JobState))"; }
        sleep 0.1 # polling the output of a running job, bounded by the deadline
    done
}

finished_ok() { # the job COMPLETED with exit 0:0
    wait_state 120 COMPLETED FAILED CANCELLED NODE_FAIL TIMEOUT OUT_OF_MEMORY
    local s e
    s=$(job_field JobState) e=$(job_field ExitCode)
    [ "$s" = COMPLETED ] && [ "$e" = 0:0 ] || { cat "$OUT"; fail "job $JOB ended $s, exit $e"; }
    JOB=
}

step_ddp() {
    grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' "$DDP_TESTS/ddp.ini" >single.ini
    must single.log "$FULGUR" --plugin-path "$PLUGIN_DIR" fit single.ini strategy.name=single \
        data.batch_size=128 trainer.final_checkpoint="$WORK/single.safetensors"
    sbatch_job 2 1 "$DDP_TESTS/ddp.ini" data.batch_size=64 trainer.final_checkpoint="$WORK/ddp.safetensors"
    finished_ok
    grep -q '2 ranks on 2 node(s)' "$OUT" || { cat "$OUT"; fail "ddp did not run on 2 nodes"; }
    grep -q 'after 50 steps' "$OUT" || { cat "$OUT"; fail "ddp did not run 50 steps"; }
    diff <(losses single.log) <(losses "$OUT") || fail "the logged losses differ (single <, 2-node ddp >)"
    local out
    out=$("$PYTHON" "$COMPARE" ddp.safetensors single.safetensors 1e-5) ||
        fail "2-node ddp and single weights differ: $out"
    echo "ok: sbatch 2 nodes x 1 rank (batch 64) == single (batch 128) after 50 steps: $out"
    grep '^weights:' single.log "$OUT"
}

step_sharded_stage3() {
    local common=(strategy.stage=3 data.batch_size=16 trainer.gradient_clip_val=0.5)
    must one_node.log mpirun "${MPI_FLAGS[@]}" -n 4 "$FULGUR" --plugin-path "$PLUGIN_DIR" fit \
        "$SHARDED_TESTS/sharded.ini" "${common[@]}" trainer.final_checkpoint="$WORK/one_node.safetensors"
    sbatch_job 2 2 "$SHARDED_TESTS/sharded.ini" "${common[@]}" trainer.final_checkpoint="$WORK/two_nodes.safetensors"
    finished_ok
    grep -q 'stage 3 on 4 ranks' "$OUT" || { cat "$OUT"; fail "stage 3 did not start on 4 ranks"; }
    grep -q 'after 50 steps' "$OUT" || { cat "$OUT"; fail "stage 3 did not run 50 steps"; }
    diff <(losses one_node.log) <(losses "$OUT") || fail "the logged losses differ (one node <, two nodes >)"
    local out
    out=$("$PYTHON" "$COMPARE" two_nodes.safetensors one_node.safetensors 1e-5) ||
        fail "stage 3 on 2 nodes and on 1 node differ: $out"
    # the same reductions in the same order over TCP as through shared memory: bitwise
    [ "$(grep '^weights:' one_node.log)" = "$(grep '^weights:' "$OUT")" ] ||
        fail "weight digests differ: $(grep -h '^weights:' one_node.log "$OUT")"
    echo "ok: sbatch stage 3 on 2 nodes x 2 ranks == mpirun -n 4 on one node (AdamW, clip 0.5, 50 steps): $out"
    grep '^weights:' one_node.log "$OUT"
}

shape() { # shape on|off: 1 Gbit/s, 1 ms on both nodes' eth0 (each direction: 2 ms RTT)
    local n
    for n in n1 n2; do
        "$CLUSTER" node "$n" tc qdisc del dev eth0 root 2>/dev/null
        [ "$1" = on ] && { "$CLUSTER" node "$n" tc qdisc add dev eth0 root netem delay 1ms rate 1gbit ||
            skip "tc netem refused on $n's eth0 (no sch_netem here)"; }
    done
    return 0
}

step_netem() {
    trap 'shape off; cleanup' EXIT
    shape on
    local rtt
    rtt=$("$CLUSTER" node n1 ping -c 5 -i 0.2 -q 10.77.0.2 | sed -n 's|.* = [0-9.]*/\([0-9.]*\)/.*|\1|p')
    awk -v r="$rtt" 'BEGIN { exit !(r >= 2.0) }' || fail "ping n1 -> n2 averages '$rtt' ms, want >= 2 (1 ms each way)"
    # overlap.ini: five 512-wide layers, buckets of 0.01 MiB: one bucket per layer, 10 steps
    sbatch_job 2 1 "$DDP_TESTS/overlap.ini"
    finished_ok
    local line inflight steps
    line=$(grep 'gradient all-reduce in flight' "$OUT") || { cat "$OUT"; fail "no all-reduce summary"; }
    steps=$(echo "$line" | sed -n 's/.* \([0-9]*\) steps: .*/\1/p')
    inflight=$(echo "$line" | sed -n 's/.*in flight \([0-9.]*\) s.*/\1/p')
    # each of 5 buckets crosses the link at least once per step: >= 1 ms each
    awk -v f="$inflight" -v s="$steps" 'BEGIN { exit !(s > 0 && f >= s * 5 * 0.001) }' ||
        fail "all-reduces in flight $inflight s over $steps steps: less than 1 ms per bucket under 1 ms delay"
    echo "ok: RTT $rtt ms; $line"
}

# long_run TIMEOUT_S: a 2-node ddp job that trains until stopped; waits for step 20.
long_run() {
    sbatch_job 2 1 "$DDP_TESTS/ddp.ini" trainer.max_steps=-1 trainer.max_epochs=100000 comm.timeout_s="$1"
    wait_line 60 '^epoch 1 step 20/'
}

# lost_rank_named T0 TIMEOUT: rank 0 names rank 1 and srun reports task 0's exit 3 in time.
lost_rank_named() {
    local t0=$1 timeout=$2 secs
    wait_line $((timeout + 10)) 'n1: task 0: Exited with exit code 3'
    secs=$(elapsed "$t0")
    grep -qE '^fulgur: comm\.mpi: rank 0: .* timed out after '"$timeout"' s; ranks that did not arrive: 1 ' "$OUT" ||
        { cat "$OUT"; fail "no line from rank 0 naming rank 1"; }
    grep 'fulgur: comm.mpi: rank 0' "$OUT"
    echo "rank 0 exited 3 naming rank 1 within $secs s ([comm] timeout_s = $timeout)"
}

step_lost_node() {
    local timeout=5 t0 p pids=
    long_run $timeout
    for p in $(ip netns pids fgsl-n2); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = fulgur ] && pids="$pids $p"
    done
    [ -n "$pids" ] || fail "no fulgur process in node n2's namespace"
    t0=$(now)
    kill -KILL $pids
    lost_rank_named "$t0" $timeout
    wait_state 60 FAILED COMPLETED CANCELLED NODE_FAIL
    echo "ok: SIGKILL of n2's rank: job $JOB $(job_field JobState), exit $(job_field ExitCode)"
    JOB=
}

step_link_down() {
    local timeout=5 t0
    long_run $timeout
    t0=$(now)
    "$CLUSTER" node n2 ip link set eth0 down || fail "cannot set n2's eth0 down"
    lost_rank_named "$t0" $timeout
    "$CLUSTER" node n2 ip link set eth0 up
    "$CLUSTER" run scancel "$JOB"
    wait_state 60 FAILED COMPLETED CANCELLED NODE_FAIL
    echo "ok: n2's link down: job $JOB $(job_field JobState), exit $(job_field ExitCode)"
    JOB=
    # the cluster serves the next test: both nodes idle again
    local deadline=$(($(date +%s) + 60))
    until [ "$("$CLUSTER" run sinfo -h -N -o '%t' | grep -c '^idle$')" = 2 ]; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "nodes not idle 60 s after the link came back: $("$CLUSTER" run sinfo -N)"
        sleep 0.5 # polling sinfo, bounded by the deadline
    done
}

step_requeue() {
    local steps=1200 stop out
    # the unbroken run
    sbatch_job 2 1 "$DDP_TESTS/ddp.ini" trainer.max_steps=$steps trainer.max_epochs=100000 \
        trainer.final_checkpoint="$WORK/unbroken.safetensors"
    finished_ok
    mv "$WORK/runs" "$WORK/runs.unbroken"
    # the same run, signalled as --signal=USR1@90 would at the time limit
    sbatch_job 2 1 "$DDP_TESTS/ddp.ini" trainer.max_steps=$steps trainer.max_epochs=100000 \
        trainer.final_checkpoint="$WORK/resumed.safetensors"
    wait_line 60 '^epoch 1 step 20/'
    "$CLUSTER" run scancel --signal=USR1 "$JOB" || fail "scancel --signal=USR1 $JOB failed"
    wait_line 30 '^requeue: SLURM job [0-9]+ requeued'
    stop=$(sed -n 's/^requeue: SIGUSR1 received, stopping after step \([0-9]*\)$/\1/p' "$OUT")
    [ -n "$stop" ] && [ "$stop" -lt $steps ] || { cat "$OUT"; fail "no stop before step $steps"; }
    wait_line 120 "^resuming at epoch [0-9]+, batch [0-9]+, step $stop\$"
    finished_ok
    [ "$(grep -c '^requeue: SLURM job' "$OUT")" = 1 ] || { cat "$OUT"; fail "requeued more than once"; }
    out=$("$PYTHON" "$COMPARE" resumed.safetensors unbroken.safetensors 0) ||
        fail "the resumed run's weights differ from the unbroken run's: $out"
    [ "$(grep '^weights:' "$OUT" | tail -n1)" = "$(grep -h '^weights:' "$WORK"/job-*.out | head -n1)" ] ||
        fail "weights lines differ: $(grep -h '^weights:' "$WORK"/job-*.out)"
    must runs.log "$FULGUR" runs runs
    cat runs.log
    grep -qE "^$step +version_0 +interrupted " runs.log || fail "fulgur runs: no interrupted version_0"
    grep -qE "^$step +version_1 +finished +$steps " runs.log || fail "fulgur runs: no finished version_1 at step $steps"
    echo "ok: USR1 -> checkpoint after step $stop, Slurm requeued job, resumed, $steps steps bitwise as unbroken ($out)"
}

"step_$step"
