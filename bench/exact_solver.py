"""Exact solver against SciPy's plain sparse solves of the same matrix, in one run.

For each case, ``exact_stationary(..., boundary_mass=target)`` chooses max_queue (pilot
solves, geometric extrapolation, a check of the boundary mass) and solves the chain by
the method="auto" chooses (ILU(0)-preconditioned GMRES(60), or multilevel aggregation
cycles for four or more stations); its total time includes the pilots.  At the max_queue it
chose, the same replaced system (pi Q = 0 with the empty state's equation replaced by
pi_0 = 1) is then handed to SciPy's ``spsolve`` (SuperLU, COLAMD) and to SciPy's
``gmres`` without a preconditioner (restart 60, rtol 1e-10), each in a child process
killed at CAP seconds ("> cap").  Every solve runs in its own child process on one
thread, one after the other, so the ratios are measured under the same machine load.

Run: ``python bench/exact_solver.py [cap_seconds] [ours_cap_seconds] [N,...]`` (the
last argument keeps only the cases with these numbers of stations).
"""

import json
import multiprocessing as mp
import os
import sys
import time

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
            "NUMBA_NUM_THREADS"):
    os.environ[var] = "1"

CASES = [(2, 0.99, 0.05, 1e-5), (5, 0.9, 0.1, 1e-5), (6, 0.9, 0.1, 1e-5)]
CAP = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
OURS_CAP = float(sys.argv[2]) if len(sys.argv) > 2 else 900.0
if len(sys.argv) > 3:
    CASES = [c for c in CASES if c[0] in {int(v) for v in sys.argv[3].split(",")}]


def _ours(n, lam, p, target, q):
    import qtheory
    from qtheory.exact import exact_cost_estimate
    qtheory.exact_stationary(2, 0.5, 0.1, max_queue=3, method="gmres",
                             truncation_tol=1.0)  # compile outside the timing
    t0 = time.perf_counter()
    r = qtheory.exact_stationary(n, lam, p, boundary_mass=target, max_seconds=1e5,
                                 memory_limit=16e9,
                                 progress=False)
    dt = time.perf_counter() - t0
    est = exact_cost_estimate(n, r.max_queue, r.method)
    q.put(dict(seconds=dt, K=r.max_queue, states=r.n_states, bm=r.boundary_mass,
               its=r.iterations, last_solve=r.seconds, est_seconds=est.seconds,
               mean=r.mean_queue_length, method=r.method))


def _system(n, lam, p, K):
    import numpy as np
    import scipy.sparse as sp
    from qtheory.exact import _build_generator
    indptr, indices, data, _ = _build_generator(n, K, lam, p)
    S = indptr.shape[0] - 1
    A = sp.csr_matrix((data, indices, indptr), shape=(S, S)).T.tocsr()
    A = A.tolil() if S < 50_000 else A
    A = A.tocsr()
    A.data[A.indptr[0]:A.indptr[1]] = 0.0
    A[0, 0] = 1.0
    A.eliminate_zeros()
    b = np.zeros(S)
    b[0] = 1.0
    return A, b


def _baseline(kind, n, lam, p, K, q):
    import numpy as np
    import scipy.sparse.linalg as spla
    A, b = _system(n, lam, p, K)
    t0 = time.perf_counter()
    if kind == "spsolve":
        x = spla.spsolve(A.tocsc(), b)
        its = 0
    else:
        count = [0]
        x, info = spla.gmres(A, b, rtol=1e-10, restart=60, maxiter=10_000,
                             callback=lambda _: count.__setitem__(0, count[0] + 1),
                             callback_type="pr_norm")
        its = count[0]
    dt = time.perf_counter() - t0
    x = np.maximum(x, 0.0)
    pi = x / x.sum()
    q.put(dict(seconds=dt, its=its, pi_top=float(pi[-1])))


def run(target, args, cap):
    q = mp.Queue()
    proc = mp.Process(target=target, args=args + (q,))
    proc.start()
    proc.join(cap)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return None
    return q.get() if not q.empty() else {"error": f"exit code {proc.exitcode}"}


def main():
    mp.set_start_method("fork")
    print(f"exact_solver bench, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average {os.getloadavg()[0]:.2f}, baseline cap {CAP:.0f} s, "
          f"ours cap {OURS_CAP:.0f} s", flush=True)
    rows = []
    for n, lam, p, target in CASES:
        ours = run(_ours, (n, lam, p, target), OURS_CAP)
        if ours is None or "error" in ours:
            print(f"N={n} lam={lam} p={p} target={target:g}: ours "
                  + (f"> {OURS_CAP:.0f} s" if ours is None else ours["error"]),
                  flush=True)
            rows.append(dict(case=[n, lam, p, target], ours=None))
            continue
        K = ours["K"]
        line = (f"N={n} lam={lam} p={p}: ours {ours['seconds']:.1f} s total "
                f"(last solve {ours['method']} {ours['last_solve']:.1f} s, {ours['its']} its; estimate "
                f"{ours['est_seconds']:.0f} s) K={K} states={ours['states']:,} "
                f"boundary mass {ours['bm']:.2e}")
        row = dict(case=[n, lam, p, target], ours=ours)
        for kind in ("spsolve", "gmres"):
            b = run(_baseline, (kind, n, lam, p, K), CAP)
            row[kind] = b
            if b is None:
                line += f" | scipy {kind} > {CAP:.0f} s"
            elif "error" in b:
                line += f" | scipy {kind} failed ({b['error']})"
            else:
                line += (f" | scipy {kind} {b['seconds']:.1f} s"
                         + (f" ({b['its']} its)" if kind == "gmres" else "")
                         + f" = {b['seconds'] / ours['last_solve']:.1f}x our last solve")
        print(line, flush=True)
        rows.append(row)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
