#!/usr/bin/env bash
# Installs the Debian 12 packages fulgur needs that are missing; installs nothing when all
# are present. Runs apt-get as root, or through sudo.
# chromium renders report.html in ctest ux.report_render (which skips without it); it is
# installed without its recommended packages (about 395 MiB, 24 packages, 115 MB to fetch);
# FULGUR_DEPS_NO_BROWSER=1 leaves it out. clang and its libFuzzer runtime (libclang-rt-14-dev,
# only recommended by clang) build the fuzz.* targets (tests/fuzz). slurmctld, slurmd,
# slurm-client and munge (Debian's Slurm 22.05, with srun's mpi/pmix) run the two-node
# cluster of tests/cluster, in network namespaces (iproute2: ip, tc; util-linux: nsenter).
set -euo pipefail
packages=(build-essential cmake pkg-config libinih-dev zlib1g-dev libopenblas-dev
          libopenmpi-dev openmpi-bin libjansson-dev dataset-fashion-mnist tmux python3
          libpng-dev libjpeg-dev python3-pil python3-torchvision clang libclang-rt-14-dev
          fortunes libdnnl-dev slurmctld slurmd slurm-client munge iproute2 util-linux)
browser=(chromium)
[ "${FULGUR_DEPS_NO_BROWSER:-0}" = 1 ] && browser=()
missing() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t need < <(missing "${packages[@]}")
mapfile -t need_browser < <(missing "${browser[@]}")
[ ${#need[@]} -eq 0 ] && [ ${#need_browser[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${need[*]} ${need_browser[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -q
[ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}"
[ ${#need_browser[@]} -eq 0 ] ||
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need_browser[@]}"
