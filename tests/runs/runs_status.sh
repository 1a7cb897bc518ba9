#!/bin/sh
# ux.runs_status: `fulgur runs DIR` tells a finished, a failed, a running, a killed and a
# requeued run apart, with their steps, best monitored metric and wall time:
#  - finished: a fit that ended; its best val/loss is the smallest the run logged;
#  - failed: a fit whose final checkpoint cannot be written (exit 2), with the reason (a path
#    relative to the run folder that leads under a file);
#  - running, then died: a long fit listed while it runs, then killed with SIGKILL
#    (status.json still says running; the pid is gone: "died", not "running");
#  - interrupted: a fit stopped by its requeue signal (SIGUSR1, outside SLURM).
#   runs_status.sh FULGUR REPORT_CHECK_PY
FULGUR=$1 CHECK=$2
. "$(dirname "$0")/../common/cli_lib.sh"
write_config cfg.ini 3

# line NAME: the listing's line of run family NAME (one run each).
line() { grep "^$1 " list.txt; }

"$FULGUR" fit cfg.ini trainer.name=done > done.out 2>&1 || fail "the finished run failed: $(tail -2 done.out)"
touch afile
# (relative to the run folder: an absolute path under a file is refused before training)
"$FULGUR" fit cfg.ini trainer.name=broken trainer.final_checkpoint=../../../afile/x.safetensors > broken.out 2>&1
rc=$?
[ $rc -ne 0 ] || fail "the failing run exited 0"

# A fit that would run for ages: listed as running, then killed.
"$FULGUR" fit cfg.ini trainer.name=killed trainer.max_epochs=1000000 > killed.out 2>&1 &
killed_pid=$!
has_val() { grep -q '"val/loss"' runs/killed/version_0/report.html 2> /dev/null; }
poll_for 60 has_val || fail "the long run wrote no report with a validation"
"$FULGUR" runs runs > list.txt 2>&1 || fail "fulgur runs (one running): exit $?"
line killed | grep -q '^killed  *version_0  *running ' || fail "the live run is not listed as running: $(line killed)"
kill -KILL $killed_pid
wait $killed_pid 2> /dev/null

# A fit stopped by its requeue signal at the next step.
"$FULGUR" fit cfg.ini trainer.name=requeued trainer.max_epochs=1000000 trainer.requeue_signal=SIGUSR1 > requeued.out 2>&1 &
pid=$!
has_status() { grep -q '"running"' runs/requeued/version_0/status.json 2> /dev/null && has_steps; }
has_steps() { grep -q 'train/step_loss' runs/requeued/version_0/report.html 2> /dev/null; }
poll_for 60 has_status || fail "the requeue run did not start"
kill -USR1 $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "the requeued run exited $rc: $(tail -2 requeued.out)"

"$FULGUR" runs runs > list.txt 2>&1 || fail "fulgur runs: exit $?"
cat list.txt
head -1 list.txt | grep -q '^NAME  *VERSION  *STATUS  *STEPS  *BEST  *WALL TIME  *NOTES$' || fail "no header line"
[ "$(grep -c version_0 list.txt)" -eq 4 ] || fail "$(grep -c version_0 list.txt) runs listed, want 4"

best=$(python3 -c "
import os,sys
sys.path.insert(0, os.path.dirname('$CHECK'))
from report_check import embedded
run=embedded(open('runs/done/version_0/report.html').read())['runs'][0]
j=run['columns'].index('val/loss')
print('%.4g' % min(r[j] for r in run['rows'] if isinstance(r[j],(int,float))))")
line done | grep -q "^done  *version_0  *finished  *48  *val/loss $best  *0:0[0-9]  *\$" ||
    fail "finished run: $(line done) (want 48 steps, best val/loss $best)"
line broken | grep -q "^broken  *version_0  *failed  *48  *val/loss [0-9.]*  *0:0[0-9]  .*afile/x.safetensors.*cannot create: Not a directory" ||
    fail "failed run: $(line broken)"
line killed | grep -q "^killed  *version_0  *died  *[1-9][0-9]*  *val/loss [0-9.]*  *[0-9]*:[0-9][0-9]  *process $killed_pid is gone without recording an end" ||
    fail "killed run (pid $killed_pid): $(line killed)"
line requeued | grep -q "^requeued  *version_0  *interrupted  *[1-9][0-9]*  .*stopped by the requeue signal after step [1-9]" ||
    fail "requeued run: $(line requeued)"

# The killed run's page (kept in place: each validation appends its rows and rewrites the
# data block in one write) still reads.
python3 "$CHECK" runs runs/killed/version_0/report.html 1 > /dev/null || fail "the killed run's report.html does not read"
# A SIGKILL that lands inside a whole-page write (the first) leaves its temporary file (nothing can
# remove it); every other run, and every other writer, must leave none.
left=$(ls runs/*/version_0/*.tmp.* 2> /dev/null | grep -v "^runs/killed/version_0/[^/]*\.tmp\.$killed_pid\$")
[ -z "$left" ] || fail "temporary files left: $left"

# Choosing runs: a family name, a glob.
"$FULGUR" runs runs 'k*' done > pick.txt 2>&1 || fail "fulgur runs with patterns: exit $?"
[ "$(grep -c version_0 pick.txt)" -eq 2 ] || fail "patterns k* and done chose: $(cat pick.txt)"
"$FULGUR" runs "$CLI_TMP/nowhere" > /dev/null 2> err.txt
[ $? -eq 2 ] || fail "a missing folder is not a usage error"
grep -q 'nowhere: no such folder' err.txt || fail "missing folder: $(cat err.txt)"
finish
