"""Out-of-sample validation of qtheory.finite_n_mean: a fresh, seeded design drawn after
the predictor and its error model were frozen.

Writes qtheory/book/data/finite_n_out_of_sample.json: the design (its distribution and seed), the
commit of the frozen predictor, and for every point the measured excess
E[v^N_1] - v^I_1 with its 95% interval, the plain time average beside it, the prediction
with its error, and the summary the chapter quotes (coverage of prediction +- error, the
ratios predicted/measured, the error relative to the prediction).  Usage:

    python bench/finite_n_out_of_sample.py [--out PATH] [--points K]
    python bench/finite_n_out_of_sample.py --summary      # print the stored summary

The design: DESIGN_SEED seeds numpy's default generator, which draws, in this order,
* "moderate" (14 points): lam ~ U(0.3, 0.97), p ~ log-uniform(0.03, 0.5),
  N ~ log-uniform(100, 3e4) rounded;
* "heavy" (10 points): lam ~ U(0.98, 0.995), p ~ log-uniform(0.03, 0.5),
  N ~ log-uniform(1000, 2e4) rounded;
* "band" (8 points): lam ~ U(0.9, 0.995), c ~ U(1, 3), N = round(c / (1 - lam)) (so
  1 <= N (1 - lam) <= 3 up to rounding), p ~ log-uniform(0.03, 0.5).
Every drawn point is measured; none is dropped (a point whose run is too long for the
budget is stored with the interval its budget allows and marked unresolved).

Each point is measured exactly as the in-sample rows of bench/finite_n_validation.py
(its ``measure``: a pilot, then a run planned by qt.plan_run aiming at a 95% half-width
of 5% of the pilot's excess, two chains started empty, the warm-up that of the plan at
the half-width aimed at whatever the budget; below a spare capacity N (1 - lam) of 5 its
``measure_aggregate``: 5 + 200 relaxation times of the slower of the fluid model and the
pooled M/M/1 queue), read through the exact identity (qt.finite_n.excess_by_identity); seeds
SEED0 + k (pilot) and SEED0 + k + 10000 (final run).
"""
import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import qtheory as qt

sys.path.insert(0, str(Path(__file__).resolve().parent))
import finite_n_validation as fv  # noqa: E402  (the in-sample bench: same measurement)

DESIGN_SEED = 20261202
SEED0 = 7000
OUT = (Path(__file__).resolve().parents[1] / "qtheory" / "book" / "data"
       / "finite_n_out_of_sample.json")
fv.MAX_EVENTS = 3e10   # per run; the pilot stays at fv.PILOT_EVENTS
# below this spare capacity N (1 - lam) a point is measured by fv.measure_aggregate
AGGREGATE_SPARE = 5.0


def _loguniform(rng, lo, hi):
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def design(seed=DESIGN_SEED):
    """The 32 points (stratum, N, lam, p), drawn in a fixed order from ``seed``."""
    rng = np.random.default_rng(seed)
    pts = []
    for _ in range(14):
        lam = round(float(rng.uniform(0.3, 0.97)), 4)
        p = round(_loguniform(rng, 0.03, 0.5), 4)
        n = int(round(_loguniform(rng, 100, 3e4)))
        pts.append(("moderate", n, lam, p))
    for _ in range(10):
        lam = round(float(rng.uniform(0.98, 0.995)), 4)
        p = round(_loguniform(rng, 0.03, 0.5), 4)
        n = int(round(_loguniform(rng, 1000, 2e4)))
        pts.append(("heavy", n, lam, p))
    for _ in range(8):
        lam = round(float(rng.uniform(0.9, 0.995)), 4)
        c = float(rng.uniform(1.0, 3.0))
        n = max(2, int(round(c / (1.0 - lam))))
        p = round(_loguniform(rng, 0.03, 0.5), 4)
        pts.append(("band", n, lam, p))
    return pts


def covered(row):
    """The prediction's error bar contains the measured excess."""
    return abs(row["predicted"] - row["measured"]) <= row["error"]


def summary(rows):
    """Coverage, ratios and relative errors (the chapter's table)."""
    def block(sel):
        if not sel:
            return dict(n=0)
        ratio = np.array([r["predicted"] / r["measured"] for r in sel])
        rel_err = np.array([r["error"] / r["predicted"] for r in sel])
        return dict(n=len(sel), covered=int(sum(map(covered, sel))),
                    coverage=float(np.mean([covered(r) for r in sel])),
                    ratio_median=float(np.median(ratio)), ratio_min=float(ratio.min()),
                    ratio_max=float(ratio.max()),
                    rel_error_median=float(np.median(rel_err)),
                    rel_error_max=float(rel_err.max()))
    out = dict(all=block(rows))
    for name, sel in [("heavy", [r for r in rows if r["lam"] >= 0.98]),
                      ("band", [r for r in rows if 1 <= r["N"] * (1 - r["lam"]) <= 3]),
                      ("n_ge_1000", [r for r in rows if r["N"] >= 1000]),
                      ("resolved", [r for r in rows if r["resolved"]])]:
        out[name] = block(sel)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--points", type=int, default=None, help="measure the first K only")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rows already stored and measure the rest")
    args = ap.parse_args()
    if args.summary:
        print(json.dumps(json.loads(Path(args.out).read_text())["summary"], indent=1))
        return
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "qtheory"],
                                capture_output=True, text=True).stdout.strip())
    pts = design()[: args.points]
    out = dict(predictor_commit=commit, predictor_dirty=dirty, design_seed=DESIGN_SEED,
               seed0=SEED0, design=[list(x) for x in pts],
               settings=dict(pilot_events=fv.PILOT_EVENTS, max_events=fv.MAX_EVENTS,
                             rel_target=fv.REL_TARGET), rows=[])
    t0 = time.time()
    if args.resume:
        old = json.loads(Path(args.out).read_text())
        assert old["design"] == out["design"], "the stored design is another one"
        out["rows"] = old["rows"]
        out["resumed_commits"] = old.get("resumed_commits", []) + [old["predictor_commit"]]
        t0 -= old.get("seconds", 0.0)
    for k, (stratum, n, lam, p) in enumerate(pts):
        if k < len(out["rows"]):
            continue
        t1 = time.time()
        # near total capacity the whole system relaxes like one M/M/1 queue of rate N,
        # slower than the fluid model says: measured as the in-sample pooled rows (a
        # fixed run of 5 + 200 relaxation times, the slower of the two)
        how = fv.measure_aggregate if n * (1 - lam) < AGGREGATE_SPARE else fv.measure
        row, why = how(n, lam, p, SEED0 + k)
        if row is None:
            raise SystemExit(f"point {k} ({n}, {lam}, {p}) could not be measured: {why}")
        fv.predict(row)
        row.update(stratum=stratum, spare=n * (1 - lam))
        print(f"[{k:2d}] {stratum:8s} N={n:6d} lam={lam:.4f} p={p:.4f}: measured "
              f"{row['measured']:.4g} +- {row['half_width']:.2g}, predicted "
              f"{row['predicted']:.4g} +- {row['error']:.2g} [{row['regime']}] "
              f"{'covered' if covered(row) else 'MISSED'}  {time.time() - t1:.0f} s",
              flush=True)
        out["rows"].append(row)
        out["seconds"] = time.time() - t0
        out["summary"] = summary(out["rows"])
        Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out["summary"], indent=1))
    print("wrote", args.out, f"in {out['seconds']:.0f} s")


if __name__ == "__main__":
    main()
