# Sourced by bench_cpu.sh and bench_lm.sh: the two ceilings a result is a fraction of.
#   fma_peak FULGUR    the machine's FMA peak in GFLOP/s, as `fulgur devices` measures it
#                      (register-only FMA loops on all the CPU backend's threads, default
#                      threads = online CPUs); NA where it cannot be measured
#   build_sgemm_peak DIR HERE   builds HERE/sgemm_peak.c into DIR/sgemm_peak: OpenBLAS and,
#                      where libdnnl-dev is installed, oneDNN's sgemm too (its "best" lines
#                      are then the faster library per shape); returns 1 when it cannot
fma_peak() {
    local line
    line=$("$1" devices 2>&1 | grep -o 'FMA peak on [0-9]* threads\?: [0-9.]* GFLOP/s' | head -n1)
    [[ -n $line ]] && sed -E 's/.*: ([0-9.]+) GFLOP\/s/\1/' <<<"$line" || echo NA
}

build_sgemm_peak() {
    cc -O2 -DSGEMM_PEAK_DNNL -fopenmp -o "$1/sgemm_peak" "$2/sgemm_peak.c" -lopenblas -ldnnl \
        2>/dev/null || cc -O2 -o "$1/sgemm_peak" "$2/sgemm_peak.c" -lopenblas 2>"$1/cc.err"
}
