"""The global random generators outside torch: Python's `random` module and numpy's legacy global
generator (`np.random`). A model may draw from them in its forward (a mask from np.random.rand, a
layerdrop choice from random.uniform). remat replays torch's draws; these it must either refuse
(a trace would keep their numbers: capture.py) or save and restore like torch's generator
around a block it runs again (checkpointable.py).

    before = host_random.state()
    ...                                   # code that may draw
    host_random.moved(before)             # ["numpy's global generator (`np.random`)"] or []
    host_random.set_state(before)
"""

import random


def state():
    """The generators' states: (Python's, numpy's or None where numpy is not installed)."""
    return random.getstate(), _numpy_state()


def set_state(saved):
    python, numpy_state = saved
    random.setstate(python)
    if numpy_state is not None:
        import numpy
        numpy.random.set_state(numpy_state)


def moved(since):
    """The names of the generators drawn from since `since` (a state()), empty when none."""
    python, numpy_state = since
    names = []
    if random.getstate() != python:
        names.append("Python's `random` module")
    now = _numpy_state()
    if now is not None and not _same_numpy_state(now, numpy_state):
        names.append("numpy's global generator (`np.random`)")
    return names


def _numpy_state():
    try:
        import numpy
    except ImportError:
        return None
    return numpy.random.get_state()


def _same_numpy_state(a, b):
    """Equal numpy legacy states: (name, key array, position, has_gauss, cached_gaussian)."""
    return a[0] == b[0] and (a[1] == b[1]).all() and a[2:] == b[2:]
