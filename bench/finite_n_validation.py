"""Validate qtheory.finite_n_mean against exact solutions (N = 2..4) and planned simulations.

Writes book/data/finite_n_validation.json (seeds, plans, commit, measured and predicted
excess E[v^N_1] - v^I_1).  Usage:

    python bench/finite_n_validation.py [--sims all|none] [--out PATH]
    python bench/finite_n_validation.py --repredict   # new predictions, stored witnesses

Cost (December 2026, shared 2-core machine, one run): 660 s in all, the exact part 26 s,
the N = 1e4 row at (0.9, 0.2) 521 s (3.4e10 events), every other row under 40 s.  Each
simulation row is planned for a 95% half-width of 20% of the predicted excess (at least
1e-5; the N = 1e4 row at (0.9, 0.2) for 4e-4) with n_chains=2, capped at 3e9 events (4e10
for that row); rows whose plan exceeds the cap are skipped and listed.  --repredict
recomputes only the predictions (seconds) and records predictions_commit.
"""
import argparse
import json
import subprocess
import time
import warnings
from pathlib import Path

import qtheory as qt

EXACT = {  # (lam, p): truncation K for N = 2, 3, 4
    (0.5, 0.2): (24, 16, 12), (0.7, 0.2): (30, 22, 18), (0.9, 0.2): (60, 40, 30),
    (0.9, 0.1): (45, 40, 32), (0.95, 0.3): (80, 46, 32), (0.3, 0.5): (30, 20, 14),
    (0.6, 0.3): (30, 20, 14), (0.8, 0.3): (40, 28, 20), (0.8, 0.1): (40, 28, 20),
    (0.7, 0.4): (30, 20, 14), (0.85, 0.25): (40, 30, 22), (0.5, 0.4): (24, 16, 12),
}
SIMS = [  # (N, lam, p, seed, half-width or None = 20% of the predicted excess)
    (100, 0.9, 0.2, 11, None), (1000, 0.9, 0.2, 1, None), (10000, 0.9, 0.2, 1, 4e-4),
    (100, 0.7, 0.2, 12, None), (1000, 0.7, 0.2, 18, None),
    (100, 0.3, 0.5, 14, None), (1000, 0.3, 0.5, 13, None), (100000, 0.3, 0.5, 19, None),
    (1000, 0.9, 0.1, 15, None), (100, 0.99, 0.05, 16, None),
    (1000, 0.8, 0.3, 17, None), (1000, 0.6, 0.3, 20, None), (10000, 0.6, 0.3, 21, None),
]
MAX_EVENTS = 3e9
MAX_EVENTS_FIXED = 4e10  # rows with a fixed half-width (the N = 1e4 check)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", default="all", choices=["all", "none"])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1]
                                          / "book" / "data" / "finite_n_validation.json"))
    ap.add_argument("--repredict", action="store_true",
                    help="keep the stored measurements, recompute the predictions")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    if args.repredict:
        out = json.loads(Path(args.out).read_text())
        for row in out["exact"] + out["sims"]:
            pr = qt.finite_n_mean(row["N"], row["lam"], row["p"])
            row.update(predicted=pr.excess, error=pr.error, regime=pr.regime)
        out["predictions_commit"] = commit
        Path(args.out).write_text(json.dumps(out, indent=1))
        print("re-predicted", args.out)
        return
    out = dict(commit=commit, predictions_commit=commit, exact=[], sims=[], skipped=[])
    t0 = time.time()
    for (lam, p), Ks in EXACT.items():
        for N, K in zip((2, 3, 4), Ks):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ex = qt.exact_stationary(N, lam, p, max_queue=K, truncation_tol=1.0)
            pr = qt.finite_n_mean(N, lam, p)
            row = dict(N=N, lam=lam, p=p, K=K, boundary_mass=float(ex.boundary_mass),
                       measured=float(ex.mean_queue_length - pr.fluid_mean),
                       predicted=pr.excess, error=pr.error, regime=pr.regime)
            out["exact"].append(row)
            print("exact", row, flush=True)
    out["exact_seconds"] = time.time() - t0
    if args.sims == "all":
        for N, lam, p, seed, h_fixed in SIMS:
            pr = qt.finite_n_mean(N, lam, p)
            h = h_fixed if h_fixed else max(0.2 * pr.excess, 1e-5)
            cap = MAX_EVENTS_FIXED if h_fixed else MAX_EVENTS
            try:
                plan = qt.plan_run(N, lam, p, half_width=h, n_chains=2)
            except ValueError as err:
                out["skipped"].append(dict(N=N, lam=lam, p=p, why=str(err)))
                continue
            if plan.expected_events > cap:
                out["skipped"].append(dict(N=N, lam=lam, p=p,
                                           why=f"{plan.expected_events:.3g} events"))
                print("skip", N, lam, p, plan.expected_events, flush=True)
                continue
            t1 = time.time()
            r = qt.simulate(**plan, seed=seed, progress=False)
            row = dict(N=N, lam=lam, p=p, seed=seed, half_width_target=h,
                       t_end=plan.t_end, warmup=plan.warmup, n_batches=plan.n_batches,
                       n_chains=plan.n_chains, n_events=int(r.n_events),
                       measured=r.mean_queue_length - pr.fluid_mean,
                       ci=[r.ci[0] - pr.fluid_mean, r.ci[1] - pr.fluid_mean],
                       predicted=pr.excess, error=pr.error, regime=pr.regime,
                       warnings=list(r.warnings), seconds=time.time() - t1)
            out["sims"].append(row)
            print("sim", row, flush=True)
    out["total_seconds"] = time.time() - t0
    Path(args.out).write_text(json.dumps(out, indent=1))
    print("wrote", args.out, "in", f"{out['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
