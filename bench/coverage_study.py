"""Coverage of the 95% intervals of planned runs, for both estimators of the mean queue.

(Not named coverage.py: run as a script from bench/, that name would hide the
``coverage`` package that numba imports.)

Run from the repository root (about eight minutes on two quiet cores with the defaults;
477 s on 2 December 2026):

    PYTHONPATH=. python bench/coverage_study.py       # 4000 or 1000 runs per point
    PYTHONPATH=. python bench/coverage_study.py --runs 200 --quick    # a smoke test
    PYTHONPATH=. python bench/coverage_study.py --out qtheory/book/data/coverage.json

For each point (lam, p, N) and half-width h it plans a run for each estimator,
``qtheory.plan_run(N, lam, p, half_width=h, n_chains=2, estimator=...)`` (two chains, as
the default plan on this two-core machine), runs ``--runs`` independent planned runs
``qtheory.simulate(**plan, seed=child)`` (children of one SeedSequence per point), and
counts how many 95% intervals contain a long-run reference.  When the two plans are the
same run (both set by the batch-length floor, as in heavy traffic) one set of runs gives
both intervals; otherwise each estimator gets its own runs.

The reference is a separate long run: the identity plan's warm-up and 100 times its
measured time per chain (the cost of 100 planned runs), so that its identity interval
is about ten times narrower than a planned run's (7.9 to 12.4 times in the stored
study) and its own error moves a coverage by well under a percentage point; its plain
estimate and interval are printed beside it as a check that both estimators estimate
the same mean.

Printed per point and estimator: the runs, the coverage with its exact (Clopper-Pearson)
95% binomial interval, the fractions of intervals wholly below ("low") and wholly above
("high") the reference, the median realized half-width against the predicted one, the
fraction of runs with a SimulationWarning, and the time taken.  Beside the two
estimators, ``identity_student`` is the Student interval of the identity's batch values
on the same runs (what simulate reported before it adopted Willink's interval).  With
1000 runs a procedure whose true coverage is 0.95 lands in [0.93, 0.97] with probability
about 0.996 (binomial standard deviation 0.0069); with 200 runs only about 0.84.

``--out`` stores the rows with the commit and the seeds in a JSON file that the
simulation chapter reads (qtheory/book/data/coverage.json, section "Coverage of planned
intervals").  The identity estimator's interval is simulate's ``identity_ci``:
Willink's skewness-adjusted batch-means interval (qtheory.statistics.batch_means with
skew_adjusted=True); the plain one is the Student interval.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from scipy import stats

import qtheory as qt
from qtheory.statistics import batch_means
from reproduce_large import commit  # the same commit record (bench/ is on sys.path)

# (lam, p, N, target half-width, runs as a multiple of --runs): a light point, a critical
# top level (lam s_8 = p), and heavy traffic with N = 1000; the half-widths are large
# enough that the batch-length floor sets both plans (the stringent case: the shortest
# batches the rules allow), except at the light point, where the plans differ.  The two
# cheap points get four times the runs (binomial sd 0.0034 instead of 0.0069).
# The last row repeats the critical point with batches twice as long (plan_run's
# max_lag1 halved from its default 0.05), to see how much of a shortfall there comes
# from the shortest batches.
POINTS = [(0.7, 0.2, 1000, 0.01, 4, 0.05), (0.9, 0.1, 100, 0.5, 4, 0.05),
          (0.99, 0.2, 1000, 0.3, 1, 0.05), (0.9, 0.1, 100, 0.5, 4, 0.025)]
QUICK = [(0.7, 0.2, 1000, 0.01, 1, 0.05), (0.9, 0.1, 100, 0.5, 1, 0.05)]
REFERENCE_FACTOR = 100.0


def binom_ci(k, n):
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95,
                                                        method="exact")
    return float(ci.low), float(ci.high)


def planned_runs(plan, runs, seed, desc):
    """Run ``runs`` planned runs; per run (plain ci, identity ci, warned for each)."""
    from tqdm.auto import tqdm

    children = np.random.SeedSequence(seed).spawn(runs)
    out = []
    for child in tqdm(children, desc=desc, leave=False):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", qt.simulation.SimulationWarning)
            r = qt.simulate(**plan, seed=child, progress=False)
        student = batch_means(r.batch_identity_mean_queue_length)  # for comparison
        out.append(dict(plain=r.ci, identity=r.identity_ci, identity_student=student.ci,
                        warned=bool(caught), hw_plain=r.half_width,
                        hw_identity=r.identity_half_width,
                        hw_identity_student=student.half_width,
                        lag1_identity_student=r.identity_lag1,
                        lag1_plain=r.lag1, lag1_identity=r.identity_lag1,
                        events=r.n_events))
    return out


def reference(plan, factor, seed):
    """A long run: the plan's warm-up, ``factor`` times its measured time per chain, in
    20 batches per chain (so batches ``factor / 10`` times the planned length)."""
    kw = dict(plan)
    kw["t_end"] = plan.warmup + factor * (plan.t_end - plan.warmup)
    kw["n_batches"] = 20
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", qt.simulation.SimulationWarning)
        r = qt.simulate(**kw, seed=seed, progress=True)
    return dict(identity=r.identity_mean_queue_length, identity_ci=list(r.identity_ci),
                plain=r.mean_queue_length, plain_ci=list(r.ci), events=r.n_events,
                factor=factor, t_end=kw["t_end"], n_batches=20, n_chains=plan.n_chains,
                warnings=[str(w.message) for w in caught], seed=seed,
                identity_lag1=r.identity_lag1, plain_lag1=r.lag1)


def run_point(lam, p, n, h, runs, seed, max_lag1=0.05):
    plans = {e: qt.plan_run(n, lam, p, half_width=h, n_chains=2, estimator=e,
                            calibrate=False, max_lag1=max_lag1)
             for e in ("plain", "identity")}
    same = {k: v for k, v in plans["plain"].items() if k != "estimator"} == \
        {k: v for k, v in plans["identity"].items() if k != "estimator"}
    t0 = time.perf_counter()
    results = {}
    if same:
        rows = planned_runs(plans["identity"], runs, seed, f"({lam}, {p}, {n})")
        results = {"plain": rows, "identity": rows}
    else:
        for k, e in enumerate(("plain", "identity")):
            results[e] = planned_runs(plans[e], runs, seed + k,
                                      f"({lam}, {p}, {n}) {e}")
    seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    ref = reference(plans["identity"], REFERENCE_FACTOR, seed + 100)
    ref_seconds = time.perf_counter() - t1
    truth = ref["identity"]
    row = dict(lam=lam, p=p, n=n, half_width=h, max_lag1=max_lag1, runs=runs, seed=seed,
               same_runs=same,
               reference=ref, seconds=seconds, reference_seconds=ref_seconds,
               estimators={})
    results["identity_student"] = results["identity"]
    for e in ("plain", "identity", "identity_student"):
        rs = results[e]
        ok = sum(r[e][0] <= truth <= r[e][1] for r in rs)
        hw = [r["hw_" + e] for r in rs]
        pl = plans["identity" if e == "identity_student" else e]
        row["estimators"][e] = dict(
            covered=int(ok), coverage=ok / len(rs), ci=binom_ci(ok, len(rs)),
            misses_below=float(np.mean([r[e][1] < truth for r in rs])),
            misses_above=float(np.mean([r[e][0] > truth for r in rs])),
            median_half_width=float(np.median(hw)),
            predicted_half_width=pl.predicted_half_width,
            warned=float(np.mean([r["warned"] for r in rs])),
            mean_lag1=float(np.nanmean([r["lag1_" + e] for r in rs])),
            events_per_run=float(np.mean([r["events"] for r in rs])),
            plan=dict(t_end=pl.t_end, warmup=pl.warmup, n_batches=pl.n_batches,
                      n_chains=pl.n_chains, batch_length=pl.batch_length,
                      correlation_time=pl.correlation_time,
                      relaxation_time=pl.relaxation_time))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    pts = QUICK if args.quick else POINTS
    rows = []
    print(f"{'lam':>5} {'p':>5} {'N':>6} {'h':>6} {'estimator':>16} {'runs':>5} "
          f"{'coverage':>8} {'95% binomial':>15} {'low':>6} {'high':>6} {'median hw':>10} "
          f"{'predicted':>10} {'warned':>6} {'lag-1':>6} {'events/run':>10} {'sec':>6}")
    t_all = time.perf_counter()
    for k, (lam, p, n, h, mult, max_lag1) in enumerate(pts):
        row = run_point(lam, p, n, h, mult * args.runs, args.seed + 1000 * k, max_lag1)
        rows.append(row)
        ref = row["reference"]
        for e, st in row["estimators"].items():
            print(f"{lam:5.2f} {p:5.2f} {n:6d} {h:6.3g} {e:>16} {row['runs']:5d} "
                  f"{st['coverage']:8.3f} ({st['ci'][0]:.3f}, {st['ci'][1]:.3f}) "
                  f"{st['misses_below']:6.3f} {st['misses_above']:6.3f} "
                  f"{st['median_half_width']:10.3g} {st['predicted_half_width']:10.3g} "
                  f"{st['warned']:6.3f} {st['mean_lag1']:+6.3f} "
                  f"{st['events_per_run']:10.3g} {row['seconds']:6.0f}", flush=True)
        print(f"      reference (long identity run, {ref['events']:.3g} events, "
              f"{row['reference_seconds']:.0f} s): {ref['identity']:.6f} "
              f"({ref['identity_ci'][0]:.6f}, {ref['identity_ci'][1]:.6f}); its plain "
              f"estimate {ref['plain']:.4f} ({ref['plain_ci'][0]:.4f}, "
              f"{ref['plain_ci'][1]:.4f}); same runs for both: {row['same_runs']}",
              flush=True)
    total = time.perf_counter() - t_all
    print(f"\n{total:.0f} s in all")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(dict(commit=commit(), seed=args.seed, runs=args.runs,
                           total_seconds=total, rows=rows), fh, indent=1)
        print(f"stored in {args.out}")


if __name__ == "__main__":
    main()
