#!/bin/sh
# fulgur generate on the emulated CUDA backend (or a real one: tests/cuda/gpu_checks.sh passes
# the real plugin directory): trains examples/char_lm.ini for BATCHES
# batches on the CPU backend, then continues a prompt greedily (top-k 1) from that checkpoint
# on the CPU backend and on the emulated cuda backend with the KV cache (attention_decode)
# and without it (a full forward per token). The three texts must be the same bytes.
#   emu_generate.sh FULGUR EMU_PLUGIN_DIR CONFIG DATA_DIR BATCHES
# Exits 77 (skipped) without the corpus.
set -u
fulgur=$1 plugins=$2 cfg=$3 data=$4 batches=$5
[ -e "$data" ] || { echo "skip: no $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
common="trainer.max_epochs=1 trainer.limit_train_batches=$batches trainer.limit_val_batches=1
  trainer.test_after_fit=false data.num_workers=0 trainer.default_root_dir=$tmp/runs
  data.batch_size=8 data.dir=$data trainer.enable_progress_bar=false"
# shellcheck disable=SC2086
"$fulgur" fit "$cfg" $common >fit.out 2>&1 || { cat fit.out; echo "FAIL: cpu fit"; exit 1; }
gen() { # NAME [KEY=VALUE...]: the continuation into NAME.txt
    name=$1; shift
    # shellcheck disable=SC2086
    "$fulgur" --plugin-path "$plugins" generate "$cfg" --ckpt-path last --prompt "The " \
        --max-new-tokens 40 --top-k 1 --seed 1 $common "$@" >"$name.out" 2>"$name.err" ||
        { cat "$name.out" "$name.err"; echo "FAIL: generate $name"; exit 1; }
    # stdout is the text alone (the run's lines and the plugins' go to stderr)
    ! grep -qE "^(model|run folder): " "$name.out" && grep -q "^model: " "$name.err" ||
        { cat "$name.out"; echo "FAIL: generate $name: the run's lines are not on stderr alone"; exit 1; }
    grep -q "^The " "$name.out" || { cat "$name.out"; echo "FAIL: generate $name: no text after the prompt"; exit 1; }
    cp "$name.out" "$name.txt"
}
gen cpu backend.name=cpu
gen cuda_cache backend.name=cuda
gen cuda_nocache backend.name=cuda generate.kv_cache=false
grep -q "KV cache on" cuda_cache.err || { cat cuda_cache.err; echo "FAIL: no KV cache on cuda"; exit 1; }
status=0
for run in cuda_cache cuda_nocache; do
    if cmp -s cpu.txt "$run.txt"; then
        echo "ok: $run: the same $(wc -c <"$run.txt") bytes: $(head -c 60 "$run.txt")"
    else
        echo "FAIL: $run differs from the cpu backend's text"; od -c cpu.txt; od -c "$run.txt"
        status=1
    fi
done
# a trained model's greedy text is not one byte repeated
[ "$(od -An -v -tx1 cpu.txt | tr -s ' ' '\n' | sort -u | wc -l)" -gt 4 ] ||
    { echo "FAIL: the text has under 4 distinct bytes: the model did not train"; status=1; }
exit $status
