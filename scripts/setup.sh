#!/usr/bin/env bash
# Installs what is missing, then configures and builds remat in build/: the Debian packages of the
# C++ side (only those missing), the Python virtual environment (scripts/venv.sh: PyTorch and the
# rest of requirements-dev.txt, outside the clone), and the build with that environment's
# interpreter and pybind11. Safe to run again: it does nothing that is already done.
#   REMAT_BUILD_DIR=DIR    build there instead of build/
#   REMAT_CMAKE_ARGS=...   more CMake arguments (-DREMAT_PYTHON=OFF: no extension, no environment)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  g++ cmake ninja-build pkg-config ccache
  nlohmann-json3-dev libcli11-dev libfmt-dev libboost-graph-dev
  googletest libgtest-dev libbenchmark-dev
  coinor-libcbc-dev coinor-libclp-dev libgecode-dev
  python3-venv python3-dev  # the interpreter of the virtual environment, and its headers
  clang-14 libclang-rt-14-dev  # the libFuzzer targets (scripts/fuzz.sh): clang and libFuzzer
  clang-format  # the format test (scripts/format_check.sh)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build_dir=${REMAT_BUILD_DIR:-build}
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
if [[ " ${REMAT_CMAKE_ARGS:-} " != *" -DREMAT_PYTHON=OFF "* ]]; then
  venv=$(./scripts/venv.sh)
  cmake_args+=(-DPython_EXECUTABLE="$venv/bin/python"
               -Dpybind11_DIR="$("$venv/bin/python" -m pybind11 --cmakedir)")
fi
# ccache makes a rebuild in a fresh clone (CI) cheap after the first one: paths under the clone
# are hashed relative to it, so a clone in another folder hits the same entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
start=$SECONDS
cmake -S . -B "$build_dir" -G Ninja "${cmake_args[@]}" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  ${REMAT_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
echo "setup: configure and build took $((SECONDS - start)) s" >&2
