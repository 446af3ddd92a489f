"""Concentration of the stationary laws on the invariant state: the fitted rates.

Runs qb.concentration_study with longer simulations than the book can afford and
prints, for each (lam, p), one row per N and power-law fits c N^(-alpha) of
E||s^N - s^I||_1, the spill-over E s_{i*+1}, the bias ||E s^N - s^I||_1 and the excess
of the mean queue over the fluid value (for lam < p: N times the mean queue).

Usage:  OPENBLAS_NUM_THREADS=1 python bench/concentration.py [events_per_run]
(default 3e8 events per run, two runs per simulated N; a few minutes in all.)
"""

import sys
import time

import numpy as np

import qtheory
from qtheory import book as qb

CASES = [(0.9, 0.1), (0.99, 0.05), (0.7, 0.2), (0.3, 0.5)]
N_VALUES = [1, 2, 3, 10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000]


def main(events):
    for lam, p in CASES:
        t = time.perf_counter()
        c = qb.concentration_study(lam, p, N_VALUES, events_per_run=events,
                                        seed=2026, exact_max_states=200_000)
        print(f"\nlam={lam}, p={p}: i*={c.top_level}, fluid mean {c.fluid_mean:.6f}, "
              f"{time.perf_counter() - t:.0f} s, {events:.0e} events per run")
        print(f"{'N':>7} {'method':>10} {'mean':>20} {'N*mean':>9} {'distance':>20} "
              f"{'bias':>9} {'spill':>20} {'T':>9}")
        for k, n in enumerate(c.n_stations):
            print(f"{n:>7} {c.method[k]:>10} "
                  f"{c.mean_queue_length[k]:>10.6f}±{c.mean_half_width[k]:<9.6f} "
                  f"{n * c.mean_queue_length[k]:>9.4f} "
                  f"{c.distance[k]:>10.6f}±{c.distance_half_width[k]:<9.6f} "
                  f"{c.bias[k]:>9.6f} {c.spill[k]:>10.6f}±{c.spill_half_width[k]:<9.6f} "
                  f"{c.t_end[k]:>9.3g}")
        for qn in ("distance", "spill", "bias", "mean_excess"):
            for lo, hi in ((10, 1e5), (100, 1e5)):
                try:
                    a, cc = c.fit(qn, n_min=lo, n_max=hi)
                    print(f"  fit {qn:>11} on {lo:g} <= N <= {hi:g}: alpha = {a:.3f}, "
                          f"c = {cc:.4g}")
                except ValueError as e:
                    print(f"  fit {qn:>11}: {e}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 3e8)
