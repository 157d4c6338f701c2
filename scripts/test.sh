#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the C++ suites (ctest) and the
# Python suite (pytest under /usr/bin/python3, the interpreter that has Debian's PyTorch).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
build_dir=${REMAT_BUILD_DIR:-build}
(cd "$build_dir" && ctest --output-on-failure --timeout 600 -j "$(nproc)")
if [ -d python/tests ]; then
  PYTHONPATH="$PWD/$build_dir/python:$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
    /usr/bin/python3 -m pytest -q python/tests
fi
