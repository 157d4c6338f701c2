#!/usr/bin/env bash
# Installs the Debian packages remat needs (only those missing), then configures and builds it in
# build/. Safe to run again: it does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  g++ cmake ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev libboost-graph-dev
  googletest libgtest-dev libbenchmark-dev
  python3-dev pybind11-dev python3-torch python3-torchvision python3-networkx python3-pytest
  coinor-libcbc-dev coinor-libclp-dev libgecode-dev python3-scipy ccache
  clang-14 libclang-rt-14-dev  # the libFuzzer targets (scripts/fuzz.sh): clang and libFuzzer
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
# ccache makes a rebuild in a fresh clone (CI) cheap after the first one.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache ${REMAT_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
