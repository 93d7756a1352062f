#!/usr/bin/env bash
# The sanitizer check of CI: builds vtrun, vt_tests and the libraries with AddressSanitizer and
# UndefinedBehaviorSanitizer (CMake option VT_SANITIZE, gcc, its own build directory), then runs
# the Catch2 and Lua tests under them. Any report (out-of-bounds access, use after free, leak,
# undefined behaviour) fails the test that caused it.
#
#   bash scripts/ci/sanitize.sh                 # configure, build, test
#   SANITIZE_TESTS='^lua\.' bash scripts/ci/sanitize.sh   # another ctest -R selection
#
# Environment: SANITIZE_BUILD_DIR (default build-sanitize), JOBS (default: all CPUs),
# SANITIZE_TESTS (ctest -R regex; default: the unit and Lua tests and the quickstart; the long
# protocol, experiment and profile-pair scripts run the same code at length and are left to
# the plain build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

BUILD_DIR=${SANITIZE_BUILD_DIR:-build-sanitize}
JOBS=${JOBS:-$(nproc)}
TESTS=${SANITIZE_TESTS:-'^(unit\.|lua\.|examples\.quickstart$)'}

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVT_SANITIZE=ON
cmake --build "$BUILD_DIR" -j "$JOBS"

# Reports abort the process (a test then fails). vt_tests checks for leaks at exit, vtrun does
# not (bindings/main.cc: Lua's allocator hides its references). An allocation too large for
# the machine fails as it would without ASan (the tests check those errors).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:check_initialization_order=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure -R "$TESTS"
