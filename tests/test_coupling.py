"""The coupled construction of the fluid-limit proof (qtheory.book.coupling).

What theory fixes: the construction has the law of the N-station system (time averages
against the exact stationary law for N = 1 and N = 3, with batch-means intervals); the
bounds of the counting, tail and increments lemmas hold for every sample (they are
deterministic inequalities, checked on several runs); the Lipschitz bound holds path by
path; all N share one prefix of the randomness; the DKW-Massart bound on the uniform
counting error fails with probability at most beta; the truncated regularized fluid
model stays in its state space, is (1 + lam)-Lipschitz in l1 and approaches the fluid
solution as eps decreases.
"""

import math

import numpy as np
import pytest

import qtheory as qt
from qtheory import book as qb
from qtheory.statistics import batch_means


def test_driver_prefix_and_seed_sequence_untouched():
    a = qb.coupled_driver(1000, 5)
    b = qb.coupled_driver(3000, 5)
    np.testing.assert_array_equal(a.tau, b.tau[:1000])
    np.testing.assert_array_equal(a.u, b.u[:1000])
    ss = np.random.SeedSequence(123)
    c, d = qb.coupled_driver(50, ss), qb.coupled_driver(50, ss)
    np.testing.assert_array_equal(c.u, d.u)
    assert not np.array_equal(qb.coupled_driver(50, 6).u, a.u[:50])


def test_driver_is_a_poisson_clock_and_uniforms():
    drv = qb.coupled_driver(200_000, 1)
    gaps = np.diff(np.concatenate([[0.0], drv.tau]))
    # exponential(1) gaps: mean 1, sd 1; uniforms: mean 1/2, sd 1/sqrt(12)
    assert abs(gaps.mean() - 1.0) < 4.0 / math.sqrt(gaps.size)
    assert abs(drv.u.mean() - 0.5) < 4.0 / math.sqrt(12 * drv.u.size)
    assert 0.0 <= drv.u.min() and drv.u.max() < 1.0 and np.all(gaps > 0)


def _time_average(n, lam, p, t_end, seed, levels, batches=20):
    times = np.linspace(0.0, t_end, 200_001)[1:]
    run = qb.coupled_run(n, lam, p, t_end, seed=seed, times=times, n_check=1)
    warm = times.size // batches
    x = run.path[warm:, :]
    x = np.pad(x, [(0, 0), (0, max(0, levels + 1 - x.shape[1]))])
    per = x.shape[0] // batches
    bm = x[: per * batches].reshape(batches, per, -1).mean(axis=1)
    return [batch_means(bm[:, i]) for i in range(1, levels + 1)]


def test_law_of_one_station_is_mm1():
    # N = 1: whatever p, the station is served at rate 1, so P(Q >= i) = lam^i
    lam, p = 0.5, 0.3
    for i, est in enumerate(_time_average(1, lam, p, 4e4, 3, 3), start=1):
        assert abs(est.mean - lam ** i) <= 2.0 * est.half_width + 1e-3, (i, est)


def test_law_of_three_stations_matches_exact_solver():
    lam, p = 0.7, 0.2
    exact = qt.exact_stationary(3, lam, p, max_queue=30)
    for i, est in enumerate(_time_average(3, lam, p, 4e4, 4, 3), start=1):
        assert abs(est.mean - exact.s[i]) <= 2.0 * est.half_width + 1e-3, (i, est, exact.s[i])


CASES = [(100, 0.9, 0.1, None, 5.0, 1), (1000, 0.9, 0.1, None, 5.0, 2),
         (3000, 0.7, 0.2, [1.0, 0.9, 0.6, 0.6, 0.3, 0.1], 4.0, 3),
         (500, 0.95, 0.0, [1.0, 0.5, 0.25], 3.0, 4), (800, 0.5, 1.0, [1.0, 1.0, 1.0], 2.0, 5)]


@pytest.mark.parametrize("n,lam,p,s0,t_end,seed", CASES)
def test_lemma_bounds_hold_on_every_sample(n, lam, p, s0, t_end, seed):
    q = 1.0 + lam
    run = qb.coupled_run(n, lam, p, t_end, s0=s0, seed=seed, n_check=6)
    r_arr = qb.counting_bound(run, beta=lam / q).bound
    r_loc = qb.counting_bound(run, beta=(1 - p) / q).bound
    r_0 = qb.counting_bound(run, beta=0.0).bound
    assert np.all(run.arrival_range[1:] <= r_arr)
    assert np.all(run.local_range[1:] <= r_loc + r_0)
    assert run.central_range <= 2 * r_0
    eps = qb.increments_bound(run)
    assert np.isclose(eps, r_arr + r_loc + 3 * r_0)
    assert np.all(run.drawdown[1:] <= eps) and np.all(run.busy_range[1:] <= eps)
    tb = qb.tail_bound(run)
    assert np.all(tb.observed <= tb.bound + 1e-12)
    # the counting bound is never below what it bounds, but it is finite and explicit
    assert 0 < r_arr < 50


@pytest.mark.parametrize("n,lam,p,s0,t_end,seed", CASES[:3])
def test_lipschitz_bound_path_by_path(n, lam, p, s0, t_end, seed):
    times = np.linspace(0.0, t_end, 401)
    run = qb.coupled_run(n, lam, p, t_end, s0=s0, seed=seed, times=times)
    q = 1.0 + lam
    events = np.searchsorted(run.driver.tau, n * q * times, side="right")
    moved = np.abs(np.diff(run.path, axis=0)).sum(axis=1)
    assert np.all(moved <= np.diff(events) / n + 1e-12)
    assert run.clock_error <= 6.0 * math.sqrt(q * t_end / n) + 2.0 / n


def test_tail_bound_limit_is_the_limit_of_the_bound():
    # theta_L = min(1, (lam/q) B_N/(L-1)): at L = 2 from a deep initial state the minimum
    # is 1 and the bound tends to v_L(0) + qT (every event raises v_2), not to the
    # unclipped v_L(0) + lam T (v_1(0) + lam T)/(L-1)
    lam, p, T = 0.9, 0.1, 1.0
    q = 1.0 + lam
    s0 = np.ones(21)                                  # 20 jobs at every station
    limits = {}
    for n in (2000, 200_000):
        run = qb.coupled_run(n, lam, p, T, s0=s0, seed=4, n_check=1)
        tb = qb.tail_bound(run, levels=[2, 80])
        limits[n] = tb
    big = limits[200_000]
    v0 = np.array([19.0, 0.0])
    assert np.isclose(big.limit[0], v0[0] + q * T)
    unclipped = v0 + lam * T * (20.0 + lam * T) / (np.array([2, 80]) - 1)
    assert np.isclose(big.limit[1], unclipped[1])
    # the bound approaches the limit like the clock and the uniforms (a few N^-1/2)
    assert np.all(np.abs(big.bound - big.limit) <= 10.0 * math.sqrt(q * T / 200_000))
    assert np.all(np.abs(limits[2000].bound - big.limit) <= 10.0 * math.sqrt(q * T / 2000))


def test_all_n_share_the_randomness_and_converge():
    lam, p, T = 0.9, 0.1, 4.0
    times = np.linspace(0.0, T, 81)
    fluid = qt.fluid_trajectory(lam, p, times)
    drv = qb.coupled_driver(int(30_000 * 1.9 * T * 1.1), 9)
    dist = {}
    for n in (300, 3000, 30_000):
        run = qb.coupled_run(n, lam, p, T, driver=drv, times=times)
        assert run.driver is drv
        dist[n] = qt.fluid.l1_distance(run.path, fluid).max()
    assert dist[30_000] < dist[300] and dist[30_000] < 0.1, dist


def test_too_short_driver_is_refused():
    drv = qb.coupled_driver(100, 1)
    with pytest.raises(ValueError, match="not enough"):
        qb.coupled_run(1000, 0.5, 0.2, 1.0, driver=drv)


def _delta(u, n_stations, c):
    """max_{n <= cN} sup_theta |#{k <= n : U_k < theta} - n theta| / N, exactly."""
    worst = 0.0
    for n in range(1, int(c * n_stations) + 1):
        us = np.sort(u[:n])
        r = np.arange(n)
        worst = max(worst, np.max(np.maximum(r + 1 - n * us, n * us - r)))
    return worst / n_stations


def test_dkw_bound_fails_rarely():
    n, c, beta = 40, 2.0, 0.2
    x = qb.dkw_uniform_bound(n, c, beta)
    assert math.isclose(x, math.sqrt(c * math.log(2 * c * n / beta) / (2 * n)))
    fails = sum(_delta(qb.coupled_driver(int(c * n), s).u, n, c) > x for s in range(200))
    # at most beta in probability; the union bound makes it much smaller in fact
    assert fails / 200 <= beta


def test_truncated_fluid_model():
    lam, p = 0.9, 0.1
    T = np.linspace(0.0, 20.0, 201)
    fluid = qt.fluid_trajectory(lam, p, T)
    dist = []
    for eps in (0.1, 0.01, 0.001):
        S = qb.truncated_fluid_trajectory(lam, p, T, n_levels=12, eps=eps)
        # stays in S_K: 1 >= s_1 >= ... >= s_K >= 0 (to the solver's tolerance)
        assert np.all(np.diff(S, axis=1) <= 1e-9) and S.min() >= -1e-9
        speed = qt.fluid.l1_distance(S[1:], S[:-1]) / np.diff(T)
        assert speed.max() <= (1 + lam) * (1 + 1e-6)
        dist.append(qt.fluid.l1_distance(S, fluid).max())
    assert dist[0] > dist[1] > dist[2] and dist[2] < 5e-3, dist
    # p = 0: no regularization at all; the truncated M/M/1 tails approach the fluid
    S0 = qb.truncated_fluid_trajectory(0.5, 0.0, T, n_levels=60, eps=1.0)
    assert qt.fluid.l1_distance(S0, qt.fluid_trajectory(0.5, 0.0, T)).max() < 1e-6


def test_bad_input():
    with pytest.raises(ValueError, match="n_events"):
        qb.coupled_driver(0)
    with pytest.raises(ValueError, match="lam"):
        qb.coupled_run(10, 1.0, 0.1, 1.0)
    with pytest.raises(ValueError, match="t_end"):
        qb.coupled_run(10, 0.5, 0.1, 0.0)
    with pytest.raises(ValueError, match="times"):
        qb.coupled_run(10, 0.5, 0.1, 1.0, times=[0.0, 2.0])
    with pytest.raises(ValueError, match="n_check"):
        qb.coupled_run(10, 0.5, 0.1, 1.0, n_check=0)
    with pytest.raises(ValueError, match="s0"):
        qb.coupled_run(10, 0.5, 0.1, 1.0, s0=[1.0, 0.2, 0.5])
    with pytest.raises(ValueError, match="driver"):
        qb.coupled_run(10, 0.5, 0.1, 1.0, driver=np.zeros(3))
    run = qb.coupled_run(10, 0.5, 0.1, 1.0)
    with pytest.raises(ValueError, match="beta"):
        qb.counting_bound(run, beta=1.5)
    with pytest.raises(ValueError, match="m_values"):
        qb.counting_bound(run, m_values=[0, 2])
    with pytest.raises(ValueError, match="run"):
        qb.counting_bound("run")
    with pytest.raises(ValueError, match="levels"):
        qb.tail_bound(run, levels=[1, 2])
    with pytest.raises(ValueError, match="beta"):
        qb.dkw_uniform_bound(10, 1.0, 1.0)
    with pytest.raises(ValueError, match="eps"):
        qb.truncated_fluid_trajectory(0.5, 0.1, [0.0, 1.0], n_levels=5, eps=0.0)
    with pytest.raises(ValueError, match="n_levels"):
        qb.truncated_fluid_trajectory(0.5, 0.1, [0.0, 1.0], n_levels=0, eps=0.1)
