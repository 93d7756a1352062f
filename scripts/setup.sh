#!/usr/bin/env bash
# Sets up vtrun on Debian 12: installs the Debian packages it needs (only those missing, so
# it is safe to run again), then configures and builds into build/.
#
#   bash scripts/setup.sh            # install what is missing, configure, build
#   bash scripts/setup.sh --deps     # only install packages
#
# Works as root or as a user with sudo. Environment: BUILD_DIR (default: build),
# BUILD_TYPE (default: Release), JOBS (default: all CPUs).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(
  g++ cmake ninja-build pkg-config          # toolchain
  libtorch-dev                              # LibTorch 1.13 (CPU): ATen tensors and autograd
  libgloo-dev                               # Gloo headers for c10d's ProcessGroupGloo (data parallelism)
  libluajit2-5.1-dev                        # the embedded Lua
  librocksdb-dev libzstd-dev zlib1g-dev     # the store (zstd-compressed logs), gzip data
  dataset-fashion-mnist                     # Fashion-MNIST (IDX, gzip)
  libssl-dev                                # SHA-256 through OpenSSL's EVP API
  librandom123-dev                          # Philox counter-based RNG
  nlohmann-json3-dev                        # safetensors headers
  libreadline-dev                           # the REPL
  libopenblas0-openmp libblis4-openmp libblas3  # BLAS variants (device profiles)
  catch2                                    # C++ unit tests
  python3-numpy                             # .npy interoperability test
  gnuplot-nox                               # PNG plots of the experiments (scripts/experiments)
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then
      SUDO=(sudo)
    else
      echo "setup: need root or sudo to install: ${missing[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

[[ "${1:-}" == "--deps" ]] && exit 0

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}"
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "setup: built $BUILD_DIR/vtrun"
