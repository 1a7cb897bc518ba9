#!/bin/sh
# ux.report_render: report.html and a `fulgur runs --report` page render in headless
# Chromium (Debian's chromium) without a console error, with one SVG path per curve and as
# many points as the run logged values of it (report_check.py render), and to a PNG.
# Skips (77) when chromium is not installed.
#   report_render.sh FULGUR REPORT_CHECK_PY CHROMIUM
FULGUR=$1 CHECK=$2 CHROMIUM=$3
. "$(dirname "$0")/../../common/cli_lib.sh"
command -v "$CHROMIUM" > /dev/null 2>&1 || { echo "SKIP: $CHROMIUM is not installed"; exit 77; }
write_config cfg.ini 3
printf '\n[callback.throughput]\nsplit = true\n' >> cfg.ini
"$FULGUR" fit cfg.ini trainer.name=a > a.out 2>&1 || fail "fit a: $(tail -2 a.out)"
"$FULGUR" fit cfg.ini trainer.name=b optimizer.lr=0.05 > b.out 2>&1 || fail "fit b: $(tail -2 b.out)"
python3 "$CHECK" render runs/a/version_0/report.html run.png "$CHROMIUM" || fail "report.html"
"$FULGUR" runs runs --report compare.html > runs.out 2>&1 || fail "fulgur runs --report: $(cat runs.out)"
python3 "$CHECK" render compare.html compare.png "$CHROMIUM" || fail "compare.html"
finish
