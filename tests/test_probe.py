"""The defects of the API probe (PROBE.md, 4 December 2026), each a test that failed
before its fix.  The exact solver's and rate's items are tested beside those modules."""

import math
import resource
import subprocess
import sys
import time
import warnings

import mpmath
import pytest

import qtheory as q
from qtheory import statistics as st
from qtheory.book import coupling
from qtheory.design import capacity_without_pooling


def _exact_top_level(lam, p):
    """i* from the closed form in 200-digit arithmetic on the exact binary inputs:
    s_i > 0 iff i < log(p/(1 - lam)) / log(r), r = lam/(1 - p)."""
    with mpmath.workdps(200):
        L, P = mpmath.mpf(lam), mpmath.mpf(p)
        bound = mpmath.log(P / (1 - L)) / mpmath.log(L / (1 - P))
        return int(mpmath.ceil(bound)) - 1


@pytest.mark.parametrize("lam, p, expected", [
    (0.9999999825349238, 6.245862518633155e-09, 91653837),
    (1 - 1e-12, 1e-12, 1000011061022),
    (1 - 1e-12, 3e-12, 549311129461),
])
def test_top_level_tiny_p_near_one(lam, p, expected):
    assert _exact_top_level(lam, p) == expected
    assert q.top_level(lam, p) == expected


def test_mean_queue_length_tiny_p_near_one_to_stated_accuracy():
    lam, p = 1 - 1e-12, 1e-12
    k = _exact_top_level(lam, p)
    with mpmath.workdps(200):
        L, P = mpmath.mpf(lam), mpmath.mpf(p)
        d, r = L - (1 - P), L / (1 - P)
        exact = L * (1 - L) * (1 - r**k) / d**2 + P * k / d
    assert abs(q.mean_queue_length(lam, p) / float(exact) - 1) < 1e-13


def test_mean_queue_length_no_negative_zero():
    assert math.copysign(1.0, q.mean_queue_length(-0.0, 0.0)) == 1.0


def test_capacity_without_pooling_no_nan():
    assert capacity_without_pooling(0.0, 1e-320) == 0.0
    assert capacity_without_pooling(0.5, 1.0) == 1.0


@pytest.mark.parametrize("call", [
    lambda: st.mm1_relaxation_time(2.0),
    lambda: st.mm1_relaxation_time(1.0),
    lambda: st.mm1_asymptotic_variance(1.0),
    lambda: st.mm1_asymptotic_variance("0.5"),
    lambda: st.batch_means(["1", "2"]),
    lambda: st.batch_means([True, False, True]),
    lambda: st.batch_means([1.0, 2.0], level="0.9"),
    lambda: st.batch_means([1.0, 2.0], level=None),
    lambda: st.batch_means([1 + 1j, 2.0]),
    lambda: st.correlation_threshold("20"),
    lambda: st.correlation_threshold(0),
], ids=["relax-2", "relax-1", "var-1", "var-str", "bm-str", "bm-bool", "level-str",
        "level-none", "bm-complex", "thr-str", "thr-0"])
def test_statistics_helpers_refuse_bad_input(call):
    with pytest.raises(ValueError):
        call()


def test_statistics_values_unchanged_and_no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = st.batch_means([1e308, -1e308, 1e308])
        assert big.mean == pytest.approx(1e308 / 3)
        assert st.lag1_autocorrelation([1e308, -1e308, 1e308]) == pytest.approx(-2 / 3)
    assert st.mm1_relaxation_time(0.25) == 4.0
    assert st.mm1_asymptotic_variance(0.5) == pytest.approx(2 * 0.5 * 1.5 / 0.5**4)
    r = st.batch_means([1.0, 2.0, 3.0])
    assert r.mean == 2.0 and r.half_width == pytest.approx(4.302652729911275 / 3**0.5)


def test_huge_n_no_overflow_error():
    lo, hi = q.finite_n_mean_bounds(10**400, 0.9, 0.1)
    assert (lo, hi) == q.finite_n_mean_bounds(10**300, 0.9, 0.1)
    assert hi == pytest.approx(9.0)
    x = coupling.dkw_uniform_bound(10**400, 1.0, 0.5)
    assert 0.0 < x < 1e-190
    # the logarithmic path agrees with the direct one where both apply
    assert coupling.dkw_uniform_bound(2**1000, 1.0, 0.5) == pytest.approx(
        coupling.dkw_uniform_bound(2**1000 - 1, 1.0, 0.5), rel=1e-12)


def test_truncated_fluid_trajectory_has_a_budget():
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="max_seconds"):
        coupling.truncated_fluid_trajectory(0.99, 0.05, [0.0, 1e5], n_levels=2000,
                                            eps=1e-8, max_seconds=1.0)
    assert time.monotonic() - t0 < 30.0
    with pytest.raises(ValueError, match="max_seconds"):
        coupling.truncated_fluid_trajectory(0.9, 0.1, [0.0, 1.0], n_levels=5, eps=0.1,
                                            max_seconds=0.0)


def test_counting_bound_refuses_huge_m():
    run = coupling.coupled_run(100, 0.9, 0.1, 1.0)
    for m in (10**12, 10**9, 10**8):
        with pytest.raises(ValueError, match="m_values"):
            coupling.counting_bound(run, m_values=[m])


_PEAK = """
import resource, qtheory
a = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
s = qtheory.invariant_state(1 - 1e-7, 1e-8, max_levels=10**8)
b = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(s.nbytes, (b - a) * 1024)
"""


def test_invariant_state_memory_peak_near_its_size():
    out = subprocess.run([sys.executable, "-c", _PEAK], capture_output=True, text=True,
                         check=True).stdout.split()
    nbytes, peak = int(out[0]), int(out[1])
    assert nbytes > 100e6
    assert peak < 1.5 * nbytes  # was about six times


def test_unclear_inputs_refused():
    from qtheory.book.concentration import concentration_study
    from qtheory.design import min_centralization_for_delay

    for xtol in (-1.0, "a"):
        with pytest.raises(ValueError, match="xtol"):
            min_centralization_for_delay(0.9, 100.0, xtol=xtol)
    with pytest.raises(ValueError, match="boundary_target"):
        concentration_study(0.9, 0.1, [2], boundary_target=0.0)
    with pytest.raises(ValueError, match="lam"):
        q.finite_n_min_centralization(10, 0.0, 1.0)


def test_fluctuation_covariance_names_the_level_limit():
    with pytest.raises(ValueError, match="6534 levels.*tiny p"):
        q.fluctuation_covariance(0.9, 1e-300)


def _echo(lam, p):
    return {"lam": float(lam), "mean_queue_length": q.mean_queue_length(float(lam), p)}


def test_sweep_fraction_grid_and_keeping_a_grid_name():
    from fractions import Fraction

    res = q.sweep(_echo, {"lam": [Fraction(9, 10)], "p": [0.1]}, progress=False,
                  raise_on_error=True)
    res2 = q.sweep(_echo, {"lam": [0.9], "p": [0.1]}, progress=False,
                   keep=["lam", "mean_queue_length"], raise_on_error=True)
    for r in (res, res2):
        assert r.ok and not r.failures
        assert list(r.columns)[:3] == ["lam", "p", "mean_queue_length"]
        assert r.column("mean_queue_length")[0] == pytest.approx(4.0)


def test_rate_bounds_for_n_beyond_the_float_range():
    c = q.rate.rate_constants(0.9, 0.1)
    assert c.distance_bound(10**400) == 0.0 and c.top_mass_bound(10**400) == 0.0
    assert list(c.distance_bound([10, 10**400])) == [c.distance_bound(10), 0.0]


@pytest.mark.parametrize("args", [(20, 0.9, 0.1, 1e-3), (50, 0.5, 0.3, 1e-6)])
def test_boundary_mass_refuses_before_allocating(args):
    """A target boundary mass that extrapolates to an astronomical max_queue is refused
    with the documented ValueError (it raised MemoryError: the GMRES start vector was
    allocated before the cost check)."""
    n, lam, p, target = args
    with pytest.raises(ValueError, match="estimated at"):
        q.exact_stationary(n, lam, p, boundary_mass=target)
