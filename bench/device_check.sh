#!/usr/bin/env bash
# The GPU checks, for a lent machine that has CUDA, PyTorch and the compilers but none of remat's
# C++ dependencies and no network: the planned peak against torch.cuda.max_memory_allocated and
# the step time against eager, for the bundled examples (bench/examples_bench.py), where the
# measured peak departs from the live tensors call by call (bench/cuda_memory_check.py), the
# compile bench (bench/compile_bench.py --device cuda), a plan made on fake tensors run on the
# real model (bench/gpu_plan_for_check.py), and the executor's kernels against eager's
# (bench/gpu_executor_profile.py).
#
#   bench/device_check.sh fetch     # here: Debian's packages of the C++ dependencies to .devdeps/
#   bench/device_check.sh run [CHECK...]  # there: unpack them, build the extension, run the
#                                   # checks (default: examples memory compile; also compile_gpt2,
#                                   # compile_loose, plan_for, profile); all it prints also goes to
#                                   # $OUT/device_check.log
#   bench/device_check.sh build     # the unpacking and the build alone (to try them here)
#
# `run` unpacks the packages under /opt/remat-deps (never over /), builds the extension for the
# machine's own python3 (warnings are no errors there, and <cstdint> comes first in every file:
# its compiler is newer than CI's and its headers include less), and writes each bench's tables
# under $OUT (default /tmp/remat-device). REMAT_DEVICE_SECONDS caps each bench.
set -uo pipefail
cd "$(dirname "$0")/.."
deps_dir=.devdeps
packages=(
  libboost1.74-dev nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9
  coinor-libcbc-dev coinor-libcbc3 coinor-libcgl-dev coinor-libcgl1 coinor-libclp-dev
  coinor-libclp1 coinor-libcoinutils-dev coinor-libcoinutils3v5 coinor-libosi-dev
  coinor-libosi1v5 libgecode-dev libgecode49
  liblapack3 libblas3 libgfortran5 libquadmath0 libmpfr6 libgmp10
  pkgconf pkgconf-bin libpkgconf3
)

fetch() {
  mkdir -p "$deps_dir"
  grep -qx "/$deps_dir/" .git/info/exclude 2>/dev/null || echo "/$deps_dir/" >>.git/info/exclude
  (cd "$deps_dir" && apt-get download "${packages[@]}")
  du -sh "$deps_dir"
}

# Links the unpacked libraries need under their development names; a runtime library the machine
# has already is used from the machine (an older copy of ours would shadow it for PyTorch too).
link_libraries() {
  local lib=$1/usr/lib/x86_64-linux-gnu name found
  for name in libgfortran.so.5 libquadmath.so.0 libgmp.so.10 libmpfr.so.6; do
    if ldconfig -p | grep -q " $name "; then rm -f "$lib/$name"*; fi
  done
  ln -sf lapack/liblapack.so.3 "$lib/liblapack.so.3" && ln -sf liblapack.so.3 "$lib/liblapack.so"
  ln -sf blas/libblas.so.3 "$lib/libblas.so.3" && ln -sf libblas.so.3 "$lib/libblas.so"
  for name in libbz2 libz; do
    found=$(ldconfig -p | awk -v n="$name.so." 'index($1, n) == 1 {print $NF; exit}')
    [ -e "$lib/$name.so" ] || [ -z "$found" ] || ln -sf "$found" "$lib/$name.so"
  done
}

build() {
  local root=$1 py
  py=$(command -v python3)
  export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_LIBDIR=$root/usr/lib/x86_64-linux-gnu/pkgconfig:$root/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$root
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DREMAT_TESTS=OFF \
    -DREMAT_BENCH=OFF -DREMAT_WERROR=OFF -DCMAKE_CXX_FLAGS="-include cstdint" -DREMAT_WITH_CBC=AUTO -DREMAT_WITH_GECODE=AUTO \
    -DCMAKE_PREFIX_PATH="$root/usr" -DPKG_CONFIG_EXECUTABLE="$root/usr/bin/pkgconf" \
    -DPython_EXECUTABLE="$py" -Dpybind11_DIR="$("$py" -m pybind11 --cmakedir)" || return 1
  cmake --build build-device --target _remat --parallel "$(nproc)" 2>&1 | tail -n 30
  [ -e build-device/python/remat/_remat*.so ] || ls build-device/python/remat/_remat*.so
}

unpack_and_build() {
  local root=${REMAT_DEPS_ROOT:-/opt/remat-deps} start=$SECONDS
  mkdir -p "$root"
  g++ --version | head -n 1
  for f in "$deps_dir"/*.deb; do dpkg -x "$f" "$root"; done
  link_libraries "$root"
  build "$root" || { echo "device_check: the build failed" >&2; return 1; }
  echo "device_check: unpacking and build took $((SECONDS - start)) s"
  export PYTHONPATH=$PWD/build-device/python:$PWD/python PYTHONUNBUFFERED=1
  python3 -c "import remat; print('remat solvers:', remat.solvers())" || return 1
  echo "device_check: to use this build: export LD_LIBRARY_PATH=$LD_LIBRARY_PATH PYTHONPATH=$PYTHONPATH"
}

# Each check writes its tables under $out; rows print as they finish, so a check cut by its cap
# leaves them in the log. Each Inductor compile takes seconds there: one model and fraction per
# compile_bench call.
check_examples() {
  timeout "$seconds" python3 bench/examples_bench.py --device cuda --solvers auto \
    --budgets 100%,50%,25% --time-limit 10 --results "$out/examples_bench_cuda.md"
  echo "device_check: examples_bench exit $?"
}

check_memory() {
  timeout "$seconds" python3 bench/cuda_memory_check.py --budgets 50%,25% --top 3 \
    | tee "$out/cuda_memory_check.md"
  echo "device_check: cuda_memory_check exit $?"
}

check_compile() {
  timeout "$seconds" python3 bench/compile_bench.py --device cuda --models gpt --fractions 0.5 \
    --solvers auto --equal-peak-solver none --out "$out/compile_bench_cuda.json"
  echo "device_check: compile_bench exit $?"
  timeout "$seconds" python3 bench/compile_bench.py --device cuda --models hf-llama \
    --fractions 0.3 --solvers auto --equal-peak-solver none --out "$out/compile_bench_cuda.json" \
    --append
  echo "device_check: compile_bench exit $?"
}

# The loose budget, where the compile path also plans the joint graph without the backward's copies
# of forward chains, held within PyTorch's default partition's memory.
check_compile_loose() {
  local model
  for model in gpt hf-llama; do
    timeout "$seconds" python3 bench/compile_bench.py --device cuda --models "$model" \
      --fractions 0.8 --solvers auto --torch-solvers greedy --equal-peak-solver none \
      --out "$out/compile_bench_cuda_loose.json" $([ "$model" = gpt ] || echo --append)
    echo "device_check: compile_bench exit $?"
  done
}

check_compile_gpt2() {
  timeout "$seconds" python3 bench/compile_bench.py --device cuda --models hf-gpt2 \
    --fractions 0.5 --solvers auto --torch-solvers ilp --equal-peak-solver none \
    --out "$out/compile_bench_cuda_gpt2.json"
  echo "device_check: compile_bench exit $?"
}

# A 1.1 B-parameter Llama planned on fake tensors and run for real: at batch 8 (its default
# schedule fits) and at batch 20 (it does not).
check_plan_for() {
  timeout "$seconds" python3 bench/gpu_plan_for_check.py --batches 8,20 --budgets 50%,56GB \
    --results "$out/gpu_plan_for_check.md"
  echo "device_check: gpu_plan_for_check exit $?"
}

# Where remat's executor spends GPU time that eager does not, at the default schedule.
check_profile() {
  timeout "$seconds" python3 bench/gpu_executor_profile.py --top 16 \
    --results "$out/gpu_executor_profile.md"
  echo "device_check: gpu_executor_profile exit $?"
}

run() {
  local checks=${*:-examples memory compile} check
  out=${OUT:-/tmp/remat-device} seconds=${REMAT_DEVICE_SECONDS:-200}
  for check in $checks; do
    declare -F "check_$check" >/dev/null || {
      echo "device_check: no check '$check' (examples, memory, compile, compile_gpt2," \
        "compile_loose, plan_for, profile)"
      return 2
    }
  done
  mkdir -p "$out"
  echo "device_check: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD \
    2>/dev/null || echo unknown), $(nproc) CPUs, checks: $checks"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda',
torch.cuda.is_available(), 'transformers', transformers.__version__)"
  unpack_and_build || return 1
  for check in $checks; do
    "check_$check"
  done
}

case "${1:-}" in
  fetch) fetch ;;
  run) shift
       mkdir -p "${OUT:-/tmp/remat-device}"
       run "$@" 2>&1 | tee "${OUT:-/tmp/remat-device}/device_check.log" ;;
  build) unpack_and_build ;;
  *) echo "usage: bench/device_check.sh fetch|run|build" >&2; exit 2 ;;
esac
