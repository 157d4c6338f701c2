#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job on a bundled example: every solver at
# three budgets on a 100-node random-layered graph (the MOCCASIN data set's RL 1): the baseline and
# FastSA, each plan judged by the simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
build_dir=${REMAT_BUILD_DIR:-build}
"$build_dir/src/remat" info examples/rl100.json
echo
"$build_dir/src/remat" compare examples/rl100.json --budgets 90%,80%,70% \
  --solvers "${REMAT_DEMO_SOLVERS:-none,fastsa}" --time-limit 10
