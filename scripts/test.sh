#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the C++ suites (ctest), the
# Python suite (pytest under the project's virtual environment, scripts/venv.sh), the wheel that
# `pip install .` builds, installed into a throwaway environment and used from outside the clone
# (scripts/wheel_check.sh), and the fuzz targets (scripts/fuzz.sh). Each part prints its wall time.
#   scripts/test.sh              # everything
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

timed() {  # timed NAME COMMAND...: runs it and prints how long it took
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - start)) s"
}
timed setup ./scripts/setup.sh
build_dir=${REMAT_BUILD_DIR:-build}
timed ctest bash -c "cd '$build_dir' && ctest --output-on-failure --timeout 600 -j $(nproc)"
# -rs: each skip and its reason; --durations: where the suite's time goes
timed pytest ./scripts/python -m pytest -q -rs --durations=12 python/tests
timed wheel ./scripts/wheel_check.sh
# The readers under libFuzzer (clang, ASan+UBSan): a fixed number of runs with a fixed seed.
timed fuzz ./scripts/fuzz.sh
