#!/usr/bin/env bash
# CI's ThreadSanitizer pass (.ci/run, after the plain and ASan passes): in a build folder
# configured with -DFULGUR_SANITIZE=thread -DFULGUR_WITH_CUDA=OFF, builds the threaded
# subset (target fulgur_tsan_subset) and runs its tests, which fail on the first report:
#   dataloader.*            the sampler and the loader's worker threads, fences, prefetch
#   events.*                the loader's copy fences against a backend whose copies land late
#   dp.*                    strategy.dp: a thread per CPU virtual device, reducing gradients
#   pipeline.*              strategy.model-parallel: stages on CPU virtual devices
#   callback2.progress.*, callback2.report.*, ux.report_data, ux.bar_pipe
#                           the progress bar and report callbacks, alone and in fits with
#                           loader workers running beside them
# (dataloader.asan cannot be built with TSan; callback2.progress.terminal needs tmux on a
# terminal and adds no thread.) The tests are chosen by their ctest names, wherever their
# folder: TSan is a build flavour, not a folder of tests. Suppressions:
# tests/tsan_suppressions.txt, third-party libraries only, a comment for each.
#   tests/tsan_run.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tests/tsan_run.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
grep -q '^FULGUR_SANITIZE:STRING=thread$' "$build/CMakeCache.txt" ||
    { echo "tests/tsan_run.sh: $build is not configured with -DFULGUR_SANITIZE=thread" >&2; exit 2; }
cmake --build "$build" -j2 --target fulgur_tsan_subset
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$here/tsan_suppressions.txt"
ctest --test-dir "$build" --output-on-failure -j2 \
    -R '^(dataloader\.|events\.|dp\.|pipeline\.|callback2\.(progress|report)\.|ux\.(report_data|bar_pipe)$)' \
    -E '^(dataloader\.asan|callback2\.progress\.terminal)$'
