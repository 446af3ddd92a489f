"""Tests of the fluid model: drift, exact solver, stability numerics, bad input.

Every expected value is fixed by theory: the closed-form invariant state (MODEL.md
section 5), closed-form solutions of special cases, an independent first-order scheme
(projected Euler in tail-sum coordinates) whose error must halve with the step, an
independent M/M/1 transient for p = 0, and the l1 contraction of fluid solutions.
"""

import math

import numpy as np
import pytest
from scipy.linalg import expm

import qtheory as qt
from qtheory import book as qb
from qtheory import fluid_drift, fluid_trajectory, invariant_state
from qtheory.fluid import l1_distance

RNG_SEED = 20120101


def random_state(rng, levels):
    """A random non-increasing s with s[0] = 1 and `levels` occupied levels."""
    s = np.sort(rng.uniform(0.0, 1.0, levels))[::-1]
    return np.concatenate([[1.0], s])


def is_state(S, atol=1e-12):
    S = np.atleast_2d(S)
    return (np.all(S[:, 0] == 1.0) and np.all(S >= -atol) and np.all(S <= 1 + atol)
            and np.all(np.diff(S, axis=1) <= atol))


# ----------------------------------------------------------------------- drift

def test_drift_zero_at_invariant_state():
    for lam, p in [(0.7, 0.2), (0.95, 0.1), (0.99, 0.05), (0.9, 0.1), (0.7, 0.3)]:
        s = np.append(invariant_state(lam, p), 0.0)
        assert np.max(np.abs(fluid_drift(s, lam, p))) < 1e-13


def test_drift_by_hand():
    # lam = 0.5, p = 0.2, s = (1, 0.6, 0.3, 0): top level 2, lam s_2 = 0.15 < p: sliding
    s = np.array([1.0, 0.6, 0.3, 0.0])
    d = fluid_drift(s, 0.5, 0.2)
    assert d[0] == 0.0
    assert d[1] == pytest.approx(0.5 * 0.4 - 0.8 * 0.3)
    assert d[2] == pytest.approx(0.5 * 0.3 - 0.8 * 0.3 - (0.2 - 0.15))
    assert d[3] == 0.0
    # lam s_2 > p: level 3 opens at rate lam s_2 - p and the top row loses lam s_2
    s = np.array([1.0, 0.9, 0.8, 0.0])
    d = fluid_drift(s, 0.5, 0.2)
    assert d[2] == pytest.approx(0.5 * 0.1 - 0.8 * 0.8)
    assert d[3] == pytest.approx(0.5 * 0.8 - 0.2)
    # empty system: level 1 opens at lam - p if positive
    assert fluid_drift([1.0, 0.0], 0.5, 0.2)[1] == pytest.approx(0.3)
    assert fluid_drift([1.0, 0.0], 0.1, 0.2)[1] == 0.0


def test_prelimit_drift_by_hand():
    """sliding=False: the N-system's mean drift, central server at full rate on top."""
    s = np.array([1.0, 0.6, 0.3, 0.0])
    d = fluid_drift(s, 0.5, 0.2, sliding=False)
    assert d[2] == pytest.approx(0.5 * 0.3 - 0.8 * 0.3 - 0.2)
    assert d[3] == pytest.approx(0.5 * 0.3)
    # it differs from the fluid drift only at the top two levels
    f = fluid_drift(s, 0.5, 0.2)
    np.testing.assert_array_equal(d[:2], f[:2])
    # total work balance is the same: both remove p from the mean queue length
    assert d.sum() == pytest.approx(f.sum())


def test_drift_coordinates_agree():
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(200):
        lam, p = rng.uniform(0, 0.99), rng.uniform(0, 1)
        levels = int(rng.integers(0, 12))
        s = np.append(random_state(rng, levels), 0.0)
        if rng.uniform() < 0.3 and levels:
            s[levels - int(rng.integers(0, levels)):] = 0.0   # empty top levels
        v = np.cumsum(s[::-1])[::-1]
        for sliding in (True, False):
            ds = fluid_drift(s, lam, p, sliding=sliding, validate=False)
            dv = fluid_drift(v, lam, p, coords="v", sliding=sliding, validate=False)
            ds_from_v = np.append(dv[:-1] - dv[1:], dv[-1])
            ds_from_v[0] = 0.0
            np.testing.assert_allclose(ds_from_v, ds, atol=1e-14)


def test_drift_needs_room_for_a_new_level():
    with pytest.raises(ValueError, match="append a zero"):
        fluid_drift([1.0, 0.9], 0.9, 0.1)
    # without validation the flow beyond the array is dropped (the naive truncation)
    d = fluid_drift([1.0, 0.9], 0.9, 0.1, validate=False)
    assert d.shape == (2,)


# ------------------------------------------------------------- exact solutions

def test_pure_drain_closed_form():
    """lam = 0, one job everywhere: s_1' = -(1-p) s_1 - p until empty."""
    p = 0.5
    a = p / (1 - p)
    t_empty = math.log((1 + a) / a) / (1 - p)
    T = np.linspace(0, 1.5 * t_empty, 31)
    S = fluid_trajectory(0.0, p, T, [1.0, 1.0])
    exact = np.where(T < t_empty, (1 + a) * np.exp(-(1 - p) * T) - a, 0.0)
    np.testing.assert_allclose(S[:, 1], exact, atol=1e-14)


def test_central_server_only_closed_form():
    """lam = 0, p = 1: the central server drains the top level at rate 1."""
    T = np.linspace(0, 1.0, 41)
    S = fluid_trajectory(0.0, 1.0, T, [1.0, 0.5, 0.25])
    np.testing.assert_allclose(S[:, 2], np.maximum(0.25 - T, 0.0), atol=1e-14)
    np.testing.assert_allclose(S[:, 1], np.clip(0.75 - T, 0.0, 0.5), atol=1e-14)


def test_p0_is_mm1_transient():
    """p = 0: s_i(t) = P(Q(t) >= i) for an M/M/1 queue started empty."""
    lam, n = 0.5, 120
    Q = np.zeros((n, n))
    for k in range(n - 1):
        Q[k, k + 1] = lam
        Q[k + 1, k] = 1.0
    Q -= np.diag(Q.sum(axis=1))
    T = np.array([0.0, 0.5, 2.0, 10.0])
    S = fluid_trajectory(lam, 0.0, T, tol=1e-12)
    for t, s in zip(T, S):
        pi = expm(Q * t)[0]
        tail = pi[::-1].cumsum()[::-1]
        m = min(s.size, 40)
        np.testing.assert_allclose(s[:m], tail[:m], atol=1e-12)


def test_projected_euler_converges_to_it():
    """An independent first-order scheme (MODEL section 4: v-coordinates, clip at 0)
    approaches fluid_trajectory with error halving with the step."""

    def euler(lam, p, s0, T, h, L):
        s = np.zeros(L + 2)
        s[: len(s0)] = s0
        v = np.cumsum(s[::-1])[::-1]
        for _ in range(int(round(T / h))):
            sv = v[:-1] - v[1:]
            vn = v.copy()
            vn[1:-1] += h * (lam * sv[:-1] - (1 - p) * sv[1:])
            vn[1:] = np.maximum(vn[1:] - p * h, 0.0)
            vn[0] = 1 + vn[1]
            v = vn
        return v[:-1] - v[1:]

    for lam, p, s0 in [(0.9, 0.1, [1.0]), (0.5, 0.3, [1, 1, 1, 1, 1, 0.5])]:
        T = 3.0
        ours = fluid_trajectory(lam, p, [T], s0)[0]
        e1 = l1_distance(euler(lam, p, s0, T, 1e-3, 30), ours)
        e2 = l1_distance(euler(lam, p, s0, T, 5e-4, 30), ours)
        assert 1.8 < e1 / e2 < 2.2
        assert e2 < 1e-4


# ------------------------------------------------------------------ invariants

@pytest.mark.parametrize("lam,p", [(0.9, 0.1), (0.7, 0.2), (0.99, 0.05), (0.3, 0.5),
                                   (0.5, 0.0), (0.95, 1e-6), (0.6, 1.0)])
def test_invariants_from_random_states(lam, p):
    rng = np.random.default_rng(RNG_SEED)
    T = np.concatenate([[0.0], np.geomspace(1e-3, 200.0, 60)])
    for levels in (0, 3, 25, 120):
        s0 = random_state(rng, levels)
        S = fluid_trajectory(lam, p, T, s0)
        assert S.shape[0] == T.size
        assert is_state(S, atol=0.0)
        np.testing.assert_array_equal(S[0, : s0.size], s0)


@pytest.mark.parametrize("lam,p,t_end", [(0.7, 0.2, 400.0), (0.95, 0.1, 4000.0),
                                         (0.9, 0.1, 2000.0), (0.7, 0.3, 400.0),
                                         (0.99, 0.05, 4e4), (0.3, 0.5, 400.0)])
def test_converges_to_invariant_state(lam, p, t_end):
    rng = np.random.default_rng(RNG_SEED)
    for s0 in (None, random_state(rng, 60)):
        S = fluid_trajectory(lam, p, [0.0, t_end], s0)
        assert l1_distance(S[-1], invariant_state(lam, p)) < 1e-9


@pytest.mark.parametrize("lam,p", [(0.9, 0.1), (0.7, 0.3), (0.7, 0.2), (0.99, 0.05),
                                   (0.95, 0.1), (0.5, 0.0), (0.3, 0.5)])
def test_stays_at_invariant_state(lam, p):
    s_inv = invariant_state(lam, p)
    T = np.linspace(0.0, 500.0, 51)
    S = fluid_trajectory(lam, p, T, s_inv)
    assert np.max(l1_distance(S, s_inv)) < 1e-12


def test_two_accuracies_agree():
    rng = np.random.default_rng(RNG_SEED)
    for lam, p in [(0.9, 0.1), (0.99, 0.05), (0.6, 0.25)]:
        # check=True solves twice (half step, twice the event sampling) and raises
        # if the two differ by more than tol
        S = fluid_trajectory(lam, p, np.linspace(0, 100, 11), random_state(rng, 30),
                             tol=1e-12, check=True)
        assert is_state(S)


def test_k13():
    """CASES K13: lam = 0.9, p = 0.1 from empty on [0, 300]."""
    T = np.linspace(0.0, 300.0, 3001)
    S = fluid_trajectory(0.9, 0.1, T, tol=1e-11, check=True)
    target = 1.0 - np.arange(9) / 9.0
    assert np.max(np.abs(S[-1, :9] - target)) < 1e-4
    assert np.all(S[-1, 9:] < 1e-4)
    assert is_state(S, atol=0.0)
    S_inv = fluid_trajectory(0.9, 0.1, T, target)
    assert np.max(l1_distance(S_inv, target)) < 1e-12


def test_levels_grow_and_shrink():
    # mass at level 80 drains; levels close one by one and the top reaches i* = 3
    s0 = np.concatenate([[1.0], np.full(80, 0.5)])
    S = fluid_trajectory(0.7, 0.2, [0.0, 1.0, 2000.0], s0)
    top = [int(np.flatnonzero(row > 0)[-1]) for row in S]
    # lam s_80 = 0.35 > p: level 81 opens at once
    assert S.shape[1] == 82
    assert top[0] == 80 and top[1] == 81 and top[2] == 3
    # from empty the system opens levels up to i* = 39
    S = fluid_trajectory(0.99, 0.05, [0.0, 3e4])
    assert S.shape[1] == 40


# --------------------------------------------------------------------- stability

def test_l1_distance_non_increasing():
    rng = np.random.default_rng(RNG_SEED)
    T = np.concatenate([[0.0], np.geomspace(1e-2, 300.0, 80)])
    for lam, p in [(0.9, 0.1), (0.7, 0.2), (0.95, 0.05), (0.4, 0.5), (0.8, 0.0)]:
        for _ in range(4):
            a = fluid_trajectory(lam, p, T, random_state(rng, int(rng.integers(0, 30))))
            b = fluid_trajectory(lam, p, T, random_state(rng, int(rng.integers(0, 30))))
            d = l1_distance(a, b)
            assert np.all(np.diff(d) <= 1e-12)


def _fitted_rate(lam, p, s0, t0, t1):
    T = np.linspace(t0, t1, 41)
    S = fluid_trajectory(lam, p, np.concatenate([[0.0], T]), s0)[1:]
    d = l1_distance(S, invariant_state(lam, p))
    return -np.polyfit(T, np.log(d), 1)[0]


@pytest.mark.parametrize("lam,p,t0,t1", [(0.7, 0.2, 40.0, 120.0),
                                         (0.95, 0.1, 600.0, 1800.0),
                                         (0.8, 0.05, 200.0, 600.0)])
def test_relaxation_rate_matches_decay(lam, p, t0, t1):
    mu = qt.relaxation_rate(lam, p)
    assert _fitted_rate(lam, p, None, t0, t1) == pytest.approx(mu, rel=0.02)


def test_relaxation_rate_critical_both_sides():
    """At lam + p = 1 the invariant state sits on the switching surface: approached
    from below (level i*+1 closed) the decay is that of regime i*, from above (level
    i*+1 kept open) it is slower; relaxation_rate reports the slower."""
    lam, p = 0.9, 0.1
    mu = qt.relaxation_rate(lam, p)
    above = np.append(invariant_state(lam, p), 0.0) + 0.01
    above[0] = 1.0
    assert _fitted_rate(lam, p, above, 200.0, 600.0) == pytest.approx(mu, rel=0.02)
    assert _fitted_rate(lam, p, None, 200.0, 600.0) > 1.1 * mu


def test_relaxation_rate_values():
    assert qt.relaxation_rate(0.7, 0.2) == pytest.approx(0.177, abs=5e-4)
    assert qt.relaxation_rate(0.95, 0.1) == pytest.approx(0.011, abs=5e-4)
    assert qt.relaxation_rate(0.64, 0.0) == pytest.approx(0.04)
    assert qt.relaxation_rate(0.3, 0.5) == math.inf
    assert qt.relaxation_rate(0.4, 0.4) == pytest.approx(0.6)


def test_time_to_invariant_follows_relaxation_rate():
    for lam, p in [(0.7, 0.2), (0.95, 0.1)]:
        mu = qt.relaxation_rate(lam, p)
        t1 = qt.time_to_invariant(lam, p, eps=1e-6)
        t2 = qt.time_to_invariant(lam, p, eps=1e-7)
        assert (t2 - t1) * mu == pytest.approx(math.log(10.0), rel=0.02)
        S = fluid_trajectory(lam, p, [t1 * (1 - 1e-4), t1 * (1 + 1e-4)])
        d = l1_distance(S, invariant_state(lam, p))
        assert d[0] > 1e-6 >= d[1]


# -------------------------------------------------------------------- bad input

@pytest.mark.parametrize("s0", [[1.0, 1.5], [1.0, -0.1], [1.0, 0.2, 0.5], [0.9, 0.5],
                                [1.0, np.inf], [1.0, np.nan], [], [[1.0, 0.5]]])
def test_bad_s0(s0):
    with pytest.raises(ValueError, match="s0"):
        fluid_trajectory(0.5, 0.2, [0.0, 1.0], s0)


@pytest.mark.parametrize("times", [[1.0, 0.5], [-1.0, 1.0], [0.0, np.nan],
                                   [0.0, np.inf], []])
def test_bad_times(times):
    with pytest.raises(ValueError, match="times"):
        fluid_trajectory(0.5, 0.2, times)


@pytest.mark.parametrize("lam,p", [(1.0, 0.1), (np.nan, 0.1), (0.5, -0.1),
                                   (0.5, np.nan), (1 - 1e-17, 0.1)])
def test_bad_parameters(lam, p):
    with pytest.raises(ValueError):
        fluid_trajectory(lam, p, [0.0, 1.0])


def test_bad_drift_input():
    with pytest.raises(ValueError, match="coords"):
        fluid_drift([1.0, 0.5, 0.0], 0.5, 0.2, coords="w")
    with pytest.raises(ValueError):
        fluid_drift([1.0, 0.5, 0.7, 0.0], 0.5, 0.2)
    with pytest.raises(ValueError):
        fluid_drift([1.0, np.nan], 0.5, 0.2, validate=False)
    with pytest.raises(ValueError, match="v\\[0\\]"):
        fluid_drift([2.0, 0.5, 0.0], 0.5, 0.2, coords="v")


def test_naive_solver_result_is_reported_honestly():
    r = qb.naive_fluid_solve(0.7, 0.2, 5.0, method="RK45", max_evaluations=20_000)
    assert r.t_reached <= 5.0
    ref = fluid_trajectory(0.7, 0.2, [r.t_reached])[0]
    assert r.error == pytest.approx(l1_distance(r.s_end, ref))
    assert r.stalled == (not r.success and r.n_evaluations == 20_000)
