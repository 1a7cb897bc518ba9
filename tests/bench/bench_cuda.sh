#!/usr/bin/env bash
# CUDA training benchmark on one GPU: fulgur (backend.name=cuda) against PyTorch eager,
# torch.compile and Lightning, on Fashion-MNIST with the models of mlp.ini and cnn.ini here
# (SGD lr 0.01 momentum 0.9, fp32, no TF32 on either side), at batch sizes 128 and 1024.
# Prints samples/s of each and the ratios fulgur/eager, fulgur/compile, fulgur/lightning,
# and writes one CSV row per (model, batch size, precision) to --results.
# --precisions "fp32 bf16-mixed" adds rows under bf16 mixed precision: fulgur with
# precision.name=bf16-mixed and backend.cudnn_benchmark=true, PyTorch with autocast(bf16),
# channels_last model and batches and cudnn.benchmark (its fastest CNN setting; Lightning
# has no such row); the CSV's model column reads e.g. cnn/bf16-mixed. In those rows the CNN
# runs fulgur channels-last too (model.memory_format=channels_last: NHWC convolutions,
# pooling and batch norm, the input and flatten transposed on the device), as PyTorch's
# channels_last model does.
#
#   tests/bench/bench_cuda.sh --fulgur BIN --data DIR [--results FILE] [--runs N]
#                            [--batches N] [--batch-sizes "128 1024"] [--models "mlp cnn"]
#                            [--modes "eager compile lightning"] [--precisions "fp32"]
#
# fulgur's figure is its epoch-2 samples/s over --batches batches (epoch 1 is warm-up);
# torch's is --batches timed steps after warm-up (torch_cuda_ref.py). Both copy each batch
# from page-locked host memory inside the step. Not a ctest test: it needs a GPU, and
# timings need a quiet machine. tests/cuda/gpu_checks.sh runs it on the GPU machine.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}
fulgur="" data="" results="" runs=2 batches=0 batch_sizes="128 1024" models="mlp cnn"
modes="eager compile lightning" precisions="fp32"
die() { echo "bench_cuda: $*" >&2; exit 2; }
while (( $# > 0 )); do
    (( $# >= 2 )) || die "$1 needs a value"
    case $1 in
        --fulgur) fulgur=$2 ;; --data) data=$2 ;; --results) results=$2 ;;
        --runs) runs=$2 ;; --batches) batches=$2 ;; --batch-sizes) batch_sizes=$2 ;;
        --models) models=$2 ;; --modes) modes=$2 ;; --precisions) precisions=$2 ;;
        *) die "unknown option '$1'" ;;
    esac
    shift 2
done
[[ -x $fulgur ]] || die "--fulgur must name the fulgur binary"
[[ -r $data/train-images-idx3-ubyte.gz ]] || die "--data must name a Fashion-MNIST folder"
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs needs a whole number >= 1"
for p in $precisions; do [[ $p == fp32 || $p == bf16-mixed ]] || die "--precisions: fp32 or bf16-mixed, not '$p'"; done

scratch=$(mktemp -d /tmp/fulgur-bench-cuda.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# The CPU benchmark's configs, less the CPU backend's own keys (the cuda backend refuses them).
for model in $models; do sed -E '/^threads *=/d' "$here/$model.ini" >"$scratch/$model.ini"; done
fulgur_failed=0

# timed batches: a fulgur epoch holds 60000/bs of them
batches_for() { local per=$((60000 / $1)); local b=${batches}; (( b > 0 )) || b=$(( $1 >= 1024 ? 50 : 300 )); (( b <= per )) || b=$per; echo "$b"; }

fulgur_run() { # model bs batches precision -> samples/s
    local out line extra=()
    [[ $4 == fp32 ]] || extra=(precision.name="$4" backend.cudnn_benchmark=true)
    [[ $4 == fp32 || $1 != cnn ]] || extra+=(model.memory_format=channels_last)
    out=$("$fulgur" fit "$scratch/$1.ini" backend.name=cuda data.dir="$data" data.batch_size="$2" "${extra[@]}" \
        trainer.max_epochs=2 trainer.limit_train_batches="$3" trainer.log_every_n_steps="$3" \
        trainer.check_val_every_n_epoch=0 trainer.test_after_fit=false \
        trainer.default_root_dir="$scratch/runs" 2>&1) || { echo "$out" >&2; return 1; }
    line=$(grep -E '^epoch 2/2 +train loss' <<<"$out") || { echo "$out" >&2; return 1; }
    sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' <<<"$line" | grep .
}

torch_run() { # mode model bs batches precision -> samples/s
    local out extra=()
    [[ $5 == fp32 ]] || extra=(--precision "$5" --channels-last --cudnn-benchmark)
    [[ $5 == fp32 || $1 != lightning ]] || { echo NA; return 0; }
    out=$("$python" "$here/torch_cuda_ref.py" --mode "$1" --model "$2" --batch-size "$3" \
        --batches "$4" --data-dir "$data" "${extra[@]}" 2>&1) || { echo "$out" | tail -20 >&2; echo NA; return 0; }
    sed -nE 's/^RESULT samples_per_s=([0-9.]+).*/\1/p' <<<"$out" | grep . || echo NA
}

median() { tr ' ' '\n' | awk 'NF && $1 != "NA"' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "NA"; exit }
    print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "NA" || b == "NA" || b == 0) print "NA"; else printf "%.3f", a / b }'; }

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1 || echo unknown)
echo "GPU: $gpu"
if [[ -n $results && ! -s $results ]]; then
    echo "date,gpu,model,batch_size,timed_batches,runs,fulgur,torch_eager,torch_compile,lightning,fulgur_over_eager,fulgur_over_compile,fulgur_over_lightning" >"$results"
fi
for prec in $precisions; do
for model in $models; do
    label=$model
    [[ $prec == fp32 ]] || label=$model/$prec
    for bs in $batch_sizes; do
        nb=$(batches_for "$bs")
        declare -A all=()
        for (( r = 1; r <= runs; r++ )); do
            v=$(fulgur_run "$model" "$bs" "$nb" "$prec") || { v=NA; fulgur_failed=1; }
            all[fulgur]+=" $v"
            for m in $modes; do all[$m]+=" $(torch_run "$m" "$model" "$bs" "$nb" "$prec")"; done
        done
        f=$(median <<<"${all[fulgur]}")
        e=$(median <<<"${all[eager]:-NA}"); c=$(median <<<"${all[compile]:-NA}")
        l=$(median <<<"${all[lightning]:-NA}")
        printf '%-15s bs %-5s fulgur %9s  eager %9s  compile %9s  lightning %9s  | fulgur/eager %s  /compile %s  /lightning %s\n' \
            "$label" "$bs" "$f" "$e" "$c" "$l" "$(ratio "$f" "$e")" "$(ratio "$f" "$c")" "$(ratio "$f" "$l")"
        [[ -z $results ]] || printf '%s,"%s",%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$gpu" \
            "$label" "$bs" "$nb" "$runs" "$f" "$e" "$c" "$l" "$(ratio "$f" "$e")" "$(ratio "$f" "$c")" \
            "$(ratio "$f" "$l")" >>"$results"
        unset all
    done
done
done
(( fulgur_failed == 0 )) || { echo "bench_cuda: a fulgur run failed (its output is above)" >&2; exit 1; }
