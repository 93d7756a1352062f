#!/usr/bin/env bash
# Builds vtrun on a machine with an NVIDIA GPU (README "GPU profile"): against the LibTorch of
# that machine's Python torch (a wheel built with CUDA, LibTorch 2.x), with LuaJIT, RocksDB,
# OpenSSL and the other libraries from the Debian 12 packages scripts/gpu/debs.sh downloaded,
# unpacked into a prefix (nothing is installed into /, no registry is needed). Debian's own
# build (LibTorch 1.13, CPU) is untouched: this one lives in its own build directory.
#
#   bash scripts/gpu/build.sh [DEBS_DIR] [BUILD_DIR]    # defaults: .gpu-debs build-gpu
#
# Environment: VT_DEPS_PREFIX (default /tmp/vt-deps), PYTHON (default python3), JOBS (nproc),
# BUILD_COMPARE=0 (skip the CUDA kernels' comparison program).
# Prints the lines `source`-able as the environment to run the build with (env.sh in BUILD_DIR).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
debs=${1:-.gpu-debs}
build=${2:-build-gpu}
prefix=${VT_DEPS_PREFIX:-/tmp/vt-deps}
python=${PYTHON:-python3}
jobs=${JOBS:-$(nproc)}

mkdir -p "$prefix"
for f in "$debs"/*.deb; do
  if command -v dpkg >/dev/null; then
    dpkg -x "$f" "$prefix"
  else  # a .deb is an ar archive holding data.tar.xz
    ar p "$f" data.tar.xz | tar xJ -C "$prefix"
  fi
done
torch=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$("$python" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
cuda=$("$python" -c 'import torch; print(torch.version.cuda or "none")')
echo "gpu build: LibTorch $("$python" -c 'import torch; print(torch.__version__)') (CUDA $cuda, C++11 ABI $abi) from $torch"
dist=ON
if [[ ! -f $torch/include/gloo/config.h ]]; then
  # Debian's Gloo headers are older than the Gloo inside a current LibTorch: no c10d then.
  echo "gpu build: $torch/include has no Gloo headers: building without data parallelism (VT_DIST=OFF)"
  dist=OFF
fi
lib=$prefix/usr/lib/x86_64-linux-gnu
cat > /tmp/vt-gpu-env.sh <<ENV
export LD_LIBRARY_PATH=$lib:$prefix/lib/x86_64-linux-gnu:$torch/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$lib/pkgconfig:$prefix/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$prefix
ENV
# shellcheck disable=SC1091
source /tmp/vt-gpu-env.sh
cuda_flags=()
if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  cuda_flags=(-DCMAKE_CUDA_ARCHITECTURES=90)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
  -DVT_TORCH_ROOT="$torch" -DVT_DIST=$dist -DCMAKE_PREFIX_PATH="$prefix/usr" \
  -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$abi -isystem $prefix/usr/include -isystem $prefix/usr/include/x86_64-linux-gnu" \
  -DOPENSSL_ROOT_DIR="$prefix/usr" -DCMAKE_DISABLE_FIND_PACKAGE_RocksDB=ON "${cuda_flags[@]}"
cmake --build "$build" -j "$jobs" --target vtrun
if [[ ${BUILD_COMPARE:-1} == 1 ]] && grep -q "vt_precision_cuda_compare" "$build/build.ninja"; then
  cmake --build "$build" -j "$jobs" --target vt_precision_cuda_compare
fi
cp /tmp/vt-gpu-env.sh "$build/env.sh"
echo "gpu build: done; run with: source $build/env.sh; $build/vtrun ..."
