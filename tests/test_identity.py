"""The identity estimator of the mean queue length (simulate, plan_run, the kernels)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import qtheory as qt
from qtheory import _engine, _identity, _kernels, _runlength
from qtheory.statistics import batch_means


def quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.simulation.SimulationWarning)
        return fn(*args, **kw)


# ------------------------------------------------------------------ the estimator


def test_identity_weights_solve_the_recursion():
    # sum_{i<=i*} d_i with (1-p) d_i = lam d_{i-1} + p q_i equals c . q for any q
    lam, p = 0.95, 0.1
    c = _identity.identity_weights(lam, p)
    top = _identity.identity_top_level(lam, p)
    assert c.size == top == qt.top_level(lam, p)
    q = np.random.default_rng(1).uniform(size=top)
    d, total = 0.0, 0.0
    for i in range(top):
        d = (lam * d + p * q[i]) / (1 - p)
        total += d
    assert c @ q == pytest.approx(total, rel=1e-12)
    assert np.all(np.diff(c) < 0) and c[-1] == pytest.approx(p / (1 - p))


def test_identity_estimate_is_the_fluid_value_plus_excess_by_identity():
    r = quiet(qt.simulate, 300, 0.9, 0.2, t_end=3000.0, warmup=300.0, seed=3,
              n_chains=2)
    e = qt.finite_n.excess_by_identity(r)
    v = qt.mean_queue_length(0.9, 0.2)
    assert r.identity_mean_queue_length == pytest.approx(v + e.excess, rel=1e-12)
    assert r.identity_half_width == pytest.approx(e.half_width, rel=1e-9)
    # (its lag-1 is the pooled one of simulate, as for the plain batch means)
    assert abs(r.identity_lag1 - e.lag1) < 0.05
    assert np.allclose(r.batch_identity_mean_queue_length, v + e.batch_values)
    assert r.identity_top_level == qt.top_level(0.9, 0.2)
    # never below v^I, batch by batch (every term it adds is non-negative)
    assert np.all(r.batch_identity_mean_queue_length >= v)


def test_identity_estimator_is_unbiased_against_the_exact_chain():
    # N = 3: the exact stationary mean from the truncated chain (blocked mass < 1e-9);
    # a long stationary-enough run: both intervals contain it, the identity's is the
    # narrower one
    lam, p = 0.8, 0.3
    ex = qt.exact_stationary(3, lam, p, max_queue=60)
    mean = float(np.sum(ex.s[1:]))
    r = quiet(qt.simulate, 3, lam, p, t_end=4e5, warmup=500.0, seed=11, n_chains=2)
    for est in ("plain", "identity"):
        b = r.estimate(est)
        assert b.ci[0] <= mean <= b.ci[1], (est, b, mean)
    assert r.identity_half_width < r.half_width


def test_identity_interval_much_narrower_at_a_populated_top():
    r = quiet(qt.simulate, 10_000, 0.5, 0.4, t_end=200.0, warmup=40.0, seed=5)
    assert r.identity_half_width < 0.01 * r.half_width
    # and the two estimate the same mean
    assert abs(r.identity_mean_queue_length - r.mean_queue_length) <= r.half_width


def test_identity_undefined_without_a_top_level_and_plain_when_lam_below_p():
    r0 = quiet(qt.simulate, 20, 0.5, 0.0, t_end=200.0, warmup=20.0, seed=1)
    assert math.isnan(r0.identity_mean_queue_length) and r0.identity_top_level == -1
    assert r0.batch_identity_mean_queue_length.size == 0
    with pytest.raises(ValueError, match="identity"):
        r0.estimate("identity")
    with pytest.raises(ValueError, match="0 < p < 1"):
        qt.simulate(20, 0.5, 0.0, t_end=200.0, warmup=20.0, estimator="identity")
    r1 = quiet(qt.simulate, 20, 0.5, 1.0, t_end=200.0, warmup=20.0, seed=1)
    assert math.isnan(r1.identity_mean_queue_length)
    # lam <= p: i* = 0 and the identity is the plain average, bit for bit
    r = quiet(qt.simulate, 20, 0.3, 0.5, t_end=200.0, warmup=20.0, seed=1)
    assert r.identity_top_level == 0
    assert np.array_equal(r.batch_identity_mean_queue_length, r.batch_mean_queue_length)
    assert quiet(qt.simulate, 20, 0.3, 0.5, t_end=20.0, warmup=2.0,
                 estimator="auto").estimator == "plain"


def test_estimator_argument_and_the_best_estimate():
    kw = dict(t_end=2000.0, warmup=200.0, seed=2)
    a = quiet(qt.simulate, 200, 0.9, 0.1, **kw)
    b = quiet(qt.simulate, 200, 0.9, 0.1, estimator="identity", **kw)
    c = quiet(qt.simulate, 200, 0.9, 0.1, estimator="auto", **kw)
    assert a.estimator == "plain" and b.estimator == c.estimator == "identity"
    assert np.array_equal(a.batch_s, b.batch_s)  # the run does not depend on it
    assert a.best.mean == a.mean_queue_length and b.best.mean == b.identity_mean_queue_length
    assert b.best.n_batches == 20 and b.best.half_width == b.identity_half_width
    assert "through the identity" in b.summary() and "planned estimator" in b.summary()
    for bad in ("Identity", "", True, 1, None.__class__):
        with pytest.raises(ValueError, match="estimator"):
            qt.simulate(200, 0.9, 0.1, estimator=bad, **kw)
    with pytest.raises(ValueError, match="estimator"):
        a.estimate("both")


def test_warnings_judge_the_planned_estimator():
    # batches of about one correlation time: both batch series are correlated; the
    # messages name the estimator the run was made for
    kw = dict(t_end=300.0 + 40 * 40.0, warmup=300.0, n_batches=40, seed=4)
    with warnings.catch_warnings(record=True) as w1:
        warnings.simplefilter("always", qt.simulation.SimulationWarning)
        qt.simulate(2000, 0.9, 0.1, **kw)
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always", qt.simulation.SimulationWarning)
        qt.simulate(2000, 0.9, 0.1, estimator="identity", **kw)
    m1 = " ".join(str(w.message) for w in w1)
    m2 = " ".join(str(w.message) for w in w2)
    assert "the batch means are correlated" in m1
    assert "identity" not in m1
    assert "five correlation times" in m2


def test_identity_interval_covers_on_replications():
    # 200 short planned-like runs at a light point: coverage of both intervals near 95%
    lam, p, n = 0.7, 0.2, 200
    ref = quiet(qt.simulate, n, lam, p, t_end=2e5, warmup=100.0, seed=99, n_chains=2)
    truth = ref.identity_mean_queue_length
    assert ref.identity_half_width < 0.02 * ref.half_width + 1e-3
    reps = quiet(qt.replicate, 200, n, lam, p, t_end=100.0 + 20 * 60.0, warmup=100.0,
                 seed=7)
    cov_i = np.mean([r.identity_ci[0] <= truth <= r.identity_ci[1] for r in reps])
    cov_p = np.mean([r.ci[0] <= truth <= r.ci[1] for r in reps])
    # binomial sd 0.015 at 200 runs: 4 sd either side
    assert 0.89 <= cov_i <= 1.0 and 0.89 <= cov_p <= 1.0, (cov_i, cov_p)


# ------------------------------------------------------------------ planning


def test_plan_chooses_the_identity_where_it_is_defined_and_smaller():
    pl = qt.plan_run(10_000, 0.99, 0.05, half_width=0.02, calibrate=False, n_chains=2)
    assert pl.estimator == "identity" and "auto" in pl.estimator_note
    assert pl["estimator"] == "identity"
    assert pl.asymptotic_variance == pytest.approx(pl.asymptotic_variance_identity)
    assert pl.asymptotic_variance_identity < pl.asymptotic_variance_plain
    ratio = _runlength.identity_model(10_000, 0.99, 0.05)["identity_ratio"]
    assert pl.asymptotic_variance_identity == pytest.approx(
        ratio * pl.asymptotic_variance_plain)
    assert "estimator: identity" in pl.summary()
    for args, why in [((100, 0.9, 0.0), "not defined"), ((100, 0.3, 0.5), "lam <= p"),
                      ((1, 0.9, 0.2), "single station"), ((10, 0.9, 0.2), "against")]:
        q = qt.plan_run(*args, half_width=0.5, calibrate=False)
        assert q.estimator == "plain" and why in q.estimator_note, (args, q.estimator_note)
    with pytest.raises(ValueError, match="0 < p < 1"):
        qt.plan_run(100, 0.9, 0.0, half_width=0.1, estimator="identity")
    for bad in ("Auto", None, 1, True):
        with pytest.raises(ValueError, match="estimator"):
            qt.plan_run(100, 0.9, 0.1, half_width=0.1, estimator=bad)


def test_identity_plan_is_cheaper_where_the_variance_decides():
    kw = dict(half_width=0.01, calibrate=False, n_chains=2)
    plain = qt.plan_run(1000, 0.9, 0.1, estimator="plain", **kw)
    ident = qt.plan_run(1000, 0.9, 0.1, estimator="identity", **kw)
    assert ident.expected_events < 0.5 * plain.expected_events
    assert ident.correlation_time == plain.correlation_time
    assert ident.warmup == plain.warmup
    assert plain.predicted_half_width == pytest.approx(0.01)  # the variance decides
    r = quiet(qt.simulate, **ident, seed=1, progress=False)
    assert r.estimator == "identity" and r.best.half_width <= 2 * ident.half_width


def test_default_plan_has_one_chain_per_core(monkeypatch):
    monkeypatch.setattr(_engine, "available_cores", lambda: 3)
    pl = qt.plan_run(1000, 0.9, 0.1, half_width=0.1, calibrate=False)
    assert pl.n_chains == 3 and pl.n_batches == 7
    assert qt.plan_run(1000, 0.9, 0.1, half_width=0.1, calibrate=False,
                       n_chains=1).n_chains == 1


def test_planned_identity_run_has_no_warning():
    pl = qt.plan_run(500, 0.9, 0.1, half_width=0.05, calibrate=False, n_chains=2)
    assert pl.estimator == "identity"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", qt.simulation.SimulationWarning)
        r = qt.simulate(**pl, seed=3, progress=False)
    assert not caught, [str(w.message) for w in caught]
    assert r.identity_half_width <= pl.half_width


# ------------------------------------------------------------------ the kernels


def test_prefetching_kernel_gives_the_same_path(monkeypatch):
    kw = dict(t_end=3.0, warmup=0.5, seed=8, n_chains=2, progress=False)
    s0 = qt.invariant_state(0.95, 0.1)
    a = quiet(qt.simulate, 3000, 0.95, 0.1, s0=s0, **kw)
    pa = qt.sample_path(3000, 0.95, 0.1, [0.5, 1.0, 2.0], seed=2)
    monkeypatch.setattr(_kernels, "AHEAD_STATIONS", 1000)
    system = _engine.System(3000, 0.95, 0.1, _engine.initial_counts(3000, None),
                            np.ones(4, dtype=np.uint64), track=False)
    assert system.ring is not None  # the prefetching kernel is the one used now
    b = quiet(qt.simulate, 3000, 0.95, 0.1, s0=s0, **kw)
    pb = qt.sample_path(3000, 0.95, 0.1, [0.5, 1.0, 2.0], seed=2)
    assert np.array_equal(a.batch_s, b.batch_s)
    assert np.array_equal(a.batch_longest_queue_tail, b.batch_longest_queue_tail)
    assert np.array_equal(pa, pb)
    # and across chunk boundaries (the ring carries over between calls)
    monkeypatch.setattr(_engine, "CHUNK", 777)
    c = quiet(qt.simulate, 3000, 0.95, 0.1, s0=s0, **kw)
    assert np.array_equal(a.batch_s, c.batch_s)


def test_kernel_handles_no_arrivals_and_only_central_tokens():
    # lam = 0, p = 1: every event is a central token (threshold 0); the system drains
    r = quiet(qt.simulate, 50, 0.0, 1.0, t_end=20.0, warmup=0.0, s0=3, seed=1)
    path = qt.sample_path(50, 0.0, 1.0, [0.0, 0.5, 3.0, 10.0], s0=3, seed=1)
    assert path[0, 3] == 1.0 and np.all(np.diff(path.sum(axis=1)) <= 0)
    assert path[-1, 1] == 0.0 and r.s[1] < 0.5
    # p = 0: no central token at all (threshold 2**63): levels follow M/M/1 queues
    r0 = quiet(qt.simulate, 2000, 0.6, 0.0, t_end=300.0, warmup=50.0, seed=2)
    assert abs(r0.s[1] - 0.6) < 0.02 and abs(r0.s[2] - 0.36) < 0.02


def test_identity_batch_values_from_batch_means():
    r = quiet(qt.simulate, 400, 0.95, 0.1, t_end=1000.0, warmup=100.0, seed=6)
    vals, below, above = _identity.identity_batches(0.95, 0.1, r.batch_s,
                                                    r.batch_longest_queue_tail)
    assert np.array_equal(vals, r.batch_identity_mean_queue_length)
    bm = batch_means(vals, skew_adjusted=True)
    assert bm.ci == r.identity_ci
    # not the Student interval: these batch values are skewed
    assert batch_means(vals).ci != r.identity_ci
    top = qt.top_level(0.95, 0.1)
    assert np.allclose(above, r.batch_s[:, top + 1:].sum(axis=1))
    assert np.all(below >= 0.0)
