"""Issue 23, library side: the inputs a new user broke, and every input of the same kind.

Each test failed before its fix.  The rule they enforce: a clear ``ValueError`` naming the
parameter and its valid range within a second or two; never a hang, a MemoryError, a raw
NumPy/numba/overflow error or a silent wrong number; Ctrl-C works within a few seconds.
Expected values come from closed forms evaluated independently here (mpmath, math.comb,
the secular equation of a tridiagonal Toeplitz matrix).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import mpmath
import numpy as np
import pytest

import qtheory as qt
from qtheory import _linear_noise as linnoise
from qtheory import book as qb
from qtheory import fluid as fluidmod
from qtheory.book import explorers as explmod
from qtheory.sweep import expand_grid, point_seeds

# Every call below must answer quickly; a hang fails the test instead of the suite.
pytestmark = pytest.mark.timeout(120)


def _named(err, *names):
    text = str(err.value)
    missing = [n for n in names if n not in text]
    assert not missing, f"message does not name {missing}: {text}"


# ======================================================================================
# Item 1: hangs and memory blow-ups
# ======================================================================================

@pytest.mark.parametrize("lam, p, t_end", [
    (0.999, 1e-6, 1e6),      # the reported case: ~6900 levels for 1e6 time units
    (0.9999, 1e-3, 1e6),     # ~2560 levels
    (1 - 1e-9, 1e-8, 1e6),   # top level ~2.6e8: the bound must not build the state
])
def test_fluid_trajectory_p_positive_has_a_work_cap(lam, p, t_end):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as err:
        qt.fluid_trajectory(lam, p, [0.0, t_end])
    _named(err, "lam", "p=", "times", "levels")
    assert time.perf_counter() - t0 < 30  # refused before any long solve


def test_fluid_trajectory_work_cap_counts_the_initial_levels():
    s0 = np.ones(300_001)  # every station holds 300000 jobs: 3e5 levels x 1e4 time units
    with pytest.raises(ValueError) as err:
        qt.fluid_trajectory(0.9, 0.1, [0.0, 1e4], s0)
    _named(err, "s0", "levels")


def test_fluid_trajectory_output_size_is_capped():
    times = np.linspace(0.0, 10.0, 10**7)  # 1e7 rows x (levels) columns
    with pytest.raises(ValueError) as err:
        qt.fluid_trajectory(0.99, 0.05, times)
    _named(err, "times")


def test_fluid_trajectory_p_positive_runs_in_bounded_slices(monkeypatch):
    """Each compiled call covers a bounded amount of work, so Ctrl-C is seen between them;
    the sliced solve equals the one-piece solve."""
    t = [0.0, 3.0, 40.0, 41.0, 400.0]
    s0 = [1.0, 1.0, 1.0, 0.5]
    whole = qt.fluid_trajectory(0.95, 0.05, t, s0)
    calls = []
    real = fluidmod.fluid_run  # the kernel entry point (qtheory._fluid_kernels)

    def spy(lam, p, x, K, t, times, *rest):
        calls.append((t, float(times[-1])))
        return real(lam, p, x, K, t, times, *rest)

    monkeypatch.setattr(fluidmod, "fluid_run", spy)
    monkeypatch.setattr(fluidmod, "_SLICE_WORK", 200.0)  # level-time units per call
    sliced = qt.fluid_trajectory(0.95, 0.05, t, s0)
    assert len(calls) > 20
    w = max(whole.shape[1], sliced.shape[1])
    pad = lambda a: np.pad(a, ((0, 0), (0, w - a.shape[1])))  # noqa: E731
    assert np.abs(pad(whole) - pad(sliced)).sum(axis=1).max() < 1e-12


@pytest.mark.timeout(180)
def test_fluid_trajectory_p_positive_honours_ctrl_c():
    """A long (accepted) solve is interrupted by SIGINT within a few seconds."""
    code = textwrap.dedent("""
        import signal, qtheory as qt
        # as in an interactive session (a shell may start background jobs with SIGINT
        # ignored, and Python then installs no KeyboardInterrupt handler)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        qt.fluid_trajectory(0.9, 0.1, [0.0, 1.0])        # compile / load the kernels
        print("go", flush=True)
        qt.fluid_trajectory(0.999, 1e-4, [0.0, 3e5])     # ~2600 levels: about a minute
        print("finished", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "go"
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("fluid_trajectory ignored Ctrl-C for 30 s")
        waited = time.perf_counter() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "KeyboardInterrupt" in err, err[-2000:]
    assert waited < 30


def test_exact_state_space_size_huge_answers_at_once():
    t0 = time.perf_counter()
    assert qt.exact.exact_state_space_size(10**9, 10**9) == math.inf
    assert qt.exact.exact_state_space_size(10**18, 10**18) == math.inf
    assert qt.exact.exact_state_space_size(10**18, 3) == math.comb(10**18 + 3, 3)
    assert time.perf_counter() - t0 < 5
    # exact integers wherever they can be written out cheaply
    for n, k in [(1, 1), (3, 60), (50, 50), (1000, 1000), (2000, 2000)]:
        v = qt.exact.exact_state_space_size(n, k)
        assert isinstance(v, int) and v == math.comb(n + k, n)


def _memory_formula(n, k):
    """The documented estimate, in exact integer arithmetic (independent of the code)."""
    S = math.comb(n + k, n)
    E = S * (1 + 2 * min(n, k + 1))
    ib = 4 if E < 2**31 else 8
    states = S * 2 * n
    build = states + S * 16 + 2 * E * (8 + ib) + S * 8
    solve = states + E * (8 + ib) + E * 8 + S * 8 + 68 * S * 8
    return 1.1 * max(build, solve) + 250e6


@pytest.mark.parametrize("n, k", [(1, 1), (2, 40), (3, 60), (10, 10), (6, 30), (100, 20)])
def test_exact_memory_estimate_small_cases_unchanged(n, k):
    assert qt.exact.exact_memory_estimate(n, k) == pytest.approx(_memory_formula(n, k), abs=1.0)


@pytest.mark.parametrize("n, k", [(2000, 2000), (10**9, 10**9), (200, 200), (10**6, 10),
                                  (5, 10**12), (10**18, 3)])
def test_exact_memory_estimate_never_overflows_or_hangs(n, k):
    t0 = time.perf_counter()
    v = qt.exact.exact_memory_estimate(n, k)
    assert time.perf_counter() - t0 < 5
    assert v > 1e12
    if n + k < 5000:  # the formula can be evaluated exactly here
        ref = _memory_formula(n, k) if math.comb(n + k, n) < 10**300 else math.inf
        assert v == ref == math.inf or v == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("n, k, limit", [(1000, 1000, 4e9), (200, 200, math.inf),
                                         (2000, 2000, math.inf), (10**9, 10**9, math.inf),
                                         (40, 40, 1e300)])
def test_exact_stationary_refuses_impossible_state_spaces(n, k, limit):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as err:
        qt.exact_stationary(n, 0.5, 0.1, max_queue=min(k, 32767), memory_limit=limit)
    assert time.perf_counter() - t0 < 5
    _named(err, "n_stations", "max_queue")


@pytest.mark.parametrize("start", ["all at level k", "invariant + layer"])
@pytest.mark.parametrize("k", [10**7, 10**12, 2**80])
def test_fluid_start_level_is_capped(start, k):
    with pytest.raises(ValueError) as err:
        qb.fluid_start(0.9, 0.1, start, k)
    _named(err, "k")


@pytest.mark.parametrize("shift", [10**8, 10**12, 2**80])
def test_shifted_invariant_state_shift_is_capped(shift):
    with pytest.raises(ValueError) as err:
        qb.shifted_invariant_state(0.9, 0.1, shift)
    _named(err, "shift")
    assert qb.shifted_invariant_state(0.9, 0.1, 1000).size == 1000 + 9


@pytest.mark.parametrize("call", [
    lambda n: qb.fluid_limit_distance(10, 0.9, 0.1, 5.0, seed=1, n_times=n),
    lambda n: qb.martingale_tolerance(10, 0.9, 0.1, 5.0, n_times=n),
    lambda n: qb.fluid_limit_study(0.9, 0.1, 5.0, [10, 20], [1], n_times=n),
], ids=["fluid_limit_distance", "martingale_tolerance", "fluid_limit_study"])
@pytest.mark.parametrize("n", [10**9, 10**12, 2**70])
def test_n_times_is_capped(call, n):
    with pytest.raises(ValueError) as err:
        call(n)
    _named(err, "n_times")


@pytest.mark.parametrize("n", [10**9, 2**70])
def test_concentration_snapshots_are_capped(n):
    with pytest.raises(ValueError) as err:
        qb.concentration_study(0.9, 0.1, [2], n_snapshots=n, n_batches=n)
    assert "n_snapshots" in str(err.value) or "n_batches" in str(err.value)


@pytest.mark.parametrize("n_curve", [10**9, 10**12, 2**70])
def test_design_view_curve_is_capped(n_curve):
    with pytest.raises(ValueError) as err:
        qb.design_view(0.9, 2.0, n_curve)
    _named(err, "n_curve")


@pytest.mark.parametrize("bad", ["a", 2.5, True, 1, 0, -3, None])
def test_design_view_curve_must_be_an_integer(bad):
    with pytest.raises(ValueError) as err:
        qb.design_view(0.9, 2.0, bad)
    _named(err, "n_curve")


def test_design_view_curve_unchanged():
    v = qb.design_view(0.9, 2.0, 5)
    assert np.array_equal(v["p"], np.linspace(0.0, 0.9, 5))
    assert v["mean"][0] == pytest.approx(9.0) and v["mean"][-1] == 0.0


@pytest.mark.parametrize("method", ["Radau", "BDF", "LSODA"])
def test_naive_solve_implicit_methods_cap_levels(method):
    with pytest.raises(ValueError) as err:
        qb.naive_fluid_solve(0.9, 0.1, 1.0, method=method, levels=10**5)
    _named(err, "levels", method)


def test_naive_solve_caps_total_work():
    with pytest.raises(ValueError) as err:
        qb.naive_fluid_solve(0.9, 0.1, 1.0, levels=10**6, max_evaluations=10**6)
    _named(err, "levels", "max_evaluations")
    with pytest.raises(ValueError) as err:
        qb.naive_fluid_solve(0.9, 0.1, 1.0, max_evaluations=10**15)
    _named(err, "max_evaluations")


def test_naive_solve_default_levels_never_build_a_huge_state():
    # tiny p: the default (2 i* + 10) would be ~5e8 levels; refuse, naming levels
    with pytest.raises(ValueError) as err:
        qb.naive_fluid_solve(1 - 1e-9, 1e-8, 1.0)
    _named(err, "levels")


@pytest.mark.parametrize("n", [10**8, 10**12, 2**70])
def test_point_seeds_count_is_capped(n):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as err:
        point_seeds(1, n)
    assert time.perf_counter() - t0 < 5
    _named(err, "n_points")


@pytest.mark.parametrize("grid", [
    {"a": range(10**6), "b": range(10**6)},
    {"a": range(10**12)},
    {"a": range(1000), "b": range(1000), "c": range(1000)},
    {"a": np.arange(3000), "b": np.arange(3000)},
])
def test_expand_grid_caps_the_product_before_allocating(grid):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as err:
        expand_grid(grid)
    assert time.perf_counter() - t0 < 5
    _named(err, "grid")
    with pytest.raises(ValueError):
        qt.sweep(abs, grid, progress=False)


@pytest.mark.parametrize("call, name", [
    (lambda: qt.invariant_state(1 - 1e-15, 1e-14, max_levels=10**12), "max_levels"),
    (lambda: qt.invariant.invariant_tail_sums(1 - 1e-15, 1e-14, max_levels=10**12), "max_levels"),
    (lambda: qt.invariant_state(1 - 1e-15, 0.0, max_levels=10**12), "max_levels"),
    (lambda: qt.supermarket.supermarket_fixed_point(1 - 1e-12, 1, max_levels=10**13), "max_levels"),
    (lambda: qt.supermarket.supermarket_fixed_point(0.9, 2, max_levels=10**13), "max_levels"),
])
def test_max_levels_has_a_ceiling(call, name):
    with pytest.raises(ValueError) as err:
        call()
    _named(err, name)


@pytest.mark.parametrize("lam, p", [(1 - 1e-12, 1e-300), (1 - 1e-9, 1e-8),
                                    (0.999999, 1e-200)])
def test_functions_of_lam_p_never_build_the_state_they_do_not_return(lam, p):
    """relaxation_rate and relaxation_rate_bound need only i* and s_{i*}, not the state."""
    t0 = time.perf_counter()
    mu = qt.relaxation_rate(lam, p)
    assert 0.0 < mu < 1.0 and math.isfinite(mu)
    if lam + p > 1:
        assert qb.relaxation_rate_bound(lam, p) >= mu * (1 - 1e-9)
    assert time.perf_counter() - t0 < 10
    with pytest.raises(ValueError) as err:   # the tail array itself is too large
        qb.longest_queue_limit(lam, p)
    _named(err, "lam", "p")


def _eigmax_dense(lam, p, K):
    from scipy.linalg import eigvalsh_tridiagonal

    d = np.full(K, -(lam + 1.0 - p))
    d[-1] = -(1.0 - p)
    e = np.full(K - 1, math.sqrt(lam * (1.0 - p)))
    return float(eigvalsh_tridiagonal(d, e, select="i", select_range=(K - 1, K - 1))[0])


@pytest.mark.parametrize("lam, p", [(0.9, 0.1), (0.99, 0.05), (0.7, 0.2), (0.5, 0.01),
                                    (0.999, 0.01), (0.95, 0.3), (0.9, 1e-30),
                                    (0.99, 0.0101), (0.6, 0.35), (0.9, 1e-300)])
def test_relaxation_rate_secular_equation_matches_the_matrix(lam, p):
    """The top eigenvalue comes from the secular equation of the tridiagonal matrix (no
    matrix is built); on sizes LAPACK can handle it equals LAPACK's value."""
    K = qt.top_level(lam, p)
    for k in (K, K + 1):
        assert linnoise.regime_matrix_eigmax(lam, p, k) == pytest.approx(
            _eigmax_dense(lam, p, k), rel=1e-10)


def test_relaxation_rate_tiny_eigenvalue_is_accurate():
    # lam = 1 - 1e-12, p = 0.5: the rate is ~9e-13, where LAPACK's absolute error of a
    # rounding unit of ||A|| costs 5 digits; reference: 50-digit eigenvalues (mpmath)
    lam, p = 1 - 1e-12, 0.5
    with mpmath.workdps(50):
        L, P = mpmath.mpf(lam), mpmath.mpf(p)
        for K in (38, 39):
            A = mpmath.zeros(K, K)
            for i in range(K):
                A[i, i] = -(L + 1 - P)
                if i < K - 1:
                    A[i, i + 1] = A[i + 1, i] = mpmath.sqrt(L * (1 - P))
            A[K - 1, K - 1] = -(1 - P)
            ref = float(max(mpmath.eigsy(A, eigvals_only=True)))
            assert linnoise.regime_matrix_eigmax(lam, p, K) == pytest.approx(ref, rel=1e-12)


# ======================================================================================
# Item 2: wrong or raw errors
# ======================================================================================

def test_fluid_trajectory_rounding_floor_is_a_value_error_cheap_case():
    # lam = 1 - 1e-12: the relaxation time (~1e12) dwarfs the horizon, so rounding
    # errors are not damped; at t = 1e4 two step sizes differ by ~1e-12
    with pytest.raises(ValueError) as err:
        qt.fluid_trajectory(1 - 1e-12, 0.5, [0.0, 1e4], tol=1e-14)
    _named(err, "lam", "tol")
    assert "please report" not in str(err.value)
    s = qt.fluid_trajectory(1 - 1e-12, 0.5, [0.0, 1e4], tol=1e-10)
    assert s.shape[0] == 2


@pytest.mark.slow
def test_fluid_trajectory_reported_near_one_case():
    try:
        s = qt.fluid_trajectory(1 - 1e-12, 0.5, [0.0, 1e6])
    except ValueError as err:
        assert "lam" in str(err) and "tol" in str(err), err
        assert "please report" not in str(err)
    else:  # if it is solved, it must be a state
        assert s.shape[0] == 2 and np.all(np.diff(s, axis=1) <= 0)


@pytest.mark.parametrize("maxiter", [10**6, 10**12, True, 2.0])
def test_exact_stationary_gmres_iterations_are_capped(maxiter):
    with pytest.raises(ValueError) as err:
        qt.exact_stationary(2, 0.5, 0.2, max_queue=10, maxiter=maxiter)
    _named(err, "maxiter")


def test_exact_stationary_memory_limit_inf_is_not_a_numba_error():
    with pytest.raises(ValueError) as err:
        qt.exact_stationary(200, 0.5, 0.1, max_queue=200, memory_limit=math.inf)
    _named(err, "n_stations", "max_queue")


@pytest.mark.parametrize("d", [10**309, 10**400, 2**64, 10**20])
def test_supermarket_huge_d(d):
    # s_1 = lam, s_2 = lam**(1 + d) underflows: the mean is lam
    assert qt.supermarket.supermarket_mean_queue_length(0.9, d) == 0.9
    assert np.array_equal(qt.supermarket.supermarket_fixed_point(0.9, d), [1.0, 0.9])


def test_supermarket_moderate_d_unchanged():
    for d in (2, 3, 10, 1000):
        s = qt.supermarket.supermarket_fixed_point(0.9, d)
        i = np.arange(s.size)
        exps = [(d**k - 1) // (d - 1) for k in i]
        assert np.allclose(s, [0.9**e for e in exps], rtol=1e-15)


@pytest.mark.parametrize("eps", [1e-15, 1e-14, 5e-324])
def test_time_to_invariant_eps_below_rounding_names_eps(eps):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as err:
        qt.time_to_invariant(0.9, 0.1, eps=eps)
    assert time.perf_counter() - t0 < 10
    _named(err, "eps")
    assert "times" not in str(err.value)


def test_time_to_invariant_reaches_beyond_one_fluid_call(monkeypatch):
    """The march is not limited by fluid_trajectory's horizon: t_max is reachable."""
    ref = qt.time_to_invariant(0.9, 0.1, eps=1e-6)
    assert 300 < ref < 1000
    monkeypatch.setattr(fluidmod, "_MAX_TIME", 64.0)  # each call may cover 64 units only
    assert qt.time_to_invariant(0.9, 0.1, eps=1e-6) == pytest.approx(ref, rel=1e-5)


@pytest.mark.parametrize("t_max", [50.0, 300.0])
def test_time_to_invariant_errors_name_t_max(t_max):
    # 50 is refused at once (the distance cannot decay that fast), 300 after marching
    with pytest.raises((RuntimeError, ValueError)) as err:
        qt.time_to_invariant(0.9, 0.1, eps=1e-6, t_max=t_max)
    _named(err, "t_max")
    assert "times" not in str(err.value)


def test_time_to_invariant_t_max_bounds():
    with pytest.raises(ValueError) as err:
        qt.time_to_invariant(0.9, 0.1, t_max=1e12)
    _named(err, "t_max")


def test_time_to_invariant_slow_relaxation_names_callers_parameters():
    # relaxation time ~1e7 with ~2600 levels: far beyond the fluid solver's work cap
    with pytest.raises((ValueError, RuntimeError)) as err:
        qt.time_to_invariant(0.9999, 0.001, eps=1e-3)
    assert "times" not in str(err.value), err.value
    assert "eps" in str(err.value) or "t_max" in str(err.value)


# ======================================================================================
# Item 3: validation gaps
# ======================================================================================

@pytest.mark.parametrize("call, name", [
    (lambda v: qt.fluid_drift([1.0, 0.5, 0.0], 0.9, 0.1, sliding=v), "sliding"),
    (lambda v: qt.fluid_drift([1.0, 0.5, 0.0], 0.9, 0.1, validate=v), "validate"),
    (lambda v: qt.fluid_drift([5.0, 4.0, 0.0], 0.9, 0.1, coords="v", validate=v),
     "validate"),
    (lambda v: qb.naive_fluid_solve(0.9, 0.1, 1.0, sliding=v), "sliding"),
    (lambda v: qt.sweep(qt.mean_queue_length, {"lam": [0.5], "p": [0.1]},
                        raise_on_error=v, progress=False,
                        executor=ThreadPoolExecutor(1)), "raise_on_error"),
    (lambda v: qt.sweep(qt.mean_queue_length, {"lam": [0.5], "p": [0.1]},
                        pass_seed=v, progress=False,
                        executor=ThreadPoolExecutor(1)), "pass_seed"),
    (lambda v: qt.exact_stationary(2, 0.5, 0.2, max_queue=10, progress=v), "progress"),
    (lambda v: qb.fluid_limit_study(0.9, 0.1, 1.0, [5, 10], [1], progress=v), "progress"),
    (lambda v: qb.concentration_study(0.5, 0.2, [1], progress=v), "progress"),
])
@pytest.mark.parametrize("bad", ["no", "False", "", 0, 1, [True], 1.0])
def test_every_switch_takes_only_bools(call, name, bad):
    with pytest.raises(ValueError) as err:
        call(bad)
    _named(err, name)


@pytest.mark.parametrize("bad", ["3", True, False, np.True_, [1.0, "2"], [True, 1.0],
                                 ["1", "2"], 1 + 0j, [1.0, 2j], None, "abc", {1: 2}])
def test_littles_law_takes_real_numbers_only(bad):
    with pytest.raises(ValueError) as err:
        qt.design.littles_law_sojourn_time(bad, 0.5)
    _named(err, "mean_queue")


def test_littles_law_values_unchanged():
    assert qt.design.littles_law_sojourn_time(3, 0.5) == 6.0
    assert qt.design.littles_law_sojourn_time(np.float32(1.5), 0.5) == 3.0
    assert np.array_equal(qt.design.littles_law_sojourn_time([1, 2.0], 0.5), [2.0, 4.0])
    from fractions import Fraction
    assert qt.design.littles_law_sojourn_time(Fraction(1, 2), 0.5) == 1.0
    with pytest.raises(ValueError, match="mean_queue"):
        qt.design.littles_law_sojourn_time(math.inf, 0.5)


def test_fit_power_law_takes_real_numbers_only():
    from qtheory.book.concentration import fit_power_law

    with pytest.raises(ValueError, match=r"\bn\b"):
        fit_power_law(["1", "2"], [1.0, 0.5])
    with pytest.raises(ValueError, match=r"\by\b"):
        fit_power_law([1, 2], [True, 0.5])
    assert fit_power_law([1, 4], [1.0, 0.5]) == pytest.approx((0.5, 1.0))


_VIEWS_WITH_TIMES = [
    (lambda t: qb.small_system_view(4, 0.9, 0.1, times=t), "small_system_view"),
    (lambda t: qb.fluid_view(0.9, 0.1, times=t), "fluid_view"),
    (lambda t: qb.fluid_limit_view(4, 0.9, 0.1, times=t), "fluid_limit_view"),
    (lambda t: qt.fluid_trajectory(0.9, 0.1, t), "fluid_trajectory"),
    (lambda t: qb.fluid_distance_curve(0.9, 0.1, t, [1.0], [1.0, 0.5]),
     "fluid_distance_curve"),
    (lambda t: qt.sample_path(4, 0.9, 0.1, t), "sample_path"),
]


@pytest.mark.parametrize("call, fname", _VIEWS_WITH_TIMES, ids=[f for _, f in _VIEWS_WITH_TIMES])
@pytest.mark.parametrize("bad", ["abc", [0.0, 1 + 2j], np.array([0.0, 1.0 + 2j]),
                                 np.array([0.0, 1.0 + 0j]), [True, True],
                                 np.array([False, True]), [0.0, "1"], [[0.0, 1.0]],
                                 [0.0, math.nan], [2.0, 1.0], [-1.0, 0.0], None])
def test_times_checked_with_the_parameter_name_everywhere(call, fname, bad):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ComplexWarning must not be how it fails
        with pytest.raises(ValueError) as err:
            call(bad)
    _named(err, "times")


def test_views_keep_real_times_as_given():
    t = [0, 1, 2.5]
    assert np.array_equal(qb.fluid_view(0.9, 0.1, times=t)["times"], [0.0, 1.0, 2.5])
    assert np.array_equal(qb.small_system_view(4, 0.9, 0.1, times=t)["times"], [0.0, 1.0, 2.5])


@pytest.mark.parametrize("bad", [[[1.0]], [1.0, 0.5], np.ones((200, 3)),
                                 np.ones((201, 0)), np.full((201, 3), np.nan),
                                 np.tile([1.0, 0.5, 0.7], (201, 1)),
                                 np.tile([0.5, 0.4, 0.1], (201, 1)), "abc",
                                 np.tile([1.0, 1.5, 0.1], (201, 1))])
def test_fluid_limit_distance_checks_the_fluid_it_is_given(bad):
    with pytest.raises(ValueError) as err:
        qb.fluid_limit_distance(10, 0.9, 0.1, 5.0, seed=1, fluid=bad)
    _named(err, "fluid")


def test_fluid_limit_distance_with_its_own_fluid_unchanged():
    grid = np.linspace(0.0, 5.0, 201)
    fluid = qt.fluid_trajectory(0.9, 0.1, grid, check=False)
    a = qb.fluid_limit_distance(10, 0.9, 0.1, 5.0, seed=1)
    b = qb.fluid_limit_distance(10, 0.9, 0.1, 5.0, seed=1, fluid=fluid)
    assert a == b
    with pytest.raises(ValueError, match="fluid"):  # a fluid from another start
        qb.fluid_limit_distance(10, 0.9, 0.1, 5.0, seed=1,
                                fluid=qt.fluid_trajectory(0.9, 0.1, grid, [1.0, 1.0]))


@pytest.mark.parametrize("bad", [["fluid"], None, 3, ("fluid",), {"fluid"}, b"fluid",
                                 "Fluid", "nope"])
def test_explorer_name_errors_are_clear(bad):
    with pytest.raises(ValueError) as err:
        qb.explorer(bad)
    _named(err, "name", "fluid")


def _tiny_explorer():
    controls = (explmod._control("lam", "lam", (0.5, 0.9), 0.9),
                explmod._control("start", "start", ("empty", "full"), "empty"),
                explmod._control("t", "t", (0.0, 1.0), 0.0, keyed=False))
    records = {f"{i},{j}": {"v": 10 * i + j} for i in range(2) for j in range(2)}
    return qb.Explorer("fluid", "x", controls, records)


def test_explorer_record_lookups():
    e = _tiny_explorer()
    assert e.record(lam=0.9, start="full") == {"v": 11}
    assert e.record(lam=np.float64(0.5), start="empty") == {"v": 0}
    assert e.record(lam=0.1 + 0.8, start="empty", t=1.0) == {"v": 10}  # t: inside


@pytest.mark.parametrize("settings, names", [
    ({}, ["lam", "start"]),
    ({"lam": 0.9}, ["start"]),
    ({"lam": 0.7, "start": "empty"}, ["lam", "0.5", "0.9"]),
    ({"lam": 0.9, "start": "half"}, ["start", "empty", "full"]),
    ({"lam": 0.9, "start": "empty", "speed": 3}, ["speed"]),
    ({"lam": 0.9, "start": "empty", "t": 5.0}, ["t", "0", "1"]),
    ({"lam": [0.9], "start": "empty"}, ["lam"]),
    ({"lam": True, "start": "empty"}, ["lam"]),
])
def test_explorer_record_errors_are_clear(settings, names):
    with pytest.raises(ValueError) as err:
        _tiny_explorer().record(**settings)
    _named(err, *names)


def _top_level_exact(lam, p):
    """i* = max{i : s_i > 0} from s_i > 0 <=> i < log(p/(1-lam)) / log(r), in 80 digits."""
    with mpmath.workdps(80):
        L, P = mpmath.mpf(lam), mpmath.mpf(p)
        if L <= P:
            return 0
        r = L / (1 - P)
        if r == 1:
            bound = (1 - P) / P
        else:
            bound = mpmath.log(P / (1 - L)) / mpmath.log(r)
        k = int(mpmath.ceil(bound)) - 1
        return max(k, 0)


@pytest.mark.parametrize("lam, p", [(0.9, 1e-300), (0.5, 1e-200), (0.99, 1e-100),
                                    (0.3, 1e-30), (0.9, 1e-20), (0.7, 1e-16),
                                    (0.999, 1e-250), (0.9, 2.2e-308), (0.6, 1e-12),
                                    (0.99, 0.05), (0.7, 0.3 + 1e-13)])
def test_top_level_has_no_rounding_cut_off(lam, p):
    # (on the line lam + p = 1 the convention "within rounding of zero counts as zero"
    # decides instead; K01 is tested in test_invariant.py)
    assert qt.top_level(lam, p) == _top_level_exact(lam, p)


@pytest.mark.parametrize("lam, p", [(0.9, 1e-300), (0.5, 1e-100), (0.3, 1e-30),
                                    (0.99, 1e-50)])
def test_invariant_state_tiny_p_is_accurate_to_the_top(lam, p):
    """s_i = r^i - p/(1-p) G_i, computed without the cancellation of an O(1) term
    (K05): the error is a rounding error of r^i at every level up to the top."""
    s = qt.invariant_state(lam, p)
    assert s.size - 1 == _top_level_exact(lam, p)
    with mpmath.workdps(60):
        L, P = mpmath.mpf(lam), mpmath.mpf(p)
        r = L / (1 - P)
        idx = np.unique(np.linspace(1, s.size - 1, 40).astype(int))
        for i in idx:
            exact = r**i - P / (1 - P) * (1 - r**i) / (1 - r)
            # the error is relative to the size of the two terms (r^i), not to s_i
            assert abs(s[i] - float(exact)) <= 1e-12 * float(r**i), (i, s[i], exact)
    assert qt.mean_queue_length(lam, p) == pytest.approx(lam / (1 - lam), rel=1e-10)


def test_relaxation_rate_tiny_p_tends_to_the_mm1_gap():
    """With p -> 0 the top level grows like log(1/p) and the rate tends to (1 - sqrt
    lam)^2 from above, by a term ~ pi^2 sqrt(lam) / i*^2; it used to stop at i* = 310."""
    lam = 0.9
    gap = (1 - math.sqrt(lam)) ** 2
    K = _top_level_exact(lam, 1e-300)
    assert K > 6500
    mu = qt.relaxation_rate(lam, 1e-300)
    assert mu == pytest.approx(-_eigmax_dense(lam, 1e-300, K), rel=1e-9)
    assert 0 < mu - gap < 3 * math.pi**2 * math.sqrt(lam * (1 - 1e-300)) / K**2
    rates = [qt.relaxation_rate(lam, p) for p in (1e-30, 1e-100, 1e-200, 1e-300)]
    assert all(a > b for a, b in zip(rates, rates[1:])) and rates[-1] > gap


# ======================================================================================
# Item 4(c): process pools under every start method
# ======================================================================================

def _main_function(monkeypatch):
    """A function that lives in ``__main__`` as one defined in a notebook does: its module
    is ``__main__``, it is found there by name, and ``__main__`` has no file."""
    main = sys.modules["__main__"]
    monkeypatch.delattr(main, "__file__", raising=False)
    ns = {"__name__": "__main__"}
    exec("def qt_notebook_f(a):\n    return a * 10 + 1\n", ns)
    f = ns["qt_notebook_f"]
    monkeypatch.setattr(main, "qt_notebook_f", f, raising=False)
    assert f.__module__ == "__main__"
    return f


def _module_function(a):
    return a * 10 + 1


START_METHODS = [m for m in ("fork", "spawn", "forkserver")
                 if m in multiprocessing.get_all_start_methods()]


def _expect_runs_or_refuses(func, executor=None):
    try:
        res = qt.sweep(func, {"a": [1, 2, 3]}, executor=executor, progress=False,
                       raise_on_error=True)
    except ValueError as err:
        text = str(err)
        assert "__main__" in text or "notebook" in text, text
        assert "module" in text and "executor" in text, text
        return None
    assert [r["value"] for r in res.rows] == [11, 21, 31]
    return res


@pytest.mark.timeout(300)
@pytest.mark.parametrize("method", START_METHODS)
def test_sweep_module_function_under_every_start_method(method):
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as ex:
        res = qt.sweep(_module_function, {"a": [1, 2, 3]}, executor=ex, progress=False,
                       raise_on_error=True)
    assert [r["value"] for r in res.rows] == [11, 21, 31]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("method", START_METHODS)
def test_sweep_notebook_function_under_every_start_method(method, monkeypatch):
    """A function defined in a notebook (module __main__, no file) runs, or sweep says at
    once what to do; it never comes back as three failed rows."""
    f = _main_function(monkeypatch)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as ex:
        _expect_runs_or_refuses(f, ex)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("method", START_METHODS)
def test_sweep_default_pool_follows_the_default_start_method(method, monkeypatch):
    f = _main_function(monkeypatch)
    ctx = multiprocessing.get_context(method)
    monkeypatch.setattr(sys.modules["qtheory.sweep"], "_default_context", lambda: ctx)
    _expect_runs_or_refuses(f)
    _expect_runs_or_refuses(_module_function)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_sweep_without_cloudpickle_refuses_at_once(method, monkeypatch):
    """Where a notebook function cannot reach the workers, the refusal comes before any
    worker starts and says what to do."""
    f = _main_function(monkeypatch)
    monkeypatch.setattr(sys.modules["qtheory.sweep"], "_cloudpickle", lambda: None)
    ctx = multiprocessing.get_context(method)
    with ProcessPoolExecutor(2, mp_context=ctx) as ex:
        t0 = time.perf_counter()
        with pytest.raises(ValueError) as err:
            qt.sweep(f, {"a": [1, 2]}, executor=ex, progress=False)
        assert time.perf_counter() - t0 < 5
    _named(err, "__main__", method, "module", "executor")
    # a lambda cannot be pickled under any start method
    with pytest.raises(ValueError) as err:
        qt.sweep(lambda a: a, {"a": [1]}, progress=False)
    _named(err, "lambda")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("method", START_METHODS)
def test_sweep_lambda_and_closure_run_with_cloudpickle(method):
    pytest.importorskip("cloudpickle")
    k = 10
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as ex:
        res = qt.sweep(lambda a: a * k + 1, {"a": [1, 2, 3]}, executor=ex, progress=False,
                       raise_on_error=True)
    assert [r["value"] for r in res.rows] == [11, 21, 31]


def test_thread_pool_needs_no_pickling():
    with ThreadPoolExecutor(2) as ex:
        res = qt.sweep(lambda a: a + 1, {"a": [1, 2]}, executor=ex, progress=False)
    assert [r["value"] for r in res.rows] == [2, 3]


def test_pyproject_declares_the_supported_python_range():
    import tomllib
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if not path.exists():
        pytest.skip("no pyproject.toml next to the tests (installed-wheel run)")
    meta = tomllib.loads(path.read_text())["project"]
    spec = meta["requires-python"]
    assert ">=3.11" in spec and "<3." in spec, spec
    upper = int(spec.split("<3.")[1].split(",")[0])
    assert (3, 11) <= sys.version_info[:2] < (3, upper)
    tested = [c for c in meta["classifiers"] if c.startswith("Programming Language :: Python :: 3.")]
    versions = sorted(int(c.rsplit(".", 1)[1]) for c in tested)
    assert versions == list(range(11, upper)), versions


# ======================================================================================
# CASES.md K24, K25: compiled code under several processes
# ======================================================================================

@pytest.mark.timeout(600)
def test_cold_numba_cache_written_by_two_processes_at_once(tmp_path):
    """K24: two processes compile the same cached kernels into one empty cache at the same
    time; both answers, and that of a third process reading the cache, are right."""
    code = ("import qtheory as qt; "
            "print(repr(float(qt.fluid_trajectory(0.9, 0.1, [0.0, 30.0], check=False)"
            "[-1, 1])))")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outs = [p.communicate(timeout=500) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-1500:] for o in outs]
    assert any((tmp_path / "numba").rglob("*.nbi")), "nothing was cached"
    third = subprocess.run([sys.executable, "-c", code], env=env, text=True,
                           capture_output=True, timeout=300)
    assert third.returncode == 0, third.stderr[-1500:]
    want = float(qt.fluid_trajectory(0.9, 0.1, [0.0, 30.0], check=False)[-1, 1])
    got = [float(o[0].strip()) for o in outs] + [float(third.stdout.strip())]
    assert got == [want] * 3


def test_public_callables_are_python_functions_that_pickle_by_reference():
    """K25: what a user sends to a cluster or a process pool is a module-level Python
    function (or class) that calls the compiled code, never a numba dispatcher."""
    import pickle

    from numba.core.dispatcher import Dispatcher

    for ns in (qt, qb):
        for name in ns.__all__:
            obj = getattr(ns, name)
            if not callable(obj):
                continue
            assert not isinstance(obj, Dispatcher), name
            assert pickle.loads(pickle.dumps(obj)) is obj, name


@pytest.mark.parametrize("bad", [[True, 2], [2, "3"], [2.0, 3], np.array([[2, 3]]), []])
def test_concentration_n_values_are_integers(bad):
    with pytest.raises(ValueError, match="n_values"):
        qb.concentration_study(0.5, 0.2, bad)


def test_result_helpers_check_their_numbers():
    with ThreadPoolExecutor(1) as ex:
        res = qt.sweep(qt.mean_queue_length, {"lam": [0.5], "p": [0.1]}, executor=ex,
                       progress=False)
    for kw, name in [({"digits": "3"}, "digits"), ({"digits": 0}, "digits"),
                     ({"max_rows": True}, "max_rows"), ({"max_rows": -1}, "max_rows")]:
        with pytest.raises(ValueError, match=name):
            res.table(**kw)
    assert "0.5" in res.table(digits=3)


# --- issue 23 item 4(b): the finite-N Monte Carlo never takes log 0, and checks its paths

def test_bridge_minimum_is_finite_at_a_zero_uniform():
    """np.random.random() can return exactly 0.0; the kernel used log(u) of that draw,
    which is -inf and makes the path NaN.  A zero draw is read as 1."""
    from qtheory import finite_n

    for w, v in ((0.3, 1.0), (-0.2, 0.01), (0.0, 1e-4)):
        m = finite_n._bridge_minimum(w, v, 0.0)
        assert math.isfinite(m) and m <= min(0.0, w)
    # the law P(min < -m) = exp(-2 m (m + w) / v) is inverted exactly
    w, v = 0.3, 1.0
    for u in (0.5, 0.01, 2.0**-60):
        m = -finite_n._bridge_minimum(w, v, u)
        assert math.isclose(math.exp(-2 * m * (m + w) / v), u, rel_tol=1e-9)
    assert finite_n._bridge_minimum(w, v, 0.0) == min(0.0, w)


def test_reflected_diffusion_refuses_a_non_finite_path(monkeypatch):
    """A NaN path must raise, not enter the cached mean."""
    from qtheory import finite_n

    def nan_kernel(lam, p, diag, D, x0, kappa, refl, dt, n_steps, burn, seed, idle):
        return float("nan"), np.zeros(diag.size)

    monkeypatch.setattr(finite_n, "_reflected_kernel", nan_kernel)
    s = qt.invariant_state(0.9, 0.2)
    with pytest.raises(FloatingPointError, match="not finite"):
        finite_n._reflected_top(1000, 0.9, 0.2, s, True)
