"""Time to a precise answer: the planned +-0.02 estimate at (0.99, 0.05), N = 1e4.

Run from the repository root (about a minute on two quiet cores):

    PYTHONPATH=. python bench/time_to_answer.py
    PYTHONPATH=. python bench/time_to_answer.py --half-width 0.05 --seed 3

What a new user does for the mean queue length at (lam, p) = (0.99, 0.05) with N = 1e4
stations to +-0.02: ``plan = qtheory.plan_run(10**4, 0.99, 0.05, half_width=0.02)`` (the
defaults: the estimator with the smaller predicted variance, one chain per core) and
``qtheory.simulate(**plan, seed=1)`` (all cores).  The script prints

1. the wall time of a one-core run of 1e9 events at the same point (one chain, one
   worker, started at the rounded invariant state, no estimate wanted: the unit of
   cost), measured before and after the planned run (the machine's load may change);
2. the plan (its summary), the wall time of the planned run and its cost in units of
   the one-core 1e9-event run (the mean of the two measurements), the realized 95%
   half-width of the planned estimator and, beside it, the plain time average with its
   interval, the lag-1 autocorrelations and any warning;
3. the load average of the machine at the start and at the end.

Issue 24's goal: a cost of at most 6 (63 on the code before the identity estimator).
Tests never assert wall-clock times; this script prints the figures.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import qtheory as qt

N, LAM, P = 10**4, 0.99, 0.05


def unit_run(seed):
    """Seconds of a one-core run of 1e9 events at (LAM, P), N (one chain, one worker)."""
    s0 = qt.invariant_state(LAM, P)
    t_end = 1e9 / (N * (1 + LAM))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.simulation.SimulationWarning)
        t0 = time.perf_counter()
        r = qt.simulate(N, LAM, P, t_end=t_end, warmup=0.0, s0=s0, seed=seed,
                        n_chains=1, workers=1, progress=False)
        dt = time.perf_counter() - t0
    return dt, r.n_events


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--half-width", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    load0 = os.getloadavg()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.simulation.SimulationWarning)
        qt.simulate(N, LAM, P, t_end=1.0, warmup=0.0, seed=0, progress=False)  # compile
    u1, ev1 = unit_run(101)
    print(f"1. one-core run of {ev1:.3g} events: {u1:.2f} s ({ev1 / u1:.3g} events/s)")
    plan = qt.plan_run(N, LAM, P, half_width=args.half_width)
    print("\n2. " + plan.summary().replace("\n", "\n   "))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", qt.simulation.SimulationWarning)
        t0 = time.perf_counter()
        r = qt.simulate(**plan, seed=args.seed)
        dt = time.perf_counter() - t0
    u2, ev2 = unit_run(102)
    unit = 0.5 * (u1 * 1e9 / ev1 + u2 * 1e9 / ev2)
    best = r.best
    print(f"   planned run: {r.n_events:.3g} events in {dt:.2f} s on "
          f"{plan.n_chains} chain(s) ({r.n_events / dt:.3g} events/s in all)")
    print(f"   one-core 1e9-event run again: {u2:.2f} s; unit (mean, per 1e9 events) "
          f"{unit:.2f} s")
    print(f"   COST: {dt / unit:.2f} one-core 1e9-event runs (goal <= 6)")
    print(f"   {plan.estimator} estimate (the planned one): {best.mean:.5f}, 95% CI "
          f"({best.ci[0]:.5f}, {best.ci[1]:.5f}), realized half-width "
          f"{best.half_width:.5f} (target {args.half_width}, predicted "
          f"{plan.predicted_half_width:.4g}), lag-1 {best.lag1:+.3f}")
    print(f"   plain time average beside it: {r.mean_queue_length:.5f}, 95% CI "
          f"({r.ci[0]:.5f}, {r.ci[1]:.5f}), half-width {r.half_width:.5f}, lag-1 "
          f"{r.lag1:+.3f}; fluid value v^I = {qt.mean_queue_length(LAM, P):.5f}")
    print(f"   warnings: {[str(w.message) for w in caught] or 'none'}")
    print(f"\n3. load average at the start {load0[0]:.2f}, at the end "
          f"{os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
