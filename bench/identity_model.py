"""Measure the variance and correlation time of the two estimators of the mean queue length.

Run from the repository root (a few minutes on two cores):

    PYTHONPATH=. python bench/identity_model.py                   # the default grid
    PYTHONPATH=. python bench/identity_model.py --quick           # four points
    PYTHONPATH=. python bench/identity_model.py --json out.json   # also store the rows

For each (lam, p, N) of the grid it simulates two chains from empty, discards a warm-up
of 10 fluid relaxation times 1/mu, and cuts the next ``--length`` relaxation times of
each chain into fine batches of a quarter of the plain estimator's correlation time
(``qtheory.planning.variance_model``).  From the autocovariances gamma_l of the fine batch
values of each estimator (the plain time average and the identity estimator of
``qtheory.simulate``) it estimates

- the asymptotic variance constant sigma^2 = N b0 (gamma_0 + 2 sum_{l>=1} gamma_l), in the
  normalization of ``plan_run`` (the time average over T has variance sigma^2 / (N T));
- the mean lag tau = b0 sum_l l gamma_l / (gamma_0 / 2 + sum_l gamma_l) of the
  autocovariance (the correlation time of the batch-length rule: batch means of length b
  have lag-1 autocorrelation about tau / (2 b));

the sums running over the lags before the first negative autocovariance (at most 40),
and prints them beside the models of ``qtheory.planning.variance_model`` (plain) and
``qtheory._runlength.identity_model`` (identity).  A model is safe where the measured
correlation time is at most the model's (the planned batches are then at least as long
as the rule asks) and a variance below the model's means a run at least as long as the
target needs.

These are measurements with sampling error: about 10% on sigma^2 and 20% on tau per
point at the default length (400 relaxation times).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import numpy as np

import qtheory as qt
from qtheory import _runlength

GRID_LAM = [0.7, 0.9, 0.95, 0.99]
GRID_P = [0.05, 0.1, 0.2, 0.5]
GRID_N = [10, 100, 1000, 10000]
QUICK = [(0.9, 0.1, 100), (0.95, 0.1, 1000), (0.99, 0.05, 1000), (0.7, 0.2, 10000)]


def acf_stats(x, n_chains, b0, n):
    """(sigma^2, tau, lag-1 of batches of length b) from fine batch values x."""
    x = np.asarray(x, dtype=np.float64).reshape(n_chains, -1)
    x = x - x.mean(axis=1, keepdims=True)
    K = x.shape[1]
    gam = np.array([(x[:, : K - l] * x[:, l:]).sum() / (n_chains * (K - l))
                    for l in range(min(41, K // 4))])
    if gam[0] <= 0:
        return 0.0, 0.0
    neg = np.flatnonzero(gam[1:] < 0)
    L = int(neg[0]) + 1 if neg.size else gam.size  # lags 1..L-1
    g = gam[1:L]
    lags = np.arange(1, L)
    sigma2 = n * b0 * (gam[0] + 2.0 * g.sum())
    tau = b0 * float((lags * g).sum()) / (0.5 * gam[0] + g.sum())
    return float(sigma2), float(tau)


def measure(n, lam, p, length, seed):
    plain = _runlength.variance_model(n, lam, p)
    ident = _runlength.identity_model(n, lam, p)
    mu = plain["relaxation_rate"]
    tau_model = plain["correlation_time"]
    b0 = tau_model / 4.0
    n_fine = int(round(length / mu / b0))
    warm = 10.0 / mu
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.simulation.SimulationWarning)
        r = qt.simulate(n, lam, p, t_end=warm + n_fine * b0, warmup=warm,
                        n_batches=n_fine, n_chains=2, seed=seed, progress=False)
    sp, tp = acf_stats(r.batch_mean_queue_length, 2, b0, n)
    si, ti = acf_stats(r.batch_identity_mean_queue_length, 2, b0, n)
    return dict(lam=lam, p=p, n=n, relaxation_time=1.0 / mu,
                sigma2_plain_model=plain["sigma2"], sigma2_plain=sp,
                tau_plain_model=tau_model, tau_plain=tp,
                sigma2_identity_model=ident["sigma2"], sigma2_identity=si,
                tau_identity_model=ident["correlation_time"], tau_identity=ti,
                mean_plain=r.mean_queue_length, mean_identity=r.identity_mean_queue_length,
                events=r.n_events)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--length", type=float, default=400.0,
                    help="measured relaxation times per chain (default 400)")
    ap.add_argument("--json", default=None, help="write the rows to this file")
    ap.add_argument("--seed", type=int, default=2027)
    args = ap.parse_args()
    pts = QUICK if args.quick else [(lam, p, n) for lam in GRID_LAM for p in GRID_P
                                    for n in GRID_N if lam > p]
    print(f"{'lam':>5} {'p':>5} {'N':>6} {'1/mu':>8} | {'s2 plain':>9} {'model':>9} "
          f"{'tau':>8} {'model':>8} | {'s2 ident':>9} {'model':>9} {'tau':>8} "
          f"{'model':>8} | {'s2 ratio':>8} {'tau ratio':>9} {'sec':>5}")
    rows = []
    for k, (lam, p, n) in enumerate(pts):
        t0 = time.perf_counter()
        row = measure(n, lam, p, args.length, args.seed + k)
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        print(f"{lam:5.2f} {p:5.2f} {n:6d} {row['relaxation_time']:8.1f} | "
              f"{row['sigma2_plain']:9.3g} {row['sigma2_plain_model']:9.3g} "
              f"{row['tau_plain']:8.3g} {row['tau_plain_model']:8.3g} | "
              f"{row['sigma2_identity']:9.3g} {row['sigma2_identity_model']:9.3g} "
              f"{row['tau_identity']:8.3g} {row['tau_identity_model']:8.3g} | "
              f"{row['sigma2_identity'] / max(row['sigma2_plain'], 1e-300):8.3g} "
              f"{row['tau_identity'] / max(row['tau_plain'], 1e-300):9.3g} "
              f"{row['seconds']:5.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(seed=args.seed, length=args.length, rows=rows), fh, indent=1)


if __name__ == "__main__":
    main()
