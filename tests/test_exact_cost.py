"""Tests of the cost model, budgets and truncation choice of the exact solver.

Each item of the probe (../shared/PROBE.md) on the exact solver has a test here that
failed before the fix: the direct method crashed or ran for minutes with no warning,
Ctrl-C waited for a compiled GMRES cycle, and sizes beyond the float range raised
OverflowError.  No test asserts a wall-clock time: the slow calls are stopped by the
budget before anything is built, which the tests detect by turning the warning into an
error or by the ValueError itself.
"""

import math
import signal
import warnings

import numpy as np
import pytest

import qtheory.exact as ex
from qtheory import _exact_kernels as _k
from qtheory.exact import (CostWarning, exact_cost_estimate, exact_memory_estimate,
                           exact_state_space_size, exact_stationary)


# --------------------------------------------------------------------------------------
# The cost model


def test_direct_estimate_counts_lu_fill_in():
    d = exact_cost_estimate(6, 14, "direct")
    g = exact_cost_estimate(6, 14, "gmres")
    assert d.n_states == g.n_states == pytest.approx(math.comb(20, 6))
    # fill-in of the factors: a multiple of the block width binom(K+N-1, N-1) per state
    assert d.fill >= 0.4 * d.n_states * math.comb(19, 5)
    assert d.fill > 100 * g.fill and d.bytes > g.bytes
    assert d.seconds > 10 * g.seconds
    assert exact_memory_estimate(6, 14, "direct") > exact_memory_estimate(6, 14)
    assert "states" in d.text() and "direct" in d.text()


def test_gmres_estimate_grows_with_size_and_respects_maxiter():
    a = exact_cost_estimate(5, 20)
    b = exact_cost_estimate(5, 38)
    assert b.seconds > a.seconds and b.bytes > a.bytes
    assert exact_cost_estimate(2, 2000, maxiter=10).iterations == 10
    assert exact_cost_estimate(2, 2000).iterations == 3000


@pytest.mark.parametrize("kw, name", [({"method": "lu"}, "method"),
                                      ({"maxiter": 0}, "maxiter")])
def test_cost_estimate_rejects_bad_input(kw, name):
    with pytest.raises(ValueError, match=name):
        exact_cost_estimate(3, 10, **kw)


# --------------------------------------------------------------------------------------
# Budgets: the two slow calls of issue 33 stop before they start


def test_explicit_direct_over_budget_warns_before_building(monkeypatch):
    built = []
    monkeypatch.setattr(ex, "_build_generator",
                        lambda *a: built.append(a) or pytest.fail("built"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostWarning)
        with pytest.raises(CostWarning, match=r"max_seconds.*|estimated"):
            exact_stationary(6, 0.9, 0.1, max_queue=14, method="direct")
    assert not built


def test_auto_over_budget_refuses_with_estimate():
    with pytest.raises(ValueError) as err:
        exact_stationary(2, 0.99, 0.05, max_queue=2000)
    msg = str(err.value)
    assert "max_seconds" in msg and "estimated" in msg and "states" in msg


def test_probe_direct_on_635376_states_is_refused_not_a_segfault():
    # PROBE: SuperLU "Can't expand MemType" and SIGSEGV after 97 s
    with pytest.raises(ValueError, match="memory_limit"):
        exact_stationary(4, 0.9, 0.3, max_queue=60, method="direct")


def test_auto_avoids_direct_when_it_is_over_budget():
    # 4845 states: below the size limit of direct, but its estimate is over a tiny budget
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="max_seconds"):
            exact_stationary(4, 0.9, 0.1, max_queue=16, max_seconds=1e-6)


def test_explicit_gmres_over_budget_warns_and_solves():
    with pytest.warns(CostWarning, match="max_seconds"):
        r = exact_stationary(2, 0.5, 0.3, max_queue=30, method="gmres", max_seconds=1e-9)
    d = exact_stationary(2, 0.5, 0.3, max_queue=30, method="direct")
    np.testing.assert_allclose(r.probabilities, d.probabilities, atol=1e-12)


@pytest.mark.parametrize("value", [0.0, -1.0, "1", float("nan")])
def test_max_seconds_is_checked(value):
    with pytest.raises(ValueError, match="max_seconds"):
        exact_stationary(2, 0.5, 0.3, max_queue=5, max_seconds=value)


# --------------------------------------------------------------------------------------
# Ctrl-C inside GMRES


def test_keyboard_interrupt_is_honoured_within_one_gmres_iteration(monkeypatch):
    # PROBE: Ctrl-C waited 28 s for a compiled 60-iteration cycle.  A timer raises
    # KeyboardInterrupt during the solve; at most one more iteration may run after it.
    steps = [0]
    at_signal = []
    real_step = _k.gmres_step

    def counting_step(*a):
        out = real_step(*a)
        steps[0] += 1
        return out

    def handler(signum, frame):
        at_signal.append(steps[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(_k, "gmres_step", counting_step)
    old = signal.signal(signal.SIGALRM, handler)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exact_stationary(3, 0.9, 0.1, max_queue=12, method="gmres")  # compile first
            steps[0] = 0
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            with pytest.raises(KeyboardInterrupt):
                exact_stationary(4, 0.95, 0.05, max_queue=40, method="gmres",
                                 tol=1e-15, maxiter=100_000, max_seconds=math.inf)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert at_signal, "the timer did not fire during the solve"
    assert steps[0] - at_signal[0] <= 1


# --------------------------------------------------------------------------------------
# Sizes beyond the float range: ValueErrors, not OverflowError


def test_state_space_size_of_huge_ints():
    assert exact_state_space_size(10**400, 1) == 10**400 + 1
    assert exact_state_space_size(1, 10**400) == 10**400 + 1
    assert exact_state_space_size(10**400, 3) == math.comb(10**400 + 3, 3)
    assert exact_state_space_size(10**400, 10**400) == math.inf


@pytest.mark.parametrize("n, k", [(10**400, 3), (3, 10**400), (10**400, 10**400)])
def test_memory_and_cost_estimates_of_huge_ints(n, k):
    assert exact_memory_estimate(n, k) == math.inf
    assert exact_memory_estimate(n, k, "direct") == math.inf
    c = exact_cost_estimate(n, k)
    assert c.seconds == math.inf and c.bytes == math.inf


@pytest.mark.parametrize("n, k, name", [(10**400, 3, "n_stations"),
                                        (2, 10**400, "max_queue")])
def test_exact_stationary_refuses_huge_ints(n, k, name):
    with pytest.raises(ValueError, match=name) as err:
        exact_stationary(n, 0.5, 0.1, max_queue=k)
    assert len(str(err.value)) < 600  # the integer is not written out


# --------------------------------------------------------------------------------------
# max_queue chosen from a target boundary mass


@pytest.mark.parametrize("n, lam, p, target", [(1, 0.8, 0.3, 1e-9), (2, 0.5, 0.3, 1e-8),
                                               (3, 0.9, 0.1, 1e-4), (4, 0.7, 0.3, 1e-6)])
def test_boundary_mass_target_is_met(n, lam, p, target):
    r = exact_stationary(n, lam, p, boundary_mass=target)
    assert 0 <= r.boundary_mass <= target
    again = exact_stationary(n, lam, p, max_queue=r.max_queue, truncation_tol=1.0)
    np.testing.assert_allclose(r.probabilities, again.probabilities, atol=1e-11)


def test_boundary_mass_for_mm1_is_close_to_the_smallest_level():
    # M/M/1 truncated at K: P(M = K) = (1 - rho) rho^K / (1 - rho^(K+1))
    lam, target = 0.8, 1e-9
    r = exact_stationary(1, lam, 0.0, boundary_mass=target)
    K = r.max_queue
    bm = (1 - lam) * lam**K / (1 - lam ** (K + 1))
    assert r.boundary_mass == pytest.approx(bm, rel=1e-8)
    assert (1 - lam) * lam ** (K - 6) / (1 - lam ** (K - 5)) > target  # not far too big


def test_boundary_mass_with_no_arrivals():
    r = exact_stationary(3, 0.0, 0.2, boundary_mass=1e-6)
    assert r.boundary_mass == 0.0 and r.probabilities[0] == 1.0


@pytest.mark.parametrize("kw", [{}, {"max_queue": 10, "boundary_mass": 1e-6}])
def test_exactly_one_of_max_queue_and_boundary_mass(kw):
    with pytest.raises(ValueError, match="max_queue"):
        exact_stationary(2, 0.5, 0.3, **kw)


@pytest.mark.parametrize("value", [0.0, 1.0, -1e-3, "1e-5", float("nan")])
def test_boundary_mass_is_checked(value):
    with pytest.raises(ValueError, match="boundary_mass"):
        exact_stationary(2, 0.5, 0.3, boundary_mass=value)
