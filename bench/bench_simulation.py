"""Speed and memory of qtheory.simulate, against plain Python, SimPy and the RNG limit.

Run from the repository root (benchmark-only dependencies in bench/requirements.txt):

    PYTHONPATH=. python bench/bench_simulation.py            # about a minute
    PYTHONPATH=. python bench/bench_simulation.py --events 3e8 --python-events 1e6
    PYTHONPATH=. python bench/bench_simulation.py --pipeline  # the two loops of run_events

What it prints, all on the same parameters (lam, p) = (0.9, 0.1) and (0.99, 0.05):

1. events per second of ``qtheory.simulate`` (compiled, one core) at N = 1e2, 1e4, 1e6,
   started at the (rounded) invariant state so that the timed events are representative
   of the steady state; the compile is done before timing;
2. the "random-number limit": a compiled loop that draws the same random numbers and
   reads one queue entry per event and does nothing else, and the ratio to it;
3. the same model as a conventional plain-Python event loop, as the compiled algorithm
   transcribed line by line to Python ("tuned"), and as a SimPy model: their events per
   second, the speed-up, and a check that their mean queue length agrees with qtheory's
   within the batch-means intervals (N = 20);
4. memory of a process that simulates N = 1e7 stations: resident set before and peak
   during the run, and the NumPy allocations of the run.

Every rate is the best of ``--repeat`` timed runs (default 3; the ``timeit``
convention: the fastest run is the one least disturbed by the rest of the machine), for
the compiled code and the Python and SimPy models alike, with different seeds per run.

Floors (issue 3): >= 5e7 events/s at every N, >= 100x plain Python and SimPy; issue 24:
the compiled kernel at >= 0.5 of the random-number limit at every N (the ratio column,
both measured in the same run).  The figures vary with the machine's load: measure on a
quiet machine; the load average is printed at the start and at the end.

What limits the kernel (see qtheory/_kernels.py, "Speed"): it issues about 2.6 times
the instructions of the random-number loop per event (49 against 19 in the generated
code at N = 1e4: the generator and the product are shared; the event's reads and
writes of the sorted levels, the counts and the integral accumulators are not), and at
N = 1e6 the random read of the sorted levels misses the first-level cache (hidden by
drawing numbers ahead and prefetching).  At small N the writes to the sorted levels
often hit the addresses the next events read; below 512 stations the kernel therefore
reads each event's level before the previous write (``--pipeline`` compares the two
loops, which give the same path).

The multi-core speed-up (``simulate(..., n_chains=2, workers=1 or 2)``) and the cost of
the planned (0.99, 0.05, N = 1e4, half-width 0.1) estimate are printed by
``bench/bench_parallel.py``; the validation of ``plan_run``'s variance model by
``bench/plan_validation.py``.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import time
import warnings

import numpy as np

import qtheory
from qtheory import _kernels
from qtheory._engine import System, initial_counts
from qtheory.simulation import SimulationWarning
from qtheory.statistics import batch_means

CASES = [(0.9, 0.1), (0.99, 0.05)]
SIZES = [10**2, 10**4, 10**6]
FLOOR_RATE = 5e7
FLOOR_SPEEDUP = 100.0
FLOOR_RATIO = 0.5


# ----------------------------------------------------------------- reference models


class PyState:
    """The N-station state in pure Python, stations kept sorted by queue length.

    Same representation as the compiled kernel (a sorted list of levels ``L`` and counts
    ``cnt[k]`` of stations with at least k jobs), so the comparison measures the language,
    not the algorithm.
    """

    def __init__(self, n, cnt0):
        self.n = n
        self.cnt = [int(c) for c in cnt0] + [0] * 4
        self.L = []
        for k in range(len(cnt0)):
            self.L.extend([k] * (self.cnt[k] - self.cnt[k + 1]))
        self.top = len(cnt0) - 1
        self.jobs = sum(self.cnt[1:])

    def arrive(self, j):
        k = self.L[j]
        cnt = self.cnt
        if k + 2 >= len(cnt):
            cnt.extend([0] * len(cnt))
        b = self.n - cnt[k + 1] - 1
        self.L[b] = k + 1
        cnt[k + 1] += 1
        if k + 1 > self.top:
            self.top = k + 1
        self.jobs += 1

    def depart_level(self, k):
        a = self.n - self.cnt[k]
        self.L[a] = k - 1
        self.cnt[k] -= 1
        if self.cnt[k] == 0:
            self.top = k - 1
        self.jobs -= 1

    def local(self, j):
        k = self.L[j]
        if k > 0:
            self.depart_level(k)

    def central(self):
        if self.top > 0:
            self.depart_level(self.top)


def python_event_loop(n, lam, p, cnt0, t_end, n_batches=20, seed=1):
    """A conventional plain-Python event loop of the same chain.

    Exponential holding times at the total rate N(1 + lam), the event type and the station
    drawn separately, the time integral of the number of jobs kept exactly.  Returns
    (batch means of the mean queue length, number of events).
    """
    rnd = random.Random(seed)
    st = PyState(n, cnt0)
    rate = n * (1 + lam)
    batch_len = t_end / n_batches
    b_end = batch_len
    t = area = 0.0
    events = 0
    means = []
    while True:
        dt = rnd.expovariate(rate)
        while t + dt >= b_end:  # close the batch (memorylessness: continue after it)
            area += st.jobs * (b_end - t)
            means.append(area / (batch_len * n))
            if len(means) == n_batches:
                return np.array(means), events
            area = 0.0
            dt -= b_end - t
            t = b_end
            b_end += batch_len
        area += st.jobs * dt
        t += dt
        u = rnd.random() * (1 + lam)
        if u < lam:
            st.arrive(rnd.randrange(n))
        elif u < lam + 1 - p:
            st.local(rnd.randrange(n))
        else:
            st.central()
        events += 1


def python_loop(n, lam, p, cnt0, n_events, n_batches=20, seed=1):
    """Hand-tuned plain-Python loop: the compiled kernel's algorithm line by line.

    One uniform per event (station and event type), step averages (uniformization).
    Returns the batch means of the mean queue length.
    """
    rnd = random.Random(seed)
    st = PyState(n, cnt0)
    a_thr, l_thr, scale = lam, lam + 1 - p, 1 + lam
    per_batch = n_events // n_batches
    means = []
    for _ in range(n_batches):
        total = st.jobs
        for _ in range(per_batch):
            x = rnd.random() * n
            j = int(x)
            f = (x - j) * scale
            if f < a_thr:
                st.arrive(j)
            elif f < l_thr:
                st.local(j)
            else:
                st.central()
            total += st.jobs
        means.append(total / ((per_batch + 1) * n))
    return np.array(means)


def simpy_model(n, lam, p, cnt0, t_end, n_batches=20, seed=1):
    """SimPy model: three Poisson event streams acting on the stations.

    Returns (batch means of the time-average mean queue, number of events).
    """
    import simpy

    rnd = random.Random(seed)
    env = simpy.Environment()
    st = PyState(n, cnt0)
    area = [0.0, 0.0]  # integral of jobs, time of last change
    counter = [0]
    batch_len = t_end / n_batches
    means = []

    def record():
        area[0] += st.jobs * (env.now - area[1])
        area[1] = env.now
        counter[0] += 1

    def arrivals():
        while True:
            yield env.timeout(rnd.expovariate(n * lam))
            record()
            st.arrive(rnd.randrange(n))

    def local_tokens():
        while True:
            yield env.timeout(rnd.expovariate(n * (1 - p)))
            record()
            st.local(rnd.randrange(n))

    def central_tokens():
        while True:
            yield env.timeout(rnd.expovariate(n * p))
            record()
            st.central()

    def batches():
        for _ in range(n_batches):
            yield env.timeout(batch_len)
            record()
            means.append(area[0] / (batch_len * n))
            area[0] = 0.0

    env.process(arrivals())
    env.process(local_tokens())
    if p > 0:
        env.process(central_tokens())
    done = env.process(batches())
    env.run(until=done)
    return np.array(means), counter[0] - n_batches


# ----------------------------------------------------------------- measurements


def best_rate(run, repeat):
    """Best events per second over ``repeat`` calls of ``run(seed)`` -> (events, extra)."""
    best, extra = 0.0, None
    for seed in range(1, repeat + 1):
        t0 = time.perf_counter()
        events, out = run(seed)
        rate = events / (time.perf_counter() - t0)
        if rate > best:
            best, extra = rate, out
    return best, extra


def compiled_rate(n, lam, p, n_events, repeat=1):
    """Events per second of qtheory.simulate on n stations from the invariant state."""
    s0 = qtheory.invariant_state(lam, p)
    rate = n * (1 + lam)
    t_end = n_events / rate

    def run(seed):
        r = qtheory.simulate(n, lam, p, t_end=t_end, warmup=0.1 * t_end, s0=s0,
                             seed=seed, progress=False)
        return r.n_events, r

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimulationWarning)
        qtheory.simulate(n, lam, p, t_end=1.0, warmup=0.5, s0=s0, seed=0)  # compile
        return best_rate(run, repeat)


def rng_limit_rate(n, lam, p, n_events, repeat=1):
    """Events per second of the loop that only draws the numbers and reads L[j]."""
    cnt0 = initial_counts(n, qtheory.invariant_state(lam, p))
    st = System(n, lam, p, cnt0, np.array([1, 2, 3, 4], dtype=np.uint64), False)
    _kernels.rng_limit(10, st.L, st.rng)  # compile
    return best_rate(lambda seed: (n_events, _kernels.rng_limit(n_events, st.L, st.rng)),
                     repeat)[0]


def python_rate(n, lam, p, n_events, repeat=1):
    cnt0 = initial_counts(n, qtheory.invariant_state(lam, p))
    t_end = n_events / (n * (1 + lam))
    return best_rate(
        lambda seed: python_event_loop(n, lam, p, cnt0, t_end, seed=seed)[::-1],
        repeat)[0]


def tuned_rate(n, lam, p, n_events, repeat=1):
    cnt0 = initial_counts(n, qtheory.invariant_state(lam, p))
    return best_rate(
        lambda seed: (n_events, python_loop(n, lam, p, cnt0, n_events, seed=seed)),
        repeat)[0]


def simpy_rate(n, lam, p, n_events, repeat=1):
    cnt0 = initial_counts(n, qtheory.invariant_state(lam, p))
    t_end = n_events / (n * (1 + lam))
    return best_rate(lambda seed: simpy_model(n, lam, p, cnt0, t_end, seed=seed)[::-1],
                     repeat)[0]


PIPE_SIZES = [10, 100, 300, 1000, 3000, 10**4]


def kernel_rate(n, lam, p, n_events, pipelined, repeat=1):
    """Events per second of the untracked kernel, pipelined or not, from the invariant
    state, and the state (counts, accumulators, levels, generator) after 1e6 events from
    one seed, by which the caller checks that the two loops give the same path."""
    cnt0 = initial_counts(n, qtheory.invariant_state(lam, p))

    def run(seed, events=n_events):
        st = System(n, lam, p, cnt0, np.array([seed, 2, 3, 4], dtype=np.uint64), False)
        st.pipelined = pipelined
        st.run(events)
        return events, (st.cnt, st.acc, st.L, st.rng)

    final = run(0, 10**6)[1]  # compiles; the state after 1e6 events from one seed
    return best_rate(run, repeat)[0], final


def pipeline_table(n_ev, rep):
    """The two event loops of run_events side by side (the crossover behind
    qtheory._kernels.PIPE_STATIONS)."""
    print(f"run_events, pipelined or not: events/s, one core, {n_ev:.3g} events, best of "
          f"{rep} (the simulator pipelines below {_kernels.PIPE_STATIONS} stations)\n")
    print(f"{'lam':>5} {'p':>5} {'N':>7} | {'plain':>10} {'pipelined':>10} "
          f"{'pipelined/plain':>15} | same path")
    for lam, p in CASES:
        for n in PIPE_SIZES:
            plain, fa = kernel_rate(n, lam, p, n_ev, False, rep)
            pipe, fb = kernel_rate(n, lam, p, n_ev, True, rep)
            same = all(np.array_equal(x, y) for x, y in zip(fa, fb))
            print(f"{lam:5.2f} {p:5.2f} {n:7d} | {plain:10.3e} {pipe:10.3e} "
                  f"{pipe / plain:15.2f} | {same}")


def agreement(lam, p, n=20, t_end=None, warmup=1_000.0):
    """Mean queue length by qtheory, plain Python and SimPy (N = 20), with 95% CIs.

    The run is 2e4 time units, or 1e5 when lam > 0.95 (heavy traffic relaxes slowly, and
    shorter batches would be correlated and their intervals too narrow).
    """
    if t_end is None:
        t_end = 100_000.0 if lam > 0.95 else 20_000.0
    s0 = qtheory.invariant_state(lam, p)
    cnt0 = initial_counts(n, s0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimulationWarning)
        r = qtheory.simulate(n, lam, p, t_end=t_end, warmup=warmup, s0=s0, seed=3)
    py_events = int(n * (1 + lam) * (t_end - warmup))
    tu = batch_means(python_loop(n, lam, p, cnt0, py_events, seed=4))
    py = batch_means(python_event_loop(n, lam, p, cnt0, t_end - warmup, seed=6)[0])
    sp_means, _ = simpy_model(n, lam, p, cnt0, t_end - warmup, seed=5)
    sp = batch_means(sp_means)
    rows = []
    for name, est, hw in [("qtheory", r.mean_queue_length, r.half_width),
                          ("python", py.mean, py.half_width),
                          ("tuned", tu.mean, tu.half_width),
                          ("simpy", sp.mean, sp.half_width)]:
        z = abs(est - r.mean_queue_length) / max(math.hypot(hw, r.half_width), 1e-300)
        rows.append((name, est, hw, z))
    return rows


def peak_memory(n):
    """Memory of simulating n stations in a fresh process (MiB).

    Returns (resident set before the run, peak resident set during the run, peak of
    the NumPy allocations traced by tracemalloc during the run).  The kernels are compiled
    first and the kernel's peak-RSS counter is reset (``/proc/self/clear_refs``), so that
    the peak is that of the simulation, not of the LLVM compiler.
    """
    code = (
        "import tracemalloc, warnings, qtheory\n"
        "warnings.simplefilter('ignore')\n"
        "def status(key):\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith(key):\n"
        "            return int(line.split()[1]) / 1024\n"
        "qtheory.simulate(100, 0.99, 0.05, t_end=2.0, warmup=1.0, seed=1)\n"
        "base = status('VmRSS')\n"
        "open('/proc/self/clear_refs', 'w').write('5')\n"
        "tracemalloc.start()\n"
        f"r = qtheory.simulate({n}, 0.99, 0.05, t_end=2.0, warmup=1.0, seed=1)\n"
        "peak = status('VmHWM')\n"
        "print(base, peak, tracemalloc.get_traced_memory()[1] / 2**20)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ))
    base, peak, traced = map(float, out.stdout.split()[-3:])
    return base, peak, traced


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=1e8,
                    help="events per compiled measurement (default 1e8)")
    ap.add_argument("--python-events", type=float, default=2e5,
                    help="events per plain-Python / SimPy measurement (default 2e5)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="timed runs per measurement, best reported (default 3)")
    ap.add_argument("--no-memory", action="store_true", help="skip the N = 1e7 run")
    ap.add_argument("--pipeline", action="store_true",
                    help="only compare the pipelined and plain event loops of run_events")
    args = ap.parse_args(argv)
    n_ev = int(args.events)
    n_py = int(args.python_events)
    rep = max(1, args.repeat)
    if args.pipeline:
        pipeline_table(n_ev, rep)
        return 0

    load0 = os.getloadavg()[0]
    print(f"qtheory {qtheory.__version__}, numpy {np.__version__}, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs (one core used)")
    print(f"compiled runs: {n_ev:.3g} events each; Python/SimPy: {n_py:.3g} events each;"
          f" best of {rep} runs\n")
    hdr = (f"{'lam':>5} {'p':>5} {'N':>8} | {'qtheory ev/s':>12} {'RNG limit':>10} "
           f"{'ratio':>6} | {'python ev/s':>11} {'x':>6} | {'tuned ev/s':>10} {'x':>5} |"
           f" {'simpy ev/s':>10} {'x':>6} | {'mean':>7}")
    print(hdr)
    print("-" * len(hdr))
    ok = True
    ratio_ok = True
    for lam, p in CASES:
        for n in SIZES:
            rate, r = compiled_rate(n, lam, p, n_ev, rep)
            lim = rng_limit_rate(n, lam, p, n_ev, rep)
            py = python_rate(n, lam, p, n_py, rep)
            tu = tuned_rate(n, lam, p, n_py, rep)
            sp = simpy_rate(n, lam, p, n_py, rep)
            ok &= rate >= FLOOR_RATE and rate / py >= FLOOR_SPEEDUP
            ok &= rate / sp >= FLOOR_SPEEDUP
            ratio_ok &= rate / lim >= FLOOR_RATIO
            print(f"{lam:5.2f} {p:5.2f} {n:8.0e} | {rate:12.3e} {lim:10.3e} "
                  f"{rate / lim:6.2f} | {py:11.3e} {rate / py:6.0f} | {tu:10.3e} "
                  f"{rate / tu:5.0f} | {sp:10.3e} {rate / sp:6.0f} | "
                  f"{r.mean_queue_length:7.3f}")
    print("\nagreement at N = 20 (mean queue length, 95% half-width, "
          "|difference| / combined half-width):")
    for lam, p in CASES:
        for name, est, hw, z in agreement(lam, p):
            flag = "" if z <= 2.0 else "   <-- disagrees"
            print(f"  lam={lam:g} p={p:g} {name:>8}: {est:8.4f} +- {hw:.4f}   {z:5.2f}{flag}")
    if not args.no_memory:
        base, peak, traced = peak_memory(10**7)
        print(f"\nmemory, N = 1e7 (0.99, 0.05): resident before the run {base:.0f} MiB, "
              f"peak during it {peak:.0f} MiB (+{peak - base:.0f} MiB); NumPy "
              f"allocations traced during the run: peak {traced:.1f} MiB "
              f"({traced * 2**20 / 1e7:.2f} bytes per station)")
    print("\npython: a conventional event loop (exponential holding times, type and station "
          "drawn separately);\ntuned: the compiled kernel's algorithm transcribed to "
          "Python (one uniform per event, step averages).")
    print(f"floors (>= {FLOOR_RATE:.0e} events/s at every N, >= {FLOOR_SPEEDUP:.0f}x the "
          f"Python event loop and SimPy): {'met' if ok else 'NOT met'}")
    print(f"ratio to the random-number limit >= {FLOOR_RATIO} at every N: "
          f"{'met' if ratio_ok else 'NOT met'}")
    print(f"load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end "
          f"({os.cpu_count()} CPUs)")
    return 0 if ok and ratio_ok else 1


if __name__ == "__main__":
    sys.exit(main())
