"""Time and accuracy of qtheory.fluid_trajectory at (lam, p) = (0.99, 0.05).

Run: PYTHONPATH=. python bench/fluid_speed.py
Prints the wall time of one solve (check=False) and of a checked solve (check=True,
two solves) to t = 1e4 on 1001 output times, warm (after numba compilation), the best
of 5 runs; then the accuracy: the largest l1 difference between the solve and a
refined solve (half step, twice the event sampling), the l1 distance to the invariant
state at t = 1e4 and at t = 4e4, and the invariant-state drift over [0, 1e4].
"""

import time

import numpy as np

import qtheory as qt
from qtheory.fluid import _NSUB, _THETA, _check_invariants, _solve

lam, p = 0.99, 0.05
times = np.linspace(0.0, 1e4, 1001)
qt.fluid_trajectory(lam, p, [0.0, 1.0])  # compile / load the cache


def best(f, n=5):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


t1 = best(lambda: qt.fluid_trajectory(lam, p, times, check=False))
t2 = best(lambda: qt.fluid_trajectory(lam, p, times, check=True))
x0 = np.array([1.0])
a = _check_invariants(_solve(lam, p, x0, times, _THETA, _NSUB, None)[0], lam, p)
b = _check_invariants(_solve(lam, p, x0, times, _THETA / 4, 4 * _NSUB, None)[0], lam, p)
inv = qt.invariant_state(lam, p)
far = qt.fluid_trajectory(lam, p, [0.0, 4e4])
stay = qt.fluid_trajectory(lam, p, times, inv)
print(f"lam={lam}, p={p}, t_end=1e4, {times.size} output times, levels={a.shape[1] - 1}")
print(f"one solve (check=False): {t1 * 1e3:.1f} ms")
print(f"checked solve (check=True): {t2 * 1e3:.1f} ms")
print(f"max l1 difference to a solve with 1/4 step, 4x event sampling: "
      f"{qt.fluid.l1_distance(a, b).max():.2e}")
print(f"l1 distance to invariant state at t=1e4: {qt.fluid.l1_distance(a[-1], inv):.3e}")
print(f"l1 distance to invariant state at t=4e4: {qt.fluid.l1_distance(far[-1], inv):.3e}")
print(f"started at the invariant state, max l1 drift on [0, 1e4]: "
      f"{qt.fluid.l1_distance(stay, inv).max():.2e}")
print(f"relaxation rate: {qt.relaxation_rate(lam, p):.6f} per mean service time")
