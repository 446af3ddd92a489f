"""The design chapter's predicted finite-N designs at (lam, L) = (0.9, 2), stored for the book.

Run from the repository root (166 s when the stored file was made, at a load average of
6.5 on two cores):

    PYTHONPATH=. python bench/design_finite_n.py                # writes the file below
    PYTHONPATH=. python bench/design_finite_n.py --out other.json

book/design.md (section "A predicted finite-N design") shows, for N = 1e2, 1e3 and 1e4
stations, the predicted excess of :func:`qtheory.finite_n_mean` at the fluid design
``p* = qtheory.min_centralization(0.9, 2.0)`` and the predicted design
:func:`qtheory.finite_n_min_centralization` ``(N, 0.9, 2.0)`` (default options).  Each
search evaluates the prediction at six to nine values of p, and each evaluation away
from the well-populated regime runs the Monte Carlo of a reflected diffusion: the three
searches take about a minute on two quiet cores, more than the chapter's share of the
book's budget.  This script makes them once and writes, for every N, the prediction at
``p*`` (mean, excess, error estimate, regime), the design and the prediction at the
design, with the commit, the wall times and the qtheory version, to
``qtheory/book/data/design_finite_n.json``.  The Monte Carlo of ``finite_n_mean`` is seeded
inside qtheory (a fixed seed per path), so every number is a function of (N, lam, p)
and of the code alone; there is no seed to choose.  The chapter reads the file and
recomputes a cheap subset (the predictions at ``p*`` for N = 1e2 and 1e4, and at the
design for N = 1e2), which must agree with it.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import qtheory as qt
from reproduce_large import commit  # the same commit record (bench/ is on sys.path)

LAM, TARGET = 0.9, 2.0
SIZES = (100, 1000, 10_000)


def _prediction(f):
    return dict(p=f.p, mean=f.mean, excess=f.excess, error=f.error, regime=f.regime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join("qtheory", "book", "data",
                                                  "design_finite_n.json"))
    args = ap.parse_args()
    p_star = qt.min_centralization(LAM, TARGET)
    rows = []
    for n in SIZES:
        t0 = time.perf_counter()
        at_fluid = qt.finite_n_mean(n, LAM, p_star)
        p_min = qt.finite_n_min_centralization(n, LAM, TARGET)
        at_design = qt.finite_n_mean(n, LAM, p_min)
        seconds = time.perf_counter() - t0
        rows.append(dict(N=n, at_fluid_design=_prediction(at_fluid), p_min=p_min,
                         at_design=_prediction(at_design), seconds=seconds))
        print(f"N = {n:>5}: excess at p* {at_fluid.excess:.4g} +- {at_fluid.error:.2g} "
              f"({at_fluid.regime}); p_min(N) = {p_min:.6f}, predicted mean there "
              f"{at_design.mean:.5f} + {at_design.error:.2g}; {seconds:.1f} s")
    out = dict(
        description="book/design.md: predicted finite-N designs at (lam, L) = (0.9, 2) "
                    "(qtheory.finite_n_mean, qtheory.finite_n_min_centralization with "
                    "default options), made by bench/design_finite_n.py",
        commit=commit(), qtheory_version=qt.__version__, lam=LAM, target=TARGET,
        p_star=p_star, load_average=os.getloadavg()[0], rows=rows)
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
