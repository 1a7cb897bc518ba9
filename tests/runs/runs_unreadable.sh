#!/bin/sh
# ux.runs_unreadable: a folder `fulgur runs` cannot read is named on stderr with the reason,
# and the runs it can read are still listed (it used to be left out without a word). As
# root, whom permissions do not stop, `fulgur runs` runs as nobody (setpriv).
#   runs_unreadable.sh FULGUR
FULGUR=$1
. "$(dirname "$0")/../common/cli_lib.sh"
write_config cfg.ini 1
"$FULGUR" fit cfg.ini trainer.name=open > open.out 2>&1 || fail "the run failed: $(tail -2 open.out)"
mkdir -p runs/locked && cp -r runs/open/version_0 runs/locked/version_0
chmod -R a+rX "$CLI_TMP"
chmod 000 runs/locked/version_0
as_user=""
if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null || { echo "skip: root without setpriv"; exit 77; }
    as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
fi
$as_user "$FULGUR" runs runs > list.txt 2> err.txt || fail "fulgur runs: exit $? ($(cat err.txt))"
cat list.txt err.txt
grep -q "^open  *version_0  *finished" list.txt || fail "the readable run is not listed: $(cat list.txt)"
grep -q "^fulgur runs: runs/locked/version_0: cannot read the folder (Permission denied); runs in it are left out$" err.txt ||
    fail "no line naming the unreadable folder: $(cat err.txt)"
chmod 755 runs/locked/version_0
finish
