#!/bin/sh
# Mutation check of the emulated CUDA tests: copies the source tree, builds the emulated
# backend and the parity harness once, then for each mutation below edits the copy, rebuilds
# the emulated plugin, runs the parity group that must catch it, and expects a failure.
# Prints one line per mutation (CAUGHT or MISSED) and the failing checks' first lines;
# exits 1 if a mutation was missed or the unmutated baseline fails.
#   tests/cudaemu/mutate.sh [WORKDIR]     (about 4 minutes on 2 cores, plus the nvcc build)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d /tmp/cudaemu-mutate.XXXXXX)}
mkdir -p "$work/src"
(cd "$src" && git ls-files --cached --others --exclude-standard -z |
    xargs -0 tar cf - --) | tar xf - -C "$work/src"
cd "$work"
echo "mutate: tree copied to $work/src; building (log: $work/build.log)"
cmake -S src -B build -DCMAKE_BUILD_TYPE=Release -DFULGUR_WITH_MPI=OFF -DFULGUR_WITH_IMAGE=OFF \
    -DFULGUR_BUILD_EXAMPLES=OFF >build.log 2>&1
cmake --build build -j2 --target test_parity fulgur-backend-cpu fulgur-backend-cuda-emu \
    test_parity_emu_asan >>build.log 2>&1
plugin=build/tests/cudaemu/plugins/fulgur-backend-cuda.so
asan_plugin=build/tests/cudaemu/plugins-asan/fulgur-backend-cuda.so

run() { # GROUP [asan] -> exit status of the parity group on the emulated backend
    if [ "${2:-}" = asan ]; then
        LD_LIBRARY_PATH=build/tests/cudaemu/driver ASAN_OPTIONS=detect_leaks=0 \
            build/bin/test_parity_emu_asan --backend cuda --plugin "$asan_plugin" "$1" \
            >run.log 2>&1
    else
        build/bin/test_parity --backend cuda --plugin "$plugin" "$1" >run.log 2>&1
    fi
}

for g in xent batchnorm dropout_dev gemm conv attention attention_fused embedding layernorm rope swiglu gqa loss_scale; do
    if ! run "$g"; then
        echo "mutate: baseline parity group $g fails before any mutation:"; tail -5 run.log
        exit 1
    fi
done

missed=0
# name | file | perl -0777 substitution | parity group that must catch it [| asan: the
# sanitized build runs it]
while IFS='|' read -r name file expr group san; do
    [ -n "$name" ] || continue
    cp "src/$file" orig.tmp
    perl -0777 -pi -e "$expr" "src/$file"
    if cmp -s "src/$file" orig.tmp; then
        echo "mutate: $name: the substitution matched nothing in $file"; missed=1; continue
    fi
    target=fulgur-backend-cuda-emu
    [ "$san" = asan ] && target=fulgur-backend-cuda-emu-asan
    if ! cmake --build build --target "$target" >>build.log 2>&1; then
        echo "CAUGHT  $name: the mutated $file does not build"
    elif run "$group" "$san"; then
        echo "MISSED  $name ($file): parity group $group passes"; missed=1
    else
        echo "CAUGHT  $name ($file): parity group $group fails:"
        grep -m 3 -E "FAIL|fail|deadlock|cudaemu|cuBLASLt|cuDNN|AddressSanitizer|SUMMARY" run.log |
            cut -c1-160 |
            sed 's/^/    /'
    fi
    cp orig.tmp "src/$file"
done <<'LIST'
removed __syncthreads in block_sum|kernels/cuda/fg_cuda_common.cuh|s/(sh\[threadIdx\.x\] = v;\n)\s*__syncthreads\(\);\n/$1/|batchnorm
wrong shuffle offset in the softmax row sum|kernels/cuda/reduce.cu|s/sum \+= __shfl_xor_sync\(0xffffffffu, sum, off\)/sum += __shfl_xor_sync(0xffffffffu, sum, off >> 1)/|xent
off-by-one grid (xent rows: count / 8 blocks)|kernels/cuda/reduce.cu|s/\(\(count \+ 7\) \/ 8\)/(count \/ 8)/|xent
transposed gemm operand (cuBLASLt TRANSA inverted)|plugins/backend-cuda/cuda_gemm.c|s/ta = k->trans_b \? CUBLAS_OP_T : CUBLAS_OP_N/ta = k->trans_b ? CUBLAS_OP_N : CUBLAS_OP_T/|gemm
wrong leading dimension (A layout with lda)|plugins/backend-cuda/cuda_gemm.c|s/a_cols, k->ldb\)/a_cols, k->lda)/|gemm
conv descriptor with swapped padding|plugins/backend-cuda/cuda_conv.c|s/\(p->conv, k->pad_h, k->pad_w,/(p->conv, k->pad_w, k->pad_h,/|conv
removed __syncthreads before an attention key tile is reloaded|kernels/cuda/attention.cu|s/__syncthreads\(\); \/\* the previous tile is used up \*\//;/|attention
decode attends to keys [0, pos) (the query's own key left out)|kernels/cuda/attention_decode.cu|s/n = pos \+ 1;/n = pos;/|attention
embedding positions ranked one slot late within their id (<= for <)|kernels/cuda/embedding.cu|s/rank \+= w.slots\[b\] < pos;/rank += w.slots[b] <= pos;/|embedding
layernorm parameter gradient drops its first row chunk|kernels/cuda/layernorm.cu|s/for \(int k = 0; k < chunks; k\+\+\)/for (int k = 1; k < chunks; k++)/|layernorm
cuDNN attention: causal mask comparison reversed (col >= row)|plugins/backend-cuda/cuda_sdpa_graph.c|s/CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col,/CMP_GE, CUDNN_DATA_BOOLEAN, -1, col, row,/|attention_fused
cuDNN attention: V read at K's offset in qkv|plugins/backend-cuda/cuda_sdpa_exec.c|s/\(const char \*\)qkv \+ 2 \* c\)/(const char *)qkv + c)/|attention_fused
cuDNN attention: backward without the causal mask|plugins/backend-cuda/cuda_sdpa_graph.c|s/(sdpa_pointwise\(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, -1, scores, stats, NULL, z,\n\s+what\);\n)\s+if \(s == CUDNN_STATUS_SUCCESS && sh->causal\)\n\s+s = sdpa_causal\(g, sh, z, &z, what\);\n/$1/|attention_fused
rope backward turns the same way as the forward|kernels/cuda/rope.cu|s/double sign = backward \? -1\.0 : 1\.0;/double sign = backward ? 1.0 : 1.0;/|rope
rope 128-bit path: a pack's values all take its first angle|kernels/cuda/rope.cu|s/-2\.0 \* \(i \+ k\)/-2.0 * i/|rope
swiglu forward without the up projection|kernels/cuda/swiglu.cu|s/g\[k\] = g\[k\] \/ \(1\.0f \+ expf\(-g\[k\]\)\) \* u\[k\];/g[k] = g[k] \/ (1.0f + expf(-g[k]));/|swiglu
GQA dK and dV summed over the group's first query head only|kernels/cuda/attention.cu|s/hq < \(w\.h \+ 1\) \* group;/hq < w.h * group + 1;/|gqa
GQA decode reads key/value head h % kv_heads, not h / group|kernels/cuda/attention_decode.cu|s/int kv = h \/ \(a\.heads \/ a\.kv_heads\);/int kv = h % a.kv_heads;/|gqa
dropout_forward_dev: the counter never advanced (the same mask every replay)|kernels/cuda/elementwise.cu|s/\*offset_dev \+= advance;/(void)advance;/|dropout_dev
dropout_forward_dev: the counter advanced twice|kernels/cuda/elementwise.cu|s/\*offset_dev \+= advance;/*offset_dev += 2 * advance;/|dropout_dev
dropout_forward_dev: the step's part not read (the offset by value only)|kernels/cuda/elementwise.cu|s/offset \+= \*offset_dev;/(void)offset_dev;/|dropout_dev
loss scaler that never skips (found_inf never set)|kernels/cuda/loss_scale.cu|s/sc->found_inf = isfinite\(\*sq\) \? 0 : 1;/sc->found_inf = isfinite(*sq) ? 0 : 0;/|loss_scale
loss scaler flag not reset between steps (set on overflow, never cleared)|kernels/cuda/loss_scale.cu|s/sc->found_inf = isfinite\(\*sq\) \? 0 : 1;/if (!isfinite(*sq)) sc->found_inf = 1;/|loss_scale
fused sgd ignores the scaler's skip flag|kernels/cuda/optimizer.cu|s/if \(a\.skip_dev && \*a\.skip_dev\)\n        return; \/\* the loss scaler skips this step \(decided on the device\) \*\/\n    float lr/float lr/|loss_scale
grid-stride loop one element past the end (ASan)|kernels/cuda/fg_cuda_common.cuh|s/i < \(n\);/i <= (n);/|flat|asan
LIST
cmake --build build --target fulgur-backend-cuda-emu fulgur-backend-cuda-emu-asan >>build.log 2>&1
[ "$missed" = 0 ] && echo "mutate: every mutation caught" || echo "mutate: some mutation missed"
exit "$missed"
