#!/usr/bin/env bash
# Downloads, on a Debian 12 machine, the Debian packages that building vtrun on a GPU machine
# needs besides its LibTorch (scripts/gpu/build.sh): headers and libraries of LuaJIT, RocksDB
# and its codecs, OpenSSL, readline, zstd, zlib, Random123, nlohmann-json and Gloo's headers.
# They are unpacked there into a prefix (never into /), so the GPU machine needs no package
# registry and no root.
#
#   bash scripts/gpu/debs.sh [DIR]     # default DIR: .gpu-debs (git-ignored)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dir=${1:-.gpu-debs}
mkdir -p "$dir"
packages=(
  libluajit-5.1-dev libluajit-5.1-2 libluajit-5.1-common
  librocksdb-dev librocksdb7.8 libgflags2.2 libsnappy1v5 liblz4-1 libbz2-1.0
  libssl-dev libssl3 libreadline-dev libreadline8 libzstd-dev libzstd1 zlib1g-dev zlib1g
  librandom123-dev nlohmann-json3-dev libgloo-dev
)
(cd "$dir" && apt-get download "${packages[@]}")
ls -la "$dir"
