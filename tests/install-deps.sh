#!/usr/bin/env bash
# Installs the Debian 12 packages fulgur needs that are missing; installs nothing when all
# are present. Runs apt-get as root, or through sudo.
set -euo pipefail
packages=(build-essential cmake pkg-config libinih-dev zlib1g-dev libopenblas-dev
          libopenmpi-dev openmpi-bin libjansson-dev dataset-fashion-mnist tmux python3
          libpng-dev libjpeg-dev python3-pil python3-torchvision)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
