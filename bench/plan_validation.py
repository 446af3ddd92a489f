"""Validate the variance model of qtheory.plan_run against planned simulations.

Run from the repository root:

    PYTHONPATH=. python bench/plan_validation.py                 # the default grid
    PYTHONPATH=. python bench/plan_validation.py --quick         # a few points
    PYTHONPATH=. python bench/plan_validation.py --seeds 8 --budget 1e8

For every (lam, p, N) of the grid it plans a run with ``qtheory.plan_run`` for the
smallest half-width whose plan costs at most ``--budget`` events (the plan's batch-length
floor may make it cost more), runs ``qtheory.simulate(**plan, seed=s)`` for
``--seeds`` seeds and prints:

- ``model``: the variance model used (mm1, linear-noise, pooled);
- ``pred``: the predicted 95% half-width;
- ``ratio``: realized half-width / predicted, mean over the seeds, and its range;
- ``cover``: how many intervals contain the reference value (the fluid value v^I for
  information: the finite-N mean lies above it, so this is not a coverage test);
- ``flags``: how many runs issued a SimulationWarning (it should be about 5% or less);
- ``est``: the mean estimate and v^I.

The realized half-width of one run is t S / sqrt(B) with S the sample standard deviation
of B = 20 batch means, so even an exact model gives ratios spread by about 1/sqrt(2 B)
= 16% per run.  A ratio far above 1 means the model under-predicts the variance (the run
is too short for the target), far below 1 that it over-predicts (the run is longer than
needed).

The test ``tests/test_planning.py::test_plan_meets_target_half_width`` keeps a few of
these points with fixed seeds and the tolerance the table supports.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np

import qtheory as qt

GRID_LAM = [0.7, 0.9, 0.95, 0.99]
GRID_P = [0.0, 0.05, 0.1, 0.2, 0.6]
GRID_N = [10, 100, 1000]
QUICK = [(0.9, 0.1, 100), (0.95, 0.05, 100), (0.7, 0.2, 1000), (0.9, 0.0, 10),
         (0.99, 0.05, 100), (0.5, 0.6, 100)]


def _plan(n, lam, p, h):
    # the plain average's variance model on one chain: what this script validates (the
    # defaults of plan_run would choose the estimator and the chains by model and machine)
    return qt.plan_run(n, lam, p, half_width=h, n_chains=1, estimator="plain",
                       calibrate=False)


def plan_for_budget(n, lam, p, budget):
    """Plan with the smallest half-width whose plan needs at most ``budget`` events."""
    ref = _plan(n, lam, p, 1.0)
    # events ~ max(floor, c / h^2): scale h so that the variance part meets the budget
    h = max(1e-6, math.sqrt(ref.expected_events / budget)) if ref.expected_events > 0 \
        else 1.0
    plan = _plan(n, lam, p, h)
    for _ in range(40):
        if plan.expected_events <= 1.05 * budget or plan.predicted_half_width < h:
            break
        h *= 1.2
        plan = _plan(n, lam, p, h)
    return plan


def run_point(n, lam, p, seeds, budget, max_events):
    plan = plan_for_budget(n, lam, p, budget)
    if plan.expected_events > max_events:
        return plan, None, 0, math.nan, 0
    ratios, flags, ests, cover = [], 0, [], 0
    v = plan.fluid_mean
    for s in range(seeds):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", qt.simulation.SimulationWarning)
            r = qt.simulate(**plan, seed=1000 + s, workers=1, progress=False)
        flags += bool(caught)
        if plan.predicted_half_width > 0:
            ratios.append(r.half_width / plan.predicted_half_width)
        ests.append(r.mean_queue_length)
        cover += r.ci[0] <= v <= r.ci[1]
    return plan, np.array(ratios), flags, float(np.mean(ests)), cover


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--budget", type=float, default=2e7,
                    help="events per planned run (default 2e7)")
    ap.add_argument("--max-events", type=float, default=3e8,
                    help="skip points whose plan needs more events per run (the "
                         "batch-length floor at lam = 0.99 and large N)")
    ap.add_argument("--quick", action="store_true", help="a few points only")
    args = ap.parse_args()
    points = QUICK if args.quick else [(lam, p, n) for lam in GRID_LAM for p in GRID_P
                                       for n in GRID_N]
    print(f"{'lam':>5} {'p':>5} {'N':>5} {'model':>12} {'pred':>9} {'ratio':>6} "
          f"{'min':>5} {'max':>5} {'cover':>5} {'flags':>5} {'est':>9} {'v^I':>9} "
          f"{'events':>8} {'sec':>6}")
    all_ratios = []
    t_all = time.perf_counter()
    for lam, p, n in points:
        t0 = time.perf_counter()
        plan, ratios, flags, est, cover = run_point(n, lam, p, args.seeds, args.budget,
                                                    args.max_events)
        dt = time.perf_counter() - t0
        if ratios is None:
            print(f"{lam:5.2f} {p:5.2f} {n:5d} {plan.variance_model:>12} skipped: "
                  f"{plan.expected_events:.2g} events per run > --max-events", flush=True)
            continue
        if ratios.size:
            all_ratios.extend(ratios.tolist())
            rs = f"{ratios.mean():6.2f} {ratios.min():5.2f} {ratios.max():5.2f}"
        else:
            rs = f"{'-':>6} {'-':>5} {'-':>5}"
        print(f"{lam:5.2f} {p:5.2f} {n:5d} {plan.variance_model:>12} "
              f"{plan.predicted_half_width:9.3g} {rs} {cover:3d}/{args.seeds:<1d} "
              f"{flags:3d}/{args.seeds:<1d} {est:9.4g} {plan.fluid_mean:9.4g} "
              f"{plan.expected_events:8.2g} {dt:6.1f}", flush=True)
    a = np.array(all_ratios)
    print(f"\nall runs: {a.size}; realized/predicted half-width: mean {a.mean():.2f}, "
          f"median {np.median(a):.2f}, 5%-95% {np.quantile(a, 0.05):.2f}-"
          f"{np.quantile(a, 0.95):.2f}, min {a.min():.2f}, max {a.max():.2f}; "
          f"{time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
