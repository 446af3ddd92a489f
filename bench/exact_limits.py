"""Measure the limits of qtheory.exact_stationary at (lam, p) = (0.9, 0.1).

For each N: find the smallest truncation level K whose boundary mass P(M = K) is below
1e-8 (predicted from a cheaper solve by extrapolating the geometric tail of the law of
the longest queue, then checked), solve at K in a fresh subprocess, and print the number
of states, wall time, peak resident memory and the boundary mass.  The largest N solved
in under 60 s and 4 GB is the figure reported in the exact chapter's closing note.

Usage:  OPENBLAS_NUM_THREADS=1 python bench/exact_limits.py [N ...]   (default 1 2 3 4 5)
Run it on a quiet machine: it takes a few minutes.
"""

import json
import math
import subprocess
import sys

import numpy as np

LAM, P, TARGET = 0.9, 0.1, 1e-8

CHILD = r"""
import json, resource, sys, time
import qtheory
n, K = int(sys.argv[1]), int(sys.argv[2])
qtheory.exact_stationary(2, 0.5, 0.1, max_queue=3)           # compile outside the timing
qtheory.exact_stationary(2, 0.5, 0.1, max_queue=3, method="gmres")
t = time.perf_counter()
r = qtheory.exact_stationary(n, %r, %r, max_queue=K, memory_limit=16e9)
dt = time.perf_counter() - t
print(json.dumps(dict(n=n, K=K, states=r.n_states, seconds=dt,
                      peak_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
                      estimate_gb=qtheory.exact.exact_memory_estimate(n, K) / 1e9,
                      boundary=r.boundary_mass, trunc=r.truncation_error_estimate,
                      iterations=r.iterations, method=r.method,
                      mean=r.mean_queue_length, residual=r.residual)))
""" % (LAM, P)


def predict_K(n):
    """Truncation level with P(M = K) < TARGET, from a solve at a small level."""
    import qtheory
    K0 = {1: 60, 2: 50, 3: 40, 4: 30}.get(n, 24)
    r = qtheory.exact_stationary(n, LAM, P, max_queue=K0)
    law = r.longest_queue_law
    lv = np.arange(K0 - 12, K0 - 3)
    slope, icpt = np.polyfit(lv, np.log(law[lv]), 1)
    return int(math.ceil((math.log(TARGET) - icpt) / slope))


def run(n, K):
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(K)],
                         capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(ns):
    print(f"lam={LAM}, p={P}, boundary mass target {TARGET:g}")
    print(f"{'N':>2} {'K':>4} {'states':>10} {'time s':>8} {'peak GB':>8} {'est GB':>7} "
          f"{'P(M=K)':>9} {'its':>5} {'mean':>12}")
    for n in ns:
        K = predict_K(n)
        for _ in range(3):
            row = run(n, K)
            if row["boundary"] < TARGET:
                break
            K += 3
        print(f"{n:>2} {K:>4} {row['states']:>10} {row['seconds']:>8.2f} "
              f"{row['peak_gb']:>8.2f} {row['estimate_gb']:>7.2f} {row['boundary']:>9.2e} "
              f"{row['iterations']:>5} {row['mean']:>12.8f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 2, 3, 4, 5])
