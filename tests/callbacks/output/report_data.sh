#!/bin/sh
# ux.report_data: report.html's embedded data, parsed, equals metrics.csv (the csv_logger's
# table of the same events) value for value; the page is self-contained (no link, src,
# import, font or network address); no temporary file is left in the run folder.
#   report_data.sh FULGUR REPORT_CHECK_PY
FULGUR=$1 CHECK=$2
. "$(dirname "$0")/../../common/cli_lib.sh"
write_config cfg.ini 3
printf '\n[callback.csv_logger]\n\n[callback.throughput]\nsplit = true\n' >> cfg.ini
"$FULGUR" fit cfg.ini > fit.out 2>&1 || fail "fit: $(tail -2 fit.out)"
run=runs/default/version_0
python3 "$CHECK" data $run/report.html $run/metrics.csv || fail "the page's data is not metrics.csv's"
ls $run/*.tmp.* > /dev/null 2>&1 && fail "temporary files left: $(ls $run)"
finish
