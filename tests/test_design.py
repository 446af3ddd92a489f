"""Inverse questions (minimal centralization, Little's law) and the supermarket model.

Expected values come from ../shared/MODEL.md section 5 (the invariant state and its
reference values), Little's law, the M/M/1 mean, and the supermarket fixed point
s_i = lam**((d**i - 1)/(d - 1)) of Vvedenskaya, Dobrushin and Karpelevich (1996) and
Mitzenmacher (2001), checked against its own fluid equation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import qtheory as qt

lams = st.floats(min_value=0.02, max_value=0.999)


# ------------------------------------------------------------ min_centralization
@pytest.mark.parametrize("lam, p", [(0.99, 0.05), (0.95, 0.1), (0.7, 0.2), (0.9, 0.1),
                                    (0.7, 0.3), (0.5, 1e-6)])
def test_min_centralization_inverts_reference_values(lam, p):
    target = qt.mean_queue_length(lam, p)
    got = qt.min_centralization(lam, target)
    assert qt.mean_queue_length(lam, got) <= target
    assert got == pytest.approx(p, rel=1e-8, abs=1e-11)


def test_min_centralization_paper_case_rounded_target():
    # MODEL.md: v_1 = 24.0298 at (0.99, 0.05); a target 24.0298 needs p within 1e-5 of 0.05
    assert qt.min_centralization(0.99, 24.0298) == pytest.approx(0.05, abs=1e-5)
    # and v_1 = 4 exactly at (0.9, 0.1) (K01: r = 1)
    assert qt.min_centralization(0.9, 4.0) == pytest.approx(0.1, abs=1e-11)


@settings(max_examples=150, deadline=None)
@given(lam=lams, frac=st.floats(min_value=1e-6, max_value=0.999999))
def test_min_centralization_round_trip_and_minimality(lam, frac):
    p = frac * lam
    target = qt.mean_queue_length(lam, p)
    assume(target > 0)
    got = qt.min_centralization(lam, target)
    assert 0.0 <= got <= lam
    # feasible: meets the target
    assert qt.mean_queue_length(lam, got) <= target
    # minimal within tolerance: a slightly smaller p misses the target
    if got > 1e-8:
        assert qt.mean_queue_length(lam, got - 1e-8) > target
    assert got == pytest.approx(p, abs=1e-7)


@settings(max_examples=150, deadline=None)
@given(lam=lams, a=st.floats(0, 1), b=st.floats(0, 1))
def test_mean_queue_length_non_increasing_in_p(lam, a, b):
    # The property min_centralization relies on (MODEL.md section 5).
    # (up to rounding: p = 0 uses lam/(1 - lam), p > 0 sums the levels)
    p1, p2 = sorted((a * lam, b * lam))
    m1, m2 = qt.mean_queue_length(lam, p1), qt.mean_queue_length(lam, p2)
    assert m1 >= m2 * (1 - 1e-13)


@settings(max_examples=100, deadline=None)
@given(lam=lams, t1=st.floats(1e-6, 1e3), t2=st.floats(1e-6, 1e3))
def test_min_centralization_non_increasing_in_target(lam, t1, t2):
    t1, t2 = sorted((t1, t2))
    assert qt.min_centralization(lam, t1) >= qt.min_centralization(lam, t2)


def _breakpoints(lam):
    """Values of p where the top level i* drops, found by bisection on top_level."""
    out = []
    ps = np.linspace(1e-4, lam * (1 - 1e-9), 4000)
    tops = [qt.top_level(lam, p) for p in ps]
    for k in range(len(ps) - 1):
        if tops[k] != tops[k + 1]:
            lo, hi = ps[k], ps[k + 1]
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                if qt.top_level(lam, mid) == tops[k]:
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
    return out


@pytest.mark.parametrize("lam", [0.9, 0.6])
def test_min_centralization_across_top_level_jumps(lam):
    # i* jumps where s_{i*} reaches 0; the mean is continuous there but kinked.
    bps = _breakpoints(lam)
    assert len(bps) >= 3
    for pb in bps:
        for p in (pb * (1 - 1e-6), pb, pb * (1 + 1e-6)):
            target = qt.mean_queue_length(lam, p)
            got = qt.min_centralization(lam, target)
            assert qt.mean_queue_length(lam, got) <= target
            assert got == pytest.approx(p, abs=1e-9)
        # continuity of the mean across the jump
        left = qt.mean_queue_length(lam, pb * (1 - 1e-9))
        right = qt.mean_queue_length(lam, pb * (1 + 1e-9))
        assert abs(left - right) < 1e-6


@pytest.mark.parametrize("lam, target", [
    (0.9, 9.0),                  # lam/(1-lam) typed by hand (0.9/0.1 rounds above 9)
    (0.9, 0.9 / (1 - 0.9)),
    (0.9, 1e6),
    (0.9, math.inf),
    (0.5, 1.0),
    (0.0, 1e-9),                 # no load: nothing to do
])
def test_target_needing_no_centralization_gives_zero(lam, target):
    assert qt.min_centralization(lam, target) == 0.0


@pytest.mark.parametrize("lam", [0.3, 0.9, 0.999])
@pytest.mark.parametrize("target", [1e-12, 1e-300])
def test_tiny_target_needs_p_close_to_lam(lam, target):
    got = qt.min_centralization(lam, target)
    assert got <= lam
    assert qt.mean_queue_length(lam, got) <= target
    # s_1 = (lam - p)/(1 - p) <= target forces lam - p <= target
    assert lam - got <= 2 * target + 1e-11


@pytest.mark.parametrize("target", [0, 0.0, -1.0, math.nan, -math.inf, "1", None, True,
                                    1 + 2j, [1.0]])
def test_bad_target_raises(target):
    with pytest.raises(ValueError, match="target_mean_queue"):
        qt.min_centralization(0.9, target)


@pytest.mark.parametrize("lam", [1.0, 1 - 1e-17, -0.1, math.nan])
def test_bad_lam_raises(lam):
    with pytest.raises(ValueError, match="lam"):
        qt.min_centralization(lam, 1.0)


@pytest.mark.parametrize("xtol", [0.0, -1e-9, 0.1])
def test_bad_xtol_raises(xtol):
    with pytest.raises(ValueError, match="xtol"):
        qt.min_centralization(0.9, 1.0, xtol=xtol)


# ------------------------------------------------------------ Little's law, delay view
def test_sojourn_time_mm1_and_reference():
    # p = 0: M/M/1 sojourn time 1/(1 - lam); (0.9, 0.1): v_1 = 4, W = 4/0.9
    assert qt.design.mean_sojourn_time(0.5, 0.0) == pytest.approx(2.0, rel=1e-15)
    assert qt.design.mean_sojourn_time(0.9, 0.1) == pytest.approx(4.0 / 0.9, rel=1e-14)
    assert qt.design.mean_sojourn_time(0.3, 0.5) == 0.0  # K03: empty fluid state
    assert qt.design.littles_law_sojourn_time(4.0, 0.9) == pytest.approx(4.0 / 0.9)
    np.testing.assert_allclose(qt.design.littles_law_sojourn_time([0.9, 1.8], 0.9), [1.0, 2.0])


@settings(max_examples=80, deadline=None)
@given(lam=lams, w=st.floats(1e-3, 1e3))
def test_delay_target_is_queue_target_times_lam(lam, w):
    got = qt.min_centralization_for_delay(lam, w)
    if w >= 1 / (1 - lam):
        assert got == 0.0
    else:
        assert got == qt.min_centralization(lam, lam * w)
        assert qt.design.mean_sojourn_time(lam, got) <= w * (1 + 1e-12)


@pytest.mark.parametrize("bad", [
    lambda: qt.design.mean_sojourn_time(0.0, 0.1),
    lambda: qt.min_centralization_for_delay(0.0, 1.0),
    lambda: qt.min_centralization_for_delay(0.5, 0.0),
    lambda: qt.design.littles_law_sojourn_time(-1.0, 0.5),
    lambda: qt.design.littles_law_sojourn_time(1.0, 0.0),
    lambda: qt.design.littles_law_sojourn_time(math.nan, 0.5),
])
def test_sojourn_bad_input(bad):
    with pytest.raises(ValueError):
        bad()


@settings(max_examples=80, deadline=None)
@given(lam=st.floats(0.01, 0.99), target=st.floats(1e-3, 1e3))
def test_capacity_without_pooling_meets_target_exactly(lam, target):
    mu = qt.design.capacity_without_pooling(lam, target)
    # an M/M/1 queue with service rate mu and arrival rate lam has mean lam/(mu - lam)
    assert lam / (mu - lam) == pytest.approx(target, rel=1e-9)
    assert (mu <= 1.0) == (qt.min_centralization(lam, target) == 0.0) or \
        math.isclose(mu, 1.0, rel_tol=1e-12)


def test_capacity_without_pooling_bad_target():
    with pytest.raises(ValueError, match="target_mean_queue"):
        qt.design.capacity_without_pooling(0.5, -1)


# ------------------------------------------------------------ supermarket model
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.9, 0.99])
def test_supermarket_d1_is_mm1(lam):
    s = qt.supermarket.supermarket_fixed_point(lam, 1)[:200]
    np.testing.assert_allclose(s, lam ** np.arange(len(s)), rtol=1e-13)
    assert qt.supermarket.supermarket_mean_queue_length(lam, 1) == pytest.approx(lam / (1 - lam))
    if lam > 0:
        np.testing.assert_allclose(qt.supermarket.supermarket_fixed_point(lam, 1)[:50],
                                   qt.invariant_state(lam, 0.0)[:50], rtol=1e-12)


def test_supermarket_exact_values_d2():
    s = qt.supermarket.supermarket_fixed_point(0.5, 2)
    np.testing.assert_array_equal(s[:6], [1.0, 0.5, 2.0**-3, 2.0**-7, 2.0**-15, 2.0**-31])
    assert len(s) == 10  # s_9 = 2**-511 is kept; s_10 = 2**-1023 < 1e-300 is not


@settings(max_examples=100, deadline=None)
@given(lam=st.floats(0.01, 0.999), d=st.integers(1, 6))
def test_supermarket_fixed_point_solves_its_fluid_equation(lam, d):
    # ds_i/dt = lam (s_{i-1}^d - s_i^d) - (s_i - s_{i+1}) = 0 for every i >= 1
    s = np.append(qt.supermarket.supermarket_fixed_point(lam, d), 0.0)
    drift = lam * (s[:-2] ** d - s[1:-1] ** d) - (s[1:-1] - s[2:])
    assert np.max(np.abs(drift)) < 1e-12 + 1e-300 / (1 - lam)
    assert s[1] == pytest.approx(lam, rel=1e-14)  # throughput: s_1 = lam
    assert np.all(np.diff(s) <= 0)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_supermarket_heavy_traffic_is_logarithmic(d):
    # mean - log_d 1/(1 - lam) stays bounded as lam -> 1 (doubly exponential tail)
    gaps = [qt.supermarket.supermarket_mean_queue_length(1 - 10.0**-e, d)
            - math.log(10.0**e) / math.log(d) for e in (3, 6, 9, 12)]
    assert max(abs(g) for g in gaps) < 2.0
    assert max(gaps) - min(gaps) < 0.1


@settings(max_examples=60, deadline=None)
@given(lam=st.floats(0.05, 0.999), d=st.integers(1, 8))
def test_supermarket_more_choices_shorter_queues(lam, d):
    assert (qt.supermarket.supermarket_mean_queue_length(lam, d + 1)
            < qt.supermarket.supermarket_mean_queue_length(lam, d))


@pytest.mark.parametrize("d", [0, -1, 2.0, True, "2", None])
def test_supermarket_bad_d(d):
    with pytest.raises(ValueError, match="d must be an integer"):
        qt.supermarket.supermarket_fixed_point(0.5, d)
    with pytest.raises(ValueError, match="d must be an integer"):
        qt.supermarket.supermarket_mean_queue_length(0.5, d)


def test_supermarket_bad_lam():
    with pytest.raises(ValueError, match="lam"):
        qt.supermarket.supermarket_mean_queue_length(1.0, 2)


# ------------------------------------------------------------ design_point
@pytest.mark.parametrize("lam, target", [(0.9, 4.0), (0.99, 5.0), (0.95, 30.0)])
def test_design_point_consistent(lam, target):
    d = qt.design_point(lam, target)
    assert d.p_min == qt.min_centralization(lam, target)
    assert d.mean_queue_length == qt.mean_queue_length(lam, d.p_min) <= target
    assert d.mean_sojourn_time == pytest.approx(d.mean_queue_length / lam)
    assert d.mm1_mean_queue_length == pytest.approx(lam / (1 - lam))
    if d.p_min > 0:
        assert d.top_level == qt.top_level(lam, d.p_min)
    else:
        assert d.top_level == -1 and "no centralization" in d.summary()
    assert d.capacity_without_pooling == qt.design.capacity_without_pooling(lam, target)


def test_design_point_reference_and_bad_input():
    d = qt.design_point(0.9, 4.0)     # MODEL.md: v_1 = 4 exactly at (0.9, 0.1), i* = 8
    assert d.p_min == pytest.approx(0.1, abs=1e-11) and d.top_level == 8
    with pytest.raises(ValueError, match="target_mean_queue"):
        qt.design_point(0.9, 0.0)


# ------------------------------------------------- finite systems (lower bound R14)
@pytest.mark.parametrize("lam, target", [(0.9, 2.0), (0.7, 0.5), (0.8, 1.0)])
@pytest.mark.parametrize("n, K", [(2, 90), (3, 45)])
def test_fluid_design_is_necessary_for_small_exact_systems(lam, target, n, K):
    # E[v^N_1] >= v^I_1 for every N (steady-state chapter): at the fluid design, and at
    # any smaller p, an exactly solved finite system does not beat the target.
    p_star = qt.min_centralization(lam, target)
    for p in (p_star, 0.9 * p_star):
        r = qt.exact_stationary(n, lam, p, max_queue=K)
        assert r.boundary_mass < 1e-6
        assert r.mean_queue_length >= qt.mean_queue_length(lam, p) >= target * (1 - 1e-9)


@pytest.mark.parametrize("p", [0.0, 0.3, 0.9])
def test_one_station_ignores_centralization(p):
    # N = 1 is an M/M/1 queue with service rate 1 whatever p is, so no p meets a
    # target below lam/(1 - lam) (the design chapter's p_min(1) = +inf).
    lam, K = 0.6, 80
    r = qt.exact_stationary(1, lam, p, max_queue=K)
    law = lam ** np.arange(K + 1)
    law /= law.sum()
    assert np.abs(r.probabilities - law).max() < 1e-12
    assert r.mean_queue_length == pytest.approx(lam / (1 - lam), rel=1e-12)


@pytest.mark.parametrize("target", [1.0, 2.0, 5.0])
def test_unpooled_fraction_exponent_tends_to_one_over_target_plus_one(target):
    # design chapter, exercise design-ex-table: log(1 - p_min)/log(1 - lam) -> 1/(L + 1)
    expo = [math.log1p(-qt.min_centralization(1 - 10.0 ** -k, target)) / math.log(10.0 ** -k)
            for k in (3, 6, 12)]
    assert expo[0] < expo[1] < expo[2]
    assert expo[2] == pytest.approx(1 / (target + 1), abs=2e-3)
    # and not the 1/L that the fixed-p heavy-traffic formula would suggest
    assert abs(expo[2] - 1 / target) > 0.5 * (1 / target - 1 / (target + 1))


# ------------------------------------------ the guaranteed design (proved rate bound)
from qtheory.design import (guaranteed_mean_queue_bound,  # noqa: E402
                            guaranteed_min_centralization)


@pytest.mark.parametrize("n, lam, p, K", [(2, 0.7, 0.3, 60), (3, 0.9, 0.4, 45),
                                          (3, 0.5, 0.1, 30), (2, 0.9, 0.2, 90)])
def test_guaranteed_bound_holds_on_exact_systems(n, lam, p, K):
    r = qt.exact_stationary(n, lam, p, max_queue=K)
    assert r.boundary_mass < 1e-6
    u = guaranteed_mean_queue_bound(n, lam, p)
    assert qt.mean_queue_length(lam, p) <= r.mean_queue_length <= u <= lam / (1 - lam)


def test_guaranteed_bound_edges():
    # p = 0: N independent M/M/1 queues, the mean exactly; p = 1: one pooled M/M/1 queue
    # of rate N, whose mean per station lam/((1 - lam) N) the rate constants give exactly
    assert guaranteed_mean_queue_bound(50, 0.8, 0.0) == pytest.approx(4.0)
    assert guaranteed_mean_queue_bound(50, 0.8, 1.0) == pytest.approx(4.0 / 50)
    assert guaranteed_mean_queue_bound(7, 0.0, 0.5) == 0.0
    # the rate bound shrinks with N: the bound tends to the fluid mean
    u = [guaranteed_mean_queue_bound(n, 0.9, 0.4) for n in (10, 10**3, 10**5, 10**7)]
    assert all(a > b for a, b in zip(u, u[1:]))
    assert u[-1] - qt.mean_queue_length(0.9, 0.4) < 1e-3


@pytest.mark.parametrize("n, lam, target", [(100, 0.9, 2.0), (1000, 0.9, 2.0),
                                            (100, 0.5, 0.02), (50, 0.7, 0.5),
                                            (10**4, 0.99, 2.0)])
def test_guaranteed_design_is_feasible_and_above_the_fluid_design(n, lam, target):
    p = guaranteed_min_centralization(n, lam, target)
    assert qt.min_centralization(lam, target) <= p <= 1.0
    assert guaranteed_mean_queue_bound(n, lam, p) <= target
    # minimal up to the grid: a ten times finer grid finds nothing much smaller
    fine = np.linspace(qt.min_centralization(lam, target), 1.0, 10_001)
    first = next(q for q in fine if guaranteed_mean_queue_bound(n, lam, q) <= target)
    assert p <= first + 1e-3


def test_guaranteed_design_tends_to_the_fluid_design():
    fluid = qt.min_centralization(0.9, 2.0)
    ps = [guaranteed_min_centralization(n, 0.9, 2.0) for n in (10, 100, 10**4, 10**6)]
    assert all(a > b for a, b in zip(ps, ps[1:]))
    assert ps[-1] - fluid < 1e-3


def test_guaranteed_design_special_cases_and_bad_input():
    assert guaranteed_min_centralization(5, 0.8, 4.0) == 0.0       # the M/M/1 mean
    assert guaranteed_min_centralization(5, 0.8, math.inf) == 0.0
    assert guaranteed_min_centralization(1, 0.8, 3.9) == math.inf  # N = 1: M/M/1 for all p
    for bad in [dict(n_stations=0), dict(n_stations=2.5), dict(lam=1.0), dict(lam=-0.1),
                dict(target_mean_queue=0.0), dict(target_mean_queue=float("nan")),
                dict(grid=5), dict(grid=True), dict(ptol=0.5)]:
        kw = dict(n_stations=100, lam=0.9, target_mean_queue=2.0) | bad
        with pytest.raises(ValueError):
            guaranteed_min_centralization(**kw)
    with pytest.raises(ValueError):
        guaranteed_mean_queue_bound(100, 0.9, 1.5)
