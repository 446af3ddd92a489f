"""The invariant state against closed forms, exact cases and a 60-digit reference.

Sources of the expected values: ../shared/MODEL.md section 5 (checked summary of
Tsitsiklis and Xu 2012, Theorem 3.3) and ../shared/cases/CASES.md K01-K06.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import qtheory as qt
from qtheory import _invariant


def reference_state(lam, p, dps=60):
    """s_1..s_k by the balance recursion lam s_{i-1} = (1-p) s_i + p in `dps` digits.

    The float inputs are taken as exact binary fractions.  Levels are kept while the
    exact value is positive.  Returns a list of mpf (without s_0).
    """
    with mpmath.workdps(dps):
        L, P = mpmath.mpf(lam), mpmath.mpf(p)
        out, prev = [], mpmath.mpf(1)
        if P == 1:
            return out
        while True:
            nxt = (L * prev - P) / (1 - P)
            if nxt <= 0:
                return out
            out.append(nxt)
            prev = nxt


def reference_mean(lam, p):
    with mpmath.workdps(60):
        return float(mpmath.fsum(reference_state(lam, p)))


# ---------------------------------------------------------------- reference values
@pytest.mark.parametrize(
    "lam, p, top, mean",
    [
        (0.99, 0.05, 39, 24.0298),  # the paper's case (MODEL.md section 5)
        (0.95, 0.1, 12, 6.6481),
        (0.7, 0.2, 3, 0.93164),
        (0.9, 0.1, 8, 4.0),
    ],
)
def test_reference_values(lam, p, top, mean):
    assert qt.top_level(lam, p) == top
    s = qt.invariant_state(lam, p)
    assert len(s) == top + 1
    assert qt.mean_queue_length(lam, p) == pytest.approx(mean, abs=5e-5)


def test_paper_case_against_mm1():
    assert qt.mm1_mean_queue_length(0.99) == pytest.approx(99.0, rel=1e-14)
    assert qt.mean_queue_length(0.99, 0.0) == pytest.approx(99.0, rel=1e-14)


def test_mean_equals_sum_and_closed_form():
    # v_1 = lam(1-lam)(1-r^k)/(1-p-lam)^2 - p k/(1-p-lam), r != 1 (MODEL.md section 5)
    for lam, p in [(0.99, 0.05), (0.95, 0.1), (0.7, 0.2), (0.5, 0.05), (0.8, 0.01)]:
        k = qt.top_level(lam, p)
        r = lam / (1 - p)
        closed = lam * (1 - lam) * (1 - r**k) / (1 - p - lam) ** 2 - p * k / (1 - p - lam)
        assert qt.mean_queue_length(lam, p) == pytest.approx(closed, rel=1e-10)
        assert qt.mean_queue_length(lam, p) == pytest.approx(
            math.fsum(qt.invariant_state(lam, p)[1:]), rel=1e-15)


# ---------------------------------------------------------------- K01: lam + p = 1
def test_k01_on_the_line():
    s = qt.invariant_state(0.9, 0.1)
    np.testing.assert_allclose(s, [1 - i / 9 for i in range(9)], rtol=0, atol=1e-15)
    assert qt.mean_queue_length(0.9, 0.1) == pytest.approx(4.0, rel=1e-13)
    s = qt.invariant_state(0.7, 0.3)
    np.testing.assert_allclose(s, [1, 4 / 7, 1 / 7], rtol=1e-14)
    assert qt.mean_queue_length(0.7, 0.3) == pytest.approx(5 / 7, rel=1e-13)


# ---------------------------------------------------------------- K02: near the line
@pytest.mark.parametrize("dp", [1e-13, -1e-13, 1e-15, -1e-15, 1e-9, -1e-9])
def test_k02_just_off_the_line(dp):
    lam, p = 0.7, 0.3 + dp
    s = qt.invariant_state(lam, p)
    ref = reference_state(lam, p)
    assert len(s) - 1 == len(ref) == 2
    for got, want in zip(s[1:], ref):
        assert abs(got - float(want)) <= 1e-9 * float(want)
    assert qt.mean_queue_length(lam, p) == pytest.approx(5 / 7, rel=1e-8)


def test_continuity_across_the_line_paper_scale():
    # the mean is continuous in p across lam + p = 1
    lam = 0.9
    at = qt.mean_queue_length(lam, 0.1)
    for dp in [1e-14, 1e-12, 1e-10]:
        for sign in (1, -1):
            assert qt.mean_queue_length(lam, 0.1 + sign * dp) == pytest.approx(
                at, abs=1e-8)


# ---------------------------------------------------------------- K03-K06
def test_k03_lam_at_most_p_is_empty():
    for lam, p in [(0.3, 0.5), (0.5, 0.5), (0.0, 0.2), (0.0, 1.0)]:
        s = qt.invariant_state(lam, p)
        assert s.tolist() == [1.0]
        assert qt.mean_queue_length(lam, p) == 0.0
        assert qt.top_level(lam, p) == 0


def test_k04_p_zero_is_mm1():
    for lam in [0.0, 0.3, 0.9, 0.99]:
        s = qt.invariant_state(lam, 0.0)
        assert s[0] == 1.0
        np.testing.assert_allclose(s, lam ** np.arange(len(s)), rtol=1e-12)
        assert qt.mean_queue_length(lam, 0.0) == pytest.approx(lam / (1 - lam),
                                                               rel=1e-15)
    with pytest.raises(ValueError, match="p = 0"):
        qt.heavy_traffic_scaling(0.9, 0.0)
    with pytest.raises(ValueError, match="p = 0"):
        qt.top_level(0.9, 0.0)


def test_k04_p_one_is_empty():
    assert qt.mean_queue_length(0.99, 1.0) == 0.0
    assert qt.invariant_state(0.99, 1.0).tolist() == [1.0]
    assert qt.heavy_traffic_scaling(0.99, 1.0) == 0.0


@pytest.mark.parametrize("p", [1e-12, 1e-8, 1e-300, 0.05])
def test_k05_heavy_traffic_scaling_tiny_p(p):
    lam = 0.99
    with mpmath.workdps(50):
        want = float(mpmath.log1p(-mpmath.mpf(lam)) / mpmath.log1p(-mpmath.mpf(p)))
    assert qt.heavy_traffic_scaling(lam, p) == pytest.approx(want, rel=1e-14)


@pytest.mark.parametrize("lam", [1 - 1e-17, 1.0, 1.5, -1e-300, -0.1, math.nan, math.inf,
                                 "0.5", None, True, 1j, [0.5]])
def test_k06_bad_lam(lam):
    for f in (qt.invariant_state, qt.mean_queue_length, qt.top_level,
              qt.heavy_traffic_scaling):
        with pytest.raises(ValueError, match="lam"):
            f(lam, 0.1)
    with pytest.raises(ValueError, match="lam"):
        qt.mm1_mean_queue_length(lam)


def test_k06_message_explains_rounding():
    with pytest.raises(ValueError, match="double precision"):
        qt.mean_queue_length(1 - 1e-17, 0.05)


@pytest.mark.parametrize("p", [-0.1, 1.0000001, math.nan, -math.inf, "0.1", None,
                               False])
def test_bad_p(p):
    for f in (qt.invariant_state, qt.mean_queue_length, qt.heavy_traffic_scaling):
        with pytest.raises(ValueError, match=r"\bp\b"):
            f(0.5, p)


def test_max_levels_guard():
    with pytest.raises(ValueError, match="max_levels"):
        qt.invariant_state(1 - 1e-12, 1e-12)
    # the mean needs no array and stays finite and accurate
    want = reference_mean_line(1e-12)
    got = qt.mean_queue_length(1 - 1e-12, 1e-12)
    # off the line by 2e-17 in binary: i* delta ~ 2e-5 moves the mean by that much
    assert got == pytest.approx(want, rel=1e-4)


def reference_mean_line(p):
    """Mean on (close to) the line lam = 1 - p: s_i = 1 - i p/(1-p), i < (1-p)/p."""
    with mpmath.workdps(50):
        P = mpmath.mpf(p)
        k = int(mpmath.ceil((1 - P) / P)) - 1
        return float(k - P * k * (k + 1) / (2 * (1 - P)))


# ---------------------------------------------------------------- extremes
@pytest.mark.parametrize("lam, p", [(1 - 1e-12, 0.05), (1 - 1e-9, 0.3), (0.99, 1e-12),
                                    (0.5, 1e-12), (1 - 1e-12, 0.999),
                                    (0.999999, 0.001)])
def test_extremes_match_60_digit_reference(lam, p):
    ref = reference_state(lam, p)
    s = qt.invariant_state(lam, p)
    assert len(s) - 1 == len(ref)
    np.testing.assert_allclose(s[1:], [float(x) for x in ref], rtol=1e-10, atol=1e-14)
    assert qt.mean_queue_length(lam, p) == pytest.approx(reference_mean(lam, p),
                                                         rel=1e-12)


def test_high_precision_path_agrees_with_summation():
    # Just above the level count where the mean switches to the 50-digit closed form.
    p = 1.0 / (_invariant.MP_LEVELS + 1000)
    lam = 1 - p
    k = qt.top_level(lam, p)
    assert k > _invariant.MP_LEVELS
    by_sum = math.fsum(qt.invariant_state(lam, p)[1:])
    assert qt.mean_queue_length(lam, p) == pytest.approx(by_sum, rel=1e-11)
    p2 = p * 1.5  # off the line too
    lam2 = 1 - p * 1.01
    if qt.top_level(lam2, p2) > _invariant.MP_LEVELS:
        assert qt.mean_queue_length(lam2, p2) == pytest.approx(
            math.fsum(qt.invariant_state(lam2, p2)[1:]), rel=1e-10)


# ---------------------------------------------------------------- exact powers
@pytest.mark.parametrize("r, k", [(2, 2), (3, 2), (Fraction(3, 2), 3),
                                  (Fraction(1, 2), 1), (Fraction(2, 3), 3),
                                  (Fraction(5, 4), 6)])
def test_p_over_one_minus_lam_exact_power_of_r(r, k):
    # p/(1-lam) = r^k and lam = r(1-p)  =>  s_k = 0 exactly: i* = k - 1, no negative entry
    r = Fraction(r)
    lam_q = (r - r ** (k + 1)) / (1 - r ** (k + 1))
    p_q = r**k * (1 - lam_q)
    assume_ok = 0 < p_q <= lam_q < 1
    assert assume_ok
    lam, p = float(lam_q), float(p_q)
    s = qt.invariant_state(lam, p)
    assert np.all(s > 0)
    assert len(s) - 1 == qt.top_level(lam, p) == k - 1
    # exact rational values of the occupied levels
    prev, want = Fraction(1), []
    for _ in range(k - 1):
        prev = (lam_q * prev - p_q) / (1 - p_q)
        want.append(float(prev))
    np.testing.assert_allclose(s[1:], want, rtol=1e-12)


# ---------------------------------------------------------------- properties
lams = st.floats(min_value=0.0, max_value=1 - 1e-9, allow_nan=False)
ps = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(lam=lams, p=ps)
def test_state_is_positive_and_strictly_decreasing(lam, p):
    s = qt.invariant_state(lam, p)
    assert s[0] == 1.0
    assert np.all(s > 0)
    assert np.all(np.diff(s) < 0)


@settings(max_examples=300, deadline=None)
@given(lam=lams, p=ps)
def test_balance_equations_and_top_condition(lam, p):
    s = qt.invariant_state(lam, p)
    k = len(s) - 1
    # below and at the top: lam s_{i-1} = (1-p) s_i + p
    for i in range(1, k + 1):
        assert lam * s[i - 1] == pytest.approx((1 - p) * s[i] + p, abs=1e-12)
    # the central server keeps up with arrivals to the top level: lam s_{i*} <= p
    assert lam * s[k] <= p + 1e-12


@settings(max_examples=200, deadline=None)
@given(lam=st.floats(min_value=0.0, max_value=1 - 1e-6), p=ps)
def test_mean_matches_60_digit_reference(lam, p):
    assume(qt.top_level(lam, p) < 5000)
    ref = reference_mean(lam, p)
    assert abs(qt.mean_queue_length(lam, p) - ref) <= 1e-12 * ref + 1e-14


@settings(max_examples=200, deadline=None)
@given(lam=st.floats(min_value=0.02, max_value=0.999), dp=st.floats(-1e-10, 1e-10))
def test_mean_continuous_across_the_line(lam, dp):
    p = 1 - lam
    assume(p > 1e-3)
    a = qt.mean_queue_length(lam, p)
    b = qt.mean_queue_length(lam, min(max(p + dp, 0.0), 1.0))
    # |d mean / d p| is at most of order (i*)^2; i* < 1/p here
    assert abs(a - b) <= abs(dp) * (1 / p) ** 2 * 10 + 1e-12


@settings(max_examples=200, deadline=None)
@given(lam=lams, p1=ps, p2=ps)
def test_mean_non_increasing_in_p(lam, p1, p2):
    lo, hi = sorted((p1, p2))
    assert qt.mean_queue_length(lam, hi) <= qt.mean_queue_length(lam, lo) * (1 + 1e-12)


def test_heavy_traffic_limit_is_approached_slowly():
    # MODEL.md section 5: ratio 0.27 at (0.05, 0.99), 0.57 at 1 - 1e-4, 0.81 at 1 - 1e-9
    for lam, ratio in [(0.99, 0.27), (0.9999, 0.57), (1 - 1e-9, 0.81)]:
        got = qt.mean_queue_length(lam, 0.05) / qt.heavy_traffic_scaling(lam, 0.05)
        assert got == pytest.approx(ratio, abs=0.01)


# ---------------------------------------------------------------- tail sums (the paper's v)
def closed_form_tail_sums(lam, p, dps=60):
    """v^I_1..v^I_{i*+1} from the closed form of REVIEW R16, evaluated in `dps` digits.

    v_i = lam(1-lam)(r^(i-1) - r^i*)/(1-p-lam)^2 - p(i* - i + 1)/(1-p-lam), r = lam/(1-p),
    for lam + p != 1 (the float inputs are taken as exact binary fractions); i* is the
    top level of the 60-digit balance recursion, independent of qtheory.
    """
    k = len(reference_state(lam, p, dps))
    with mpmath.workdps(dps):
        L, P = mpmath.mpf(lam), mpmath.mpf(p)
        d = 1 - P - L
        assert d != 0, "the closed form divides by zero on the line lam + p = 1"
        r = L / (1 - P)
        return [float(L * (1 - L) * (r ** (i - 1) - r**k) / d**2 - P * (k - i + 1) / d)
                for i in range(1, k + 2)]


@pytest.mark.parametrize("lam, p", [
    (0.99, 0.05), (0.95, 0.1), (0.7, 0.2), (0.5, 0.05), (0.8, 0.01), (0.99, 0.3),
    (0.999999, 0.001),  # 6911 levels
    (0.9, 0.1 + 1e-9), (0.9, 0.1 - 1e-9),  # r within 1e-9 of 1, on both sides
    (0.7, 0.3 + 1e-13), (0.7, 0.3 - 1e-13),  # r within 1e-13 of 1
    (0.3, 0.5), (0.2, 0.2 + 1e-12), (0.0, 0.4),  # lam <= p: empty state
])
def test_tail_sums_match_closed_form(lam, p):
    v = qt.invariant.invariant_tail_sums(lam, p)
    want = closed_form_tail_sums(lam, p)
    assert v.shape == (len(want) + 1,)
    assert want[-1] == 0.0 and v[-1] == 0.0
    # relative accuracy, except at the top where s_i* itself can be a tiny difference
    np.testing.assert_allclose(v[1:], want, rtol=1e-9, atol=1e-13)


def test_tail_sums_closed_form_at_i1_is_the_mean():
    # at i = 1 the R16 formula is the mean of MODEL.md section 5 / invariant-eq-mean
    for lam, p in [(0.99, 0.05), (0.95, 0.1), (0.7, 0.2)]:
        assert closed_form_tail_sums(lam, p)[0] == pytest.approx(
            qt.mean_queue_length(lam, p), rel=1e-12)


def test_tail_sums_on_the_line_exact():
    # lam + p = 1: s_i = 1 - i/9 (i <= 8) at (0.9, 0.1), so v_i = sum_{j=i}^{8} (1 - j/9)
    v = qt.invariant.invariant_tail_sums(0.9, 0.1)
    want = [float(sum(Fraction(9 - j, 9) for j in range(i, 9))) for i in range(10)]
    np.testing.assert_allclose(v, want, rtol=1e-14, atol=1e-15)
    assert v[1] == pytest.approx(4.0, rel=1e-14) and v[0] == pytest.approx(5.0, rel=1e-14)
    # on the line at a tiny p the sum has ~1e6 terms: against the 50-digit mean
    p = 1e-6
    v = qt.invariant.invariant_tail_sums(1 - p, p)
    assert v[1] == pytest.approx(reference_mean_line(p), rel=1e-9)


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.9, 0.99])
def test_tail_sums_p_zero_is_the_mm1_tail(lam):
    v = qt.invariant.invariant_tail_sums(lam, 0.0)
    s = qt.invariant_state(lam, 0.0)
    assert v.shape == (len(s) + 1,)
    np.testing.assert_allclose(v, lam ** np.arange(len(s) + 1) / (1 - lam), rtol=1e-12)
    assert v[1] == pytest.approx(lam / (1 - lam), rel=1e-15)
    np.testing.assert_allclose(v[:-1] - v[1:], s, rtol=1e-10, atol=1e-300)


def test_tail_sums_empty_state():
    for lam, p in [(0.3, 0.5), (0.5, 0.5), (0.0, 1.0), (0.99, 1.0)]:
        assert qt.invariant.invariant_tail_sums(lam, p).tolist() == [1.0, 0.0]


@pytest.mark.parametrize("lam, p", [(1 - 1e-12, 0.05), (0.99, 1e-6), (0.999999, 0.001)])
def test_tail_sums_match_60_digit_reference(lam, p):
    ref = reference_state(lam, p)
    with mpmath.workdps(60):
        tails = [float(mpmath.fsum(ref[i:])) for i in range(len(ref))]
    v = qt.invariant.invariant_tail_sums(lam, p)
    # near the top each s_j carries an absolute rounding error of a few units of 1e-16
    # (invariant_state); the tail sum adds up at most len(ref) of them
    np.testing.assert_allclose(v[1:-1], tails, rtol=1e-10, atol=1e-15 * len(ref))


@settings(max_examples=300, deadline=None)
@given(lam=lams, p=ps)
def test_tail_sums_indexing_and_consistency(lam, p):
    s = qt.invariant_state(lam, p)
    v = qt.invariant.invariant_tail_sums(lam, p)
    assert v.shape == (len(s) + 1,)
    assert v[-1] == 0.0
    assert np.all(np.diff(v) < 0)  # strictly decreasing: every s_i > 0
    assert v[0] == pytest.approx(1 + v[1], rel=1e-15)
    np.testing.assert_allclose(v[:-1] - v[1:], s, rtol=0,
                               atol=1e-15 * max(1.0, v[0]) * len(s))
    assert v[1] == pytest.approx(qt.mean_queue_length(lam, p), rel=1e-10, abs=1e-15)


def test_tail_sums_balance_in_v_coordinates():
    # the fluid model in v (fluid-eq-drift-v) stands still at v^I
    for lam, p in [(0.99, 0.05), (0.9, 0.1), (0.7, 0.2), (0.95, 0.1)]:
        v = qt.invariant.invariant_tail_sums(lam, p)
        drift = qt.fluid_drift(v, lam, p, coords="v")
        assert np.max(np.abs(drift)) < 1e-12


def test_paper_floor_convention_differs_only_at_a_critical_top():
    # The paper's top level is floor(log_r(p/(1-lam))); the book's is ceil(.) - 1. They
    # differ exactly when the logarithm is an integer k: then the formula gives s_k = 0
    # (lam s_{k-1} = p, a critical top level) and both conventions give the same v.
    r, k = Fraction(2, 3), 3
    lam_q = (r - r ** (k + 1)) / (1 - r ** (k + 1))
    p_q = r**k * (1 - lam_q)
    assert (lam_q, p_q) == (Fraction(38, 65), Fraction(8, 65))
    prev, levels = Fraction(1), []
    for _ in range(k):
        prev = (lam_q * prev - p_q) / (1 - p_q)
        levels.append(prev)
    assert levels[-1] == 0 and all(x > 0 for x in levels[:-1])  # s_3 = 0 exactly
    assert lam_q * levels[-2] == p_q  # critical: lam s_{i*} = p
    lam, p = float(lam_q), float(p_q)
    assert qt.top_level(lam, p) == k - 1
    v = qt.invariant.invariant_tail_sums(lam, p)
    want = [float(sum(levels[i - 1:])) for i in range(1, k + 1)]
    np.testing.assert_allclose(v[1:], want, rtol=1e-12, atol=1e-15)
    # off the critical case the two conventions agree
    lam, p = 0.99, 0.05
    L = math.log(p / (1 - lam)) / math.log(lam / (1 - p))
    assert L != int(L) and math.floor(L) == qt.top_level(lam, p) == math.ceil(L) - 1


@pytest.mark.parametrize("bad", [1.0, -0.1, math.nan, "0.5", None, True])
def test_tail_sums_bad_input(bad):
    with pytest.raises(ValueError, match="lam"):
        qt.invariant.invariant_tail_sums(bad, 0.1)
    with pytest.raises(ValueError, match=r"\bp\b"):
        qt.invariant.invariant_tail_sums(0.5, bad if bad != 1.0 else 1.5)
    with pytest.raises(ValueError, match="max_levels"):
        qt.invariant.invariant_tail_sums(0.5, 0.1, max_levels=0)
    with pytest.raises(ValueError, match="max_levels"):
        qt.invariant.invariant_tail_sums(1 - 1e-12, 1e-12)
