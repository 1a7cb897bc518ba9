#!/usr/bin/env bash
# suite.cuda_tests_registered BUILD_DIR WITH_CUDA ENABLED NVCC: fails when this machine has
# nvcc, FULGUR_WITH_CUDA was AUTO and the CUDA plugins were not built (the emulated-device
# tests vanished), or when fewer cudaemu tests are registered than the suite defines.
set -uo pipefail
build=$1 with=$2 enabled=$3 nvcc=$4
# the emulated-device tests tests/cudaemu registers today
min_cudaemu=43
[ -n "$nvcc" ] && [ "$nvcc" != "FULGUR_NVCC-NOTFOUND" ] || nvcc=$(command -v nvcc || true)
if [ "$enabled" != ON ]; then
    if [ -n "$nvcc" ] && [ "$with" = AUTO ]; then
        echo "FAIL: nvcc is installed ($nvcc) but FULGUR_WITH_CUDA=AUTO built no CUDA plugins:"
        echo "      the $min_cudaemu emulated-device tests are missing. Configure with"
        echo "      -DFULGUR_WITH_CUDA=ON to see what CMake did not find."
        exit 1
    fi
    echo "ok: CUDA off (FULGUR_WITH_CUDA=$with, nvcc: ${nvcc:-none})"
    exit 0
fi
n=$(ctest --test-dir "$build" -N -L cudaemu | sed -n 's/^Total Tests: //p')
if [ -z "$n" ] || [ "$n" -lt "$min_cudaemu" ]; then
    echo "FAIL: ${n:-no} cudaemu tests registered, the suite defines $min_cudaemu"
    exit 1
fi
echo "ok: $n cudaemu tests registered (at least $min_cudaemu)"
