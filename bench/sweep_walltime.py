"""Wall time of one qtheory.sweep: local process pool against a Dask LocalCluster.

The sweep is the heavy-traffic experiment (simulated mean queue against 1/(1 - lam) for
p = 0 and p > 0, issue 7 item 3) at a larger N than the book's chapter can afford. It is
run twice with the same seed, once on a ProcessPoolExecutor and once on a Dask
LocalCluster with the same number of single-threaded worker processes; the script checks
that both give identical rows and prints the wall times (cluster start-up reported
separately) and the experiment's table.

Usage:
    PYTHONPATH=. python bench/sweep_walltime.py [--n-stations 500] [--workers 2]
"""

from __future__ import annotations

import argparse
import time
import warnings
from concurrent.futures import ProcessPoolExecutor


def grid(n_stations):
    loads = [0.5, 0.75, 0.875, 0.9375]            # 1/(1 - lam) = 2, 4, 8, 16
    t_end_p0 = {0.5: 1e4, 0.75: 2.5e4, 0.875: 8e4, 0.9375: 3.2e5}
    points = []
    for lam in loads:
        for p in (0.0, 0.1, 0.3):
            t_end = t_end_p0[lam] if p == 0 else 2e4
            points.append({"n_stations": n_stations, "lam": lam, "p": p,
                           "t_end": t_end, "warmup": t_end / 20})
    return points


def main():
    import qtheory as qt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-stations", type=int, default=500)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    points = grid(args.n_stations)
    keep = ["mean_queue_length", "ci", "n_events", "warnings"]

    with warnings.catch_warnings():  # a tiny run only to compile before timing
        warnings.simplefilter("ignore")
        qt.simulate(10, 0.5, 0.1, t_end=10.0, warmup=1.0, seed=0)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        local = qt.sweep(qt.simulate, points, executor=pool, seed=args.seed,
                         progress=False, keep=keep)
    t_local = time.perf_counter() - t0

    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        t_start = time.perf_counter() - t0
        t1 = time.perf_counter()
        dask = qt.sweep(qt.simulate, points, executor=client.get_executor(),
                        seed=args.seed, progress=False, keep=keep)
        t_dask = time.perf_counter() - t1
    t_total = time.perf_counter() - t0

    events = sum(local.column("n_events"))
    print(f"sweep of {len(points)} simulations, N = {args.n_stations}, "
          f"{events:.3e} events in total, {args.workers} workers")
    print(f"  local ProcessPoolExecutor : {t_local:6.1f} s")
    print(f"  Dask LocalCluster (sweep) : {t_dask:6.1f} s   (cluster start-up "
          f"{t_start:.1f} s, total with start and shutdown {t_total:.1f} s)")
    print(f"  identical rows            : {local.rows == dask.rows}")
    print(f"  failures / sim. warnings  : {len(local.failures)} / "
          f"{sum(len(w) for w in local.column('warnings'))}")
    print()
    print(f"{'lam':>7} {'1/(1-lam)':>9} {'p':>4} {'simulated':>10} {'95% CI':>19} "
          f"{'fluid':>8}")
    for r in local:
        lo, hi = r["ci"]
        print(f"{r['lam']:7.4f} {1 / (1 - r['lam']):9.1f} {r['p']:4.1f} "
              f"{r['mean_queue_length']:10.4f} ({lo:8.4f}, {hi:8.4f}) "
              f"{qt.mean_queue_length(r['lam'], r['p']):8.4f}")


if __name__ == "__main__":
    main()
