#!/usr/bin/env bash
# Checks `pip install .`: builds the wheel (pyproject.toml: scikit-build-core over CMake) with the
# project's environment's build tools, installs it into a throwaway virtual environment (no
# PyTorch), and plans a small graph there from outside the clone. The wheel's build folder is
# build-wheel/ and its compiler runs through ccache, so a rebuild of unchanged sources is cheap;
# the compiler is the one scripts/setup.sh's build picks (CMake's default, c++: ccache keys on
# the compiler's name too), not the Python build's (x86_64-linux-gnu-g++, which scikit-build-core
# would take from sysconfig), so the two builds share ccache's entries.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(./scripts/venv.sh)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
launcher=${CMAKE_CXX_COMPILER_LAUNCHER:-$(command -v ccache || true)}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}  # as scripts/setup.sh
CXX=${CXX:-c++} CMAKE_CXX_COMPILER_LAUNCHER=$launcher CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  "$venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-build-isolation \
  --no-deps --wheel-dir "$tmp/dist" --config-settings build-dir=build-wheel .
base=$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')
"$base/bin/python3" -m venv "$tmp/env"
"$tmp/env/bin/python" -m pip install --quiet --disable-pip-version-check --no-index "$tmp"/dist/*.whl
cd "$tmp"
env -u PYTHONPATH "$tmp/env/bin/python" - <<'PY'
import sys

import remat

assert remat.__file__.startswith(sys.prefix), remat.__file__
values = [{"name": n, "size": 100} for n in ("x", "a", "b", "c")]
values[-1]["output"] = True  # a graph computes something: the chain's end
nodes = [{"name": f"f{i}", "cost": 1, "inputs": [i], "outputs": [i + 1]} for i in range(3)]
graph = remat.Graph.build("chain", values=values, nodes=nodes)
result = remat.solve(graph, "100%", solver="auto", work_limit=1)
assert result.peak_bytes == remat.simulate(graph, result.sequence).peak_bytes
print(f"wheel: remat {remat.__file__} solved a 3-node chain ({result.status}, "
      f"peak {result.peak_bytes} B); solvers: {', '.join(remat.solvers())}")
PY
