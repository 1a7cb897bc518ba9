#!/bin/sh
# ux.defaults: the callbacks that run without a section and their switches.
#  - every run folder gets report.html and status.json without any [callback.*] section;
#  - [callback.report] enabled = false (here from the command line) writes none;
#  - [trainer] enable_progress_bar = false beside a [callback.progress] section is refused
#    with the place of the key (exit 2);
#  - `fulgur explain callback.report` shows the core's `enabled` key.
#   defaults.sh FULGUR
FULGUR=$1
. "$(dirname "$0")/../common/cli_lib.sh"
write_config cfg.ini 1

"$FULGUR" fit cfg.ini > out.txt 2>&1 || fail "fit: exit $?"
[ -s runs/default/version_0/report.html ] || fail "no report.html without a [callback.report] section"
[ -s runs/default/version_0/status.json ] || fail "no status.json"

"$FULGUR" fit cfg.ini callback.report.enabled=false > out.txt 2>&1 || fail "fit, report off: exit $?"
[ -e runs/default/version_1/report.html ] && fail "report.html with [callback.report] enabled = false"
[ -s runs/default/version_1/status.json ] || fail "no status.json with the report off"

{ cat cfg.ini; printf '\n[callback.progress]\nleave = true\n'; } > bar.ini
"$FULGUR" fit bar.ini trainer.enable_progress_bar=false > out.txt 2> err.txt
rc=$?
[ $rc -eq 2 ] || fail "enable_progress_bar = false with [callback.progress]: exit $rc (want 2)"
grep -q 'command line: trainer.enable_progress_bar=false: \[trainer\] enable_progress_bar = false, but \[callback.progress\] is configured' err.txt ||
    { fail "the refusal does not say why:"; cat err.txt >&2; }

"$FULGUR" explain callback.report > explain.txt 2>&1 || fail "explain callback.report: exit $?"
grep -q '^options of \[callback.report\] from the core:' explain.txt || fail "explain: no core options"
grep -q '^  enabled  *bool   default=true' explain.txt || fail "explain: no enabled key"
grep -q '^  filename  *string default=report.html' explain.txt || fail "explain: no filename key"
finish
