#!/bin/sh
# ux.runs_large: `fulgur runs` reads a run's metrics a row at a time (issue 30, defect 19: a
# 10^6-row metrics.csv took 1.0 GB to list, 1.9 GB with --report). A run folder of 10^6
# rows (a config.ini, a metrics.csv: a step row each step, a validation row every 1000
# steps, the smallest val/loss 0.125 at step 500000), listed under a virtual memory limit
# of 64 MB (ulimit -v) that reading the rows whole exceeds (it needed 250 MB, 515 MB for
# --report, and under the limit it listed 873729 rows as malformed, exit 0):
#  - the listing says steps 1000000 (the last row's step) and best val/loss 0.125;
#  - --report writes the comparison page within the same limit, with at most 2000 rows of
#    each kind (step rows, validation rows) spread over the run, the best validation row
#    among them, and a note that the rows were sampled.
#   runs_large.sh FULGUR REPORT_CHECK_PY
FULGUR=$1 CHECK=$2
. "$(dirname "$0")/../common/cli_lib.sh"
LIMIT_KB=65536
# a sanitizer's shadow memory is terabytes of address space: no ulimit -v there
if ldd "$FULGUR" 2> /dev/null | grep -q -e libasan -e libtsan; then
    echo "SKIP: $FULGUR is built with a sanitizer (ulimit -v cannot apply)"
    exit 77
fi

mkdir -p runs/big/version_0
printf '[trainer]\nmax_epochs = 1\n' > runs/big/version_0/config.ini
python3 - runs/big/version_0/metrics.csv <<'PY' || fail "cannot write the metrics"
import sys
with open(sys.argv[1], 'w') as f:
    f.write('epoch,step,train/step_loss,val/loss\n')
    for step in range(1, 1000001):
        f.write('0,%d,%.6f,\n' % (step, 2.0 - step * 1e-6))
        if step % 1000 == 0:
            k = step // 1000
            f.write('0,%d,,%s\n' % (step, '0.125' if k == 500 else '%.3f' % (5.0 - k * 0.001)))
PY
runs_limited() { (ulimit -v $LIMIT_KB && exec "$FULGUR" runs "$@"); }

runs_limited runs > list.txt 2> err.txt || fail "fulgur runs under ulimit -v $LIMIT_KB: exit $? ($(cat err.txt))"
cat list.txt
grep -q '^big  *version_0  *unknown  *1000000  *val/loss 0\.125  ' list.txt ||
    fail "the listing: $(grep '^big' list.txt) (want steps 1000000, best val/loss 0.125)"

runs_limited runs --report cmp.html > rep.txt 2> err.txt ||
    fail "fulgur runs --report under ulimit -v $LIMIT_KB: exit $? ($(cat err.txt))"
python3 - "$CHECK" <<'PY' || fail "the comparison page's rows"
import os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
from report_check import embedded
run = embedded(open('cmp.html').read())['runs'][0]
rows = run['rows']
steps = [r for r in rows if r[2] is not None]
vals = [r for r in rows if r[3] is not None]
assert 1000 <= len(steps) <= 2000, '%d step rows' % len(steps)
assert 500 <= len(vals) <= 1000, '%d validation rows' % len(vals)
assert steps[0][1] == 1 and steps[-1][1] > 990000, 'step rows from %d to %d' % (steps[0][1], steps[-1][1])
assert [r[1] for r in rows] == sorted(r[1] for r in rows), 'rows out of order'
assert [500000, 0.125] in [[r[1], r[3]] for r in vals], 'the best validation row is not kept'
assert any('metric rows on the page' in n for n in run['notes']), 'no note: %s' % run['notes']
print('page: %d step rows, %d validation rows' % (len(steps), len(vals)))
PY
finish
