#!/usr/bin/env bash
# The fuzz check of CI: builds the libFuzzer targets of tests/fuzz with clang (CMake option
# VT_FUZZ, its own build directory; installs Debian's clang-14 and libclang-rt-14-dev if
# missing) and runs each from its seed corpus for FUZZ_SECONDS (ctest label `fuzz`). A crash,
# a sanitizer report, a leak, a timeout or an out-of-memory input fails its test; the input is
# kept under <build dir>/tests/fuzz/work/<target>/artifacts.
#
#   bash scripts/ci/fuzz.sh                       # every target, 30 s each
#   FUZZ_SECONDS=3600 bash scripts/ci/fuzz.sh     # longer
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_SECONDS (default 30), JOBS (default:
# all CPUs; that many fuzzers run at once).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

PACKAGES=(clang-14 libclang-rt-14-dev)
missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]} > 0)); then
  echo "fuzz: installing ${missing[*]}"
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}

CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVT_FUZZ=ON \
  -DVT_FUZZ_SECONDS="$FUZZ_SECONDS"
cmake --build "$BUILD_DIR" -j "$JOBS" --target vt_fuzzers
ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure -L fuzz
