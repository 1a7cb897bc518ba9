#!/usr/bin/env bash
# Builds llm.c's CUDA trainer (karpathy/llm.c train_gpt2.cu, with cuDNN attention through
# cudnn-frontend) OUTSIDE this tree, as the anchor bench_lm_cuda.sh runs beside fulgur and
# PyTorch on the same GPU. Nothing of llm.c is committed: the checkouts are the user's (the
# session's `fetch` tool, or git clones), the work copy is a temporary folder, and only the
# binary lands in .gpu/llmc/ (an ignored path the device tool carries).
#
#   tests/bench/llmc_build.sh LLMC_CHECKOUT CUDNN_FRONTEND_CHECKOUT
#
# Needs nvcc (CUDA 13), cuDNN 9 and cuBLASLt; builds for sm_90. Two adjustments, made to the
# work copy only: CUDA 13's cudaMemAdvise takes a cudaMemLocation (llm.c passes the CUDA 12
# device id), and NVML, which only llm.c's GPU-monitor line uses, is linked against a stub
# (this machine has no driver; the GPU machine's libnvidia-ml.so.1 answers at run time).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
die() { echo "llmc_build: $*" >&2; exit 2; }
[ $# -eq 2 ] || die "usage: $(basename "$0") LLMC_CHECKOUT CUDNN_FRONTEND_CHECKOUT"
llmc=$1 cfe=$2
[ -f "$llmc/train_gpt2.cu" ] || die "$llmc has no train_gpt2.cu (a karpathy/llm.c checkout)"
[ -f "$cfe/include/cudnn_frontend.h" ] || die "$cfe has no include/cudnn_frontend.h (an NVIDIA/cudnn-frontend checkout)"
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || die "no nvcc (set NVCC or put CUDA's bin on PATH)"

work=$(mktemp -d /tmp/llmc-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$llmc"/. "$work/"
grep -q 'cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)' "$work/llmc/cuda_utils.cuh" &&
    sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
        "$work/llmc/cuda_utils.cuh"
mkdir -p "$work/nvml"
for f in nvmlInit nvmlInit_v2 nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetClockInfo \
    nvmlDeviceGetCurrentClocksThrottleReasons nvmlDeviceGetCurrentClocksEventReasons \
    nvmlDeviceGetFanSpeed nvmlDeviceGetMaxClockInfo nvmlDeviceGetPowerManagementLimit \
    nvmlDeviceGetPowerUsage nvmlDeviceGetSamples nvmlDeviceGetTemperature \
    nvmlDeviceGetTemperatureThreshold nvmlErrorString; do
    echo "int $f(void) { return 999; }"
done >"$work/nvml/stub.c"
cc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$work/nvml/libnvidia-ml.so" "$work/nvml/stub.c"

flags=(--threads=0 -t=0 --use_fast_math -std=c++17 -O3 -gencode "arch=compute_90,code=[compute_90,sm_90]"
       -DENABLE_CUDNN -DENABLE_BF16 -I"$cfe/include")
cd "$work"
"$nvcc" "${flags[@]}" -c llmc/cudnn_att.cpp -o cudnn_att.o
"$nvcc" "${flags[@]}" train_gpt2.cu cudnn_att.o -L"$work/nvml" -L"$(dirname "$nvcc")/../lib64/stubs" \
    -lcudnn -lcublas -lcublasLt -lnvidia-ml -lnvrtc -lcuda -o train_gpt2cu
mkdir -p "$root/.gpu/llmc"
cp train_gpt2cu "$root/.gpu/llmc/"
strip --strip-debug "$root/.gpu/llmc/train_gpt2cu" 2>/dev/null || true
grep -qx '/.gpu/' "$root/.git/info/exclude" 2>/dev/null || echo '/.gpu/' >>"$root/.git/info/exclude"
echo "llmc_build: $root/.gpu/llmc/train_gpt2cu (llm.c $(git -C "$llmc" rev-parse --short HEAD 2>/dev/null || echo '?'), cudnn-frontend $(git -C "$cfe" rev-parse --short HEAD 2>/dev/null || echo '?'))"
