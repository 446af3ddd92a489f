"""Tests of qtheory.finite_n: the linear-noise covariance and the finite-N mean."""
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import qtheory as qt
from qtheory.finite_n import _drift_jacobian_and_noise

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("lam", [0.5, 0.8])
def test_p0_covariance_is_the_mm1_closed_form(lam):
    # p = 0: independent M/M/1 queues, Cov(1{Q>=i}, 1{Q>=j}) = lam^max(i,j) - lam^(i+j)
    S = qt.fluctuation_covariance(lam, 0.0, levels=20)
    i = np.arange(1, 21)
    exact = lam ** np.maximum.outer(i, i) - lam ** np.add.outer(i, i)
    assert S.shape == (20, 20)
    assert np.max(np.abs(S - exact)) < 1e-8


def test_p0_covariance_matches_exact_small_system():
    # exact at every N for p = 0: N Cov(s^N_i, s^N_j) from the exact joint law, N = 2
    lam, n = 0.5, 2
    res = qt.exact_stationary(n, lam, 0.0, max_queue=50)
    Q = res.states.astype(np.int64)
    w = res.probabilities
    S = qt.fluctuation_covariance(lam, 0.0, levels=4)
    s = np.stack([(Q >= a).mean(axis=1) for a in range(1, 5)])   # (levels, states)
    mean = s @ w
    cov = n * ((s * w) @ s.T - np.outer(mean, mean))
    assert np.max(np.abs(cov - S)) < 1e-9


def test_one_level_closed_form():
    # i* = 1: A = -(1 - p), D = lam (1 - s1) + (1 - p) s1 + p + lam s1, Sigma = D / (2(1-p))
    lam, p = 0.6, 0.5
    s = qt.invariant_state(lam, p)
    assert s.size == 2
    S = qt.fluctuation_covariance(lam, p)
    D = lam * (1 - s[1]) + (1 - p) * s[1] + p + lam * s[1]
    assert S.shape == (1, 1)
    assert abs(S[0, 0] - D / (2 * (1 - p))) < 1e-12


def test_covariance_solves_lyapunov_and_is_positive_definite():
    lam, p = 0.9, 0.2
    S = qt.fluctuation_covariance(lam, p)
    s = qt.invariant_state(lam, p)
    diag, D = _drift_jacobian_and_noise(lam, p, s)
    K = diag.size
    A = np.diag(diag) + np.diag(np.full(K - 1, lam), -1) + np.diag(np.full(K - 1, 1 - p), 1)
    assert np.max(np.abs(A @ S + S @ A.T + np.diag(D))) < 1e-10
    assert np.allclose(S, S.T)
    assert np.min(np.linalg.eigvalsh(S)) > 0
    assert S.shape == (qt.top_level(lam, p),) * 2
    assert qt.fluctuation_covariance(lam, p, levels=2).shape == (2, 2)


def test_planning_variance_unchanged_by_refactor():
    # sigma^2 = c^T A^-1 D A^-T c, recomputed from the shared covariance: c^T A^-1 ... via
    # the integrated autocovariance 2 c^T (-A)^-1 Sigma c
    from qtheory.planning import _linear_noise
    lam, p = 0.9, 0.2
    s = qt.invariant_state(lam, p)
    sigma2, tau = _linear_noise(lam, p, s)
    S = qt.fluctuation_covariance(lam, p)
    diag, _ = _drift_jacobian_and_noise(lam, p, s)
    K = diag.size
    A = np.diag(diag) + np.diag(np.full(K - 1, lam), -1) + np.diag(np.full(K - 1, 1 - p), 1)
    c = np.ones(K)
    assert abs(sigma2 - 2 * c @ np.linalg.solve(-A, S @ c)) < 1e-8 * sigma2


@pytest.mark.parametrize("bad", [dict(lam=1.0, p=0.2), dict(lam=0.5, p=1.0),
                                 dict(lam=0.5, p=-0.1)])
def test_covariance_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        qt.fluctuation_covariance(**bad)


def test_covariance_rejects_levels_above_top():
    with pytest.raises(ValueError, match="levels"):
        qt.fluctuation_covariance(0.9, 0.2, levels=qt.top_level(0.9, 0.2) + 1)
    with pytest.raises(ValueError, match="levels"):
        qt.fluctuation_covariance(0.5, 0.0, levels=0)


def test_finite_n_mean_p0_exact():
    r = qt.finite_n_mean(10, 0.8, 0.0)
    assert r.regime == "exact"
    assert r.excess == 0.0 and abs(r.mean - 4.0) < 1e-12


def test_finite_n_mean_rejects_bad_input():
    with pytest.raises(ValueError, match="n_stations"):
        qt.finite_n_mean(0, 0.5, 0.2)
    with pytest.raises(ValueError, match="p"):
        qt.finite_n_mean(10, 0.5, 1.0)


def test_regimes():
    assert qt.finite_n_mean(10**4, 0.9, 0.2).regime == "well-populated"
    assert qt.finite_n_mean(10**3, 0.9, 0.2).regime == "critical"
    assert qt.finite_n_mean(100, 0.99, 0.05).regime == "sparse"
    assert qt.finite_n_mean(10**5, 0.3, 0.5).regime == "well-populated"


def test_well_populated_is_the_mm1_above_the_top():
    lam, p, n = 0.9, 0.2, 10**6
    r = qt.finite_n_mean(n, lam, p)
    s = qt.invariant_state(lam, p)
    rho = lam * s[-1] / p
    S = qt.fluctuation_covariance(lam, p)
    jensen = (lam / p) ** 2 * S[-1, -1] / n / ((1 - rho) ** 3 * n)
    assert r.regime == "well-populated"
    assert abs(r.excess - rho / ((1 - rho) * n) - jensen) < 1e-15
    # lam < p: no fluctuating top level, exactly the M/M/1 form lam/((p - lam) N)
    r0 = qt.finite_n_mean(n, 0.3, 0.5)
    assert abs(r0.excess - 0.3 / (0.2 * n)) < 1e-15
    # the excess is >= 0 and the mean at least the fluid value (the proved lower bound)
    assert r.mean >= r.fluid_mean


@pytest.mark.parametrize("lam,p,n,K", [(0.7, 0.2, 3, 22), (0.5, 0.2, 4, 12),
                                       (0.8, 0.1, 3, 28), (0.9, 0.1, 3, 40)])
def test_sparse_closure_against_exact_solutions(lam, p, n, K):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.TruncationWarning)
        ex = qt.exact_stationary(n, lam, p, max_queue=K, truncation_tol=1.0)
    r = qt.finite_n_mean(n, lam, p)
    assert r.regime == "sparse"
    measured = ex.mean_queue_length - r.fluid_mean
    assert abs(measured - r.excess) <= r.error, (measured, r.excess, r.error)


def test_well_populated_against_short_simulation():
    # lam < p: i* = 0, excess about (lam/p)/(1 - lam/p)/N; planned run, fixed seed
    n, lam, p = 1000, 0.3, 0.5
    r = qt.finite_n_mean(n, lam, p)
    assert r.regime == "well-populated"
    plan = qt.plan_run(n, lam, p, half_width=0.3 * r.excess, calibrate=False)
    sim = qt.simulate(**plan, seed=7, progress=False)
    lo, hi = sim.ci[0] - r.fluid_mean, sim.ci[1] - r.fluid_mean
    assert lo - r.error <= r.excess <= hi + r.error, (lo, hi, r.excess, r.error)


def test_stored_validation_agrees_where_the_book_claims():
    data = json.loads((ROOT / "book" / "data" / "finite_n_validation.json").read_text())
    rows = [x for x in data["sims"] if x["regime"] in ("well-populated", "critical")]
    assert len(rows) >= 3
    for x in rows:
        half = (x["ci"][1] - x["ci"][0]) / 2
        assert abs(x["measured"] - x["predicted"]) <= half + 0.2 * abs(x["predicted"]) \
            + x["error"], x


def test_one_station_is_mm1():
    r = qt.finite_n_mean(1, 0.9, 0.3)
    assert r.regime == "exact" and abs(r.mean - 9.0) < 1e-12


def test_finite_n_min_centralization():
    lam, target = 0.9, 2.0
    p_inf = qt.min_centralization(lam, target)
    p_n = qt.finite_n_min_centralization(10**4, lam, target)
    assert p_inf <= p_n < p_inf + 0.01
    r = qt.finite_n_mean(10**4, lam, p_n)
    assert r.mean + r.error <= target + 1e-9
    assert qt.finite_n_min_centralization(100, lam, 20.0) == 0.0
    assert qt.finite_n_min_centralization(1, lam, target) == float("inf")
    with pytest.raises(ValueError, match="target_mean_queue"):
        qt.finite_n_min_centralization(100, lam, 0.0)


def test_covariance_p_positive_against_a_sample_path():
    # well-populated top level: N Var(s_i) along one path (after 2000 time units) agrees
    # with the linear-noise diagonal within a batch-means 95% interval (+2%)
    n, lam, p = 10**4, 0.9, 0.2
    times = np.arange(0.0, 1.2e4 + 1e-9, 10.0)
    path = qt.sample_path(n, lam, p, times, s0=qt.invariant_state(lam, p), seed=5,
                          progress=False)[200:]
    S = qt.fluctuation_covariance(lam, p)
    X = path[:, 1:S.shape[0] + 1]
    g = X.mean(axis=0)
    v = np.array([n * ((X[b] - g) ** 2).mean(axis=0)
                  for b in np.array_split(np.arange(X.shape[0]), 10)])
    m, hw = v.mean(axis=0), 2.262 * v.std(axis=0, ddof=1) / math.sqrt(10)
    assert np.all(np.abs(m - np.diag(S)) <= hw + 0.02 * np.diag(S)), (np.diag(S), m, hw)
