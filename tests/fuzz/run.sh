#!/bin/sh
# Runs one libFuzzer target for a bounded time (ctest test fuzz.<name>, tests/fuzz/CMakeLists.txt):
#
#   run.sh FUZZER SEED_DIR WORK_DIR SECONDS [DICT]
#
# The seeds are read, never written: new inputs go to WORK_DIR/corpus, a crashing input to
# WORK_DIR/artifacts (its path is printed). Exits non-zero if the fuzzer found a problem.
set -eu
fuzzer=$1 seeds=$2 work=$3 seconds=$4 dict=${5:-}
mkdir -p "$work/corpus" "$work/artifacts"
set -- -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/"
[ -n "$dict" ] && set -- "$@" -dict="$dict"
exec "$fuzzer" "$@" "$work/corpus" "$seeds"
