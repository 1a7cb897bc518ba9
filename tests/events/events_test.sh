#!/usr/bin/env bash
# events.* tests: training on backend.latecopy (late_backend.c: the CPU backend whose
# copies out of pinned memory complete only when an event after them is waited for, and
# which fails a call once such a buffer changed before that) against backend.cpu, one
# step per run, named by $1. Environment (from ctest): FULGUR, PLUGIN_DIR, EVENTS_PLUGIN_DIR
# (the fixture's folder), EVENTS_TESTS (this folder), EVENTS_WORK (scratch).
#
# single     two loader workers, validation inside the epoch, a test pass: the same weights
#            digest, losses and metrics as the CPU backend; copies were deferred, applied
#            when the compute queue waited, completed by the loader's event_sync, and no
#            pinned buffer was rewritten before its copy completed
# inline     num_workers = 0: the slot is refilled inside next(), after its fence
# dp         strategy.dp on two devices: two copiers link into each slot's fence
# pipeline   strategy.model-parallel, two stages, micro-batches copied out of one slot
# pageable   pin_memory = false: nothing deferred, the same digest
set -u

step=${1:?usage: events_test.sh STEP}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${EVENTS_PLUGIN_DIR:?}" "${EVENTS_TESTS:?}" "${EVENTS_WORK:?}"
fail() {
    echo "FAIL [events.$step]: $*" >&2
    exit 1
}
WORK=$EVENTS_WORK/$step
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK" # runs/ folders land here
CFG=$EVENTS_TESTS/events.ini

fit() { "$FULGUR" --plugin-path "$EVENTS_PLUGIN_DIR" --plugin-path "$PLUGIN_DIR" fit "$CFG" "$@"; }
must() { # must LOG CMD...: runs the command, output to LOG; on failure shows LOG and fails
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || { cat "$log" >&2; fail "exit $rc from: $*"; }
}
count() { # count LOG WHAT: the fixture's figure after WHAT in its deinit line
    sed -n "s/^latecopy: .*$2 \([0-9]*\).*/\1/p" "$1"
}

# same NAME MIN_DEFERRED OVERRIDES...: latecopy and cpu with the same keys.
same() {
    local name=$1 min_deferred=$2 lines
    shift 2
    must "$WORK/$name.cpu.log" fit backend.name=cpu "$@"
    must "$WORK/$name.late.log" fit "$@"
    lines='-e ^weights: -e ^epoch -e ^val -e ^test'
    grep -q '^weights: .* digest ' "$WORK/$name.late.log" || fail "$name: no weights digest"
    diff <(grep $lines "$WORK/$name.cpu.log" | sed 's/ *([0-9.]* s, .*//') \
        <(grep $lines "$WORK/$name.late.log" | sed 's/ *([0-9.]* s, .*//') ||
        fail "$name: weights, losses or metrics differ (above: cpu <, latecopy >)"
    grep -q '^latecopy: ' "$WORK/$name.late.log" || fail "$name: the fixture printed no counts"
    local deferred applied synced violations
    deferred=$(count "$WORK/$name.late.log" deferred)
    applied=$(count "$WORK/$name.late.log" "applied by a queue wait")
    synced=$(count "$WORK/$name.late.log" "completed by event_sync")
    violations=$(count "$WORK/$name.late.log" violations)
    [ "$violations" = 0 ] || fail "$name: $violations pinned buffer(s) rewritten before their copy completed"
    [ "$deferred" -ge "$min_deferred" ] || fail "$name: $deferred copies deferred, expected >= $min_deferred"
    if [ "$min_deferred" -gt 0 ]; then
        [ "$applied" -gt 0 ] || fail "$name: no compute queue waited for a copy"
        [ "$synced" -gt 0 ] || fail "$name: the loader never waited for a copy (event_sync)"
    fi
    echo "ok: $name ($*): $(grep '^weights:' "$WORK/$name.late.log"); $(grep '^latecopy:' "$WORK/$name.late.log")"
}

# 40 steps of 2 copies (samples, labels), plus validation and test batches.
case $step in
single) same single 80 ;;
inline) same inline 80 data.num_workers=0 ;;
dp) same dp 160 strategy.name=dp ;;
pipeline) same pipeline 80 strategy.name=model-parallel strategy.split=fc2 strategy.chunks=2 ;;
pageable) same pageable 0 data.pin_memory=false ;;
*) fail "unknown step $step" ;;
esac
