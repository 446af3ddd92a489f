"""Tests of qtheory.book.checks: the computations behind the Part III chapters.

Expected values come from the theorems proved in the book: the order contraction of
fluid solutions (non-increasing positive parts, comparison of ordered solutions), the
supersolution property of the shifted invariant state, the Collatz-Wielandt bound on
the relaxation rate, the limit of the balance identity, and the identity itself (exact
for N = 1, where the system is an M/M/1 queue, and within confidence intervals for a
simulation).
"""

import dataclasses
import math

import numpy as np
import pytest

import qtheory as qt
from qtheory import book as qb

SEED = 20120601


def random_state(rng, levels):
    return np.concatenate([[1.0], np.sort(rng.uniform(0.0, 1.0, levels))[::-1]])


# ------------------------------------------------------------------ contraction

@pytest.mark.parametrize("lam,p", [(0.9, 0.1), (0.7, 0.2), (0.95, 0.3), (0.5, 0.6)])
def test_distances_never_increase(lam, p):
    rng = np.random.default_rng(SEED)
    t = np.linspace(0.0, 40.0, 161)
    for _ in range(3):
        a, b = random_state(rng, 10), random_state(rng, 6)
        d = qb.fluid_distance_curve(lam, p, t, a, b)
        plus = qb.fluid_distance_curve(lam, p, t, a, b, part="plus")
        minus = qb.fluid_distance_curve(lam, p, t, a, b, part="minus")
        assert d[0] == pytest.approx(qt.fluid.l1_distance(a, b), abs=1e-14)
        np.testing.assert_allclose(plus + minus, d, atol=1e-12)
        for x in (d, plus, minus):
            assert np.max(np.diff(x)) <= 1e-9


def test_ordered_solutions_stay_ordered():
    """Comparison: s(0) <= s'(0) coordinatewise implies s(t) <= s'(t)."""
    rng = np.random.default_rng(SEED + 1)
    t = np.linspace(0.0, 30.0, 121)
    lo = random_state(rng, 8)
    hi = np.maximum(lo, random_state(rng, 8))
    assert qb.fluid_distance_curve(0.9, 0.15, t, hi, lo, part="minus").max() < 1e-10
    # the plus part is then the difference of the mean queue lengths
    plus = qb.fluid_distance_curve(0.9, 0.15, t, hi, lo, part="plus")
    A = qt.fluid_trajectory(0.9, 0.15, t, hi)
    B = qt.fluid_trajectory(0.9, 0.15, t, lo)
    np.testing.assert_allclose(plus, A[:, 1:].sum(1) - B[:, 1:].sum(1), atol=1e-10)


def test_distance_curve_rejects_bad_input():
    with pytest.raises(ValueError, match="part"):
        qb.fluid_distance_curve(0.5, 0.2, [0, 1], [1, 0.5], [1, 0.2], part="sup")
    with pytest.raises(ValueError, match="s0_b"):
        qb.fluid_distance_curve(0.5, 0.2, [0, 1], [1, 0.5], [1, 0.2, 0.5])
    with pytest.raises(ValueError, match="lam"):
        qb.fluid_distance_curve(1.0, 0.2, [0, 1], [1, 0.5], [1, 0.2])


# ------------------------------------------------------------------ barrier

@pytest.mark.parametrize("lam,p", [(0.9, 0.1), (0.7, 0.2), (0.3, 0.5), (0.99, 0.05)])
def test_shifted_invariant_state_is_a_supersolution(lam, p):
    sI = qt.invariant_state(lam, p)
    np.testing.assert_array_equal(qb.shifted_invariant_state(lam, p, 0), sI)
    w = qb.shifted_invariant_state(lam, p, 4)
    assert w.size == sI.size + 4 and np.all(w[:5] == 1.0)
    drift = qt.fluid_drift(np.append(w, 0.0), lam, p)
    assert np.max(drift) <= 1e-13
    t = np.linspace(0.0, 50.0, 101)
    S = qt.fluid_trajectory(lam, p, t, w)
    assert np.max(np.diff(S, axis=0)) <= 1e-10          # non-increasing in time
    pad = np.zeros(S.shape[1])
    pad[: sI.size] = sI
    assert np.min(S - pad) >= -1e-10                    # stays above s^I


def test_shifted_invariant_state_rejects_bad_input():
    with pytest.raises(ValueError, match="shift"):
        qb.shifted_invariant_state(0.5, 0.2, -1)
    with pytest.raises(ValueError, match="p"):
        qb.shifted_invariant_state(0.5, 0.0, 2)


# ------------------------------------------------------------------ rate bound

def test_rate_bound_by_hand():
    # lam = 0.9, p = 0.1: r = 1, excluded; lam = 0.95, p = 0.1: r = 0.95/0.9, i* = 12
    r = 0.95 / 0.9
    assert qb.relaxation_rate_bound(0.95, 0.1) == pytest.approx(0.05 / (r ** 12 - 1))


@pytest.mark.parametrize("p", [0.05, 0.1, 0.3, 0.6])
def test_rate_bound_dominates_the_rate(p):
    for lam in 1.0 - np.geomspace(min(p, 0.99) * 0.9, 1e-3, 12):
        if lam + p <= 1.0 or lam <= p:
            continue
        mu = qt.relaxation_rate(lam, p)
        assert mu <= qb.relaxation_rate_bound(lam, p) * (1 + 1e-12)


def test_rate_bound_vanishes_linearly():
    p = 0.2
    for eps in (1e-3, 1e-4, 1e-5):
        b = qb.relaxation_rate_bound(1 - eps, p)
        r = (1 - eps) / (1 - p)
        assert b <= (1 - eps + p - 1) * r * eps / (p - r * eps) * (1 + 1e-9)
    assert qb.relaxation_rate_bound(1 - 1e-6, p) / 1e-6 < 1.05 / (1 - p) * r


def test_rate_bound_rejects_light_traffic():
    with pytest.raises(ValueError, match="lam \\+ p"):
        qb.relaxation_rate_bound(0.5, 0.3)
    with pytest.raises(ValueError, match="p"):
        qb.relaxation_rate_bound(0.5, 1.0)
    with pytest.raises(ValueError, match="lam > p"):
        qb.relaxation_rate_bound(0.5, 0.6)


# ------------------------------------------------------------------ longest queue

@pytest.mark.parametrize("lam,p", [(0.7, 0.2), (0.9, 0.1), (0.3, 0.5), (0.99, 0.05)])
def test_longest_queue_limit_satisfies_the_limit_identity(lam, p):
    out = qb.longest_queue_limit(lam, p)
    sI = np.append(qt.invariant_state(lam, p), [0.0, 0.0])
    istar = out.size - 2
    for i in range(1, istar + 3):
        lim = out[i] if i < out.size else 0.0
        assert p * lim == pytest.approx(lam * sI[i - 1] - (1 - p) * sI[i], abs=1e-12)


def test_longest_queue_limit_cases():
    assert qb.longest_queue_limit(0.9, 0.1)[-1] == pytest.approx(1.0)   # critical
    assert qb.longest_queue_limit(0.3, 0.5)[1] == pytest.approx(0.6)    # empty fluid
    s3 = qt.invariant_state(0.7, 0.2)[3]
    assert qb.longest_queue_limit(0.7, 0.2)[4] == pytest.approx(0.7 * s3 / 0.2)
    with pytest.raises(ValueError, match="p"):
        qb.longest_queue_limit(0.5, 0.0)


# ------------------------------------------------------------------ identity

@pytest.mark.parametrize("lam,p", [(0.6, 0.3), (0.8, 0.0)])
def test_identity_exact_single_station(lam, p):
    """N = 1 is an M/M/1 queue: P(M >= i) = s_i = lam^i; the truncated chain's defect
    is the blocked rate lam * s_K at every level."""
    r = qt.exact_stationary(1, lam, p, max_queue=60)
    chk = qb.stationary_balance(r)
    assert chk.source == "exact" and chk.n_stations == 1
    np.testing.assert_allclose(chk.defect, r.blocked_rate, atol=1e-12)
    np.testing.assert_allclose(chk.rhs[:10], p * lam ** np.arange(1, 11), rtol=1e-8,
                               atol=1e-14)
    assert np.all(chk.half_width == 0.0)


def test_identity_exact_two_stations():
    r = qt.exact_stationary(2, 0.7, 0.2, max_queue=40)
    chk = qb.stationary_balance(r)
    assert np.max(np.abs(chk.defect - r.blocked_rate)) < 1e-10
    assert chk.rhs[0] > 0.1 * 0.2  # not trivially zero


def test_identity_simulation_within_intervals_and_detects_errors():
    sim = qt.simulate(40, 0.8, 0.25, t_end=40000.0, warmup=400.0, seed=SEED,
                      n_batches=20)
    chk = qb.stationary_balance(sim)
    assert chk.source == "simulation"
    assert chk.rhs[0] == pytest.approx(0.25, abs=0.01)   # P(M >= 1) near 1 at N = 40
    z = chk.z_scores()
    used = chk.half_width > 0
    assert used.sum() >= 3
    assert np.max(np.abs(z[used])) < 4.5
    # a result that claims the wrong p must fail the check by many intervals
    wrong = qb.stationary_balance(dataclasses.replace(sim, p=0.3))
    assert np.max(np.abs(wrong.defect)) > 5 * np.max(chk.half_width)


def test_stationary_balance_rejects_other_objects():
    with pytest.raises(ValueError, match="ExactResult or a SimulationResult"):
        qb.stationary_balance({"s": [1.0]})


# ------------------------------------------------------------------ lower bound (R14)

# (lam, p) -> truncation level K for N = 1, 2, 3, 4, chosen so that the tolerance the
# truncation allows stays below 1e-2 (small against the fluid values it is compared
# with, so the check has teeth) and each solve takes at most a few seconds.
LOWER_BOUND_CASES = {
    (0.9, 0.1): (60, 45, 40, 32),     # critical top level: lam * s^I_8 = p
    (0.7, 0.2): (50, 30, 22, 18),
    (0.95, 0.3): (250, 80, 46, 32),
    (0.5, 0.2): (40, 24, 16, 12),     # r = lam / (1 - p) < 1
    (0.3, 0.5): (30, 20, 14, 10),     # lam <= p: i* = 0, the bound is E s_i >= 0
}


@pytest.mark.parametrize("lam,p", list(LOWER_BOUND_CASES))
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_lower_bound_holds_on_exact_solutions(lam, p, n):
    K = LOWER_BOUND_CASES[(lam, p)][n - 1]
    r = qt.exact_stationary(n, lam, p, max_queue=K)
    c = qb.lower_bound_check(r)
    sI = qt.invariant_state(lam, p)
    assert c.levels.tolist() == list(range(1, K + 1))
    np.testing.assert_allclose(c.fluid[: sI.size - 1], sI[1:], atol=1e-15)
    assert np.all(c.fluid[sI.size - 1:] == 0.0)
    assert c.tolerance.max() < 1e-2, "truncation too coarse for a meaningful check"
    assert c.holds, f"margins {c.margin} below -tolerance {c.tolerance}"
    # level 1 in closed form: (1 - p)(E s_1 - s^I_1) = p P(M = 0) - blocked rate
    # (for i* = 0 the fluid value is 0 and the margin is E s_1 itself)
    if sI.size > 1:
        expected = (p * (1.0 - r.longest_queue_tail[1]) - r.blocked_rate) / (1.0 - p)
        assert c.margin[0] == pytest.approx(expected, abs=1e-10)
    # E[v^N_1] >= v^I_1 up to the summed tolerance
    assert c.mean_queue_margin >= -c.tolerance.sum()


def test_lower_bound_critical_case_is_strict_at_every_level():
    # With K = 32 at N = 4 the truncation error is smaller than every true margin,
    # which the proof bounds below by p P(M < i) / (1 - p) > 0.
    r = qt.exact_stationary(4, 0.9, 0.1, max_queue=32)
    c = qb.lower_bound_check(r)
    assert np.all(c.margin > c.tolerance)


def test_lower_bound_tolerance_is_sharp_at_p0():
    # p = 0: independent M/M/1 queues truncated at K; the truncated margins equal
    # -(blocked rate) * sum_{j<i} lam^j, the truncation part of the tolerance.
    r = qt.exact_stationary(2, 0.6, 0.0, max_queue=25)
    c = qb.lower_bound_check(r)
    truncation_part = r.blocked_rate * np.cumsum(0.6 ** np.arange(25))
    assert c.holds
    assert np.all(c.margin < 0)
    np.testing.assert_allclose(-c.margin, truncation_part, rtol=1e-6)
    assert np.all(c.tolerance >= truncation_part)
    assert np.all(c.tolerance <= truncation_part * (1 + 1e-4) + 1e-11)


def test_lower_bound_check_detects_a_violation():
    r = qt.exact_stationary(3, 0.9, 0.1, max_queue=40)
    s = r.s.copy()
    s[5] -= 0.05                        # push E s_5 below s^I_5 = 4/9 + (its margin)
    s[5] = min(s[5], qt.invariant_state(0.9, 0.1)[5] - 0.01)
    fake = dataclasses.replace(r, s=s)
    c = qb.lower_bound_check(fake)
    assert not c.holds
    assert c.margin[4] < -c.tolerance[4]
    assert np.argmin(c.margin) == 4


@pytest.mark.filterwarnings("ignore::qtheory.simulation.SimulationWarning")
def test_lower_bound_check_rejects_other_inputs():
    sim = qt.simulate(20, 0.7, 0.2, t_end=50.0, warmup=5.0, seed=1)
    with pytest.raises(ValueError, match="ExactResult"):
        qb.lower_bound_check(sim)
    with pytest.raises(ValueError, match="ExactResult"):
        qb.lower_bound_check(np.ones(5))
