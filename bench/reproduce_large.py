"""The reproduction chapter's largest run, N = 1e5 at (0.99, 0.05), stored for the book.

Run from the repository root (about two minutes on two quiet cores):

    PYTHONPATH=. python bench/reproduce_large.py              # writes the file below
    PYTHONPATH=. python bench/reproduce_large.py --out other.json

The chapter book/reproduce.md plans every system size with
``qtheory.plan_run(n, 0.99, 0.05, half_width=0.1, start="empty", n_batches=20,
n_chains=2)``.  At N = 1e5 the batch-length floor (20 batches of ten correlation times,
each chain with its own warm-up of several relaxation times, whatever N) makes that run
about 5.8e10 events, two thirds of the chapter's events: more than the book's budget of
60 s per cell.  This script runs exactly that plan with the chapter's seed
(``seed=100000``, the chapter seeds the run of N stations with N) and writes every field
of the :class:`qtheory.SimulationResult` (per-batch arrays included), the plan, the
commit, the seed, the wall time and the warnings to ``book/data/reproduce_large.json``.
The chapter re-plans N = 1e5 itself, checks that the stored run is that plan, rebuilds the
result with ``qtheory.SimulationResult(**fields)`` and treats it like its live runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import time
import warnings

import numpy as np

import qtheory as qt

N, LAM, P, TARGET, SEED = 10**5, 0.99, 0.05, 0.1, 10**5


def plan():
    """The chapter's plan for N = 1e5 (machine-independent: two chains, named)."""
    return qt.plan_run(N, LAM, P, half_width=TARGET, start="empty", n_batches=20,
                       n_chains=2, calibrate=False)


def _json(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, tuple):
        return list(x)
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


def commit():
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "qtheory"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join("book", "data", "reproduce_large.json"))
    args = ap.parse_args()
    pl = plan()
    print(pl.summary())
    load0 = os.getloadavg()[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", qt.SimulationWarning)
        t0 = time.perf_counter()
        r = qt.simulate(**pl, seed=SEED)
        seconds = time.perf_counter() - t0
    print(r.summary())
    print(f"{r.n_events:.3g} events in {seconds:.1f} s; load average {load0:.2f} at the "
          f"start, {os.getloadavg()[0]:.2f} at the end")
    fields = {f.name: _json(getattr(r, f.name)) for f in dataclasses.fields(r)}
    out = dict(
        description="book/reproduce.md: the planned run at N = 1e5, (lam, p) = "
                    "(0.99, 0.05), made by bench/reproduce_large.py",
        commit=commit(), qtheory_version=qt.__version__, seed=SEED,
        plan={k: _json(pl[k]) for k in pl}, seconds=seconds,
        caught_warnings=[str(w.message) for w in caught], result=fields)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
