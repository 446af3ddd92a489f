"""Tests of qtheory.simulate / sample_path / replicate against theory.

Every statistical assertion uses a fixed seed and a tolerance taken from the interval the
simulation itself reports (or from a binomial / Student-t standard error), so a failure
means a real disagreement, not bad luck: multipliers are chosen so that a correct
simulator fails a given assertion with probability well below 1e-3.
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse, stats
from scipy.sparse.linalg import spsolve

import qtheory
from qtheory import _engine, _kernels
from qtheory import simulation as simmod
from qtheory.simulation import SimulationWarning, replicate, sample_path, simulate
from qtheory.statistics import batch_means, correlation_threshold, lag1_autocorrelation

ROOT = Path(__file__).resolve().parents[1]


def quiet(fn, *args, **kwargs):
    """Call fn with SimulationWarnings silenced (for runs whose warnings are expected)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimulationWarning)
        return fn(*args, **kwargs)


# ------------------------------------------------------------------ input validation


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(n_stations=0), "n_stations"),
        (dict(n_stations=2.0), "n_stations"),
        (dict(n_stations=True), "n_stations"),
        (dict(lam=1.0), "lam"),
        (dict(lam=1 - 1e-17), "lam"),
        (dict(lam=-0.1), "lam"),
        (dict(lam=math.nan), "lam"),
        (dict(p=-0.01), "p"),
        (dict(p=1.01), "p"),
        (dict(p=math.nan), "p"),
        (dict(t_end=0.0), "t_end"),
        (dict(t_end=-5.0), "t_end"),
        (dict(t_end=math.inf), "t_end"),
        (dict(t_end=math.nan), "t_end"),
        (dict(warmup=-1.0), "warmup"),
        (dict(warmup=100.0), "warmup"),
        (dict(warmup=math.nan), "warmup"),
        (dict(n_batches=1), "n_batches"),
        (dict(seed=-3), "seed"),
        (dict(s0=[0.5, 0.2]), "s0"),
    ],
)
def test_simulate_rejects_bad_input(kwargs, name):
    args = dict(n_stations=3, lam=0.5, p=0.2, t_end=100.0, warmup=10.0, seed=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        simulate(args.pop("n_stations"), args.pop("lam"), args.pop("p"), **args)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(times=[1.0, 0.5]), "times"),
        (dict(times=[math.nan]), "times"),
        (dict(times=[-1.0]), "times"),
        (dict(n_stations=-1), "n_stations"),
        (dict(lam=1.5), "lam"),
        (dict(s0=[1.0, 0.2, 0.5]), "s0"),
        (dict(s0=-2), "s0"),
        (dict(per_station=True, n_stations=10**6, times=np.arange(100.0)), "per_station"),
    ],
)
def test_sample_path_rejects_bad_input(kwargs, name):
    args = dict(n_stations=3, lam=0.5, p=0.2, times=[0.0, 1.0], seed=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        sample_path(args.pop("n_stations"), args.pop("lam"), args.pop("p"),
                    args.pop("times"), **args)


# ------------------------------------------------------------------ reproducibility (K07)


def _same(a, b):
    return (
        np.array_equal(a.s, b.s)
        and np.array_equal(a.batch_s, b.batch_s)
        and np.array_equal(a.longest_queue_tail, b.longest_queue_tail)
        and a.n_events == b.n_events
        and a.ci == b.ci
    )


def test_same_seed_bit_identical_and_global_seed_irrelevant():
    np.random.seed(0)
    a = simulate(50, 0.8, 0.1, t_end=300.0, warmup=50.0, seed=7)
    np.random.seed(12345)
    b = simulate(50, 0.8, 0.1, t_end=300.0, warmup=50.0, seed=7)
    c = simulate(50, 0.8, 0.1, t_end=300.0, warmup=50.0, seed=8)
    assert _same(a, b)
    assert not np.array_equal(a.batch_s, c.batch_s)


def test_no_seed_draws_fresh_entropy_and_records_it():
    a = simulate(20, 0.7, 0.1, t_end=200.0, warmup=20.0)
    b = simulate(20, 0.7, 0.1, t_end=200.0, warmup=20.0)
    assert a.seed_entropy != b.seed_entropy
    again = simulate(20, 0.7, 0.1, t_end=200.0, warmup=20.0,
                     seed=np.random.SeedSequence(a.seed_entropy,
                                                 spawn_key=a.seed_spawn_key))
    assert _same(a, again)


def test_chunking_and_level_growth_do_not_change_a_bit(monkeypatch):
    # lam = 0.97, p = 0 on one station: the queue passes level 62, so the level arrays
    # grow during the run; the result must not depend on the chunk size either.
    kw = dict(t_end=4e4, warmup=1e3, seed=3)
    a = quiet(simulate, 1, 0.97, 0.0, **kw)
    assert a.s.size > 64
    monkeypatch.setattr(_engine, "CHUNK", 1000)
    b = quiet(simulate, 1, 0.97, 0.0, **kw)
    assert _same(a, b)
    pa = sample_path(4, 0.97, 0.0, np.linspace(0, 3e3, 7), seed=2)
    monkeypatch.setattr(_engine, "CHUNK", 333)
    pb = sample_path(4, 0.97, 0.0, np.linspace(0, 3e3, 7), seed=2)
    assert np.array_equal(pa, pb)


def test_narrow_level_type_is_widened_without_changing_a_bit(monkeypatch):
    # queues start at 199 (one byte per station) and pass 255: the sorted levels are
    # widened to uint16 during the run; forcing int32 from the start gives the same bits
    kw = dict(t_end=3e4, warmup=10.0, seed=12, s0=199)
    a = quiet(simulate, 2, 0.99, 0.0, **kw)
    assert a.s.size > 256
    monkeypatch.setattr(_engine, "level_dtype", lambda top: np.int32)
    b = quiet(simulate, 2, 0.99, 0.0, **kw)
    assert _same(a, b)


def test_threads_do_not_share_random_state():
    seeds = [1, 2, 3, 4]
    serial = [simulate(30, 0.85, 0.1, t_end=400.0, warmup=50.0, seed=s) for s in seeds]
    with ThreadPoolExecutor(max_workers=2) as ex:
        threaded = list(ex.map(
            lambda s: simulate(30, 0.85, 0.1, t_end=400.0, warmup=50.0, seed=s), seeds))
    assert all(_same(a, b) for a, b in zip(serial, threaded))


def test_result_does_not_depend_on_numba_thread_count():
    a = simulate(40, 0.9, 0.05, t_end=300.0, warmup=30.0, seed=11)
    code = textwrap.dedent("""
        import numpy as np, qtheory
        r = qtheory.simulate(40, 0.9, 0.05, t_end=300.0, warmup=30.0, seed=11)
        print(repr(r.batch_s.tobytes().hex()))
    """)
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert eval(out.strip()) == a.batch_s.tobytes().hex()


def test_replications_are_independent_and_reproducible():
    rs = replicate(3, 10, 0.8, 0.1, t_end=200.0, warmup=20.0, seed=5)
    again = replicate(3, 10, 0.8, 0.1, t_end=200.0, warmup=20.0, seed=5)
    assert all(_same(a, b) for a, b in zip(rs, again))
    means = [r.mean_queue_length for r in rs]
    assert len(set(means)) == 3


# ------------------------------------------------------------------ time averages (K08)


def test_k08_time_average_not_event_average():
    r = simulate(1, 0.5, 0.0, t_end=2e5, warmup=100.0, seed=1)
    lo, hi = r.ci
    assert lo <= 1.0 <= hi
    assert r.half_width < 0.05  # the interval excludes the event average 1.5 by far
    assert abs(r.s[1] - 0.5) <= 2 * r.s_half_width[1]
    assert abs((1 - r.s[1]) - 0.5) <= 2 * r.s_half_width[1]  # P(empty)


def test_k09_mm1_interval_and_its_width():
    r = simulate(1, 0.8, 0.0, t_end=1e6, warmup=1e3, seed=9)
    assert r.ci[0] <= 4.0 <= r.ci[1]
    # sigma^2 = 1800: half-width about 1.96 * sqrt(1800 / 1e6) = 0.083 (t_19 makes it
    # a little wider; the sample sd of 20 batch means varies by about 16%).
    assert 0.05 < r.half_width < 0.13
    assert not r.warnings


def _mm1_transient_mean(lam, t_end, kmax=400):
    """(1/T) int_0^T E[Q(t)] dt for M/M/1 from empty: Kolmogorov forward equations."""
    from scipy.integrate import solve_ivp

    k = np.arange(kmax + 1)
    up = np.full(kmax + 1, lam)
    up[-1] = 0.0
    down = np.where(k > 0, 1.0, 0.0)

    def rhs(t, y):
        pi = y[:-1]
        d = -(up + down) * pi
        d[1:] += up[:-1] * pi[:-1]
        d[:-1] += down[1:] * pi[1:]
        return np.concatenate((d, [k @ pi]))

    y0 = np.zeros(kmax + 2)
    y0[0] = 1.0
    sol = solve_ivp(rhs, (0.0, t_end), y0, rtol=1e-10, atol=1e-12, method="DOP853")
    return sol.y[-1, -1] / t_end


def test_k10_warmup_bias_is_real_and_flagged():
    exact = _mm1_transient_mean(0.9, 1000.0)
    assert abs(exact - 8.11) < 0.01  # CASES.md K10
    with pytest.warns(SimulationWarning, match="warm-up"):
        simulate(1, 0.9, 0.0, t_end=1000.0, warmup=0.0, seed=1)
    rs = quiet(replicate, 400, 1, 0.9, 0.0, t_end=1000.0, warmup=0.0, seed=10)
    m = np.array([r.mean_queue_length for r in rs])
    se = m.std(ddof=1) / math.sqrt(m.size)
    assert abs(m.mean() - exact) < 4 * se
    assert m.mean() + 4 * se < 9.0  # the steady-state mean 9 is NOT what this run gives


def test_k11_k12_no_inf_nan_empty_system_and_monotone():
    # lam = 0 with p = 1: every token finds an empty system (central server on empty).
    r = simulate(5, 0.0, 1.0, t_end=100.0, warmup=10.0, seed=1)
    assert r.mean_queue_length == 0.0 and r.ci == (0.0, 0.0)
    assert np.array_equal(r.s, [1.0]) and np.array_equal(r.longest_queue_tail, [1.0])
    for args in [(7, 0.3, 1.0), (3, 0.95, 0.5), (200, 0.99, 0.05), (1, 0.2, 0.0)]:
        r = quiet(simulate, *args, t_end=300.0, warmup=30.0, seed=2)
        for arr in (r.s, r.longest_queue_tail, r.batch_s, r.s_half_width):
            assert np.all(np.isfinite(arr))
        assert np.all(r.s >= 0) and np.all(np.diff(r.s) <= 1e-15)
        assert np.all(np.diff(r.longest_queue_tail) <= 1e-15)
        assert np.all(r.longest_queue_tail >= r.s - 1e-12)  # M >= i whenever s_i > 0
        assert r.n_events > 0


# ------------------------------------------------------------------ theory checks


@pytest.mark.parametrize("n_stations", [1, 10, 300])
def test_p0_gives_geometric_occupancy(n_stations):
    lam = 0.6
    t_end = 4e5 / n_stations
    r = simulate(n_stations, lam, 0.0, t_end=t_end, warmup=100.0, seed=n_stations)
    for i in range(1, 6):
        assert abs(r.s[i] - lam**i) <= 2 * r.s_half_width[i], i
    assert r.ci[0] - r.half_width <= lam / (1 - lam) <= r.ci[1] + r.half_width


@pytest.mark.parametrize("p", [0.3, 1.0])
def test_single_station_is_mm1_for_any_p(p):
    lam = 0.6
    r = simulate(1, lam, p, t_end=2e5, warmup=100.0, seed=21)
    assert r.ci[0] - r.half_width <= lam / (1 - lam) <= r.ci[1] + r.half_width
    assert abs(r.s[1] - lam) <= 2 * r.s_half_width[1]


def _exact_two_stations(lam, p, kmax=70):
    """Stationary law of the N = 2 chain (q1, q2) truncated at kmax jobs per station."""
    n = kmax + 1
    idx = lambda a, b: a * n + b  # noqa: E731
    rows, cols, vals = [], [], []

    def add(a, b, a2, b2, rate):
        if rate > 0:
            rows.append(idx(a, b))
            cols.append(idx(a2, b2))
            vals.append(rate)

    for a in range(n):
        for b in range(n):
            if a < kmax:
                add(a, b, a + 1, b, lam)
            if b < kmax:
                add(a, b, a, b + 1, lam)
            if a > 0:
                add(a, b, a - 1, b, 1 - p)
            if b > 0:
                add(a, b, a, b - 1, 1 - p)
            if a > b:
                add(a, b, a - 1, b, 2 * p)
            elif b > a:
                add(a, b, a, b - 1, 2 * p)
            elif a > 0:
                add(a, b, a - 1, b, p)
                add(a, b, a, b - 1, p)
    q = sparse.csr_matrix((vals, (rows, cols)), shape=(n * n, n * n))
    q = q - sparse.diags(np.asarray(q.sum(axis=1)).ravel())
    a_mat = q.T.tolil()
    a_mat[0, :] = 1.0
    rhs = np.zeros(n * n)
    rhs[0] = 1.0
    pi = spsolve(a_mat.tocsr(), rhs).reshape(n, n)
    qa = np.arange(n)
    mean_a = float(pi.sum(axis=1) @ qa)
    longest = np.maximum.outer(qa, qa)
    p_m = np.array([pi[longest >= i].sum() for i in range(6)])
    return mean_a, p_m


def test_single_station_longest_queue_is_the_queue():
    # N = 1: M is the one queue, so P(M >= i) and s_i are the same time average, batch
    # by batch (two independent integer accumulators in the kernel).
    r = simulate(1, 0.8, 0.4, t_end=2e4, warmup=100.0, seed=2)
    assert np.allclose(r.batch_longest_queue_tail, r.batch_s, rtol=0, atol=1e-12)


@pytest.mark.parametrize("lam, p", [(0.9, 0.1), (0.0, 1.0), (0.5, 0.0), (0.3, 1.0),
                                    (0.99, 0.05), (1 - 2**-40, 2**-30)])
def test_event_thresholds_are_exact(lam, p):
    from fractions import Fraction

    from qtheory._kernels import event_thresholds

    a_thr, l_thr = event_thresholds(lam, p)
    lq, pq = Fraction(lam), Fraction(p)
    assert int(a_thr) == (2**63 * lq) // (1 + lq)
    assert int(l_thr) == (2**63 * (1 + lq - pq)) // (1 + lq)
    assert int(a_thr) <= int(l_thr) <= 2**63
    if p == 0.0:
        assert int(l_thr) == 2**63  # no central token at all
    if lam == 0.0:
        assert int(a_thr) == 0  # no arrival at all


def test_position_and_type_from_one_multiplication():
    # The kernel's 128-bit product against Python integers, and the event frequencies
    # of its low word against the uniformization probabilities.
    import numba

    from qtheory import _kernels as kern

    @numba.njit
    def products(r, n):
        hi = np.empty(r.size, np.uint64)
        lo = np.empty(r.size, np.uint64)
        for i in range(r.size):
            hi[i], lo[i] = kern._mul128(r[i], np.uint64(n))
        return hi, lo

    gen = np.random.default_rng(0)
    r = gen.integers(0, 2**64, size=200_000, dtype=np.uint64, endpoint=False)
    r[:3] = [0, 2**64 - 1, 2**63]
    for n in (1, 7, 10**6, 10**9):
        hi, lo = products(r, n)
        for x, h, l_ in zip(r[:50], hi[:50], lo[:50]):
            assert int(h) * 2**64 + int(l_) == int(x) * n
        assert hi.max() < n
    hi, lo = products(r, 7)
    a_thr, l_thr = kern.event_thresholds(0.8, 0.3)
    v = lo >> np.uint64(1)
    freq = np.array([(v < a_thr).mean(), ((v >= a_thr) & (v < l_thr)).mean(),
                     (v >= l_thr).mean()])
    prob = np.array([0.8, 0.7, 0.3]) / 1.8
    assert np.all(np.abs(freq - prob) <= 5 * np.sqrt(prob * (1 - prob) / r.size))
    counts = np.bincount(hi.astype(np.int64), minlength=7)
    assert stats.chisquare(counts).pvalue > 1e-4


@pytest.mark.parametrize("n, lam, p, start", [
    (1, 0.9, 0.1, 0), (2, 0.5, 1.0, 0), (7, 0.0, 1.0, 5), (10, 0.99, 0.05, 0),
    (60, 0.9, 0.0, 0), (100, 0.95, 0.3, 250), (600, 0.9, 0.1, 0)])
def test_pipelined_kernel_gives_the_same_path(monkeypatch, n, lam, p, start):
    # run_events with pipelined=True (each event reads the next event's level before it
    # writes its own, and forwards the write itself) against the plain loop: every array
    # of the state, bit for bit, across chunk boundaries, the growth of the level arrays
    # (cap 128) and the widening of L from uint8 when a queue passes 254 (start 250)
    monkeypatch.setattr(_engine, "CHUNK", 4099)
    cnt0 = _engine.initial_counts(n, start)
    rng = np.array([11, 22, 33, 44], dtype=np.uint64)
    a = _engine.System(n, lam, p, cnt0, rng, track=False)
    b = _engine.System(n, lam, p, cnt0, rng, track=False)
    a.pipelined, b.pipelined = True, False
    for events in (1, 2, 3, 50_000, 1, 200_000):
        a.run(events)
        b.run(events)
        for name in ("L", "cnt", "acc", "tacc", "scal", "rng", "win_s", "win_tail"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.n_events == b.n_events == 250_007
    if start >= 250:
        assert a.L.dtype != np.uint8  # the widening happened


def test_tracked_and_untracked_kernels_give_the_same_path():
    # per_station=True runs the kernel that also moves station identities; the
    # occupancy path must not change (same seed), and the queues must match it.
    times = np.linspace(0.0, 200.0, 41)
    s0 = qtheory.invariant_state(0.9, 0.3)
    a = sample_path(60, 0.9, 0.3, times, s0=s0, seed=12)
    b, q = sample_path(60, 0.9, 0.3, times, s0=s0, seed=12, per_station=True)
    assert np.array_equal(a, b)
    assert np.array_equal((q[:, :, None] >= np.arange(b.shape[1])).mean(axis=1), b)


def test_two_stations_against_exact_chain_and_symmetric():
    lam, p = 0.7, 0.3
    mean_exact, pm_exact = _exact_two_stations(lam, p)
    r = simulate(2, lam, p, t_end=2e5, warmup=100.0, seed=4)
    assert abs(r.mean_queue_length - mean_exact) <= 2 * r.half_width
    for i in range(1, 4):
        hw = batch_means(r.batch_longest_queue_tail[:, i]).half_width
        assert abs(r.longest_queue_tail[i] - pm_exact[i]) <= 2 * hw
    # per-station view: both stations have the same mean
    times = 100.0 + np.arange(40_000.0)
    s, queues = sample_path(2, lam, p, times, seed=5, per_station=True)
    counts = (queues[:, :, None] >= np.arange(s.shape[1])).mean(axis=1)
    assert np.array_equal(counts, s)  # the queues and the fractions agree exactly
    diff = (queues[:, 0] - queues[:, 1]).reshape(20, -1).mean(axis=1)
    d = batch_means(diff)
    assert d.ci[0] - d.half_width <= 0.0 <= d.ci[1] + d.half_width
    per_station = queues.mean(axis=0)
    assert np.all(np.abs(per_station - mean_exact) < 0.1)


@pytest.mark.parametrize("n_stations, lam, p", [(20, 0.8, 0.2), (3, 0.9, 0.3),
                                                (100, 0.95, 0.05)])
def test_exact_identity_of_positions_above_level(n_stations, lam, p):
    # lam E[s_{i-1}] - (1 - p) E[s_i] = p P(M >= i) for every i >= 1 and every N.
    r = quiet(simulate, n_stations, lam, p, t_end=1.5e6 / n_stations, warmup=200.0,
              seed=n_stations)
    bs, bt = r.batch_s, r.batch_longest_queue_tail
    for i in range(1, min(bs.shape[1], 12)):
        resid = lam * bs[:, i - 1] - (1 - p) * bs[:, i] - p * bt[:, i]
        b = batch_means(resid)
        assert abs(b.mean) <= 2 * b.half_width + 1e-12, (i, b)


def test_interval_coverage_on_mm1():
    lam = 0.5
    rs = replicate(200, 1, lam, 0.0, t_end=2e4, warmup=50.0, seed=2024)
    covered = sum(r.ci[0] <= 1.0 <= r.ci[1] for r in rs)
    # Binomial(200, 0.95): mean 190, sd 3.1
    assert 180 <= covered <= 199, covered


@pytest.mark.slow
def test_large_n_heavy_traffic_matches_invariant_state():
    # The paper's case at N = 2000, started at the (rounded) invariant state.  About
    # 5e8 events (10-20 s): the mean fluctuates slowly in heavy traffic, and a run of a
    # few thousand time units gives correlated batches (and is flagged as such).
    lam, p = 0.99, 0.05
    s_inv = qtheory.invariant_state(lam, p)
    r = quiet(simulate, 2000, lam, p, t_end=120_000.0, warmup=20_000.0, s0=s_inv,
              seed=1)
    fluid = qtheory.mean_queue_length(lam, p)
    # MODEL.md: N = 2000 gives 24.08 +- 0.11 against the fluid 24.03; allow 0.15 for the
    # finite-N offset on top of the sampling error.
    assert abs(r.mean_queue_length - fluid) <= 2 * r.half_width + 0.15
    m = min(len(r.s), len(s_inv))
    # finite N smooths the top of the profile: a few stations sit one or two levels
    # above the fluid top level i* = 39 and the levels just below it are a little lower
    assert np.max(np.abs(r.s[:m] - s_inv[:m])) < 0.03
    assert np.max(np.abs(r.s[:30] - s_inv[:30])) < 0.01
    # levels three or more above the fluid top level hold (on average) under 0.1% of
    # the stations; single excursions further up do happen in 5e8 events
    assert np.all(r.s[len(s_inv) + 2:] < 1e-3)


@pytest.mark.parametrize("n_small, n_large, slow", [
    (500, 2000, False),
    pytest.param(2000, 8000, True, marks=pytest.mark.slow),
])
def test_large_n_critical_top_level_spillover_shrinks_like_sqrt_n(n_small, n_large,
                                                                  slow):
    # (0.9, 0.1): lam s_8 = p exactly in the fluid state, i* = 8, s_i = 1 - i/9, mean 4.
    # The spill-over to level 9 is a finite-N effect of order N^(-1/2) (MODEL.md:
    # 0.0218, 0.0109, 0.0055 at N = 500, 2000, 8000); it relaxes slowly, so the runs
    # are long (2e4 time units).
    lam, p = 0.9, 0.1
    s_inv = qtheory.invariant_state(lam, p)
    res = {}
    for n in (n_small, n_large):
        res[n] = quiet(simulate, n, lam, p, t_end=20_000.0, warmup=2_000.0, s0=s_inv,
                       seed=n)
    big = res[n_large]
    assert np.max(np.abs(big.s[:9] - s_inv[:9])) < 0.01
    assert abs(big.mean_queue_length - 4.0) <= 2 * big.half_width + 0.03
    spill = {n: r.s[9] for n, r in res.items()}
    for n, r in res.items():
        assert spill[n] > 4 * r.s_half_width[9]  # clearly positive: not a fluid value
    ratio = spill[n_small] / spill[n_large]
    assert 1.5 < ratio < 2.7, ratio  # sqrt(4) = 2
    assert abs(spill[n_large] * math.sqrt(n_large) - 0.0109 * math.sqrt(2000)) < 0.15


def test_sample_path_pure_departures_match_poisson_law():
    # lam = 0, p = 0, all stations start with 3 jobs: each queue at time t is
    # max(3 - Poisson(t), 0), so s_1(t) = P(Poisson(t) <= 2).
    n = 20_000
    times = np.array([0.0, 0.5, 1.0, 2.0, 4.0])
    s = sample_path(n, 0.0, 0.0, times, s0=3, seed=8)
    assert np.array_equal(s[0], [1.0, 1.0, 1.0, 1.0])
    for i in (1, 2, 3):
        exact = stats.poisson.cdf(3 - i, times)
        se = np.sqrt(exact * (1 - exact) / n)
        assert np.all(np.abs(s[:, i] - exact) <= 5 * se + 1e-12)


def test_sample_path_shapes_and_fraction_initial_state():
    s0 = qtheory.invariant_state(0.9, 0.1)
    times = [0.0, 0.0, 1.0, 5.0]
    s = sample_path(900, 0.9, 0.1, times, s0=s0, seed=3)
    assert s.shape[0] == 4 and s.shape[1] >= len(s0)
    assert np.allclose(s[0, : len(s0)], s0, atol=0.5 / 900)
    assert np.array_equal(s[0], s[1])  # no time passes, no event happens
    assert np.all(s[:, 0] == 1.0) and np.all(np.diff(s, axis=1) <= 0)
    assert np.allclose(s * 900, np.rint(s * 900))


def test_progress_bar_does_not_change_results(capsys):
    a = simulate(10, 0.8, 0.1, t_end=300.0, warmup=30.0, seed=4, progress=True)
    b = simulate(10, 0.8, 0.1, t_end=300.0, warmup=30.0, seed=4, progress=False)
    assert _same(a, b)
    assert "ev" in capsys.readouterr().err


def test_interrupt_between_chunks_propagates(monkeypatch):
    calls = []
    real = _kernels.run_events

    def flaky(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(_engine, "CHUNK", 1000)
    monkeypatch.setattr(_kernels, "run_events", flaky)
    with pytest.raises(KeyboardInterrupt):
        simulate(10, 0.8, 0.1, t_end=1000.0, warmup=10.0, seed=1)


def test_result_reports_inputs_and_no_fluid_value():
    r = simulate(10, 0.9, 0.1, t_end=500.0, warmup=50.0, seed=1)
    assert (r.n_stations, r.lam, r.p, r.t_end, r.warmup) == (10, 0.9, 0.1, 500.0, 50.0)
    assert r.s[0] == 1.0 and r.longest_queue_tail[0] == 1.0
    assert math.isclose(r.mean_queue_length, float(r.s[1:].sum()), rel_tol=1e-12)
    assert r.ci[0] <= r.mean_queue_length <= r.ci[1]
    assert "SimulationResult" in repr(r) and "mean queue length" in r.summary()
    assert not any("fluid" in f for f in r.__dataclass_fields__)


# ------------------------------------------------------------------ statistics helpers


def test_batch_means_and_correlation_diagnostic():
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    assert abs(lag1_autocorrelation(x)) < 0.15
    ar = np.empty(400)
    ar[0] = 0.0
    for t in range(1, 400):
        ar[t] = 0.8 * ar[t - 1] + rng.normal()
    assert lag1_autocorrelation(ar) > 0.6
    assert correlation_threshold(20) > 0.1 and correlation_threshold(10_000) == 0.1
    b = batch_means([1.0, 2.0, 3.0])
    assert b.mean == 2.0
    assert math.isclose(b.half_width, stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3))
    with pytest.raises(ValueError, match="batch_values"):
        batch_means([1.0])


def test_skew_adjusted_batch_means():
    # Willink's (2005) interval: a = G1 / (6 sqrt(B)) with G1 the unbiased sample
    # skewness, limits mean - G(+-t) S / sqrt(B), G(r) = ((1 + 6a(r - a))^(1/3) - 1)/(2a)
    x = np.array([0.2, 0.3, 0.35, 0.5, 0.9, 1.4, 3.0])
    w = batch_means(x, skew_adjusted=True)
    B, m, se = x.size, x.mean(), x.std(ddof=1) / math.sqrt(x.size)
    a = stats.skew(x, bias=False) / (6 * math.sqrt(B))
    tq = stats.t.ppf(0.975, B - 1)

    def g(r):
        return (np.cbrt(1 + 6 * a * (r - a)) - 1) / (2 * a)

    assert w.ci == pytest.approx((m - g(tq) * se, m - g(-tq) * se), rel=1e-12)
    assert w.mean == m and w.half_width == pytest.approx((w.ci[1] - w.ci[0]) / 2)
    assert w.ci[1] - m > m - w.ci[0]  # right-skewed: reaches further above the mean
    # symmetric batches: the Student interval; nearly symmetric: continuous across the
    # switch to the first-order expansion at |a| = 1e-6
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert batch_means(y, skew_adjusted=True).ci == pytest.approx(batch_means(y).ci)
    from qtheory.statistics import _willink_g
    for r in (2.1, -2.1):
        for a_ in (0.999e-6, -0.999e-6):  # the expansion against the closed form
            exact = (np.cbrt(1 + 6 * a_ * (r - a_)) - 1) / (2 * a_)
            assert _willink_g(r, a_) == pytest.approx(exact, abs=1e-9)
        assert _willink_g(r, 0.0) == r
    # coverage for the mean of 20 exponential batch values (skewness 2 each): the
    # Student interval misses high far more often than low; Willink's is close to 95%
    # (20000 samples: binomial sd 0.0016; measured 0.917 and 0.948 with this seed)
    X = np.random.default_rng(20261202).exponential(size=(20000, 20))
    cov_t = np.mean([lo <= 1.0 <= hi for lo, hi in (batch_means(r).ci for r in X)])
    cov_w = np.mean([lo <= 1.0 <= hi for lo, hi in
                     (batch_means(r, skew_adjusted=True).ci for r in X)])
    assert cov_t < 0.93 and abs(cov_w - 0.95) < 0.01
    with pytest.raises(ValueError, match="3 batches"):
        batch_means([1.0, 2.0], skew_adjusted=True)
    with pytest.raises(ValueError, match="skew_adjusted"):
        batch_means(x, skew_adjusted="yes")


def test_correlated_batches_are_flagged():
    # p = 0.1, lam = 0.95, N = 200 over a short horizon from empty: the mean is still
    # drifting, so consecutive batch means are strongly correlated.
    with pytest.warns(SimulationWarning, match="correlated"):
        simulate(200, 0.95, 0.1, t_end=200.0, warmup=1.0, seed=1)


# ------------------------------------------------------------------ robustness (K18)


def _read_only_command(pkg_root, home, code):
    """Command running ``code`` with pkg_root and home read-only (even for root)."""
    if os.name == "posix" and os.geteuid() == 0:
        # root ignores permission bits: use read-only bind mounts in a private mount
        # namespace instead
        if shutil.which("unshare") is None:
            pytest.skip("running as root without unshare: cannot make a folder read-only")
        probe = subprocess.run(["unshare", "-m", "-r", "true"], capture_output=True)
        if probe.returncode != 0:
            pytest.skip("running as root and unshare -m is not permitted")
        script = ('mount --bind -o ro "$1" "$1" && mount --bind -o ro "$2" "$2" && '
                  'exec "$3" -c "$4"')
        return ["unshare", "-m", "-r", "sh", "-c", script, "sh", str(pkg_root),
                str(home), sys.executable, code]
    return [sys.executable, "-c", code]


@pytest.mark.parametrize("user_cache", [False, True])
def test_import_with_read_only_package_and_home(tmp_path, user_cache):
    # K18: numba's cache=True with a read-only package folder and an unwritable home
    pkg_root = tmp_path / "ro"
    shutil.copytree(ROOT / "qtheory", pkg_root / "qtheory",
                    ignore=shutil.ignore_patterns("__pycache__"))
    home = tmp_path / "home"
    home.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    for path in [pkg_root, home, *pkg_root.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(HOME=str(home), PYTHONPATH=str(pkg_root), XDG_CACHE_HOME=str(home),
               PYTHONDONTWRITEBYTECODE="1")
    if user_cache:
        env["NUMBA_CACHE_DIR"] = str(cache)
    code = ("import qtheory; r = qtheory.simulate(3, 0.5, 0.2, t_end=50.0, warmup=5.0, "
            "seed=1); print(qtheory.__file__); print(r.mean_queue_length)")
    try:
        proc = subprocess.run(_read_only_command(pkg_root, home, code), env=env,
                              capture_output=True, text=True, timeout=180,
                              cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr
        assert str(pkg_root) in proc.stdout
        assert math.isfinite(float(proc.stdout.split()[-1]))
        cached = list(cache.rglob("*.nbi"))
        if user_cache:
            assert cached, "NUMBA_CACHE_DIR was not used"
            assert "no writable numba cache" not in proc.stderr
        else:
            assert not cached
            assert not list(pkg_root.rglob("*.nbi")) and not list(home.rglob("*.nbi"))
            assert "no writable numba cache" in proc.stderr
    finally:
        for path in [pkg_root, home, *pkg_root.rglob("*")]:
            path.chmod(0o755)


# ------------------------------------------------------------------ several chains, all cores


def test_chains_bit_identical_whatever_the_number_of_workers():
    kw = dict(t_end=3000.0, warmup=300.0, seed=11, n_chains=3)
    a = quiet(simulate, 80, 0.9, 0.1, workers=1, **kw)
    b = quiet(simulate, 80, 0.9, 0.1, workers=2, **kw)
    c = quiet(simulate, 80, 0.9, 0.1, workers=None, **kw)
    assert _same(a, b) and _same(a, c)
    assert a.n_chains == 3 and a.batch_s.shape[0] == 3 * 20
    assert a.lag1 == b.lag1 and a.warnings == b.warnings


def test_replicate_bit_identical_whatever_the_number_of_workers():
    kw = dict(t_end=500.0, warmup=50.0, seed=5)
    a = quiet(replicate, 4, 30, 0.85, 0.1, workers=1, **kw)
    b = quiet(replicate, 4, 30, 0.85, 0.1, workers=2, **kw)
    assert all(_same(x, y) for x, y in zip(a, b))
    # and each replication is simulate with the r-th spawned child
    child = np.random.SeedSequence(5).spawn(4)[2]
    assert _same(a[2], quiet(simulate, 30, 0.85, 0.1, t_end=500.0, warmup=50.0,
                             seed=child))


def test_chains_are_the_replications_pooled():
    kw = dict(t_end=2000.0, warmup=200.0, seed=21)
    pooled = quiet(simulate, 40, 0.9, 0.1, n_chains=2, workers=2, **kw)
    reps = quiet(replicate, 2, 40, 0.9, 0.1, **kw)
    # (equal up to summation order: the pooled rows are padded to the widest chain)
    np.testing.assert_allclose(pooled.batch_mean_queue_length,
                               np.concatenate([r.batch_mean_queue_length for r in reps]),
                               rtol=1e-13)
    assert pooled.n_events == sum(r.n_events for r in reps)
    x = pooled.batch_mean_queue_length
    assert pooled.mean_queue_length == pytest.approx(x.mean(), rel=1e-12)
    h = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    assert pooled.half_width == pytest.approx(h, rel=1e-12)
    # lag-1 from pairs within chains only
    d = (x - x.mean()).reshape(2, 20)
    expect = (np.sum(d[:, :-1] * d[:, 1:]) / 38) / (np.sum(d * d) / 40)
    assert pooled.lag1 == pytest.approx(expect, rel=1e-12)


def test_one_chain_is_the_classic_run():
    a = simulate(60, 0.8, 0.1, t_end=4000.0, warmup=400.0, seed=9)
    b = simulate(60, 0.8, 0.1, t_end=4000.0, warmup=400.0, seed=9, n_chains=1,
                 workers=2)
    assert _same(a, b)


def test_interrupt_in_a_worker_stops_every_chain(monkeypatch):
    calls = {"n": 0}
    real = _kernels.run_events

    def flaky(*args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(_engine, "CHUNK", 5000)
    monkeypatch.setattr(_kernels, "run_events", flaky)
    with pytest.raises(KeyboardInterrupt):
        quiet(simulate, 50, 0.9, 0.1, t_end=2000.0, warmup=0.0, seed=1, n_chains=4,
              workers=2)


@pytest.mark.parametrize("kw, name", [
    (dict(n_chains=0), "n_chains"), (dict(n_chains=-1), "n_chains"),
    (dict(n_chains=2.0), "n_chains"), (dict(n_chains=10**5), "n_chains"),
    (dict(workers=0), "workers"), (dict(workers=-2), "workers"),
    (dict(workers=1.5), "workers"), (dict(workers="all"), "workers"),
    (dict(progress="yes"), "progress"),
])
def test_simulate_rejects_bad_chain_options(kw, name):
    with pytest.raises(ValueError, match=name):
        simulate(10, 0.5, 0.1, t_end=10.0, warmup=1.0, **kw)


# ------------------------------------------------------------------ diagnostics for p > 0


def _messages(*args, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SimulationWarning)
        r = simulate(*args, **kw)
    msgs = [str(w.message) for w in caught if issubclass(w.category, SimulationWarning)]
    assert msgs == r.warnings
    return r, msgs


def test_short_warmup_from_far_away_is_flagged_with_numbers():
    mu = qtheory.relaxation_rate(0.9, 0.1)
    r, msgs = _messages(200, 0.9, 0.1, t_end=1500.0, warmup=20.0, seed=2, s0=20)
    hit = [m for m in msgs if "three fluid relaxation times" in m]
    assert hit and f"{3 / mu:.4g}" in hit[0] and "l1 distance" in hit[0]


def test_short_warmup_from_the_answer_is_flagged_as_such():
    s_inv = qtheory.invariant_state(0.9, 0.1)
    r, msgs = _messages(500, 0.9, 0.1, t_end=1500.0, warmup=10.0, seed=2, s0=s_inv)
    assert any("the answer" in m and "3/mu" in m for m in msgs)


def test_batches_shorter_than_the_correlation_time_are_flagged():
    tau = qtheory.planning.variance_model(100, 0.95, 0.1)["correlation_time"]
    r, msgs = _messages(100, 0.95, 0.1, t_end=1500.0, warmup=1000.0, seed=4)
    hit = [m for m in msgs if "correlation times" in m]
    assert hit and f"{tau:.4g}" in hit[0]


def test_interval_below_the_fluid_lower_bound_is_flagged():
    # from empty, far too short: the estimate is well below v^I = 24.03
    r, msgs = _messages(1000, 0.99, 0.05, t_end=300.0, warmup=100.0, seed=1)
    assert r.ci[1] < qtheory.mean_queue_length(0.99, 0.05)
    assert any("below the fluid value v^I_1 = 24.0298" in m for m in msgs)


def test_a_planned_run_has_no_warning():
    plan = qtheory.plan_run(200, 0.9, 0.1, half_width=0.08, calibrate=False)
    r, msgs = _messages(**plan, seed=8)
    assert not msgs
    assert r.ci[1] >= 4.0


def test_long_good_run_p0_has_no_warning_and_p0_warnings_stay():
    r, msgs = _messages(1, 0.5, 0.0, t_end=2e4, warmup=100.0, seed=1)
    assert not msgs
    r, msgs = _messages(1, 0.9, 0.0, t_end=500.0, warmup=10.0, seed=1)
    assert any("M/M/1" in m for m in msgs)


def test_progress_shown_in_scripts_for_long_runs(monkeypatch, capsys):
    monkeypatch.setattr(simmod, "_AUTO_PROGRESS_SECONDS", 0.0)
    quiet(simulate, 20, 0.8, 0.1, t_end=500.0, warmup=50.0, seed=1)
    assert "simulate" in capsys.readouterr().err
    quiet(simulate, 20, 0.8, 0.1, t_end=500.0, warmup=50.0, seed=1, progress=False)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(simmod, "_AUTO_PROGRESS_SECONDS", 10.0)
    quiet(simulate, 20, 0.8, 0.1, t_end=500.0, warmup=50.0, seed=1)
    assert capsys.readouterr().err == ""


def test_kernels_release_the_gil():
    for kern in (_kernels.run_events, _kernels.run_events_tracked, _kernels.flush):
        assert kern.targetoptions.get("nogil") is True


def test_planned_chains_same_result_on_one_or_two_workers():
    plan = qtheory.plan_run(100, 0.9, 0.1, half_width=0.15, n_chains=2, calibrate=False)
    a = quiet(simulate, **plan, seed=4, workers=1)
    b = quiet(simulate, **plan, seed=4, workers=2)
    assert _same(a, b) and a.n_chains == 2
    assert a.batch_s.shape[0] == 2 * plan.n_batches
