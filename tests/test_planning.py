"""Run planning (qtheory.plan_run): the plan's arithmetic, its theory, its validation."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import qtheory as qt
from qtheory import _linear_noise, _runlength, planning


def plan(*args, **kw):
    # the tests of the plain recipe fix what the defaults choose by machine and model
    kw.setdefault("calibrate", False)
    kw.setdefault("estimator", "plain")
    kw.setdefault("n_chains", 1)
    return qt.plan_run(*args, **kw)


def run_quiet(p, seed):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", qt.simulation.SimulationWarning)
        r = qt.simulate(**p, seed=seed, progress=False)
    return r, [str(w.message) for w in caught]


# ------------------------------------------------------------------ the plan object


def test_plan_is_a_mapping_of_simulate_keywords_and_frozen():
    pl = plan(100, 0.9, 0.1, half_width=0.1)
    assert set(pl.keys()) == {"n_stations", "lam", "p", "t_end", "warmup", "n_batches",
                              "s0", "n_chains", "estimator"}
    assert "seed" not in pl and "workers" not in pl
    assert dict(**pl)["t_end"] == pl.t_end
    with pytest.raises(dataclasses.FrozenInstanceError):
        pl.t_end = 1.0
    with pytest.raises(KeyError):
        pl["half_width"]
    r, msgs = run_quiet(pl, 1)
    assert r.t_end == pl.t_end and r.warmup == pl.warmup and r.n_batches == pl.n_batches
    s = pl.summary()
    assert "warm-up" in s and f"{pl.n_batches} batches" in s


def test_plan_arithmetic_is_consistent():
    lam, p, n, h = 0.95, 0.1, 200, 0.2
    pl = plan(n, lam, p, half_width=h)
    assert pl.relaxation_time == pytest.approx(1.0 / qt.relaxation_rate(lam, p))
    assert pl.warmup >= 3.0 * pl.relaxation_time
    # remaining fluid bias from the empty start below a tenth of the half-width
    assert pl.fluid_mean * math.exp(-pl.warmup / pl.relaxation_time) <= 0.1 * h * 1.0001
    assert pl.batch_length >= 10.0 * pl.correlation_time * (1 - 1e-12)
    assert pl.t_end == pytest.approx(pl.warmup + pl.n_batches * pl.batch_length)
    assert pl.expected_events == pytest.approx(n * (1 + lam) * pl.t_end)
    assert pl.predicted_half_width <= h * (1 + 1e-12)
    assert pl.expected_seconds == pytest.approx(pl.expected_events / pl.events_per_second)
    assert pl.fluid_mean == pytest.approx(qt.mean_queue_length(lam, p))


def test_halving_the_half_width_quadruples_the_measured_time():
    a = plan(1000, 0.9, 0.1, half_width=0.02)
    b = plan(1000, 0.9, 0.1, half_width=0.01)
    assert a.batch_length > 10 * a.correlation_time  # the variance part decides
    ta, tb = a.t_end - a.warmup, b.t_end - b.warmup
    assert tb / ta == pytest.approx(4.0, rel=1e-9)
    # more stations, proportionally less time (same events)
    c = plan(4000, 0.9, 0.1, half_width=0.01)
    # (sigma^2 carries the finite-N factor 1 + 30/N)
    assert (c.t_end - c.warmup) * 4000 / (1 + 30 / 4000) == \
        pytest.approx(tb * 1000 / (1 + 30 / 1000), rel=1e-9)


def test_chains_split_the_measured_time_and_each_pays_its_warmup():
    one = plan(1000, 0.9, 0.1, half_width=0.01)
    two = plan(1000, 0.9, 0.1, half_width=0.01, n_chains=2)
    assert two.n_chains == 2 and two.n_batches == 10
    assert two.warmup == one.warmup
    assert 2 * (two.t_end - two.warmup) == pytest.approx(one.t_end - one.warmup)
    assert two.expected_events == pytest.approx(
        1000 * 1.9 * (2 * two.warmup + (one.t_end - one.warmup)))


def test_invariant_start_still_warms_up_three_relaxation_times():
    pl = plan(500, 0.9, 0.1, half_width=0.1, start="invariant")
    assert np.array_equal(pl.s0, qt.invariant_state(0.9, 0.1))
    assert pl.warmup == pytest.approx(3.0 * pl.relaxation_time)
    r, msgs = run_quiet(pl, 3)
    assert not msgs
    p0 = plan(50, 0.8, 0.0, half_width=0.2, start="invariant")
    assert p0.s0[0] == 1.0 and p0.s0[-1] * 50 >= 0.5
    assert p0.s0[1] == pytest.approx(0.8)


@pytest.mark.parametrize("n, lam, p, model", [
    (100, 0.9, 0.0, "mm1"), (1, 0.9, 0.4, "mm1"), (100, 0.5, 0.6, "pooled"),
    (100, 0.3, 1.0, "pooled"), (100, 0.9, 0.1, "linear-noise"), (100, 0.0, 0.3, "empty"),
])
def test_every_regime_has_a_model(n, lam, p, model):
    pl = plan(n, lam, p, half_width=0.05)
    assert pl.variance_model == model
    assert math.isfinite(pl.t_end) and pl.t_end > pl.warmup >= 0.0


def test_lam_zero_plan_gives_an_exact_zero():
    pl = plan(10, 0.0, 0.2, half_width=0.1)
    r, msgs = run_quiet(pl, 1)
    assert r.mean_queue_length == 0.0 and r.half_width == 0.0 and not msgs


# ------------------------------------------------------------------ the theory


def _birth_death_moments(rho):
    """sigma^2 = 2 int C and tau = int t C / int C of the M/M/1 queue length, from the
    Poisson equation of the truncated birth-death chain (independent of the formulas)."""
    K = int(math.log(1e-14) / math.log(rho))
    n = K + 1
    pi = rho ** np.arange(n)
    pi /= pi.sum()
    f = np.arange(n, dtype=float)
    fb = f - pi @ f
    up, dn = np.full(n - 1, rho), np.ones(n - 1)
    Q = sp.diags([dn, up], [-1, 1]).tolil()
    Q.setdiag(-(np.append(up, 0) + np.append(0, dn)))
    A = sp.vstack([-Q.tocsr(), sp.csr_matrix(pi)]).tocsc()
    solve = lambda b: spla.lsqr(A, np.append(b, 0.0), atol=1e-15, btol=1e-15,  # noqa
                                iter_lim=200000)[0]
    g1 = solve(fb)
    g2 = solve(g1)
    int_c = pi @ (fb * g1)
    return 2 * int_c, (pi @ (fb * g2)) / int_c


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.85])
def test_mm1_constants_match_the_poisson_equation(rho):
    sigma2, tau = _birth_death_moments(rho)
    assert _runlength.mm1_sigma2(rho) == pytest.approx(sigma2, rel=1e-6)
    assert qt.statistics.mm1_asymptotic_variance(rho) == pytest.approx(sigma2, rel=1e-6)
    assert _runlength.mm1_tau(rho) == pytest.approx(tau, rel=1e-6)


def test_linear_noise_variance_is_the_integral_of_the_autocovariance():
    # sigma^2 = c' A^-1 D A^-T c must equal 2 int_0^inf c' e^{At} Sigma c dt
    from scipy.integrate import quad
    from scipy.linalg import expm, solve_continuous_lyapunov

    lam, p = 0.9, 0.2
    s = qt.invariant_state(lam, p)
    sigma2, tau = _linear_noise.mean_queue_noise(lam, p, s, dense_levels=200)
    K = s.size - 1
    A = (np.diag(np.full(K, -(lam + 1 - p))) + np.diag(np.full(K - 1, lam), -1)
         + np.diag(np.full(K - 1, 1 - p), 1))
    A[-1, -1] = -(1 - p)
    sp_ = np.append(s, 0.0)
    D = lam * (sp_[:-2] - sp_[1:-1]) + (1 - p) * (sp_[1:-1] - sp_[2:])
    D[-1] += p + lam * s[-1]
    S = solve_continuous_lyapunov(A, -np.diag(D))
    c = np.ones(K)
    C = lambda t: c @ expm(A * t) @ S @ c  # noqa: E731
    mu = qt.relaxation_rate(lam, p)
    T = 60.0 / mu
    int_c = quad(C, 0, T, limit=200)[0]
    int_tc = quad(lambda t: t * C(t), 0, T, limit=200)[0]
    assert sigma2 == pytest.approx(2 * int_c, rel=1e-6)
    assert tau == pytest.approx(int_tc / int_c, rel=1e-6)
    # and the mean lag is (to a few per cent) the slowest relaxation time
    assert tau == pytest.approx(1.0 / mu, rel=0.05)


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize("n, lam, p, h", [
    (100, 0.9, 0.1, 0.1),
    (1000, 0.9, 0.05, 0.04),
    (100, 0.95, 0.2, 0.15),
    (10, 0.9, 0.0, 0.3),
])
def test_plan_meets_target_half_width(n, lam, p, h):
    """Realized half-width within a factor of 2 of the prediction at fixed seeds (the
    spread seen in bench/plan_validation.py for N >= 100, p <= 0.2 is 0.55-1.55 per
    run), intervals above the lower bound v^I - noise, and at most one flagged run."""
    pl = plan(n, lam, p, half_width=h)
    ratios, flagged = [], 0
    for seed in range(4):
        r, msgs = run_quiet(pl, 100 + seed)
        ratios.append(r.half_width / pl.predicted_half_width)
        flagged += bool(msgs)
        assert r.ci[1] >= pl.fluid_mean - 1e-9 or msgs
    assert 0.5 <= min(ratios) and max(ratios) <= 2.0, ratios
    assert 0.6 <= np.mean(ratios) <= 1.5, ratios
    assert flagged <= 1


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("kw, name", [
    (dict(half_width=0.0), "half_width"),
    (dict(half_width=-1.0), "half_width"),
    (dict(half_width=math.nan), "half_width"),
    (dict(half_width=math.inf), "half_width"),
    (dict(half_width="0.1"), "half_width"),
    (dict(half_width=None), "half_width"),
    (dict(half_width=0.1, start="full"), "start"),
    (dict(half_width=0.1, n_chains=0), "n_chains"),
    (dict(half_width=0.1, n_chains=2.0), "n_chains"),
    (dict(half_width=0.1, n_batches=1), "n_batches"),
    (dict(half_width=0.1, calibrate="no"), "calibrate"),
    (dict(half_width=0.1, max_lag1=0.0), "max_lag1"),
    (dict(half_width=0.1, max_lag1=0.2), "max_lag1"),
    (dict(half_width=0.1, max_lag1=math.nan), "max_lag1"),
])
def test_plan_run_rejects_bad_options(kw, name):
    with pytest.raises(ValueError, match=name):
        qt.plan_run(100, 0.9, 0.1, **kw)


@pytest.mark.parametrize("args, name", [
    ((0, 0.9, 0.1), "n_stations"), ((10**10, 0.9, 0.1), "n_stations"),
    ((2.5, 0.9, 0.1), "n_stations"), ((100, 1.0, 0.1), "lam"),
    ((100, 1.5, 0.1), "lam"), ((100, math.nan, 0.1), "lam"), ((100, -0.1, 0.1), "lam"),
    ((100, 0.9, 1.5), r"\bp\b"), ((100, 0.9, -0.1), r"\bp\b"),
])
def test_plan_run_rejects_bad_systems(args, name):
    with pytest.raises(ValueError, match=name):
        qt.plan_run(*args, half_width=0.1)


@pytest.mark.parametrize("args, h", [((10**6, 0.999, 0.01), 1e-6),
                                     ((10, 0.999999, 0.0), 0.01),
                                     ((10**9, 0.99, 0.05), 1e-9)])
def test_plan_beyond_the_event_cap_names_half_width(args, h):
    with pytest.raises(ValueError, match="half_width"):
        qt.plan_run(*args, half_width=h, calibrate=False)


def test_events_per_second_is_cached_and_positive():
    r1 = planning.events_per_second(measure=False)
    assert r1 > 0
    r2 = planning.events_per_second()
    assert r2 > 0 and planning.events_per_second() == r2


def test_max_lag1_trades_batch_length_for_run_length():
    a = plan(10**4, 0.99, 0.05, half_width=0.2)
    b = plan(10**4, 0.99, 0.05, half_width=0.2, max_lag1=0.1)
    assert a.batch_length == pytest.approx(10 * a.correlation_time)  # the floor decides
    assert b.batch_length == pytest.approx(5 * b.correlation_time)
    assert b.t_end - b.warmup == pytest.approx((a.t_end - a.warmup) / 2)
    # simulate's batch check (five correlation times) accepts both
    th = planning.variance_model(10**4, 0.99, 0.05)
    assert b.batch_length >= 5 * th["correlation_time"] * (1 - 1e-12)


def test_plan_predicts_the_coverage_of_its_batches():
    """predicted_coverage is batch_means_coverage of the plan's own batches: about 0.939
    at the batch-length floor (2 x 10 batches of ten correlation times), higher where
    the variance asks for longer batches, higher still with halved max_lag1; NaN when
    nothing fluctuates; the summary prints it."""
    from qtheory.statistics import batch_means_coverage

    floor = plan(10**4, 0.99, 0.05, half_width=0.1, n_chains=2)
    assert floor.batch_length == pytest.approx(10 * floor.correlation_time)
    expect = batch_means_coverage(floor.batch_length, floor.correlation_time,
                                  n_batches=floor.n_batches, n_chains=floor.n_chains)
    assert floor.predicted_coverage == expect.coverage
    assert 0.935 < floor.predicted_coverage < 0.942
    assert f"{floor.predicted_coverage:.3f}" in floor.summary()
    longer = plan(10**4, 0.99, 0.05, half_width=0.1, n_chains=2, max_lag1=0.025)
    assert longer.predicted_coverage > floor.predicted_coverage + 0.004
    light = plan(1000, 0.7, 0.2, half_width=0.01, n_chains=2, estimator="plain")
    assert light.batch_length > 12 * light.correlation_time
    assert floor.predicted_coverage < light.predicted_coverage < 0.95
    empty = plan(100, 0.0, 0.2, half_width=0.1, n_chains=2)
    assert math.isnan(empty.predicted_coverage)
    assert "predicted coverage" not in empty.summary()
