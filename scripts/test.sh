#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the C++ suites (ctest), the
# Python suite (pytest under /usr/bin/python3, the interpreter that has Debian's PyTorch).
#   scripts/test.sh              # everything, the fuzz targets included (scripts/fuzz.sh)
#   scripts/test.sh --sanitize   # the C++ suites only, built with ASan+UBSan in build-sanitize/
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  REMAT_BUILD_DIR=${REMAT_BUILD_DIR:-build-sanitize} REMAT_CMAKE_ARGS="-DREMAT_SANITIZE=ON \
-DREMAT_PYTHON=OFF -DREMAT_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo" ./scripts/setup.sh
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
  (cd "${REMAT_BUILD_DIR:-build-sanitize}" && ctest --output-on-failure --timeout 1800 -j "$(nproc)")
  exit 0
fi
./scripts/setup.sh
build_dir=${REMAT_BUILD_DIR:-build}
(cd "$build_dir" && ctest --output-on-failure --timeout 600 -j "$(nproc)")
if [ -d python/tests ]; then
  PYTHONPATH="$PWD/$build_dir/python:$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
    /usr/bin/python3 -m pytest -q python/tests
fi
# The readers under libFuzzer (clang, ASan+UBSan): a fixed number of runs with a fixed seed.
./scripts/fuzz.sh
