#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job on a bundled example: the baseline and
# FastSA at 90/80/70 % on a 100-node random-layered graph (RL 1 of the MOCCASIN data set), each
# plan judged by the simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
build_dir=${REMAT_BUILD_DIR:-build}
"$build_dir/src/remat" info examples/rl100.json
echo
"$build_dir/src/remat" compare examples/rl100.json --budgets 90%,80%,70% \
  --solvers "${REMAT_DEMO_SOLVERS:-none,fastsa}" --time-limit 10
