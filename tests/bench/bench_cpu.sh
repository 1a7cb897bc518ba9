#!/usr/bin/env bash
# CPU training benchmark: fulgur against PyTorch on Fashion-MNIST, same model, batch size,
# threads, optimizer and data (the models: mlp.ini and cnn.ini here, pinned copies of the
# examples; torch_ref.py builds the same networks). Prints the median samples/s of each, the ratio fulgur/torch for
# the MLP and the CNN, each run's op split (the throughput callback's phases), what fraction of
# OpenBLAS's raw sgemm rate fulgur's MLP step reaches and what fraction of the sgemm peak the
# CNN's convolution layers reach (bench_backend_cpu beside the fulgur binary), all measured in
# this one invocation; appends one row per model to tests/bench/results.csv with the CPU model
# and its vector flags. Installs nothing: PyTorch is used only
# when /usr/bin/python3 can import torch (Debian: python3-torch), and the comparison is refused
# when torch runs on the reference (netlib) BLAS, which would flatter fulgur.
#
#   tests/bench/bench_cpu.sh                      # build-bench/bin/fulgur, 5 MLP + 3 CNN runs each
#   tests/bench/bench_cpu.sh --help
#
# Not a ctest test: timings depend on the machine and its load. Run it on a quiet machine;
# --wait-load waits for one. Runs alternate fulgur, torch, fulgur, torch ... so slow drift in
# the machine's load hits both sides alike.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=peaks.sh
. "$here/peaks.sh"
python=/usr/bin/python3   # Debian's: python3-torch lives there, not in a pyenv python3

usage() {
    cat <<EOF
usage: $(basename "$0") [options]
  --fulgur PATH        fulgur binary (default: \$root/build-bench/bin/fulgur)
  --threads N          threads for both (default 2): torch.set_num_threads, backend.threads
  --batch-size N       batch size (default 128)
  --mlp-runs N         runs of each side for the MLP (default 5; 0 skips the MLP)
  --cnn-runs N         runs of each side for the CNN (default 3; 0 skips the CNN)
  --mlp-batches N      timed batches per MLP run (default 400; a fulgur epoch caps it at 468)
  --cnn-batches N      timed batches per CNN run (default 60)
  --torch-env K=V      extra environment for the torch runs (repeatable), after the
                       default OMP_WAIT_POLICY=passive; printed and recorded in results.csv
  --torch-plain        drop the default OMP_WAIT_POLICY=passive (torch exactly as shipped)
  --fulgur-arg K=V     extra override for the fulgur runs (repeatable), e.g. data.num_workers=1
  --wait-load X        before measuring, wait until the 1-minute load average is below X
  --wait-max SECS      give up waiting after SECS (default 1200) and measure anyway, saying so
  --results FILE       CSV to append to (default: tests/bench/results.csv); --no-results: none
  --selftest           check this script's argument parsing and exit (no benchmark)
EOF
}

die() { echo "bench_cpu: $*" >&2; exit 2; }

need_int() { # name value minimum
    [[ $2 =~ ^[0-9]+$ ]] || die "$1 needs a whole number, got '$2'"
    (( $2 >= $3 )) || die "$1 must be >= $3, got $2"
}

need_kv() { [[ $2 =~ ^[A-Za-z_][A-Za-z0-9_.]*=.*$ ]] || die "$1 needs KEY=VALUE, got '$2'"; }

need_num() { [[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die "$1 needs a number, got '$2'"; }

set_defaults() {
    fulgur="$root/build-bench/bin/fulgur"
    threads=2 batch_size=128
    mlp_runs=5 cnn_runs=3 mlp_batches=400 cnn_batches=60
    # torch's OpenMP threads spin while idle and fight OpenBLAS's own threads for the cores:
    # on a 2-core machine that made torch's MLP 2.5x slower; passive waiting is torch at its best
    torch_env=(OMP_WAIT_POLICY=passive) fulgur_args=()
    wait_load="" wait_max=1200
    results="$here/results.csv"
    selftest=0
}

parse_args() {
    while (( $# > 0 )); do
        local opt=$1
        case $opt in
            --help|-h) usage; exit 0 ;;
            --selftest) selftest=1; shift; continue ;;
            --no-results) results=""; shift; continue ;;
            --torch-plain) torch_env=(); shift; continue ;;
        esac
        (( $# >= 2 )) || die "$opt needs a value (see --help)"
        local v=$2
        case $opt in
            --fulgur) fulgur=$v ;;
            --threads) need_int "$opt" "$v" 1; threads=$v ;;
            --batch-size) need_int "$opt" "$v" 1; batch_size=$v ;;
            --mlp-runs) need_int "$opt" "$v" 0; mlp_runs=$v ;;
            --cnn-runs) need_int "$opt" "$v" 0; cnn_runs=$v ;;
            --mlp-batches) need_int "$opt" "$v" 1; mlp_batches=$v ;;
            --cnn-batches) need_int "$opt" "$v" 1; cnn_batches=$v ;;
            --torch-env) need_kv "$opt" "$v"; torch_env+=("$v") ;;
            --fulgur-arg) need_kv "$opt" "$v"; fulgur_args+=("$v") ;;
            --wait-load) need_num "$opt" "$v"; wait_load=$v ;;
            --wait-max) need_int "$opt" "$v" 0; wait_max=$v ;;
            --results) results=$v ;;
            *) die "unknown option '$opt' (see --help)" ;;
        esac
        shift 2
    done
}

# ---- selftest: the parser accepts what --help promises and rejects the rest -----------------

selftest_expect() { # "ok"|"fail" expected-fragment args...
    local want=$1 frag=$2 out rc
    shift 2
    out=$( (set_defaults; parse_args "$@"; declare -p mlp_runs cnn_batches torch_env results wait_load) 2>&1 ) && rc=0 || rc=$?
    if [[ $want == ok && $rc -ne 0 ]] || [[ $want == fail && $rc -eq 0 ]] || [[ $out != *"$frag"* ]]; then
        echo "selftest FAILED: args [$*]: want $want with '$frag', got rc $rc: $out" >&2
        return 1
    fi
}

run_selftest() {
    local bad=0
    selftest_expect ok 'mlp_runs="7"' --mlp-runs 7 || bad=1
    selftest_expect ok 'cnn_batches="9"' --cnn-batches 9 || bad=1
    selftest_expect ok 'torch_env=([0]="OMP_WAIT_POLICY=passive" [1]="OPENBLAS_NUM_THREADS=1")' --torch-env OPENBLAS_NUM_THREADS=1 || bad=1
    selftest_expect ok 'torch_env=([0]="X=1")' --torch-plain --torch-env X=1 || bad=1
    selftest_expect ok 'results=""' --no-results || bad=1
    selftest_expect ok 'wait_load="0.5"' --wait-load 0.5 || bad=1
    selftest_expect fail "--mlp-runs needs a whole number, got 'x'" --mlp-runs x || bad=1
    selftest_expect fail '--threads must be >= 1, got 0' --threads 0 || bad=1
    selftest_expect fail "unknown option '--bogus'" --bogus 1 || bad=1
    selftest_expect fail '--cnn-runs needs a value' --cnn-runs || bad=1
    selftest_expect fail "--torch-env needs KEY=VALUE, got 'nokey'" --torch-env nokey || bad=1
    selftest_expect fail "--wait-load needs a number, got 'low'" --wait-load low || bad=1
    (( bad == 0 )) && echo "bench_cpu selftest: ok"
    return $bad
}

# ---- machine ------------------------------------------------------------------------------

load1() { cut -d' ' -f1 /proc/loadavg; }
loadavg3() { cut -d' ' -f1-3 /proc/loadavg; }
cpu_model() { sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1; }
# The vector and matrix flags that decide which kernels run (lscpu's full list is longer).
cpu_flags() { grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|fma|amx|f16c)' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

wait_for_quiet() {
    [[ -n $wait_load ]] || return 0
    local waited=0
    while awk -v l="$(load1)" -v x="$wait_load" 'BEGIN { exit !(l >= x) }'; do
        if (( waited >= wait_max )); then
            echo "load: still $(loadavg3) after ${waited} s (wanted < $wait_load); measuring anyway"
            return 0
        fi
        sleep 15
        waited=$((waited + 15))
    done
    echo "load: $(loadavg3) after waiting ${waited} s for < $wait_load"
}

# ---- torch and its BLAS ---------------------------------------------------------------------

torch_available() { "$python" -c 'import torch' >/dev/null 2>&1; }

torch_run() { env OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" "${torch_env[@]}" \
    "$python" "$here/torch_ref.py" --threads "$threads" --batch-size "$batch_size" "$@"; }

# Sets torch_blas to the library torch's sgemm_ resolves to (after a matmul: dlsym through
# libtorch_cpu's handle, located in /proc/<pid>/maps) and refuses (exit 3) when that is the
# reference BLAS: comparing against it would measure netlib, not torch. The mapped libraries
# and the alternatives system are printed too; they alone can mislead (OpenBLAS's liblapack
# can be mapped while sgemm_ still comes from netlib's libblas).
check_torch_blas() {
    local out libs sgemm alt
    out=$(torch_run --blas) || die "torch_ref.py --blas failed: $out"
    libs=$(sed -n 's/^MAPPED //p' <<<"$out")
    sgemm=$(sed -n 's/^SGEMM //p' <<<"$out")
    echo "torch: $(sed -n 's/^TORCH //p' <<<"$out")"
    echo "torch BLAS libraries (from /proc/<pid>/maps after a matmul):"
    sed 's/^/  /' <<<"${libs:-(no BLAS library mapped)}"
    echo "torch sgemm_ is in: ${sgemm:-unknown}"
    alt=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/^Value: //p' || true)
    echo "update-alternatives libblas.so.3-x86_64-linux-gnu: ${alt:-(not registered)}"
    if [[ $sgemm == */blas/libblas.so* ]] ||
        { [[ $sgemm == unknown || -z $sgemm ]] && grep -qE '/blas/libblas\.so' <<<"$libs"; }; then
        echo "REFUSED: torch's sgemm is the reference BLAS (netlib, /usr/lib/x86_64-linux-gnu/blas)." >&2
        echo "  It is an unblocked triple loop, many times slower than OpenBLAS: the ratio would" >&2
        echo "  measure netlib, not PyTorch. Install an optimized libblas.so.3 alternative:" >&2
        echo "  apt-get install libopenblas0-pthread (or select it with update-alternatives)." >&2
        exit 3
    elif grep -qi openblas <<<"$sgemm"; then
        torch_blas="OpenBLAS $(grep -oE 'libopenblas[^ /]*\.so[.0-9]*' <<<"$libs" | tail -n1)"
    elif grep -qiE 'blis|mkl|atlas' <<<"$sgemm"; then
        torch_blas=$(grep -oiE '[^ /]*(blis|mkl|atlas)[^ /]*' <<<"$sgemm" | tail -n1)
    else
        echo "REFUSED: cannot tell which BLAS torch's sgemm is (sgemm_: ${sgemm:-unknown}; maps: ${libs:-none}; alternative: ${alt:-none})." >&2
        exit 3
    fi
    echo "torch BLAS: $torch_blas"
}

# ---- one run of each side -------------------------------------------------------------------

# Overrides that switch evaluation off and keep run folders out of the tree. The [trainer]
# keys are picked from what this fulgur declares (`fulgur explain trainer`), so the script
# follows renames (validate_every_n_epochs became check_val_every_n_epoch).
fulgur_eval_off() {
    local keys k
    keys=$("$fulgur" explain trainer 2>/dev/null | awk 'NR > 1 { print $1 }') ||
        die "'$fulgur explain trainer' failed"
    eval_off=(trainer.test_after_fit=false)
    for k in validate_every_n_epochs check_val_every_n_epoch; do
        grep -qx "$k" <<<"$keys" && eval_off+=("trainer.$k=0")
    done
    grep -qx num_sanity_val_steps <<<"$keys" && eval_off+=(trainer.num_sanity_val_steps=0)
    grep -qx default_root_dir <<<"$keys" && eval_off+=("trainer.default_root_dir=$scratch/runs")
    return 0
}

# Two epochs of N batches; epoch 1 is the warm-up, epoch 2's "samples/s" is the figure.
# The throughput callback's line for epoch 2 (its phases: data wait, h2d, forward, backward,
# optimizer) goes to the file named by $3.
fulgur_run() { # ini batches split-file -> samples/s on stdout
    local ini=$1 batches=$2 out line
    out=$("$fulgur" fit "$ini" trainer.max_epochs=2 trainer.limit_train_batches="$batches" \
        trainer.log_every_n_steps="$batches" "${eval_off[@]}" backend.threads="$threads" \
        data.batch_size="$batch_size" optimizer.lr=0.01 optimizer.momentum=0.9 \
        callback.throughput.log_every_n_events=1 callback.throughput.advise=false \
        "${fulgur_args[@]}" 2>&1) || { echo "fulgur failed:" >&2; echo "$out" >&2; return 1; }
    awk '/^throughput: [0-9.]+k? samples\/s; step/ { last = $0 } /^epoch 2\/2 / { print last; exit }' \
        <<<"$out" | sed -E 's/^throughput: [^;]*; //' >"$3"
    line=$(grep -E '^epoch 2/2 +train loss' <<<"$out") || { echo "no epoch 2 line in:" >&2; echo "$out" >&2; return 1; }
    sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' <<<"$line" | grep . || { echo "no samples/s in: $line" >&2; return 1; }
}

torch_one() { # model batches -> samples/s on stdout
    local out
    out=$(torch_run --model "$1" --batches "$2" --warmup 20) || { echo "torch_ref.py failed: $out" >&2; return 1; }
    sed -nE 's/^RESULT samples_per_s=([0-9.]+).*/\1/p' <<<"$out" | grep . || { echo "no RESULT line in: $out" >&2; return 1; }
}

median() { tr ' ' '\n' | awk 'NF' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "NA"; exit }
    print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "NA" || b == 0) print "NA"; else printf "%.3f", a / b }'; }

# bench_model name ini runs batches: sets f_med, t_med, split_med (the op split of the fulgur
# run nearest the median) and prints every run with its split
bench_model() {
    local name=$1 ini=$2 runs=$3 batches=$4 f_all="" t_all="" f t i best=-1 best_d=0 dist
    local -a fs=() splits=()
    echo
    echo "== $name: $runs run(s) each, $batches timed batches of $batch_size, $threads threads (load $(loadavg3))"
    for (( i = 1; i <= runs; i++ )); do
        f=$(fulgur_run "$ini" "$batches" "$scratch/split")
        f_all+=" $f"
        fs+=("$f")
        splits+=("$(cat "$scratch/split")")
        if (( have_torch )); then
            t=$(torch_one "$name" "$batches")
            t_all+=" $t"
            printf '  run %d: fulgur %10.0f samples/s   torch %10.0f samples/s\n' "$i" "$f" "$t"
        else
            printf '  run %d: fulgur %10.0f samples/s\n' "$i" "$f"
        fi
        printf '         fulgur split: %s\n' "${splits[-1]:-(no throughput line)}"
    done
    f_med=$(median <<<"$f_all")
    t_med=$(median <<<"$t_all")
    split_med=""
    for (( i = 0; i < runs; i++ )); do
        dist=$(awk -v a="${fs[i]}" -v m="$f_med" 'BEGIN { d = a - m; print (d < 0 ? -d : d) }')
        if (( best < 0 )) || awk -v d="$dist" -v b="$best_d" 'BEGIN { exit !(d < b) }'; then
            best=$i best_d=$dist
        fi
    done
    split_med=${splits[best]}
    printf '  median: fulgur %.0f samples/s, torch %s samples/s, fulgur/torch %s\n' "$f_med" \
        "$(whole "$t_med")" "$(ratio "$f_med" "$t_med")"
}

# ---- sgemm ceiling for the MLP --------------------------------------------------------------

# Forward FLOPs per sample of 784-256-256-10: 2*(784*256 + 256*256 + 256*10).
mlp_fwd_flops=$((2 * (784 * 256 + 256 * 256 + 256 * 10)))
# Training: forward + dW + dx; fulgur skips dx of the first layer (its input needs no gradient).
mlp_train_flops=$((3 * mlp_fwd_flops - 2 * 784 * 256))

# Sets sgemm_peak, sgemm_step (GFLOP/s: the best library's, per shape the faster of OpenBLAS
# and oneDNN where sgemm_peak.c was built with it), fma_peak and mlp_gflops for the results row.
sgemm_report() { # fulgur MLP samples/s
    local exe out peak step
    exe=$scratch/sgemm_peak
    fma_peak=$(fma_peak "$fulgur")
    if ! build_sgemm_peak "$scratch" "$here"; then
        echo "sgemm ceiling: cannot build sgemm_peak.c against OpenBLAS: $(cat "$scratch/cc.err")"
        return 0
    fi
    out=$(OMP_WAIT_POLICY=passive "$exe" "$threads" "$batch_size")
    echo
    echo "== MLP step against raw sgemm and the FMA peak ($threads threads)"
    sed 's/^/  /' <<<"$out"
    peak=$(sed -n 's/^best peak GFLOP\/s //p' <<<"$out")
    step=$(sed -n 's/^best step GFLOP\/s //p' <<<"$out")
    sgemm_peak=$peak sgemm_step=$step
    echo "  FMA peak (fulgur devices: register-only FMA loops on all its threads): $fma_peak GFLOP/s;" \
        "best library gemm peak: $peak GFLOP/s"
    mlp_gflops=$(awk -v s="$1" -v fl="$mlp_train_flops" 'BEGIN { printf "%.1f", s * fl * 1e-9 }')
    awk -v s="$1" -v fl="$mlp_train_flops" -v fw="$mlp_fwd_flops" -v peak="$peak" -v step="$step" -v fma="$fma_peak" 'BEGIN {
        if (s <= 0) exit
        g = s * fl * 1e-9
        printf "  MLP FLOPs per sample: forward %d, training %d (3x forward minus fc1 dx)\n", fw, fl
        printf "  fulgur MLP step: %.0f samples/s = %.1f GFLOP/s = %.0f%% of the best library gemm peak (%.1f),\n", s, g, 100 * g / peak, peak
        if (fma != "NA") printf "                   %.0f%% of the FMA peak (%.1f),\n", 100 * g / fma, fma
        printf "                   %.0f%% of the step-shape sgemm rate (%.1f: all its gemms, nothing else)\n", 100 * g / step, step
        printf "  (nominal 3x forward count: %.1f GFLOP/s, %.0f%% of peak)\n", s * 3 * fw * 1e-9, 100 * s * 3 * fw * 1e-9 / peak
    }'
}

# ---- convolution layers against the sgemm peak ----------------------------------------------

# Both layers' GFLOP/s from bench_backend_cpu's "conv" lines: FLOPs over summed time.
conv_total() {
    grep '^conv' <<<"$1" | sed -nE 's/.*total ([0-9.]+) ms, ([0-9.]+) GFLOP\/s.*/\1 \2/p' |
        awk '{ ms += $1; fl += $1 * $2 } END { if (ms > 0) printf "%.1f", fl / ms; else print "NA" }'
}

# The CNN's two convolutions through the CPU backend's vtable (bench_backend_cpu, built beside
# the fulgur binary), forward and backward, against the sgemm peak of this invocation. Sets
# conv_gflops (both layers: their FLOPs over their summed time) from what a fit runs
# ([backend] conv_algorithm = auto: each layer's faster of im2col and oneDNN, timed at its
# first call; the choices are printed), then prints im2col alone and bf16 for comparison.
conv_report() {
    local exe out
    exe=$(dirname "$fulgur")/bench_backend_cpu
    conv_gflops=NA
    echo
    echo "== CNN convolution layers against the sgemm peak ($threads threads)"
    if [[ ! -x $exe ]]; then
        echo "  no bench_backend_cpu beside $fulgur (cmake --build ... --target bench_backend_cpu)"
        return 0
    fi
    out=$("$exe" --threads "$threads" --conv-only 2>&1) || { echo "  bench_backend_cpu failed: $out"; return 0; }
    sed 's/^/  /' <<<"$(grep '^conv' <<<"$out")"
    conv_gflops=$(conv_total "$out")
    grep -o 'conv2d .*' <<<"$out" | sed 's/^/    auto: /'
    awk -v g="$conv_gflops" -v peak="${sgemm_peak:-NA}" 'BEGIN {
        if (peak == "NA" || peak == "" || g == "NA") { printf "  both layers: %s GFLOP/s\n", g; exit }
        printf "  both layers: %.1f GFLOP/s = %.0f%% of the sgemm peak (%.1f)\n", g, 100 * g / peak, peak }'
    local alt label
    for alt in "im2col:--conv-algorithm im2col" "bf16 (auto):--conv-algorithm auto --bf16"; do
        label=${alt%%:*}
        # shellcheck disable=SC2086 # the flags are words
        out=$("$exe" --threads "$threads" --conv-only ${alt#*:} 2>&1) || continue
        echo "  $label: both layers $(conv_total "$out") GFLOP/s"
    done
}

# ---- results --------------------------------------------------------------------------------

csv_header="date,machine,model,fulgur_samples_per_s,torch_samples_per_s,ratio,torch_blas,load_1_5_15,threads,batch_size,timed_batches,runs,torch_env,cpu_flags,step_gflops,sgemm_peak_gflops,sgemm_step_gflops,conv_gflops,op_split,fma_peak_gflops"

# Rows are written after the sgemm and convolution figures exist; a results file with the older,
# shorter header gets the new one (its old rows simply lack the trailing fields).
csv_row() { # model fulgur torch ratio batches runs step_gflops conv_gflops split
    [[ -n $results ]] || return 0
    if [[ ! -s $results ]]; then
        echo "$csv_header" >"$results"
    elif [[ $(head -n1 "$results") != "$csv_header" ]]; then
        sed -i "1s/.*/$csv_header/" "$results"
    fi
    printf '%s,"%s",%s,%.0f,%s,%s,"%s","%s",%s,%s,%s,%s,"%s","%s",%s,%s,%s,%s,"%s",%s\n' \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(nproc) x $(cpu_model)" "$1" "$2" "$(whole "$3")" \
        "$4" "$torch_blas" "$(loadavg3)" "$threads" "$batch_size" "$5" "$6" "${torch_env[*]}" \
        "$(cpu_flags)" "$7" "${sgemm_peak:-NA}" "${sgemm_step:-NA}" "$8" "$9" "${fma_peak:-NA}" >>"$results"
}

whole() { [[ $1 == NA ]] && echo NA || printf '%.0f' "$1"; }

summary_line() { # model fulgur torch
    printf '  %s  fulgur %8s  torch %8s  fulgur/torch %s\n' "$1" "$(whole "$2")" "$(whole "$3")" "$(ratio "$2" "$3")"
}

main() {
    set_defaults
    parse_args "$@"
    if (( selftest )); then run_selftest; exit $?; fi
    [[ -x $fulgur ]] || die "no fulgur binary at $fulgur (build: cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release && cmake --build build-bench -j2, or pass --fulgur)"
    [[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]] ||
        die "no Fashion-MNIST at /usr/share/datasets/fashion-mnist (Debian package dataset-fashion-mnist)"
    cd "$root"   # the example INI files name the data directory absolutely; paths print relative
    scratch=$(mktemp -d /tmp/fulgur-bench.XXXXXX)
    trap 'rm -rf "$scratch"' EXIT
    fulgur_eval_off

    echo "machine: $(nproc) CPUs, $(cpu_model); load $(loadavg3)"
    echo "fulgur: $fulgur"
    have_torch=0 torch_blas=NA
    if torch_available; then
        have_torch=1
        check_torch_blas
        echo "torch environment: OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads ${torch_env[*]}"
    else
        echo "torch: $python cannot import torch (apt-get install python3-torch); fulgur figures only, no ratio"
    fi
    echo "timing: torch = its training loop over in-memory tensors (forward, loss, backward, step);"
    echo "        fulgur = the samples/s its trainer prints for epoch 2 (epoch 1 is the warm-up),"
    echo "        which includes its data loader (shuffle, batch assembly, worker hand-off)."
    wait_for_quiet

    local mlp_f=NA mlp_t=NA mlp_split="" cnn_f=NA cnn_t=NA cnn_split=""
    if (( mlp_runs > 0 )); then
        bench_model mlp "$here/mlp.ini" "$mlp_runs" "$mlp_batches"
        mlp_f=$f_med mlp_t=$t_med mlp_split=$split_med
    fi
    if (( cnn_runs > 0 )); then
        bench_model cnn "$here/cnn.ini" "$cnn_runs" "$cnn_batches"
        cnn_f=$f_med cnn_t=$t_med cnn_split=$split_med
    fi
    sgemm_peak=NA sgemm_step=NA mlp_gflops=NA conv_gflops=NA fma_peak=NA
    sgemm_report "${mlp_f/NA/0}"
    (( cnn_runs == 0 )) || conv_report
    (( mlp_runs == 0 )) || csv_row mlp "$mlp_f" "$mlp_t" "$(ratio "$mlp_f" "$mlp_t")" \
        "$mlp_batches" "$mlp_runs" "$mlp_gflops" NA "$mlp_split"
    (( cnn_runs == 0 )) || csv_row cnn "$cnn_f" "$cnn_t" "$(ratio "$cnn_f" "$cnn_t")" \
        "$cnn_batches" "$cnn_runs" NA "$conv_gflops" "$cnn_split"

    echo
    echo "== summary (median samples/s; load now $(loadavg3))"
    (( mlp_runs == 0 )) || summary_line MLP "$mlp_f" "$mlp_t"
    (( mlp_runs == 0 )) || echo "       split of the median run: $mlp_split"
    (( mlp_runs == 0 )) || awk -v g="$mlp_gflops" -v p="$sgemm_peak" -v s="$sgemm_step" -v f="$fma_peak" 'BEGIN {
        if (p == "NA" || s == "NA") exit
        printf "       step %.1f GFLOP/s = %.0f%% of the step-shape sgemm rate (%.1f), %.0f%% of the best library gemm peak (%.1f)", g, 100 * g / s, s, 100 * g / p, p
        if (f != "NA") printf ", %.0f%% of the FMA peak (%.1f)", 100 * g / f, f
        printf "\n" }'
    (( cnn_runs == 0 )) || summary_line CNN "$cnn_f" "$cnn_t"
    (( cnn_runs == 0 )) || echo "       split of the median run: $cnn_split"
    (( cnn_runs == 0 )) || awk -v g="$conv_gflops" -v p="$sgemm_peak" -v f="$fma_peak" 'BEGIN {
        if (p == "NA" || g == "NA") exit
        printf "       convolution layers %.1f GFLOP/s = %.0f%% of the best library gemm peak (%.1f)", g, 100 * g / p, p
        if (f != "NA") printf ", %.0f%% of the FMA peak (%.1f)", 100 * g / f, f
        printf "\n" }'
    echo "  machine: $(nproc) x $(cpu_model); flags: $(cpu_flags)"
    [[ -z $results ]] || echo "  rows appended to ${results#"$root"/}"
}

main "$@"
