#!/usr/bin/env bash
# Packs what tests/cuda/gpu_checks.sh needs on a GPU machine that cannot build fulgur (no
# inih, jansson or OpenBLAS there, and no package registry): run HERE, on the build machine.
#
#   tests/cuda/gpu_bundle.sh [BUILD_DIR]     (default build-cuda; a Release build is best)
#
# Writes .gpu/ in the repository root (and adds /.gpu/ to .git/info/exclude, so it is an
# ignored path the device tool can carry):
#   .gpu/bundle.tar.xz  bin/fulgur, bin/test_parity, bin/sdpa_aot, lib/libfulgur.so*, the plugins,
#                       and lib/deps/: the shared libraries they need beyond glibc, libstdc++
#                       and CUDA's own (inih, jansson, OpenBLAS, gfortran, quadmath, zlib)
#   .gpu/data/          Fashion-MNIST (the four .gz files of dataset-fashion-mnist) and
#                       fortunes.tar.xz, the text files of Debian's fortunes package that
#                       examples/char_lm.ini trains on (when installed here)
# Then, from the session: run(command="bash tests/cuda/gpu_checks.sh", carry=[".gpu"],
# timeout_s=600). The bundle must stay under the tool's 64 MiB (checked here).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build-cuda}
[[ $build = /* ]] || build="$root/$build"
data=/usr/share/datasets/fashion-mnist
die() { echo "gpu_bundle: $*" >&2; exit 2; }

[[ -x $build/bin/fulgur ]] || die "no $build/bin/fulgur: build first (cmake --build $build --target fulgur_cli ...)"
[[ -x $build/bin/test_parity ]] || die "no $build/bin/test_parity (cmake --build $build --target test_parity)"
[[ -f $build/lib/fulgur/plugins/fulgur-backend-cuda.so ]] || die "the CUDA backend is not built in $build"
[[ -r $data/train-images-idx3-ubyte.gz ]] || die "no Fashion-MNIST in $data (Debian package dataset-fashion-mnist)"

stage=$(mktemp -d /tmp/fulgur-gpu-bundle.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib/fulgur/plugins" "$stage/lib/deps"
cp "$build/bin/fulgur" "$build/bin/test_parity" "$stage/bin/"
[[ -x $build/bin/sdpa_aot ]] && cp "$build/bin/sdpa_aot" "$stage/bin/"
cp -P "$build"/lib/libfulgur.so* "$stage/lib/"
cp "$build"/lib/fulgur/plugins/*.so "$stage/lib/fulgur/plugins/"
# debug sections only cost transfer size here
find "$stage" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec strip --strip-debug {} + 2>/dev/null || true

# Dependencies beyond the base system and CUDA: resolved here, copied by their soname.
skip='^(libfulgur|linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libgcc_s|libstdc\+\+|libcu|libcublas|libcudnn|libnccl|libnvrtc|libmpi|libopen-|libhwloc|libevent|libpmix|libfabric|libucx|libucp|libucs|libuct|libibverbs|librdmacm|libnl|libmunge|libpsm|libefa)'
for f in "$stage"/bin/* "$stage"/lib/libfulgur.so "$stage"/lib/fulgur/plugins/*.so; do
    ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -L "$path" "$stage/lib/deps/$name"
done
# plugins needing MPI stay behind: nothing on the GPU machine loads them in these checks
rm -f "$stage"/lib/fulgur/plugins/fulgur-comm-*.so "$stage"/lib/fulgur/plugins/fulgur-strategy-ddp.so \
      "$stage"/lib/fulgur/plugins/fulgur-strategy-sharded.so

mkdir -p "$root/.gpu/data"
tar -C "$stage" -cJf "$root/.gpu/bundle.tar.xz" bin lib
cp "$data"/*.gz "$root/.gpu/data/"
fortunes=/usr/share/games/fortunes
rm -f "$root/.gpu/data/fortunes.tar.xz"
if [[ -d $fortunes ]]; then
    # the plain text files only (not the strfile indexes .dat, nor the .u8 links)
    (cd "$fortunes" && find . -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' -printf '%P\n' |
        tar -cJf "$root/.gpu/data/fortunes.tar.xz" -T -)
else
    echo "gpu_bundle: no $fortunes (Debian package fortunes): the LM check will be skipped" >&2
fi
exclude=$(git -C "$root" rev-parse --git-path info/exclude 2>/dev/null || true)
if [[ -n $exclude ]]; then
    [[ $exclude = /* ]] || exclude="$root/$exclude"
    mkdir -p "$(dirname "$exclude")"
    grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
fi
size=$(du -sbL "$root/.gpu" | cut -f1)
echo "bundle: $(tar -tJf "$root/.gpu/bundle.tar.xz" | grep -c '[^/]$') files, .gpu/ is $((size / 1048576)) MiB"
tar -tJf "$root/.gpu/bundle.tar.xz" | grep 'lib/deps/' | sed 's/^/  /'
(( size < 60 * 1048576 )) || die ".gpu/ is $((size / 1048576)) MiB: over what the device tool carries with the tree"
echo 'next: run(command="bash tests/cuda/gpu_checks.sh", carry=[".gpu"], timeout_s=600)'
