#!/usr/bin/env bash
# estimate.* tests: `fulgur estimate` on tests/ddp/overlap.ini (five linear layers, 1,055,754
# parameters, bucket_mb 0.01: a bucket per layer).
# Environment (from ctest): FULGUR, PLUGIN_DIR, ESTIMATE_TESTS, DDP_TESTS, PROFILES,
# ESTIMATE_WORK, PYTHON.
#
# alpha_beta       overlap.profile (1 ms forward, 2 ms backward a linear layer, 1 ms optimizer)
#                  on 2 nodes over --link 1gbit,50us: single 16 ms; ddp 44.019968 ms (the
#                  per-layer all-reduces 1e-4 + 1,050,624/1.25e8 s queue behind each other
#                  from 4 ms into backward: 5 + 38.019968 + 1); stage 1 60.962032 ms (+ the
#                  all-gather of 4,223,016 bytes: 5e-5 + 16.892064 ms); samples/s, scaling
#                  and tokens/s from them; the 100 MB profile limit: every strategy fits,
#                  fastest single (ddp's 2908 samples/s < 4000); over nvlink ddp hides all
#                  but the first layer's all-reduce and is the fastest. Also at batch 128 (profile times doubled) and the text table
# link_fit         a link file of three all-reduces made from alpha 1e-4 s, 1e8 bytes/s on 2
#                  ranks is fitted back to those two numbers (1e-9 relative)
# errors           a bad rate unit, an unknown preset, a missing --link for 2 ranks, --nodes 0,
#                  a profile without layer fc3, a profile line without its times, a link
#                  file's bad line: exit 2 and the argument, file, line or layer named
# measured         without a profile: the step time of two short fits under single, split
#                  over the layers by flops (fc1..fc4 equal, out 10/512 of one, relus 0;
#                  backward twice forward); ddp's prediction over nvlink is within 1% of it
# measure_link     --measure-link under mpirun -n 2 writes 'ranks = 2' and the median times of
#                  all-reduces of 64 KiB, 256 KiB, 1, 4 and 16 MiB, which --link-file fits;
#                  on one rank it is refused with the hint to run it on the ranks
# gpt2_profile     examples/profiles/gpt2_124m_h100.profile names every layer of
#                  examples/gpt2_124m.ini (on small token shards made here) and adds up to
#                  the recorded H100 step: 216.216 ms, 37,888 tokens/s on one device
# memory_vs_check  the memory column equals what `fulgur check` prints for the same config:
#                  single and ddp on 1 rank, ddp and sharded stages 1-3 under mpirun -n 2
#                  (every role, to the 0.01 MiB check prints); under backend.memory_limit_mb
#                  = 13 single and ddp do not fit, stages 1-3 do, the fastest is a stage
#                  (the pipeline is not predicted on 2 nodes: its fit is null)
# pipeline         strategy.model-parallel on 1 node x 2 devices over 1gbit,50us with
#                  overlap.profile: the plan is the plugin's (fc1..relu2 | fc3..out, as
#                  `fulgur check` logs it), 4 micro-batches of 16 samples, a 32,768-byte
#                  activation a micro-batch each way (0.312144 ms); stage 1 (0.75 / 1.5 ms a
#                  micro-batch) ends its backwards at 9.812144 ms, stage 0's last backward at
#                  11.124288 ms, plus its optimizer share 525,312 / 1,055,754 ms: 11.621858 ms;
#                  comm 8 transfers 2.497152 ms; with `split = fc2` (stage 0 fc1..relu1)
#                  13.623073 ms; memory = check's fullest device (device 1); refused: a split
#                  naming a layer the model lacks; not predicted on 2 nodes or 1 device
set -u

step=${1:?usage: estimate_test.sh STEP}
: "${FULGUR:?}" "${PLUGIN_DIR:?}" "${ESTIMATE_TESTS:?}" "${DDP_TESTS:?}" "${ESTIMATE_WORK:?}" "${PYTHON:?}"
fail() {
    echo "FAIL [estimate.$step]: $*" >&2
    exit 1
}
export FULGUR_PLUGIN_PATH=$PLUGIN_DIR OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=$ESTIMATE_WORK/$step
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || fail "cannot enter $WORK"
cp "$DDP_TESTS/overlap.ini" "$WORK/overlap.ini"
CFG=$WORK/overlap.ini
PROFILE=$ESTIMATE_TESTS/overlap.profile

# json FILE EXPR: a Python expression over the parsed object j, printed
json() { "$PYTHON" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
# near A B [REL]: |A - B| <= REL * |B| (1e-6 by default)
near() { "$PYTHON" -c 'import sys; a, b, r = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); sys.exit(0 if abs(a - b) <= r * abs(b) else 1)' "$1" "$2" "${3:-1e-6}"; }
expect() { # expect NAME EXPR WANT [REL]
    local got
    got=$(json "$WORK/e.json" "$2") || fail "$1: cannot read $2 from e.json"
    near "$got" "$3" "${4:-1e-6}" || fail "$1: $2 = $got, expected $3"
}
# refused MESSAGE ARGS...: exit 2 and MESSAGE in stderr
refused() {
    local want=$1 rc
    shift
    "$FULGUR" estimate "$@" >"$WORK/out.txt" 2>"$WORK/err.txt"
    rc=$?
    [ "$rc" = 2 ] || fail "estimate $* exited $rc, expected 2: $(cat "$WORK/err.txt")"
    grep -qF -- "$want" "$WORK/err.txt" || fail "estimate $*: expected '$want' in: $(cat "$WORK/err.txt")"
}

case $step in
alpha_beta)
    "$FULGUR" estimate "$CFG" --nodes 2 --link 1gbit,50us --profile "$PROFILE" --no-memory --json \
        >"$WORK/e.json" || fail "estimate failed"
    expect single 'j["strategies"][0]["step_ms"]' 16
    expect ddp 'j["strategies"][1]["step_ms"]' 44.019968
    expect ddp_comm 'j["strategies"][1]["comm_ms"]' "$("$PYTHON" -c 'print(4 * (0.1 + 1050624 / 1.25e5) + 0.1 + 20520 / 1.25e5)')"
    expect ddp_exposed 'j["strategies"][1]["exposed_comm_ms"]' 28.019968
    expect stage1 'j["strategies"][2]["step_ms"]' 60.962032
    expect single_rate 'j["strategies"][0]["samples_per_s"]' 4000
    expect ddp_rate 'j["strategies"][1]["samples_per_s"]' "$("$PYTHON" -c 'print(128 / 0.044019968)')"
    expect ddp_scaling 'j["strategies"][1]["efficiency"]' "$("$PYTHON" -c 'print(128 / 0.044019968 / 8000)')"
    expect tokens 'j["strategies"][1]["tokens_per_s"]' "$("$PYTHON" -c 'print(128 / 0.044019968)')"
    expect alpha 'j["link"]["alpha_s"]' 5e-5
    expect bandwidth 'j["link"]["bytes_per_s"]' 1.25e8
    expect params 'j["params"]' 1055754
    # 2 ranks at 2908 samples/s do less than one at 4000: single is the fastest
    [ "$(json "$WORK/e.json" 'j["fastest_fitting"]')" = single ] || fail "fastest: $(json "$WORK/e.json" 'j["fastest_fitting"]'), expected single"
    expect limit 'j["memory_limit_mb"]' 100
    # twice the batch: the profile's times scale by 128/64
    "$FULGUR" estimate "$CFG" data.batch_size=128 --profile "$PROFILE" --no-memory --json \
        >"$WORK/e.json" || fail "estimate at batch 128 failed"
    expect batch128 'j["strategies"][0]["step_ms"]' 31
    "$FULGUR" estimate "$CFG" --nodes 2 --link 1gbit,50us --profile "$PROFILE" --no-memory \
        >"$WORK/e.txt" || fail "estimate (text) failed"
    grep -qE '^ddp +2 +44\.02 +16\.00 ' "$WORK/e.txt" || fail "text table: $(cat "$WORK/e.txt")"
    grep -q '^fastest that fits: single (16.00 ms a step' "$WORK/e.txt" || fail "no fastest line: $(cat "$WORK/e.txt")"
    # over NVLink the all-reduces (8.3 us a layer) hide behind backward but fc1's, which
    # starts when backward ends: ddp is the fastest
    "$FULGUR" estimate "$CFG" --nodes 1 --devices-per-node 2 --link nvlink --profile "$PROFILE" \
        --no-memory --json >"$WORK/e.json" || fail "estimate over nvlink failed"
    [ "$(json "$WORK/e.json" 'j["fastest_fitting"]')" = ddp ] || fail "nvlink fastest: $(json "$WORK/e.json" 'j["fastest_fitting"]'), expected ddp"
    expect ddp_nvlink 'j["strategies"][1]["step_ms"]' "$("$PYTHON" -c 'print(5 + 10 + 1 + 1e3 * (2 * 3e-6 + 1050624 / 450e9))')"
    grep -q 'link: --link 1gbit,50us' "$WORK/e.txt" || fail "the link assumed is not printed"
    grep -q "compute: profile $PROFILE" "$WORK/e.txt" || fail "the profile assumed is not printed"
    ;;
link_fit)
    printf '# all-reduces on 2 ranks: t = 2e-4 + bytes / 1e8\nranks = 2\n1000000 0.0102\n4000000 0.0402\n16000000 0.1602\n' >"$WORK/link.txt"
    "$FULGUR" estimate "$CFG" --nodes 2 --link-file "$WORK/link.txt" --profile "$PROFILE" --no-memory \
        --json >"$WORK/e.json" || fail "estimate failed"
    expect alpha 'j["link"]["alpha_s"]' 1e-4 1e-9
    expect bandwidth 'j["link"]["bytes_per_s"]' 1e8 1e-9
    ;;
errors)
    refused "--link '1gbt,50us': unknown rate unit 'gbt'" "$CFG" --nodes 2 --link 1gbt,50us --no-memory
    refused "--link 'nvlnk': unknown preset (presets: nvlink, ib-ndr" "$CFG" --nodes 2 --link nvlnk --no-memory
    refused "2 ranks communicate: give --link SPEC" "$CFG" --nodes 2 --no-memory
    refused "estimate --nodes needs a whole number >= 1 (got '0')" "$CFG" --nodes 0
    grep -v '^layer fc3 ' "$PROFILE" >"$WORK/nofc3.profile"
    refused "$WORK/nofc3.profile: no line for layer 'fc3' of the config" "$CFG" --profile "$WORK/nofc3.profile" --no-memory
    sed 's/^layer fc2 1 2$/layer fc2 1/' "$PROFILE" >"$WORK/short.profile"
    refused "$WORK/short.profile:10: expected 'layer NAME FWD_MS BWD_MS'" "$CFG" --profile "$WORK/short.profile" --no-memory
    printf 'ranks = 2\n1000 fast\n' >"$WORK/bad.link"
    refused "$WORK/bad.link:2: expected 'ranks = P' or 'BYTES SECONDS'" "$CFG" --nodes 2 --link-file "$WORK/bad.link" --no-memory
    ;;
measured)
    "$FULGUR" estimate "$CFG" --nodes 1 --devices-per-node 2 --link nvlink --measure-steps 3 \
        --no-memory --json >"$WORK/e.json" || fail "estimate failed"
    expect fc1_vs_fc4 'j["layers"][0]["fwd_ms"]' "$(json "$WORK/e.json" 'j["layers"][6]["fwd_ms"]')"
    expect out_share 'j["layers"][8]["fwd_ms"]' "$(json "$WORK/e.json" 'j["layers"][0]["fwd_ms"] * (512 * 10) / (512 * 512)')" 0.02
    expect backward 'j["layers"][2]["bwd_ms"]' "$(json "$WORK/e.json" '2 * j["layers"][2]["fwd_ms"]')"
    expect relu 'j["layers"][1]["fwd_ms"] + 1' 1
    single=$(json "$WORK/e.json" 'j["strategies"][0]["step_ms"]')
    near "$(json "$WORK/e.json" 'sum(l["fwd_ms"] + l["bwd_ms"] for l in j["layers"])')" "$single" 1e-6 \
        || fail "the layers do not add up to the measured step"
    expect ddp_nvlink 'j["strategies"][1]["step_ms"]' "$single" 0.01
    json "$WORK/e.json" 'j["compute_source"]' | grep -q '^measured on this machine: fits of 3 and 9 steps' \
        || fail "compute source: $(json "$WORK/e.json" 'j["compute_source"]')"
    ;;
measure_link)
    MPIRUN=$(command -v mpirun) || { echo "SKIP: mpirun not found"; exit 77; }
    MPI_FLAGS=(-n 2 --oversubscribe)
    [ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
    "$MPIRUN" "${MPI_FLAGS[@]}" "$FULGUR" estimate "$CFG" --measure-link "$WORK/link.txt" >"$WORK/m.log" 2>&1 ||
        fail "--measure-link under mpirun: $(tail -3 "$WORK/m.log")"
    [ "$(grep -c '^ranks = 2$' "$WORK/link.txt")" = 1 ] || fail "no 'ranks = 2' line: $(cat "$WORK/link.txt")"
    [ "$(grep -c "all-reduce times written to $WORK/link.txt" "$WORK/m.log")" = 1 ] ||
        fail "not one 'written' line (rank 0's): $(cat "$WORK/m.log")"
    [ "$(awk '/^[0-9]/ && $2 > 0 { printf "%s ", $1 }' "$WORK/link.txt")" = "65536 262144 1048576 4194304 16777216 " ] ||
        fail "sizes or times: $(cat "$WORK/link.txt")"
    "$FULGUR" estimate "$CFG" --nodes 2 --link-file "$WORK/link.txt" --profile "$PROFILE" --no-memory --json \
        >"$WORK/e.json" || fail "the measured link file does not fit"
    json "$WORK/e.json" 'j["link"]["source"]' | grep -q "^fitted from $WORK/link.txt (5 points, 2 ranks)" ||
        fail "link source: $(json "$WORK/e.json" 'j["link"]["source"]')"
    refused "--measure-link: comm.mpi has one rank; run it on the ranks to measure" "$CFG" --measure-link "$WORK/one.txt"
    ;;
gpt2_profile)
    # token shards in llm.c's format (header 20240520, 1, count; uint16 ids) for the config
    "$PYTHON" -c '
import array, struct, sys
for name in ("fineweb_train_000001.bin", "fineweb_val_000000.bin"):
    ids = array.array("H", (i * 7919 % 50257 for i in range(30000)))
    with open(sys.argv[1] + "/" + name, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)))
        f.write(ids.tobytes())' "$WORK" || fail "cannot write token shards"
    "$FULGUR" estimate "$ESTIMATE_TESTS/../../examples/gpt2_124m.ini" data.dir="$WORK" data.train_windows=10 \
        data.val_windows=2 precision.name=bf16-mixed --nodes 1 --devices-per-node 8 --link nvlink \
        --profile "$PROFILES/gpt2_124m_h100.profile" --no-memory --json >"$WORK/e.json" || fail "estimate failed"
    # the recorded step: 8192 tokens at 37,888 tokens/s (the profile's layers add up to it)
    expect step 'j["strategies"][0]["step_ms"]' 216.216216 1e-4
    expect tokens 'j["strategies"][0]["tokens_per_s"]' 37888 1e-4
    expect layers 'len(j["layers"])' 16
    expect params 'j["params"]' 124439808
    expect ranks 'j["strategies"][1]["ranks"]' 8
    ;;
memory_vs_check)
    MPIRUN=$(command -v mpirun) || { echo "SKIP: mpirun not found"; exit 77; }
    MPI_FLAGS=(-n 2 --oversubscribe)
    [ "$(id -u)" = 0 ] && MPI_FLAGS+=(--allow-run-as-root)
    "$FULGUR" estimate "$CFG" --nodes 2 --link 1gbit,50us --profile "$PROFILE" --json \
        >"$WORK/e.json" || fail "estimate failed"
    # check's own line for rank 0 ("memory (device 0): params ... total X MiB") as 7 numbers
    mem() { grep -m1 '^memory (device 0):' "$1" | grep -oE '[0-9]+\.[0-9]+' | tr '\n' ' '; }
    same() { # same INDEX LOG
        local want got
        want=$(mem "$2")
        got=$(json "$WORK/e.json" "' '.join('%.2f' % v for v in j['strategies'][$1]['memory_mib'].values())")
        [ -n "$want" ] || fail "no memory line in $2: $(tail -3 "$2")"
        [ "$got " = "$want" ] || fail "strategy $1: estimate says '$got', check says '$want'"
    }
    sed '/^\[strategy\]/,/^\[data\]/{/^\[data\]/!d}' "$CFG" >"$WORK/single.ini"
    printf '[strategy]\nname = single\n' >>"$WORK/single.ini"
    "$FULGUR" check "$WORK/single.ini" >"$WORK/single.log" 2>&1 || fail "check single: $(tail -3 "$WORK/single.log")"
    same 0 "$WORK/single.log"
    "$FULGUR" check "$CFG" >"$WORK/ddp1.log" 2>&1 || fail "check ddp: $(tail -3 "$WORK/ddp1.log")"
    same 1 "$WORK/ddp1.log"
    "$MPIRUN" "${MPI_FLAGS[@]}" "$FULGUR" check "$CFG" >"$WORK/ddp2.log" 2>&1 || fail "check ddp -n 2"
    same 1 "$WORK/ddp2.log"
    for stage in 1 2 3; do
        "$MPIRUN" "${MPI_FLAGS[@]}" "$FULGUR" check "$CFG" strategy.name=sharded strategy.stage=$stage \
            >"$WORK/s$stage.log" 2>&1 || fail "check stage $stage: $(tail -3 "$WORK/s$stage.log")"
        same $((stage + 1)) "$WORK/s$stage.log"
    done
    # a 13 MiB device: single and ddp (14.04 MiB) do not fit, the sharded stages (12.0) do
    "$FULGUR" estimate "$CFG" --nodes 2 --link nvlink --profile "$PROFILE" backend.memory_limit_mb=13 \
        --json >"$WORK/e.json" || fail "estimate under memory_limit_mb = 13 failed"
    [ "$(json "$WORK/e.json" '[s["fits"] for s in j["strategies"]]')" = "[False, False, True, True, True, None]" ] \
        || fail "fits: $(json "$WORK/e.json" '[s["fits"] for s in j["strategies"]]')"
    json "$WORK/e.json" 'j["fastest_fitting"]' | grep -q '^sharded stage' || fail "fastest: $(json "$WORK/e.json" 'j["fastest_fitting"]')"
    ;;
pipeline)
    sed -e '/^\[comm\]/,/^\[data\]/{/^\[data\]/!d}' -e '/^bucket_mb/d' \
        -e 's/^name = ddp$/name = model-parallel\nchunks = 4/' "$CFG" >"$WORK/mp.ini"
    "$FULGUR" estimate "$WORK/mp.ini" --devices-per-node 2 --link 1gbit,50us --profile "$PROFILE" \
        --json >"$WORK/e.json" 2>"$WORK/err.txt" || fail "estimate failed: $(cat "$WORK/err.txt")"
    expect step 'j["strategies"][5]["step_ms"]' 11.621858456754
    expect comm 'j["strategies"][5]["comm_ms"]' 2.497152
    expect compute 'j["strategies"][5]["compute_ms"]' "$("$PYTHON" -c 'print(4 * 2.25 + 530442 / 1055754)')"
    expect rate 'j["strategies"][5]["samples_per_s"]' "$("$PYTHON" -c 'print(64 / 0.011621858456754)')"
    expect scaling 'j["strategies"][5]["efficiency"]' "$("$PYTHON" -c 'print(64 / 0.011621858456754 / 8000)')"
    json "$WORK/e.json" 'j["strategies"][5]["note"]' | grep -qF '2 stages (fc1..relu2 | fc3..out), 4 micro-batches' \
        || fail "plan: $(json "$WORK/e.json" 'j["strategies"][5]["note"]')"
    "$FULGUR" check "$WORK/mp.ini" backend.devices=2 >"$WORK/check.log" 2>&1 || fail "check: $(tail -3 "$WORK/check.log")"
    grep -qF 'stage 0 (device 0): fc1..relu2' "$WORK/check.log" && grep -qF 'stage 1 (device 1): fc3..out' "$WORK/check.log" \
        || fail "the plugin planned otherwise: $(grep stage "$WORK/check.log")"
    want=$(grep '^memory (device 1):' "$WORK/check.log" | grep -oE '[0-9]+\.[0-9]+' | tr '\n' ' ')
    got=$(json "$WORK/e.json" "' '.join('%.2f' % v for v in j['strategies'][5]['memory_mib'].values())")
    [ -n "$want" ] && [ "$got " = "$want" ] || fail "memory: estimate '$got', check's device 1 '$want'"
    [ "$(json "$WORK/e.json" 'j["strategies"][5]["memory_device"]')" = 1 ] || fail "memory device"
    "$FULGUR" estimate "$WORK/mp.ini" --devices-per-node 2 --link 1gbit,50us --profile "$PROFILE" \
        --no-memory --json strategy.split=fc2 >"$WORK/e.json" || fail "estimate with split failed"
    expect split_step 'j["strategies"][5]["step_ms"]' 13.623073228377
    json "$WORK/e.json" 'j["strategies"][5]["note"]' | grep -qF '(fc1..relu1 | fc2..out)' || fail "split plan"
    refused "split = fc9: the model has no layer 'fc9'" "$WORK/mp.ini" --devices-per-node 2 \
        --link nvlink --profile "$PROFILE" --no-memory strategy.split=fc9
    "$FULGUR" estimate "$WORK/mp.ini" --nodes 2 --link nvlink --profile "$PROFILE" --no-memory --json \
        >"$WORK/e.json" || fail "estimate on 2 nodes failed"
    [ "$(json "$WORK/e.json" 'j["strategies"][5]["skipped"]')" = True ] || fail "2 nodes: predicted"
    json "$WORK/e.json" 'j["strategies"][5]["note"]' | grep -qF 'estimate it with --nodes 1' || fail "2 nodes: note"
    "$FULGUR" estimate "$WORK/mp.ini" --profile "$PROFILE" --no-memory >"$WORK/one.txt" || fail "1 device"
    grep -qF 'pipeline         not predicted' "$WORK/one.txt" || fail "1 device: $(cat "$WORK/one.txt")"
    grep -qF 'fastest that fits: single' "$WORK/one.txt" || fail "1 device: fastest"
    ;;
*) fail "unknown step $step" ;;
esac
echo "PASS [estimate.$step]"
