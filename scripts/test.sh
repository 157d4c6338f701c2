#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the C++ suites (ctest), the
# Python suite (pytest under the project's virtual environment, scripts/venv.sh), the wheel that
# `pip install .` builds, installed into a throwaway environment and used from outside the clone
# (scripts/wheel_check.sh), and the fuzz targets (scripts/fuzz.sh; built beside ctest and pytest).
# Each part prints its wall time, and pytest its slowest tests.
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
# The fuzz targets (clang, ASan+UBSan, their own build folder) build while ctest and pytest run:
# the build keeps two cores busy for minutes where the tests mostly use one.
fuzz_log=${FUZZ_BUILD_DIR:-build-fuzz}/build.log
mkdir -p "$(dirname "$fuzz_log")"
nice -n 10 ./scripts/fuzz.sh --build-only >"$fuzz_log" 2>&1 &
fuzz_build=$!
trap 'kill "$fuzz_build" 2>/dev/null || true' EXIT
timed ctest bash -c "cd '$build_dir' && ctest --output-on-failure --timeout 600 -j $(nproc)"
# -rs: each skip and its reason; --durations: where the suite's time goes
timed pytest ./scripts/python -m pytest -q -rs --durations=12 python/tests
timed wheel ./scripts/wheel_check.sh
# The readers under libFuzzer: a fixed number of runs with a fixed seed.
start=$SECONDS
if ! wait "$fuzz_build"; then
  echo "test.sh: building the fuzz targets failed:"; cat "$fuzz_log"; exit 1
fi
echo "test.sh: the fuzz targets' build ran $((SECONDS - start)) s past the tests"
timed fuzz ./scripts/fuzz.sh
