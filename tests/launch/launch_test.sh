#!/usr/bin/env bash
# launch.* tests, one step per run, named by $1. Environment (from ctest): FULGUR,
# PLUGIN_DIR, CFG (tests/ddp/ddp.ini: a small MLP on synthetic data), LAUNCH_WORK.
#
# slurm_env         mpirun -n 2 with srun's variables exported per rank (as srun sets them):
#                   comm.mpi checks them against MPI's topology; training = plain mpirun's
# slurm_mismatch    a wrong SLURM_LOCALID, ranks on one node with different SLURM_NODEID,
#                   and srun tasks without PMI (a world of 1): every rank fails naming both values
# slurm_batch_step  the batch step's SLURM_PROCID = 0 on every rank (mpirun inside sbatch):
#                   not srun's, skipped, training runs
# hostfile          mpirun --hostfile with "localhost slots=2" trains like mpirun -n 2; with
#                   slots=1 the 2 ranks are refused (the file is read)
# requeue_single    SIGUSR1 to a running fit under SLURM_JOB_ID: checkpoint, `scontrol requeue
#                   ID` (a fake scontrol first on PATH), exit 0; resuming with --ckpt-path last
#                   gives the weights of an unbroken run; SIGUSR2 outside SLURM: checkpoint, no scontrol
# requeue_ddp       the same under mpirun -n 2 with SIGUSR1 to rank 1 only: both ranks stop at
#                   one step, rank 0 checkpoints and requeues once; resume = unbroken ddp run
set -u

step=${1:?usage: launch_test.sh STEP}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${CFG:?}" "${LAUNCH_WORK:?}"
fail() {
    echo "FAIL [launch.$step]: $*" >&2
    exit 1
}
skip() {
    echo "SKIP [launch.$step]: $*"
    exit 77
}

MPI_FLAGS=(--oversubscribe)
[ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=$LAUNCH_WORK/$step
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK" # runs/ folders land here
F=("$FULGUR" --plugin-path "$PLUGIN_DIR")

need_mpirun() { MPIRUN=$(command -v mpirun) || skip "mpirun not found (install openmpi-bin)"; }
must() { # must LOG CMD...: runs the command, output to LOG; on failure shows LOG and fails
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }
}
digest() { sed -n 's/^weights: .* digest \([0-9a-f]*\), after \([0-9]*\) steps$/\1 after \2/p' "$1"; }
single_cfg() {
    grep -v -e '^\[comm\]' -e '^name = mpi' -e '^timeout_s' "$CFG" >"$WORK/single.ini"
    echo "$WORK/single.ini"
}

# What srun exports to each task, from Open MPI's per-rank variables (one node here).
SRUN_ENV='export SLURM_PROCID=$OMPI_COMM_WORLD_RANK SLURM_NTASKS=$OMPI_COMM_WORLD_SIZE'
SRUN_ENV+=' SLURM_STEP_NUM_TASKS=$OMPI_COMM_WORLD_SIZE SLURM_LOCALID=$OMPI_COMM_WORLD_LOCAL_RANK'
SRUN_ENV+=' SLURM_NODEID=0 SLURM_JOB_NUM_NODES=1 SLURM_JOB_ID=1234'

step_slurm_env() {
    need_mpirun
    must plain.log "$MPIRUN" "${MPI_FLAGS[@]}" -n 2 "${F[@]}" fit "$CFG" trainer.max_steps=20 \
        trainer.requeue_signal=none
    must srun.log "$MPIRUN" "${MPI_FLAGS[@]}" -n 2 sh -c "$SRUN_ENV; exec \"\$@\"" sh \
        "${F[@]}" -v fit "$CFG" trainer.max_steps=20
    local r
    for r in 0 1; do
        grep -oE "\[comm\.mpi\] debug: rank $r of 2, local rank $r of 2, node 0 of 1, .*launcher: srun \(SLURM_PROCID SLURM_STEP_NUM_TASKS SLURM_NTASKS SLURM_LOCALID SLURM_NODEID SLURM_JOB_NUM_NODES\); Open MPI \(OMPI_COMM_WORLD_RANK" srun.log ||
            { cat srun.log; fail "rank $r did not check srun's variables"; }
    done
    grep -q '^requeue: on SIGUSR1, checkpoint and requeue SLURM job 1234$' srun.log ||
        fail "requeue_signal = auto did not pick SIGUSR1 under SLURM_JOB_ID"
    local a b
    a=$(digest plain.log) b=$(digest srun.log)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "weights differ: mpirun '$a', srun variables '$b'"
    echo "ok: srun's variables agree with MPI on both ranks; weights $b as plain mpirun"
}

# expect_refusal LOG PATTERN WRAPPER_EXPORTS: 2 ranks, each must fail with the line.
expect_refusal() {
    local log=$1 pattern=$2 exports=$3 rc=0
    "$MPIRUN" "${MPI_FLAGS[@]}" -n 2 sh -c "$exports; exec \"\$@\"" sh "${F[@]}" fit "$CFG" \
        trainer.max_steps=5 >"$log" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || { cat "$log"; fail "$log: the job ran"; }
    [ "$(grep -cE "^fulgur: \[comm\] comm\.mpi failed to start: $pattern$" "$log")" -ge 1 ] ||
        { cat "$log"; fail "$log: no line matching: $pattern"; }
    grep -q '^weights:' "$log" && fail "$log: trained anyway"
    grep -E "^fulgur: \[comm\]" "$log" | head -1
}

step_slurm_mismatch() {
    need_mpirun
    expect_refusal localid.log 'comm\.mpi: rank [01]: the launcher \(srun\) gives local rank [01] \(SLURM_LOCALID = [01]\), MPI gives local rank [01]' \
        "$SRUN_ENV"' SLURM_LOCALID=$((1 - OMPI_COMM_WORLD_LOCAL_RANK))'
    expect_refusal nodeid.log 'comm\.mpi: ranks 0 and 1 share a node \(MPI shared memory\) but have SLURM_NODEID = 0 and 1' \
        "$SRUN_ENV"' SLURM_NODEID=$OMPI_COMM_WORLD_RANK'
    # One rank alone in its world although srun started two tasks: srun without PMI.
    local rc=0
    SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=1 SLURM_LOCALID=1 "${F[@]}" fit "$CFG" trainer.max_steps=5 >nopmi.log 2>&1 || rc=$?
    [ "$rc" -eq 2 ] || { cat nopmi.log; fail "srun without PMI: exit $rc, want 2"; }
    grep -q 'comm\.mpi: srun started 2 tasks (SLURM_STEP_NUM_TASKS = 2), MPI gives a world size of 1: each task runs alone; srun lacks PMI support' nopmi.log ||
        { cat nopmi.log; fail "no message about srun without PMI"; }
    echo "ok: wrong SLURM_LOCALID, split SLURM_NODEID and srun without PMI refused on every rank"
}

step_slurm_batch_step() {
    need_mpirun
    must batch.log "$MPIRUN" "${MPI_FLAGS[@]}" -n 2 -x SLURM_PROCID=0 -x SLURM_LOCALID=0 \
        -x SLURM_NTASKS=2 -x SLURM_NODEID=0 "${F[@]}" -v fit "$CFG" trainer.max_steps=10
    [ "$(grep -c 'launcher: SLURM_\* skipped (no SLURM_STEP_NUM_TASKS: the batch step' batch.log)" = 2 ] ||
        { cat batch.log; fail "the batch step's variables were not reported skipped on both ranks"; }
    grep -q '^weights: .* after 10 steps' batch.log || fail "did not train"
    echo "ok: the batch step's SLURM_PROCID = 0 on both ranks is skipped, training runs"
}

step_hostfile() {
    need_mpirun
    echo "localhost slots=2" >hosts
    must plain.log "$MPIRUN" "${MPI_FLAGS[@]}" -n 2 "${F[@]}" fit "$CFG" trainer.max_steps=20
    # No --oversubscribe: the slots of the host file are what allows two ranks.
    local root=()
    [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
    must hostfile.log "$MPIRUN" "${root[@]}" --hostfile hosts -n 2 "${F[@]}" -v fit "$CFG" trainer.max_steps=20
    grep -q 'strategy.ddp\] info: 2 ranks on 1 node(s)' hostfile.log || { cat hostfile.log; fail "not 2 ranks on 1 node"; }
    local a b rc=0
    a=$(digest plain.log) b=$(digest hostfile.log)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "weights differ: mpirun -n 2 '$a', host file '$b'"
    echo "localhost slots=1" >hosts1
    "$MPIRUN" "${root[@]}" --hostfile hosts1 -n 2 "${F[@]}" fit "$CFG" trainer.max_steps=5 >slots1.log 2>&1 || rc=$?
    [ "$rc" -ne 0 ] && grep -q 'not enough slots' slots1.log || { cat slots1.log; fail "slots=1 did not refuse 2 ranks"; }
    echo "ok: --hostfile (localhost slots=2) trains like mpirun -n 2 ($b); slots=1 refuses 2 ranks"
}

# ---- requeue ----------------------------------------------------------------------------

fake_scontrol() {
    mkdir -p "$WORK/bin"
    printf '#!/bin/sh\necho "$@" >>"%s/scontrol.log"\n' "$WORK" >"$WORK/bin/scontrol"
    chmod +x "$WORK/bin/scontrol"
    : >"$WORK/scontrol.log"
}

# wait_for LOG PID PATTERN: until a line of the running job's log matches (10 s at most).
wait_for() {
    local log=$1 pid=$2 pattern=$3 deadline=$(($(date +%s) + 10))
    until grep -qE "$pattern" "$log"; do
        kill -0 "$pid" 2>/dev/null || { cat "$log"; fail "the run ended before '$pattern'"; }
        [ "$(date +%s)" -lt "$deadline" ] || { cat "$log"; fail "no '$pattern' within 10 s"; }
        sleep 0.05 # polling the log of a run in progress
    done
}

# finish PID LOG: waits for the signalled run (20 s at most); sets RC.
finish() {
    local pid=$1 log=$2 deadline=$(($(date +%s) + 20))
    while kill -0 "$pid" 2>/dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] || { kill -KILL "$pid"; cat "$log"; fail "still running 20 s after the signal"; }
        sleep 0.05 # polling the run's end
    done
    wait "$pid"
    RC=$?
}

# check_requeued LOG JOB: the stop step, the checkpoint and scontrol's arguments; sets STOP.
check_requeued() {
    local log=$1 job=$2
    STOP=$(sed -n 's/^requeue: SIGUSR1 received, stopping after step \([0-9]*\)$/\1/p' "$log")
    [ -n "$STOP" ] || { cat "$log"; fail "no 'requeue: SIGUSR1 received, stopping after step N'"; }
    local ckpt=runs/default/version_0/checkpoints/requeue.safetensors
    [ -s "$ckpt" ] || { cat "$log"; fail "no checkpoint $ckpt"; }
    grep -q "^checkpoint: $ckpt (epoch [0-9]*, step $STOP)$" "$log" || { cat "$log"; fail "checkpoint not at step $STOP"; }
    grep -q "^requeue: SLURM job $job requeued (scontrol requeue $job) after step $STOP" "$log" || { cat "$log"; fail "no requeue line"; }
    [ "$(cat scontrol.log)" = "requeue $job" ] || fail "scontrol got '$(cat scontrol.log)', want 'requeue $job' once"
    grep -q '^weights:' "$log" && fail "the stopped fit ran its end (final weights line)"
    return 0
}

# check_resume RUN...: --ckpt-path last for 30 more steps == an unbroken run to that step.
check_resume() {
    local total=$((STOP + 30)) a b
    must resumed.log "$@" trainer.max_steps=$total --ckpt-path last
    grep -q "^resuming at epoch [0-9]*, batch [0-9]*, step $STOP$" resumed.log || { cat resumed.log; fail "did not resume at step $STOP"; }
    must unbroken.log "$@" trainer.max_steps=$total
    a=$(digest resumed.log) b=$(digest unbroken.log)
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "resumed '$a' != unbroken '$b'"
    echo "ok: resumed from step $STOP to $total: weights $a, as the unbroken run"
}

step_requeue_single() {
    fake_scontrol
    local cfg pid
    cfg=$(single_cfg)
    local run=("${F[@]}" fit "$cfg" strategy.name=single trainer.max_epochs=100000)
    PATH="$WORK/bin:$PATH" SLURM_JOB_ID=4242 "${run[@]}" trainer.max_steps=-1 >run.log 2>&1 &
    pid=$!
    wait_for run.log "$pid" '^epoch 1 step 10/'
    kill -USR1 "$pid"
    finish "$pid" run.log
    [ "$RC" -eq 0 ] || { cat run.log; fail "exit $RC after SIGUSR1, want 0"; }
    check_requeued run.log 4242
    echo "ok: SIGUSR1 -> checkpoint at step $STOP, scontrol requeue 4242, exit 0"
    check_resume "${run[@]}"
    # Outside SLURM (no SLURM_JOB_ID), with SIGUSR2: checkpoint, stop, no scontrol.
    rm -rf runs
    PATH="$WORK/bin:$PATH" "${run[@]}" trainer.max_steps=-1 trainer.requeue_signal=SIGUSR2 >usr2.log 2>&1 &
    pid=$!
    wait_for usr2.log "$pid" '^epoch 1 step 10/'
    kill -USR2 "$pid"
    finish "$pid" usr2.log
    [ "$RC" -eq 0 ] || { cat usr2.log; fail "SIGUSR2: exit $RC"; }
    grep -q '^requeue: stopped at step [0-9]*, not a SLURM job (no SLURM_JOB_ID): resume with --ckpt-path last' usr2.log ||
        { cat usr2.log; fail "no 'not a SLURM job' line"; }
    [ -s runs/default/version_0/checkpoints/requeue.safetensors ] || fail "SIGUSR2: no checkpoint"
    [ "$(wc -l <scontrol.log)" -eq 1 ] || fail "scontrol ran outside SLURM"
    echo "ok: SIGUSR2 without SLURM_JOB_ID: checkpoint, stop, scontrol not run"
}

step_requeue_ddp() {
    need_mpirun
    fake_scontrol
    local run=("$MPIRUN" "${MPI_FLAGS[@]}" -n 2 "${F[@]}" fit "$CFG" trainer.max_epochs=100000)
    # --noprefix: mpirun started by its absolute path puts its own folder (/usr/bin) first in
    # the ranks' PATH, before the fake scontrol, where Slurm's real one lives too
    PATH="$WORK/bin:$PATH" SLURM_JOB_ID=77 "$MPIRUN" "${MPI_FLAGS[@]}" --noprefix -n 2 -x PATH -x SLURM_JOB_ID \
        "${F[@]}" fit "$CFG" trainer.max_epochs=100000 trainer.max_steps=-1 >run.log 2>&1 &
    local pid=$! p rank1=
    trap 'kill -KILL "$pid" 2>/dev/null' EXIT
    wait_for run.log "$pid" '^epoch 1 step 10/'
    for p in $(pgrep -P "$pid"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && rank1=$p
    done
    [ -n "$rank1" ] || fail "cannot find rank 1 among mpirun's children"
    kill -USR1 "$rank1" # SLURM may signal ranks unevenly: only rank 1 here
    finish "$pid" run.log
    [ "$RC" -eq 0 ] || { cat run.log; fail "mpirun exit $RC after SIGUSR1 to rank 1, want 0"; }
    check_requeued run.log 77
    echo "ok: SIGUSR1 to rank 1 only -> both ranks stopped after step $STOP, rank 0 checkpointed, scontrol requeue 77 once, exit 0"
    check_resume "${run[@]}"
}

"step_$step"
