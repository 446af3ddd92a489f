"""Tests of the exact stationary solver (qtheory.exact) and the concentration study.

Reference values come from theory: the M/M/1 and M/M/1/K laws, products of independent
truncated geometric laws when p = 0, the flow balance across levels (an identity for
every N), the simulator's confidence intervals, and the invariant state.
"""

import math
from itertools import combinations_with_replacement

import numpy as np
import pytest

import qtheory
from qtheory import _exact_kernels as _k
from qtheory.book.concentration import auto_max_queue, concentration_study, fit_power_law
from qtheory.exact import exact_memory_estimate, exact_state_space_size, exact_stationary


def mm1k_law(rho, K):
    """M/M/1/K stationary law (service rate 1, blocking at K)."""
    w = rho ** np.arange(K + 1)
    return w / w.sum()


# --------------------------------------------------------------------------------------
# The state space


@pytest.mark.parametrize("n,K", [(1, 5), (2, 7), (3, 4), (4, 6), (6, 3)])
def test_states_are_all_sorted_multisets_in_rank_order(n, K):
    r = exact_stationary(n, 0.5, 0.2, max_queue=K)
    assert r.n_states == math.comb(K + n, n) == exact_state_space_size(n, K)
    expected = {tuple(c) for c in combinations_with_replacement(range(K + 1), n)}
    got = [tuple(int(v) for v in row) for row in r.states]
    assert set(got) == expected and len(got) == len(expected)
    assert np.all(np.diff(r.states, axis=1) >= 0)
    binom = _k.binomial_table(K + n, n)
    ranks = _k.rank_states(r.states.astype(np.int64), binom)
    np.testing.assert_array_equal(ranks, np.arange(r.n_states))


def test_generator_rows_sum_to_zero_and_rates_are_the_model():
    n, K, lam, p = 3, 4, 0.6, 0.3
    indptr, indices, data, states = qtheory.exact._build_generator(n, K, lam, p)
    S = states.shape[0]
    index = {tuple(row): i for i, row in enumerate(map(tuple, states))}
    for r in range(S):
        row = {int(c): v for c, v in zip(indices[indptr[r]:indptr[r + 1]],
                                          data[indptr[r]:indptr[r + 1]])}
        assert abs(sum(row.values())) < 1e-14
        # independent construction of the rates from MODEL.md section 3
        a = list(states[r])
        expect = {}
        for j in range(n):
            if a[j] < K:
                b = sorted(a[:j] + [a[j] + 1] + a[j + 1:])
                expect[index[tuple(b)]] = expect.get(index[tuple(b)], 0) + lam
            if a[j] > 0:
                b = sorted(a[:j] + [a[j] - 1] + a[j + 1:])
                expect[index[tuple(b)]] = expect.get(index[tuple(b)], 0) + (1 - p)
        if max(a) > 0:
            b = sorted(a)
            b[-1] -= 1
            b = tuple(sorted(b))
            expect[index[b]] = expect.get(index[b], 0) + n * p
        for c, v in expect.items():
            assert row[c] == pytest.approx(v, rel=1e-14)
        assert set(row) - {r} == set(expect)


# --------------------------------------------------------------------------------------
# Closed forms


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_one_station_is_mm1(p):
    lam = 0.8
    r = exact_stationary(1, lam, p, max_queue=200)
    geometric = (1 - lam) * lam ** np.arange(201)
    np.testing.assert_allclose(r.probabilities, geometric, rtol=0, atol=1e-10)
    assert r.mean_queue_length == pytest.approx(lam / (1 - lam), abs=1e-10)
    # and at a small truncation the law is exactly M/M/1/K
    r = exact_stationary(1, lam, p, max_queue=7)
    np.testing.assert_allclose(r.probabilities, mm1k_law(lam, 7), rtol=1e-12)


@pytest.mark.parametrize("n,K,method", [(1, 6, "direct"), (2, 9, "direct"),
                                        (3, 8, "direct"), (4, 6, "direct"),
                                        (3, 25, "gmres")])
def test_p0_is_a_product_of_truncated_geometric_laws(n, K, method):
    lam = 0.6
    r = exact_stationary(n, lam, 0.0, max_queue=K, method=method)
    g = mm1k_law(lam, K)
    for state, prob in zip(r.states, r.probabilities):
        counts = np.bincount(state, minlength=K + 1)
        multinomial = math.factorial(n) / np.prod([math.factorial(c) for c in counts])
        expect = multinomial * np.prod(g[state])
        assert prob == pytest.approx(expect, rel=1e-9, abs=1e-13)
    # marginal s_i = P(Q >= i) of one M/M/1/K queue
    np.testing.assert_allclose(r.s, g[::-1].cumsum()[::-1], atol=1e-12)


def test_no_arrivals_means_empty():
    r = exact_stationary(3, 0.0, 0.4, max_queue=5)
    assert r.mean_queue_length == 0.0 and r.probabilities[0] == 1.0
    assert r.longest_queue_tail[1] == 0.0


# --------------------------------------------------------------------------------------
# Identities


@pytest.mark.parametrize("n,lam,p,K,method", [
    (2, 0.9, 0.1, 60, "direct"), (3, 0.9, 0.1, 30, "gmres"),
    (4, 0.7, 0.2, 12, "direct"), (5, 0.95, 0.5, 8, "gmres"), (3, 0.3, 0.5, 10, "direct"),
])
def test_flow_balance_identity(n, lam, p, K, method):
    r = exact_stationary(n, lam, p, max_queue=K, method=method)
    d = r.balance_defect()
    # in the truncated chain the defect is the blocked arrival rate, on every level
    scale = 1e-12 if method == "direct" else 1e-10
    np.testing.assert_allclose(d, r.blocked_rate, rtol=0, atol=scale)
    assert r.blocked_rate == pytest.approx(lam * r.s[K])


def test_identity_of_the_untruncated_chain():
    # with negligible boundary mass the identity of Tsitsiklis and Xu holds as stated
    r = exact_stationary(3, 0.9, 0.1, max_queue=90)
    assert r.boundary_mass < 1e-8
    lhs = r.lam * r.s[:-1] - (1 - r.p) * r.s[1:]
    np.testing.assert_allclose(lhs, r.p * r.longest_queue_tail[1:], rtol=0, atol=1e-9)


def test_solution_is_a_probability_vector_with_small_residual():
    for method in ("direct", "gmres"):
        r = exact_stationary(3, 0.9, 0.1, max_queue=30, method=method)
        assert np.all(r.probabilities >= 0)
        assert r.probabilities.sum() == pytest.approx(1.0, abs=1e-14)
        assert r.residual < 1e-13 * 3 * 1.9
        assert r.s[0] == 1.0 and np.all(np.diff(r.s) <= 1e-15)
        assert np.all(np.diff(r.longest_queue_tail) <= 1e-15)
        assert r.mean_queue_length == pytest.approx(r.s[1:].sum())
        assert r.station_queue_law.sum() == pytest.approx(1.0)
        assert r.longest_queue_law.sum() == pytest.approx(1.0)
    a = exact_stationary(3, 0.9, 0.1, max_queue=30, method="direct")
    b = exact_stationary(3, 0.9, 0.1, max_queue=30, method="gmres")
    np.testing.assert_allclose(a.s, b.s, atol=1e-10)


def test_longest_queue_dominates_a_station():
    r = exact_stationary(4, 0.8, 0.2, max_queue=20)
    assert np.all(r.longest_queue_tail >= r.s - 1e-14)
    # P(M >= i) <= N s_i (union bound)
    assert np.all(r.longest_queue_tail <= 4 * r.s + 1e-14)


# --------------------------------------------------------------------------------------
# Truncation


def test_truncation_error_falls_and_is_estimated():
    ref = exact_stationary(2, 0.7, 0.2, max_queue=80)
    assert ref.boundary_mass < 1e-15
    errors = []
    for K in (5, 10, 15, 20, 25, 30):
        r = exact_stationary(2, 0.7, 0.2, max_queue=K)
        law = np.r_[ref.longest_queue_law[:K], ref.longest_queue_law[K:].sum()]
        tv = 0.5 * np.abs(law - r.longest_queue_law).sum()
        errors.append((tv, abs(ref.mean_queue_length - r.mean_queue_length),
                       r.boundary_mass))
        if K >= 10:
            # the geometric extrapolation of the law of M is accurate to within 10%
            assert r.truncation_error_estimate == pytest.approx(tv, rel=0.1)
    tv, mean_err, bmass = map(np.array, zip(*errors))
    assert np.all(np.diff(tv) < 0) and np.all(np.diff(mean_err) < 0)
    assert np.all(np.diff(bmass) < 0)


def test_mm1_truncation_estimate_is_the_cut_off_mass():
    lam, K = 0.8, 30
    r = exact_stationary(1, lam, 0.5, max_queue=K)
    # true P(Q > K) = lam**(K+1); estimate = pi_K rho/(1 - rho) with rho = lam
    assert r.truncation_error_estimate == pytest.approx(
        lam ** (K + 1) / (1 - lam ** (K + 1)), rel=1e-9)


def test_expected_distance_at_one_station():
    lam, K = 0.5, 60
    r = exact_stationary(1, lam, 0.0, max_queue=K)
    target = qtheory.invariant_state(lam, 0.0)  # lam**i
    q = np.arange(K + 1)
    law = r.probabilities
    levels = np.arange(1, target.size)
    expect = sum(law[k] * np.abs((k >= levels) - target[1:]).sum() for k in q)
    assert r.expected_distance(target) == pytest.approx(expect, rel=1e-12)


# --------------------------------------------------------------------------------------
# Agreement with simulation


@pytest.mark.parametrize("n,K,seed", [(2, 45, 11), (3, 35, 12), (4, 25, 13), (5, 22, 14)])
def test_agrees_with_simulation(n, K, seed):
    lam, p = 0.7, 0.2
    r = exact_stationary(n, lam, p, max_queue=K)
    assert r.truncation_error_estimate < 1e-6  # far below the simulation's resolution
    sim = qtheory.simulate(n, lam, p, t_end=2e5, warmup=2e3, seed=seed)
    lo, hi = sim.ci
    assert lo <= r.mean_queue_length <= hi
    L = min(sim.s.size, 6)
    # every level inside 3 half-widths (a simultaneous band for 5 levels)
    assert np.all(np.abs(sim.s[1:L] - r.s[1:L]) <= 3 * sim.s_half_width[1:L] + 1e-12)


# --------------------------------------------------------------------------------------
# Concentration study


def test_fit_power_law_recovers_exponent():
    n = np.array([10, 100, 1000, 1e4])
    alpha, c = fit_power_law(n, 3.0 * n ** -0.5)
    assert alpha == pytest.approx(0.5, abs=1e-12) and c == pytest.approx(3.0)
    with pytest.raises(ValueError, match="distinct"):
        fit_power_law([5, 5], [1.0, 2.0])


def test_concentration_study_exact_rows_and_simulated_rows():
    lam, p = 0.7, 0.2
    r = concentration_study(lam, p, [1, 2, 3], exact_max_states=100_000, seed=3,
                            events_per_run=3e6)
    assert list(r.method) == ["exact"] * 3
    assert r.mean_queue_length[0] == pytest.approx(lam / (1 - lam), abs=1e-6)
    sI = qtheory.invariant_state(lam, p)
    ex = auto_max_queue(3, lam, p)
    assert r.distance[2] == pytest.approx(ex.expected_distance(sI), rel=1e-12)
    assert r.spill[2] == pytest.approx(ex.s[r.top_level + 1], rel=1e-12)
    # the same N simulated: the exact answer lies within the simulation's interval
    s = concentration_study(lam, p, [3], exact_max_states=1, seed=4, events_per_run=2e7)
    assert s.method[0] == "simulation"
    assert abs(s.mean_queue_length[0] - r.mean_queue_length[2]) <= s.mean_half_width[0]
    assert abs(s.distance[0] - r.distance[2]) <= s.distance_half_width[0]
    assert abs(s.spill[0] - r.spill[2]) <= s.spill_half_width[0]


def test_remnant_below_the_central_capacity():
    # lam < p: the fluid state is empty; N * mean tends to lam/(p - lam) = 1.5 (MODEL.md)
    lam, p = 0.3, 0.5
    n_mean = [n * exact_stationary(n, lam, p, max_queue=12).mean_queue_length
              for n in (2, 4, 6)]
    assert np.all(np.diff(n_mean) > 0) and n_mean[-1] < 1.5
    s = concentration_study(lam, p, [2000], exact_max_states=1, seed=5,
                            events_per_run=2e7)
    n_m = 2000 * s.mean_queue_length[0]
    assert abs(n_m - 1.5) <= 2000 * s.mean_half_width[0] + 0.02


# --------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("kw,match", [
    (dict(n_stations=0), "n_stations"), (dict(n_stations=1.5), "n_stations"),
    (dict(n_stations=True), "n_stations"), (dict(n_stations="3"), "n_stations"),
    (dict(max_queue=0), "max_queue"), (dict(max_queue=4.0), "max_queue"),
    (dict(max_queue=-3), "max_queue"), (dict(max_queue=40000), "max_queue"),
    (dict(lam=1.0), "lam"), (dict(lam=-0.1), "lam"), (dict(lam=float("nan")), "lam"),
    (dict(lam=1 - 1e-17), "lam"), (dict(p=1.5), "p"), (dict(p=-1e-9), "p"),
    (dict(method="lu"), "method"), (dict(tol=0.0), "tol"),
])
def test_bad_input(kw, match):
    args = dict(n_stations=2, lam=0.5, p=0.2, max_queue=5)
    args.update(kw)
    n, lam, p = args.pop("n_stations"), args.pop("lam"), args.pop("p")
    with pytest.raises(ValueError, match=match):
        exact_stationary(n, lam, p, **args)


def test_memory_guard_refuses_before_building():
    with pytest.raises(ValueError, match=r"n_stations=40, max_queue=60.*GB"):
        exact_stationary(40, 0.9, 0.1, max_queue=60)
    assert exact_memory_estimate(40, 60) > 4e9
    with pytest.raises(ValueError, match="memory_limit"):
        exact_stationary(3, 0.9, 0.1, max_queue=30, memory_limit=1e5)
    with pytest.raises(ValueError, match="max_queue"):
        exact_state_space_size(3, 0)
