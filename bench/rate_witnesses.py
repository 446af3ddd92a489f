"""Witnesses for the rate chapter (book/rate.md): exact solutions and planned simulations.

Writes qtheory/book/data/rate_witnesses.json with, for every row, the quantities that the rate
theorem bounds (qb.RateWitness.to_dict(): E||s^N - s^I||_1, the mass above the top level
E W^N and its rms, E v^N_{i*+2}, the energy, the excess of the mean queue, with 95%
batch-means half-widths for simulated rows), plus the commit, the seeds, the settings and
the wall time.  Usage:

    python bench/rate_witnesses.py [--quick] [--out PATH]

Exact rows: qt.exact_stationary at a truncation level whose boundary mass is below
EXACT_TARGET (found by qtheory.book.concentration.auto_max_queue), N = 1..4 where the state
space allows (at most EXACT_MAX_STATES states).

Simulated rows: qb.rate_witness_simulated, i.e. a run planned by qt.plan_run from the
EMPTY state (warm-up at least three fluid relaxation times, 20 batches of at least ten
correlation times; stretched where the whole system's relaxation time
1/(N(1 - sqrt(lam))^2) is longer), once with qt.simulate (time averages) and once with
qt.sample_path (2000 snapshots), both over the same period.  The plan's target half-width
for the mean queue is REL times the linear-noise prediction of the distance
sqrt(2/(pi N)) sum_i sqrt(Sigma_ii) (qt.fluctuation_covariance; lam/((p - lam) N) in
light traffic): the prediction only sizes the run, the stored values are measured.

--quick runs a small subset (for testing the script), writing to a temporary path unless
--out is given.  --exact-only recomputes the exact rows and keeps the stored simulated
rows (it records exact_commit).
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import qtheory as qt
from qtheory import book as qb
from qtheory.book.concentration import auto_max_queue

ROOT = Path(__file__).resolve().parents[1]
EXACT_TARGET = 1e-8
EXACT_MAX_STATES = 1_600_000
# (lam, p): N values simulated, relative precision REL of the plan
POINTS = {
    (0.7, 0.2): ((10, 30, 100, 300, 1000, 3000, 10_000), 0.05),
    (0.9, 0.1): ((10, 30, 100, 300, 1000, 3000, 10_000), 0.05),   # critical top level
    (0.95, 0.3): ((10, 30, 100, 300, 1000, 3000, 10_000), 0.05),
    (0.98, 0.1): ((100, 300, 1000, 3000, 10_000), 0.1),           # heavy traffic
    (0.99, 0.05): ((100, 300, 1000), 0.1),                         # the book's headline
    (0.3, 0.5): ((10, 30, 100, 300, 1000, 3000, 10_000), 0.05),   # light traffic
}
EXACT_N = {(0.7, 0.2): 4, (0.9, 0.1): 4, (0.95, 0.3): 3, (0.98, 0.1): 2,
           (0.99, 0.05): 2, (0.3, 0.5): 4}
QUICK = {(0.7, 0.2): ((10, 100), 0.2), (0.3, 0.5): ((10,), 0.2)}
SEED_BASE = 20261221


def predicted_distance(lam, p, n):
    """Linear-noise prediction of E||s^N - s^I||_1 (only used to size the runs)."""
    if lam <= p:
        return lam / ((p - lam) * n) if lam < p else 1.0 / math.sqrt(n)
    sig = qt.fluctuation_covariance(lam, p)
    return math.sqrt(2.0 / (math.pi * n)) * float(np.sqrt(np.diag(sig)).sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--exact-only", action="store_true")
    args = ap.parse_args()
    out = Path(args.out) if args.out else (
        Path("/tmp/rate_witnesses_quick.json") if args.quick
        else ROOT / "qtheory" / "book" / "data" / "rate_witnesses.json")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "qtheory", "bench"],
                                capture_output=True, text=True, cwd=ROOT).stdout.strip())
    points = QUICK if args.quick else POINTS
    exact_n = {k: 2 for k in QUICK} if args.quick else EXACT_N
    t_all = time.time()
    from tqdm import tqdm

    # exact rows
    exact_rows = []
    t0 = time.time()
    jobs = [(lam, p, N) for (lam, p), nmax in exact_n.items() for N in range(1, nmax + 1)]
    for lam, p, N in tqdm(jobs, desc="exact", file=sys.stderr):
        t1 = time.time()
        r = auto_max_queue(N, lam, p, boundary_target=EXACT_TARGET,
                           max_states=EXACT_MAX_STATES)
        w = qb.rate_witness_exact(r).to_dict()
        w["details"]["seconds"] = time.time() - t1
        exact_rows.append(w)
        print(f"exact ({lam}, {p}) N={N}: K={r.max_queue} states={r.n_states} "
              f"distance={w['distance']:.5g} top mass={w['top_mass']:.4g} "
              f"({time.time() - t1:.1f} s)", file=sys.stderr)
    exact_seconds = time.time() - t0
    if args.exact_only:
        data = json.loads(out.read_text())
        data.update(exact=exact_rows, exact_seconds=exact_seconds, exact_commit=commit,
                    exact_code_modified_since_commit=dirty)
        out.write_text(json.dumps(data, indent=1))
        print(f"wrote {out}: {len(exact_rows)} exact rows ({exact_seconds:.0f} s); "
              f"simulated rows kept from commit {data['commit'][:10]}", file=sys.stderr)
        return

    # simulated rows
    sim_rows = []
    t0 = time.time()
    jobs = [(k, lam, p, n, rel) for k, ((lam, p), (ns, rel)) in enumerate(points.items())
            for n in ns]
    for k, lam, p, n, rel in tqdm(jobs, desc="simulations", file=sys.stderr):
        t1 = time.time()
        h = rel * predicted_distance(lam, p, n)
        seed = SEED_BASE + 1000 * k + int(round(math.log10(n) * 10))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            w = qb.rate_witness_simulated(n, lam, p, half_width=h, seed=seed,
                                          progress=False)
        d = w.to_dict()
        d["details"].update(seed=seed, rel=rel, seconds=time.time() - t1,
                            predicted_distance=predicted_distance(lam, p, n),
                            warnings=[str(c.message) for c in caught])
        sim_rows.append(d)
        print(f"sim ({lam}, {p}) N={n}: events={d['details']['n_events']:.3g} "
              f"distance={w.distance:.4g}+-{w.distance_hw:.2g} "
              f"top={w.top_mass:.3g}+-{w.top_mass_hw:.2g} "
              f"lag1={d['details']['lag1_distance']:.2f} ({time.time() - t1:.1f} s)",
              file=sys.stderr)
    sim_seconds = time.time() - t0

    data = dict(
        commit=commit, code_modified_since_commit=dirty, exact_commit=commit,
        exact_code_modified_since_commit=dirty,
        created=time.strftime("%Y-%m-%d %H:%M:%S"),
        settings=dict(exact_target=EXACT_TARGET, exact_max_states=EXACT_MAX_STATES,
                      seed_base=SEED_BASE, n_snapshots=2000, n_batches=20,
                      points={f"{lam},{p}": dict(n=list(ns), rel=rel)
                              for (lam, p), (ns, rel) in points.items()}),
        exact=exact_rows, sims=sim_rows, exact_seconds=exact_seconds,
        sim_seconds=sim_seconds, total_seconds=time.time() - t_all,
        total_events=int(sum(r["details"]["n_events"] for r in sim_rows)))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))
    print(f"wrote {out}: {len(exact_rows)} exact rows ({exact_seconds:.0f} s), "
          f"{len(sim_rows)} simulated rows ({sim_seconds:.0f} s, "
          f"{data['total_events']:.3g} events per run kind); total "
          f"{data['total_seconds']:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
