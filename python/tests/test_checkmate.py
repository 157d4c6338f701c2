"""Checkmate's MILP checked by an independent solver: `--param write_mps=FILE` writes the model,
scipy.optimize.milp (HiGHS, in Debian's python3-scipy) solves it. Its optimum must equal CBC's
when CBC proves optimality, and lie between checkmate's lower bound and the simulated cost of
checkmate's plan (every plan checkmate returns is in the model's class). On small generated
graphs always; on VGG16's training graph (the MOCCASIN data) when the data is present."""

import os
import random

import numpy as np
import pytest

import remat

pytestmark = pytest.mark.skipif("checkmate" not in remat.solvers(),
                                reason="checkmate is not built (REMAT_WITH_CBC=OFF)")
optimize = pytest.importorskip("scipy.optimize", reason="scipy (python3-scipy) is not installed")
sparse = pytest.importorskip("scipy.sparse", reason="scipy (python3-scipy) is not installed")

DATA = os.environ.get("REMAT_BENCH_DATA") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "benchmarks", "moccasin")


def read_mps(path):
    """Free-format MPS as written by Clp: ROWS (N/L/G/E), COLUMNS, RHS, RANGES, BOUNDS
    (UP/LO/FX/BV/MI/PL/UI/LI), integers as BV bounds or MARKER INTORG blocks."""
    row_index, row_type, obj_row = {}, [], None
    col_index, c, integrality = {}, [], []
    ent_r, ent_c, ent_v = [], [], []
    rhs, ranges, lower, upper = {}, {}, {}, {}
    section, in_int = None, False
    for line in open(path):
        if not line.strip() or line.startswith('*'):
            continue
        if not line[0].isspace():
            section = line.split()[0]
            continue
        f = line.split()
        if section == 'ROWS':
            if f[0] == 'N':
                if obj_row is None:
                    obj_row = f[1]
                continue
            row_index[f[1]] = len(row_type)
            row_type.append(f[0])
        elif section == 'COLUMNS':
            if len(f) >= 3 and f[1] == "'MARKER'":
                in_int = f[2] == "'INTORG'"
                continue
            if f[0] not in col_index:
                col_index[f[0]] = len(c)
                c.append(0.0)
                integrality.append(1 if in_int else 0)
            j = col_index[f[0]]
            for k in range(1, len(f) - 1, 2):
                if f[k] == obj_row:
                    c[j] = float(f[k + 1])
                elif f[k] in row_index:
                    ent_r.append(row_index[f[k]]); ent_c.append(j); ent_v.append(float(f[k + 1]))
        elif section == 'RHS':
            for k in range(1 if len(f) % 2 == 1 else 0, len(f) - 1, 2):
                if f[k] in row_index:
                    rhs[row_index[f[k]]] = float(f[k + 1])
        elif section == 'RANGES':
            for k in range(1 if len(f) % 2 == 1 else 0, len(f) - 1, 2):
                ranges[row_index[f[k]]] = float(f[k + 1])
        elif section == 'BOUNDS':
            kind, name = f[0], f[2] if len(f) >= 3 else f[1]
            j = col_index[name]
            value = float(f[3]) if len(f) >= 4 else None
            if kind == 'UP': upper[j] = value
            elif kind == 'LO': lower[j] = value
            elif kind == 'FX': lower[j] = upper[j] = value
            elif kind == 'BV': lower[j], upper[j], integrality[j] = 0.0, 1.0, 1
            elif kind == 'MI': lower[j] = -np.inf
            elif kind == 'PL': upper[j] = np.inf
            elif kind == 'UI': upper[j], integrality[j] = value, 1
            elif kind == 'LI': lower[j], integrality[j] = value, 1
            else: raise ValueError(f'MPS bound type {kind} not handled')
    n, m = len(c), len(row_type)
    lo = np.array([lower.get(j, 0.0) for j in range(n)])
    up = np.array([upper.get(j, np.inf if not integrality[j] or j not in upper else upper[j]) for j in range(n)])
    rl, ru = np.full(m, -np.inf), np.full(m, np.inf)
    for i, t in enumerate(row_type):
        b = rhs.get(i, 0.0)
        if t == 'E':
            rl[i] = ru[i] = b
            if i in ranges:
                r = ranges[i]
                if r > 0: ru[i] = b + r
                else: rl[i] = b + r
        elif t == 'L':
            ru[i] = b
            if i in ranges: rl[i] = b - abs(ranges[i])
        elif t == 'G':
            rl[i] = b
            if i in ranges: ru[i] = b + abs(ranges[i])
    a = sparse.coo_matrix((ent_v, (ent_r, ent_c)), shape=(m, n)).tocsr()
    return np.array(c), a, rl, ru, lo, up, np.array(integrality)

def solve_mps(path, time_limit=60):
    c, a, rl, ru, lo, up, integ = read_mps(path)
    return optimize.milp(c, constraints=optimize.LinearConstraint(a, rl, ru), bounds=optimize.Bounds(lo, up),
                integrality=integ, options={'time_limit': time_limit, 'disp': False})


def random_graph(seed, layers=4, width=3):
    """A random layered DAG of layers*width nodes: each node reads one to three values of the two
    previous layers; the last layer's values are graph outputs."""
    rng = random.Random(seed)
    values = [{"name": "x", "size": rng.randint(10, 60)}]
    nodes, previous = [], [["x"]]
    for layer in range(layers):
        current = []
        for k in range(width):
            name = f"v{layer}_{k}"
            pool = [v for lay in previous[-2:] for v in lay]
            inputs = sorted(set(rng.sample(pool, min(len(pool), rng.randint(1, 3)))))
            values.append({"name": name, "size": rng.randint(10, 60),
                           "output": layer == layers - 1})
            nodes.append({"name": f"n{layer}_{k}", "cost": rng.randint(1, 20), "inputs": inputs,
                          "outputs": [name]})
            current.append(name)
        previous.append(current)
    return remat.Graph.build(f"random{seed}", values, nodes)


def cross_check(graph, budget, tmp_path, time_limit):
    path = str(tmp_path / "model.mps")
    r = remat.solve(graph, budget, "checkmate", time_limit=time_limit, write_mps=path)
    counters = dict(r.counters)
    scale = counters["objective_scale"]
    highs = solve_mps(path, time_limit=4 * time_limit)
    tolerance = 1e-6 * max(1.0, abs(r.cost))
    if highs.status == 2:  # proved infeasible: then no plan of the class fits
        assert not r.feasible or r.status != "optimal"
        return r, None
    assert highs.status == 0, highs.message
    optimum = highs.fun * scale
    if r.status == "optimal":
        assert optimum == pytest.approx(r.cost, rel=1e-9, abs=1e-6)
    if r.feasible:
        assert optimum <= r.cost + tolerance  # checkmate's plan is in the model's class
    if r.cost_lower_bound is not None and r.feasible:
        assert r.cost_lower_bound <= optimum + tolerance
    return r, optimum


# Seeds whose 90 % budget has a plan in the node order (seeds 3 and 7 have none even at 95 %: CBC
# and HiGHS both say so); at 80 % some have none (seed 8), and then checkmate must not claim a fit.
# Seed 2, and the 80 % budgets of seeds 2, 5 and 6 that no plan meets, took CBC its whole time
# limit each without adding a case the others lack.
@pytest.mark.parametrize("seed, fraction", [(1, 0.9), (4, 0.9), (4, 0.8), (5, 0.9), (6, 0.9),
                                            (8, 0.9), (8, 0.8)])
def test_highs_agrees_with_cbc_on_small_graphs(seed, fraction, tmp_path):
    graph = random_graph(seed)
    peak = remat.baseline(graph)[0]
    budget = max(int(fraction * peak), remat.memory_lower_bound(graph))
    r, optimum = cross_check(graph, budget, tmp_path, time_limit=5)
    if optimum is None:  # HiGHS proved that no plan in the node order fits
        assert fraction == 0.8 and not r.feasible
        return
    assert r.status == "optimal", (seed, budget, r.status)  # 12 nodes: CBC proves it


def test_highs_agrees_with_cbc_on_vgg16_train(tmp_path):
    # A published graph (45 nodes; CBC proves it in seconds). CM 1, fcn8's training graph, checks
    # the same in about a minute.
    path = os.path.join(DATA, "VGG16_256_224_224_3_train.nx.json")
    if not os.path.exists(path):
        pytest.skip(f"MOCCASIN data absent ({path})")
    graph = remat.load(path)
    r, optimum = cross_check(graph, 0.9, tmp_path, time_limit=60)
    assert r.status == "optimal" and optimum is not None
