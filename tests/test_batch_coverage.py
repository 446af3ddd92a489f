"""qtheory.statistics.batch_means_coverage: the effect of finite batches on the Student
batch-means interval, checked against quadrature of the exponential autocovariance and
against exact simulation of an Ornstein-Uhlenbeck process's batch integrals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from qtheory.statistics import batch_means_coverage


def _window_var(length):
    """Variance of the mean over [0, length] of a unit-variance process with
    autocorrelation e^{-|u|}, by two-dimensional quadrature over s < t (no kink; twice
    the integral), independent of the closed forms in the library."""
    val, _ = integrate.dblquad(lambda s, t: math.exp(s - t), 0.0, length, 0.0,
                               lambda t: t, epsabs=1e-13, epsrel=1e-11)
    return 2.0 * val / length ** 2


def _adjacent_cov(length):
    """Covariance of the means over [0, length] and [length, 2 length] (t > s)."""
    val, _ = integrate.dblquad(lambda s, t: math.exp(s - t), length, 2.0 * length,
                               0.0, length, epsabs=1e-13, epsrel=1e-11)
    return val / length ** 2


@pytest.mark.parametrize("x, m", [(5e-4, 3), (0.05, 4), (0.5, 3), (2.0, 4),
                                  (10.0, 5)])
def test_variances_match_quadrature(x, m):
    """lag1 and the variance of one chain's mean (recovered from variance_ratio with one
    chain: Var(mean) = Var(batch) / (1 + (m - 1) r)) equal the double integrals."""
    eff = batch_means_coverage(x, 1.0, n_batches=m, n_chains=1)
    var_b = _window_var(x)
    cov1 = _adjacent_cov(x)
    assert eff.lag1 == pytest.approx(cov1 / var_b, rel=1e-7)
    var_chain = _window_var(m * x)
    assert var_b / (1 + (m - 1) * eff.variance_ratio) == pytest.approx(var_chain, rel=1e-7)


def test_scale_invariance_and_chains():
    """Only b / tau matters; more chains of the same batches change the ratio as the
    formula says (independent chains: Var(mean) / k)."""
    a = batch_means_coverage(10.0, 1.0, n_batches=10, n_chains=2)
    b = batch_means_coverage(326.0, 32.6, n_batches=10, n_chains=2)
    assert a == b or (a.variance_ratio == pytest.approx(b.variance_ratio, rel=1e-12)
                      and a.coverage == pytest.approx(b.coverage, rel=1e-12))
    one = batch_means_coverage(10.0, 1.0, n_batches=10, n_chains=1)
    assert one.lag1 == a.lag1 and one.variance_ratio != a.variance_ratio


def test_limits():
    """Long batches: independent batch means, the nominal level; the lag-1 correlation
    is tau / (2 b) to first order.  Batches far shorter than tau: every batch of a chain
    the same, so with two chains S^2 / B over Var(mean) tends to
    (B / (2 (B - 1))) / B / (1 / 2)."""
    for level in (0.9, 0.95, 0.99):
        eff = batch_means_coverage(1e7, 1.0, n_batches=10, n_chains=2, level=level)
        assert eff.variance_ratio == pytest.approx(1.0, abs=1e-6)
        assert eff.coverage == pytest.approx(level, abs=1e-6)
    assert batch_means_coverage(1e4, 1.0).lag1 == pytest.approx(0.5e-4, rel=1e-3)
    tiny = batch_means_coverage(1e-9, 1.0, n_batches=10, n_chains=2)
    assert tiny.lag1 == pytest.approx(1.0, abs=1e-8)
    assert tiny.variance_ratio == pytest.approx((20 * 0.5 / 19) / 20 / 0.5, rel=1e-6)
    xs = [1.0, 3.0, 10.0, 30.0, 100.0]
    covs = [batch_means_coverage(x, 1.0, n_batches=10, n_chains=2).coverage for x in xs]
    assert all(c0 < c1 < 0.95 for c0, c1 in zip(covs, covs[1:]))


def _ou_batch_means(x, n_runs, n_chains, n_batches, rng):
    """Exact batch means of a stationary unit-variance OU process (tau = 1): per batch,
    the end value and the integral given the start are jointly Gaussian."""
    q = math.exp(-x)
    cov = np.array([[1 - q * q, 2 * ((1 - q) - (1 - q * q) / 2)],
                    [2 * ((1 - q) - (1 - q * q) / 2),
                     2 * (x - 2 * (1 - q) + (1 - q * q) / 2)]])
    chol = np.linalg.cholesky(cov)
    state = rng.standard_normal((n_runs, n_chains))
    out = np.empty((n_runs, n_chains, n_batches))
    for i in range(n_batches):
        z = rng.standard_normal((n_runs, n_chains, 2)) @ chol.T
        integral = (1 - q) * state + z[..., 1]
        state = q * state + z[..., 0]
        out[..., i] = integral / x
    return out.reshape(n_runs, n_chains * n_batches)


@pytest.mark.parametrize("x", [10.0, 20.0])
def test_coverage_against_exact_ou_simulation(x):
    """40000 runs of 2 chains x 10 batches: the Student interval's coverage agrees with
    the prediction within 4 binomial standard deviations (0.005), and the mean squared
    standard error over the mean squared error of the mean agrees with variance_ratio."""
    rng = np.random.default_rng(20261203)
    n_runs, k, m = 40000, 2, 10
    means = _ou_batch_means(x, n_runs, k, m, rng)
    b = k * m
    centre = means.mean(axis=1)
    se2 = means.var(axis=1, ddof=1) / b
    tq = stats.t.ppf(0.975, b - 1)
    covered = float(np.mean(np.abs(centre) <= tq * np.sqrt(se2)))
    eff = batch_means_coverage(x, 1.0, n_batches=m, n_chains=k)
    sd = math.sqrt(eff.coverage * (1 - eff.coverage) / n_runs)
    assert abs(covered - eff.coverage) < 4 * sd, (covered, eff.coverage)
    ratio = float(se2.mean() / np.mean(centre ** 2))
    assert ratio == pytest.approx(eff.variance_ratio, abs=0.03)
    if x == 10.0:  # the shortfall is real: 0.95 lies outside the binomial band
        assert covered < 0.95 - 4 * sd


@pytest.mark.parametrize("kwargs, name", [
    (dict(batch_length=0.0), "batch_length"), (dict(batch_length=-1.0), "batch_length"),
    (dict(batch_length=math.nan), "batch_length"),
    (dict(batch_length=math.inf), "batch_length"),
    (dict(correlation_time=0.0), "correlation_time"),
    (dict(correlation_time=-1.0), "correlation_time"),
    (dict(correlation_time=math.nan), "correlation_time"),
    (dict(correlation_time=math.inf), "correlation_time"),
    (dict(batch_length=1.0, correlation_time=5e-324), "batch_length / correlation_time"),
    (dict(batch_length=1e308, correlation_time=1e-308), "batch_length / correlation_time"),
    (dict(batch_length=1e-308, correlation_time=1e308), "batch_length / correlation_time"),
    (dict(n_batches=0), "n_batches"), (dict(n_batches=2.5), "n_batches"),
    (dict(n_batches=True), "n_batches"), (dict(n_chains=0), "n_chains"),
    (dict(n_batches=1, n_chains=1), "n_batches"), (dict(level=0.0), "level"),
    (dict(level=1.0), "level"), (dict(level=math.nan), "level"),
    (dict(level=True), "level"), (dict(n_batches=10**7), "n_batches"),
    (dict(n_chains=10**7), "n_chains"),
])
def test_bad_input(kwargs, name):
    args = dict(batch_length=10.0, correlation_time=1.0)
    args.update(kwargs)
    b, t = args.pop("batch_length"), args.pop("correlation_time")
    with pytest.raises(ValueError, match=name):
        batch_means_coverage(b, t, **args)
