#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (build-fuzz/, ASan+UBSan) and runs each one
# for a fixed number of runs with a fixed seed over the seed corpus (examples/, tests/data/), so a
# reader or solver that crashes, trips a sanitizer or breaks an invariant fails. Prints the counts.
#   scripts/fuzz.sh                 # 2000 runs per reader, 200 of the solvers (scripts/test.sh)
#   FUZZ_RUNS=0 FUZZ_SECONDS=600 scripts/fuzz.sh   # 10 minutes per target, corpus kept in build-fuzz/
#   FUZZ_TARGETS=solve FUZZ_RUNS=0 FUZZ_SECONDS=600 scripts/fuzz.sh   # one target
#   scripts/fuzz.sh --build-only    # builds the targets, runs none (scripts/test.sh, beside pytest)
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${FUZZ_CXX:-clang++-14}
command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found; skipping the fuzz targets" >&2; exit 0; }
build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
runs=${FUZZ_RUNS:-2000}
solve_runs=${FUZZ_RUNS:-200}  # each input runs every solver
seconds=${FUZZ_SECONDS:-0}
read -r -a targets <<<"${FUZZ_TARGETS:-graph_json networkx chain_json plan_json budget solve}"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}  # as scripts/setup.sh: clones share entries
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DREMAT_FUZZ=ON -DREMAT_PYTHON=OFF -DREMAT_TESTS=OFF -DREMAT_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null
[ "${1:-}" = "--build-only" ] && exit 0
seeds=(examples tests/data)
# CoinUtils' presolve leaks a few bytes per LP (tests/lsan.supp); findings go to the build folder.
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
status=0
for t in "${targets[@]}"; do
  corpus="$build_dir/corpus/$t"
  mkdir -p "$corpus"
  args=(-seed=1 -max_len=65536 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
    -artifact_prefix="$build_dir/")
  n=$runs
  [ "$t" = solve ] && n=$solve_runs
  if [ "$seconds" -gt 0 ]; then args+=(-max_total_time="$seconds"); else args+=(-runs="$n"); fi
  log="$build_dir/fuzz_$t.log"
  if "$build_dir/tests/fuzz/fuzz_$t" "${args[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1; then
    done_runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz_$t: $done_runs runs, 0 crashes, corpus $(ls "$corpus" | wc -l) files"
  else
    echo "fuzz_$t: FAILED (see $log)"; tail -30 "$log"; status=1
  fi
done
exit $status
