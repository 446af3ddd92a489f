"""Validate qtheory.finite_n_mean against exact solutions (N = 2..4) and planned simulations.

Writes qtheory/book/data/finite_n_validation.json: for every row the seeds, plans, commit, the
measured excess E[v^N_1] - v^I_1 with its 95% interval, and the prediction.  Usage:

    python bench/finite_n_validation.py [--sims all|none] [--out PATH]
    python bench/finite_n_validation.py --repredict   # new predictions, stored witnesses
    python bench/finite_n_validation.py --holdout     # (re)measure only the held-out rows
    python bench/finite_n_validation.py --pooled      # (re)measure only the rows near capacity

Simulations: a grid of 15 (lam, p) points (well-populated, critical and sparse top
levels) times N = 1e2, 1e3, 1e4, 1e5.  Each row is measured in two stages, both planned by
qt.plan_run with two chains started empty (warm-up and batch lengths from the relaxation
time): a pilot of at most PILOT_EVENTS events, then a run aiming at a 95% half-width of
5% of the pilot's excess, with the plan's variance model corrected by the ratio of the
pilot's realized to predicted half-width, capped at MAX_EVENTS events.  The pilot is
only used to size the second run; the stored value is the second run's.  A row whose
half-width exceeds half its measured excess is stored and marked "resolved": False.
The measurement does not depend on the model being validated (the model's prediction only
sets the pilot's length), so --repredict recomputes the predictions (seconds) against
the stored measurements and records predictions_commit.
"""
import argparse
import dataclasses
import json
import math
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np

import qtheory as qt

EXACT = {  # (lam, p): truncation K for N = 2, 3, 4
    (0.5, 0.2): (24, 16, 12), (0.7, 0.2): (30, 22, 18), (0.9, 0.2): (60, 40, 30),
    (0.9, 0.1): (45, 40, 32), (0.95, 0.3): (80, 46, 32), (0.3, 0.5): (30, 20, 14),
    (0.6, 0.3): (30, 20, 14), (0.8, 0.3): (40, 28, 20), (0.8, 0.1): (40, 28, 20),
    (0.7, 0.4): (30, 20, 14), (0.85, 0.25): (40, 30, 22), (0.5, 0.4): (24, 16, 12),
}
GRID = [  # (lam, p)
    (0.3, 0.5), (0.5, 0.4), (0.6, 0.3), (0.7, 0.4), (0.9, 0.2), (0.95, 0.3),
    (0.5, 0.2), (0.8, 0.1), (0.9, 0.1),
    (0.7, 0.2), (0.8, 0.3), (0.85, 0.25), (0.95, 0.1), (0.99, 0.2), (0.99, 0.05),
]
NS = (100, 1000, 10_000, 100_000)
# held out: points and N chosen after the model's error estimate was calibrated on GRID,
# measured the same way, to check the prediction out of sample
HOLDOUT = [
    (300, 0.75, 0.15), (2000, 0.85, 0.05), (50, 0.6, 0.1), (500, 0.97, 0.25),
    (30, 0.4, 0.3), (5000, 0.92, 0.3), (200, 0.5, 0.45), (20_000, 0.8, 0.2),
    (10, 0.9, 0.3), (1500, 0.98, 0.1), (3000, 0.65, 0.35), (100, 0.2, 0.1),
]
# near total capacity (N (1 - lam) below 1): where the pooled bound lam/(N(1 - lam)) is
# not small against the mean; these showed the need for the pooled floor and error term.
# The whole system then relaxes like one M/M/1 queue of rate N, in about
# 4/(N (1 - lam)^2) time units, far slower than the fluid model says (plan_run's
# relaxation time); measure_aggregate plans with the slower of the two.
POOLED = [(20, 0.99, 0.5), (50, 0.995, 0.5), (100, 0.999, 0.5)]
PILOT_EVENTS = 4e8
MAX_EVENTS = 6e10
REL_TARGET = 0.05


def _keep_warmup(plan, warmup):
    """The plan with a warm-up of at least ``warmup`` (the measured part unchanged)."""
    if plan.warmup >= warmup:
        return plan
    extra = warmup - plan.warmup
    scale = (plan.t_end + extra) / plan.t_end
    return dataclasses.replace(plan, warmup=warmup, t_end=plan.t_end + extra,
                               expected_events=plan.expected_events * scale,
                               expected_seconds=plan.expected_seconds * scale)


def _plan_for_events(n, lam, p, h, budget, floor):
    """plan_run at half-width h, widened until its expected events fit the budget.

    The warm-up stays that of the plan at the half-width asked for (the bias rule
    d0 exp(-mu w) <= 0.1 h for that h), however much the budget widens the measured part:
    widening the target must not shorten the warm-up (a referee found warm-ups of 3
    relaxation times on the N = 1e5 rows where the budget had widened the target).
    ``floor`` is the shortest plan (warm-up and batch-length floors); it is used, with
    that warm-up, when the widening does not reach the budget first."""
    warmup = None
    for _ in range(12):
        try:
            plan = qt.plan_run(n, lam, p, half_width=h, n_chains=2, calibrate=False)
        except ValueError:  # more events than simulate accepts in one call
            h *= 10.0
            continue
        if warmup is None:
            warmup = plan.warmup
        plan = _keep_warmup(plan, warmup)
        if plan.expected_events <= budget:
            return plan
        h *= max(1.2, math.sqrt(plan.expected_events / budget))
    floor = _keep_warmup(floor, warmup or floor.warmup)
    return floor if floor.expected_events <= budget else None


def _run(plan, seed):
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        return qt.simulate(**plan, seed=seed, progress=False)


def identity_excess(r, lam, p):
    """(estimate, 95% half-width, lag-1, per-batch values) from qt.finite_n.excess_by_identity."""
    e = qt.finite_n.excess_by_identity(r)
    return e.excess, e.half_width, e.lag1, e.batch_values


def measure(n, lam, p, seed):
    fluid = qt.mean_queue_length(lam, p) if lam > p else 0.0
    try:  # the shortest run the plan allows (warm-up and batch-length floors)
        floor = qt.plan_run(n, lam, p, half_width=10.0, n_chains=2, calibrate=False)
    except ValueError as err:
        return None, str(err)
    if floor.expected_events > MAX_EVENTS:
        return None, f"shortest plan {floor.expected_events:.3g} events"
    guess = max(qt.finite_n_mean(n, lam, p).excess, 1.0 / n**1.5)
    # the pilot may exceed the shortest plan by half (its warm-up is the one its own
    # target asks for, however much the budget widens the rest)
    pilot = _plan_for_events(n, lam, p, 0.3 * guess,
                             max(PILOT_EVENTS, 1.5 * floor.expected_events), floor)
    if pilot is None:
        return None, "pilot over budget"
    t0 = time.time()
    r1 = _run(pilot, seed)
    m1, hr, lag1_1, _ = identity_excess(r1, lam, p)
    if hr <= REL_TARGET * abs(m1):  # the pilot is already precise enough: it is the run
        plan, r, used_seed = pilot, r1, seed
    else:
        corr = pilot.predicted_half_width / hr if hr > 0 else 1.0
        target = REL_TARGET * m1 if m1 > 2 * hr else 0.5 * hr
        target = max(target, 1e-8)
        plan = _plan_for_events(n, lam, p, target * corr, MAX_EVENTS, floor)
        if plan is None:
            return None, f"final over budget (pilot excess {m1:.3g} +- {hr:.2g})"
        used_seed = seed + 10_000
        r = _run(plan, used_seed)
    row = _row(r, fluid, t0, seed=used_seed, pilot_seed=seed,
               pilot=dict(t_end=pilot.t_end, measured=m1, half_width=hr,
                          n_events=int(r1.n_events)),
               t_end=plan.t_end, warmup=plan.warmup, n_batches=plan.n_batches,
               n_chains=plan.n_chains, relaxation_time=plan.relaxation_time)
    return row, None


def _row(r, fluid, t0, **run):
    """A stored row: the run's settings, the identity estimate and the plain average."""
    m, h, lag1, _ = identity_excess(r, r.lam, r.p)
    # the measured time fraction with the longest queue below the top level i*: when it
    # is 0 the run never saw the event, and its interval says nothing about that part
    top = qt.invariant_state(r.lam, r.p).size - 1 if r.lam > r.p else 0
    bt = np.asarray(r.batch_longest_queue_tail, dtype=float)
    p_below = float(1.0 - bt[:, top].mean()) if 0 < top < bt.shape[1] else (
        1.0 if top > 0 else 0.0)
    return dict(N=r.n_stations, lam=r.lam, p=r.p, **run, n_events=int(r.n_events),
                p_below_top=p_below,
                fluid_mean=fluid, measured=m, ci=[m - h, m + h], half_width=h, lag1=lag1,
                resolved=bool(h <= 0.5 * abs(m)), warnings=list(r.warnings),
                direct=dict(measured=r.mean_queue_length - fluid,
                            ci=[r.ci[0] - fluid, r.ci[1] - fluid], lag1=float(r.lag1)),
                seconds=time.time() - t0)


def measure_aggregate(n, lam, p, seed):
    """One run of two chains started empty: warm-up 5 tau, 10 batches of 20 tau each,
    tau the slower of plan_run's relaxation time and the pooled M/M/1's
    1/(N (1 - sqrt(lam))^2)."""
    fluid = qt.mean_queue_length(lam, p) if lam > p else 0.0
    base = qt.plan_run(n, lam, p, half_width=10.0, n_chains=2, calibrate=False)
    tau = max(base.relaxation_time, 1.0 / (n * (1.0 - math.sqrt(lam)) ** 2))
    t0 = time.time()
    r = qt.simulate(n, lam, p, t_end=205.0 * tau, warmup=5.0 * tau, n_batches=10,
                    n_chains=2, seed=seed, progress=False)
    return _row(r, fluid, t0, seed=seed, t_end=205.0 * tau, warmup=5.0 * tau,
                n_batches=10, n_chains=2, relaxation_time=tau), None


def predict(row):
    pr = qt.finite_n_mean(row["N"], row["lam"], row["p"])
    d = pr.details
    row.update(predicted=pr.excess, error=pr.error, regime=pr.regime,
               predicted_below_top=float(d.get("below_top", 0.0)),
               predicted_p_below_top=float(d.get("p_longest_below_top", math.nan)),
               idle_z=float(d.get("idle_z", math.nan)),
               unfloored_excess=float(d.get("unfloored_excess", pr.excess)),
               pooled_bound=float(d.get("pooled_bound", math.nan)))
    if "t_end" in row and row["lam"] > row["p"]:
        # the time the run is predicted to spend with the longest queue below the top
        # level: below one mean service time it cannot resolve the part below the top
        measured_time = row["n_chains"] * (row["t_end"] - row["warmup"])
        row["predicted_time_below_top"] = row["predicted_p_below_top"] * measured_time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", default="all", choices=["all", "none"])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "qtheory"
                                          / "book" / "data" / "finite_n_validation.json"))
    ap.add_argument("--repredict", action="store_true",
                    help="keep the stored measurements, recompute the predictions")
    ap.add_argument("--holdout", action="store_true",
                    help="measure the held-out rows and store them with the others")
    ap.add_argument("--pooled", action="store_true",
                    help="measure the rows near total capacity and store them")
    ap.add_argument("--remeasure", nargs="+", metavar="N,LAM,P",
                    help="re-measure these stored grid rows (same seeds), e.g. after a "
                         "change of the measurement rules")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    if args.remeasure:
        out = json.loads(Path(args.out).read_text())
        want = {tuple(float(v) for v in s.split(",")) for s in args.remeasure}
        for k, row in enumerate(out["sims"]):
            if (row["N"], row["lam"], row["p"]) not in want:
                continue
            new, why = measure(row["N"], row["lam"], row["p"], row["pilot_seed"])
            if new is None:
                raise SystemExit(f"could not re-measure {row['N']}, {row['lam']}, "
                                 f"{row['p']}: {why}")
            predict(new)
            new.update(remeasured_commit=commit, previous=dict(
                measured=row["measured"], ci=row["ci"], warmup=row["warmup"],
                relaxation_time=row["relaxation_time"], warnings=row["warnings"]))
            out["sims"][k] = new
            print(f"re-measured N={new['N']} lam={new['lam']} p={new['p']}: "
                  f"{row['measured']:.4g} +- {row['half_width']:.2g} (warm-up "
                  f"{row['warmup'] / row['relaxation_time']:.1f} tau) -> "
                  f"{new['measured']:.4g} +- {new['half_width']:.2g} (warm-up "
                  f"{new['warmup'] / new['relaxation_time']:.1f} tau)", flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
        return
    if args.repredict:
        out = json.loads(Path(args.out).read_text())
        for row in out["exact"] + out["sims"] + out.get("holdout", []) + out.get("pooled", []):
            predict(row)
        out["predictions_commit"] = commit
        Path(args.out).write_text(json.dumps(out, indent=1))
        print("re-predicted", args.out)
        return
    if args.holdout or args.pooled:
        name, points, seed0 = (("holdout", HOLDOUT, 5000) if args.holdout
                               else ("pooled", POOLED, 6000))
        out = json.loads(Path(args.out).read_text())
        out[name], out[name + "_skipped"] = [], []
        t0 = time.time()
        for k, (n, lam, p) in enumerate(points):
            row, why = (measure if args.holdout else measure_aggregate)(n, lam, p,
                                                                       seed0 + k)
            if row is None:
                out[name + "_skipped"].append(dict(N=n, lam=lam, p=p, why=why))
                continue
            predict(row)
            out[name].append(row)
            print(f"{name} N={n} lam={lam} p={p}: {row['measured']:.4g} +- "
                  f"{row['half_width']:.2g} pred {row['predicted']:.4g} +- "
                  f"{row['error']:.2g} [{row['regime']}]", flush=True)
        out[name + "_commit"] = commit
        out[name + "_seconds"] = time.time() - t0
        Path(args.out).write_text(json.dumps(out, indent=1))
        print("wrote", args.out)
        return
    out = dict(commit=commit, predictions_commit=commit, exact=[], sims=[], skipped=[],
               settings=dict(pilot_events=PILOT_EVENTS, max_events=MAX_EVENTS,
                             rel_target=REL_TARGET))
    t0 = time.time()
    for (lam, p), Ks in EXACT.items():
        for N, K in zip((2, 3, 4), Ks):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ex = qt.exact_stationary(N, lam, p, max_queue=K, truncation_tol=1.0)
            fluid = qt.mean_queue_length(lam, p) if lam > p else 0.0
            row = dict(N=N, lam=lam, p=p, K=K, boundary_mass=float(ex.boundary_mass),
                       measured=float(ex.mean_queue_length - fluid))
            predict(row)
            out["exact"].append(row)
            print("exact", row, flush=True)
    out["exact_seconds"] = time.time() - t0
    if args.sims == "all":
        for k, (lam, p) in enumerate(GRID):
            for j, n in enumerate(NS):
                seed = 100 * k + j + 1
                t1 = time.time()
                row, why = measure(n, lam, p, seed)
                if row is None:
                    out["skipped"].append(dict(N=n, lam=lam, p=p, why=why))
                    print("skip", n, lam, p, why, flush=True)
                else:
                    predict(row)
                    out["sims"].append(row)
                    print(f"sim N={n} lam={lam} p={p}: {row['measured']:.4g} "
                          f"({row['ci'][0]:.4g}, {row['ci'][1]:.4g}) pred "
                          f"{row['predicted']:.4g} +- {row['error']:.2g} "
                          f"[{row['regime']}] {row['n_events']:.3g} ev "
                          f"{time.time() - t1:.0f} s", flush=True)
                out["total_seconds"] = time.time() - t0
                Path(args.out).write_text(json.dumps(out, indent=1))
    out["total_seconds"] = time.time() - t0
    Path(args.out).write_text(json.dumps(out, indent=1))
    print("wrote", args.out, "in", f"{out['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
