#!/bin/sh
# ux.runs_malformed: a run folder whose files are malformed or half written (a run killed
# while writing) is listed with what could be read and a note, by `fulgur runs` and in the
# comparison page; nothing fails. Variants of one finished run (metrics.csv and report.html):
#   csv_cut     report.html gone, metrics.csv's last line cut short mid-row
#   csv_bad     report.html gone, a row that is not numbers in metrics.csv
#   html_cut    report.html cut inside its data block, no metrics.csv
#   html_csv    report.html cut inside its data block, metrics.csv whole (read instead)
#   html_bad    report.html whole, its data block not JSON, metrics.csv whole (read instead)
#   status_bad  status.json is not JSON
#   no_status   only config.ini: a run that never started
#   runs_malformed.sh FULGUR REPORT_CHECK_PY
FULGUR=$1 CHECK=$2
. "$(dirname "$0")/../common/cli_lib.sh"
write_config cfg.ini 3
printf '\n[callback.csv_logger]\n' >> cfg.ini
"$FULGUR" fit cfg.ini trainer.name=base > base.out 2>&1 || fail "the base run failed: $(tail -2 base.out)"
base=runs/base/version_0
rows=$(($(wc -l < $base/metrics.csv) - 1))

variant() { mkdir -p "root/$1" && cp -r "$base" "root/$1/version_0"; }
variant csv_cut
rm root/csv_cut/version_0/report.html
size=$(wc -c < $base/metrics.csv)
head -c $((size - 9)) $base/metrics.csv > root/csv_cut/version_0/metrics.csv
variant csv_bad
rm root/csv_bad/version_0/report.html
sed -i '3s/.*/1,notastep,x/' root/csv_bad/version_0/metrics.csv
variant html_cut
rm root/html_cut/version_0/metrics.csv
at=$(grep -b -o '"rows": \[' $base/report.html | head -1 | cut -d: -f1)
[ -n "$at" ] || fail "no rows in the base report"
head -c $((at + 60)) $base/report.html > root/html_cut/version_0/report.html
variant html_csv
cp root/html_cut/version_0/report.html root/html_csv/version_0/report.html
variant html_bad
sed -i 's/"rows": \[/"rows": [oops/' root/html_bad/version_0/report.html
variant status_bad
printf '{"status": "fini' > root/status_bad/version_0/status.json
mkdir -p root/no_status/version_0 && cp $base/config.ini root/no_status/version_0/

"$FULGUR" runs root > list.txt 2> err.txt || fail "fulgur runs: exit $? ($(cat err.txt))"
cat list.txt
line() { grep "^$1 " list.txt; }
expect() { # NAME REGEX: the run's line matches
    line "$1" | grep -q "$2" || fail "$1: $(line "$1")
    want: $2"
}
expect csv_cut "finished  *48  *val/loss [0-9.]* .*metrics.csv: line $((rows + 1)) is cut short (a run killed while writing?); ignored"
expect csv_bad "finished  *48  *val/loss [0-9.]* .*metrics.csv: 1 malformed row(s) skipped, the first at line 3"
expect html_cut "finished  *48  *-  .*report.html: no complete data block (a file cut short?)"
expect html_csv "finished  *48  *val/loss [0-9.]* .*report.html: no complete data block"
expect html_bad "finished  *48  *val/loss [0-9.]* .*report.html: the data block cannot be parsed (line [0-9]*: "
expect status_bad "unknown  *48  *val/loss [0-9.]* .*status.json cannot be read (line 1: "
expect no_status "unknown  *-  *-  *-  *no status.json .*no metrics written yet"

"$FULGUR" runs root --report cmp.html > rep.txt 2> err.txt || fail "fulgur runs --report: exit $? ($(cat err.txt))"
grep -q '^report: cmp.html (7 runs)$' rep.txt || fail "report line: $(tail -1 rep.txt)"
python3 "$CHECK" runs cmp.html 7 || fail "the comparison page does not hold the 7 runs"
python3 - "$rows" <<'PY' || fail "the comparison's rows are not what could be read"
import json, sys
rows = int(sys.argv[1])
t = open('cmp.html').read()
s = t.index('id="fulgur-report-data">') + len('id="fulgur-report-data">')
doc = json.loads(t[s:t.index('</script>', s)])
got = {r['label'].split('/')[0]: (len(r['rows']), r['notes']) for r in doc['runs']}
want = {'csv_cut': rows - 1, 'csv_bad': rows - 1, 'html_cut': 0, 'html_csv': rows, 'html_bad': rows, 'status_bad': rows, 'no_status': 0}
bad = [k for k in want if got[k][0] != want[k] or (k not in ('html_csv', 'html_bad') and not got[k][1] and want[k] != rows)]
for k in bad:
    print('%s: %d rows (want %d), notes %s' % (k, got[k][0], want[k], got[k][1]), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
finish
