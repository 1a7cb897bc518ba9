#!/bin/sh
# Trains an example for a few batches on the CPU backend and on the emulated CUDA backend
# (plugins/backend-cuda built against tests/cudaemu), and checks that the epoch's train loss
# and the val loss agree within TOL (relative).
#   emu_fit.sh FULGUR EMU_PLUGIN_DIR CONFIG PRECISION BATCHES TOL [DATA_DIR [KEY=VALUE...]]
# DATA_DIR is the dataset the config reads (default: Fashion-MNIST's); the KEY=VALUE
# overrides go to both runs. Exits 77 (skipped) without the dataset. From the environment:
# FGEMU_CUDA_ONLY, overrides for the emulated run alone (backend.attention=cudnn), and
# FGEMU_EXPECT_LOG, a text its plugins.log must contain (which attention ran).
set -u
fulgur=$1 plugins=$2 cfg=$3 precision=$4 batches=$5 tol=$6
data=${7:-/usr/share/datasets/fashion-mnist}
shift 6
[ $# -gt 0 ] && shift
extra="$*"
[ -d "$data" ] || { echo "skip: no $data"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
common="precision.name=$precision trainer.max_epochs=1 trainer.limit_train_batches=$batches
  trainer.limit_val_batches=2 trainer.test_after_fit=false trainer.log_every_n_steps=$batches
  data.num_workers=0 trainer.default_root_dir=$tmp/runs $extra"
# shellcheck disable=SC2086
"$fulgur" fit "$cfg" backend.name=cpu $common >cpu.out 2>&1 || { cat cpu.out; echo "FAIL: cpu run"; exit 1; }
# shellcheck disable=SC2086
"$fulgur" --plugin-path "$plugins" fit "$cfg" backend.name=cuda $common ${FGEMU_CUDA_ONLY:-} \
  >cuda.out 2>&1 ||
  { cat cuda.out; echo "FAIL: emulated cuda run"; exit 1; }
grep -q "backend cuda" cuda.out || { cat cuda.out; echo "FAIL: the run did not use backend cuda"; exit 1; }
if [ -n "${FGEMU_EXPECT_LOG:-}" ]; then
  logs=$(find "$tmp/runs" -name plugins.log | sort)
  # shellcheck disable=SC2086
  if [ -z "$logs" ] || ! grep -q -- "$FGEMU_EXPECT_LOG" $logs; then
    # shellcheck disable=SC2086
    cat cuda.out $logs; echo "FAIL: the emulated run's plugins.log does not say '$FGEMU_EXPECT_LOG'"
    exit 1
  fi
  echo "ok: plugins.log: $(grep -h -m1 -- "$FGEMU_EXPECT_LOG" $logs)"
fi
loss() { awk -v k="$2" '$0 ~ k { for (i = 1; i <= NF; i++) if ($i == "loss") { print $(i + 1); exit } }' "$1"; }
status=0
for what in "train loss" "^val "; do
  a=$(loss cpu.out "$what") b=$(loss cuda.out "$what")
  if [ -z "$a" ] || [ -z "$b" ]; then
    cat cpu.out cuda.out; echo "FAIL: no '$what' line"; exit 1
  fi
  if awk -v a="$a" -v b="$b" -v t="$tol" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * (a < 0 ? -a : a)) }'; then
    echo "ok: $cfg $precision $what: cpu $a, emulated cuda $b (tol $tol)"
  else
    echo "FAIL: $cfg $precision $what: cpu $a, emulated cuda $b differ by more than $tol relative"
    status=1
  fi
done
[ $status = 0 ] || { cat cpu.out cuda.out; }
exit $status
