r"""The run-length rules of steady-state simulation, for validated arguments.

The warm-up rule, the batch-length rule, the variance model that sets the run length,
and this machine's event rate: :func:`qtheory.plan_run` builds its plans from them and
:func:`qtheory.simulate` judges a run (its warnings, its progress bar) by the same rules.
The derivations and sources are in :mod:`qtheory.planning`; the linear-noise model
behind the variance is :mod:`qtheory._linear_noise`.  Nothing here validates its
arguments; :func:`events_per_second` is public (also as
``qtheory.planning.events_per_second``).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy import stats

from . import _engine
from . import _invariant as _inv
from . import _linear_noise as _ln

__all__ = ["DEFAULT_EVENTS_PER_SECOND", "LAG1_TARGET", "BIAS_FRACTION", "MIN_RELAXATIONS",
           "MIN_BATCH_EVENTS", "MM1_TAU_INT", "FINITE_N", "DENSE_LEVELS",
           "IDENTITY_RATIO_A", "IDENTITY_RATIO_B", "events_per_second", "mm1_sigma2",
           "mm1_tau", "variance_model", "identity_model",
           "start_distance", "start_levels", "start_state",
           "warmup_rule", "min_batch_length", "measured_time"]

# Expected lag-1 autocorrelation of the batch means the plan aims at: b = tau / (2 * it).
LAG1_TARGET = 0.05
# Remaining warm-up bias allowed, as a fraction of the target half-width.
BIAS_FRACTION = 0.1
# Warm-up floor in relaxation times: the plan's warm-up is at least this long, and
# simulate warns (p > 0) when a run's warm-up is shorter.
MIN_RELAXATIONS = 3.0
# Fewest events per batch (simulate warns below 100).
MIN_BATCH_EVENTS = 1000.0
# simulate's p = 0 batch check wants batches of at least 10 * 2(1 + rho)/(1 - rho)^2;
# the plan's 10 tau meets it with tau >= 2.02 (1 + rho)/(1 - rho)^2 (1% margin).
MM1_TAU_INT = 2.02
# Finite-N inflation of the linear-noise variance: sigma^2 (1 + FINITE_N / N).
FINITE_N = 30.0
# Dense Lyapunov solve up to this many levels; beyond, tau = 1/mu.
DENSE_LEVELS = 200

# Events per second of one core, used until a calibration run has measured this machine
# (and for simulate's progress-bar decision): the floor that bench/bench_simulation.py
# checks for the compiled kernel at N <= 1e6 (issue 3).  It is a deliberately low figure.
DEFAULT_EVENTS_PER_SECOND = 5e7
_measured_rate = None


def events_per_second(*, measure=True):
    r"""Events per second of one core of this machine for :func:`qtheory.simulate`.

    Parameters
    ----------
    measure : bool, optional
        If True (default) and this process has not measured it yet, run a calibration:
        N = 10,000 stations at (lam, p) = (0.9, 0.1) started at the rounded invariant
        state, 3 timed runs of 2e6 events after a compile-and-warm run, and keep the
        fastest (about 0.2 s in all once the kernel is compiled).  The figure is cached
        for the rest of the process.  If False, return the cached figure, or
        :data:`DEFAULT_EVENTS_PER_SECOND` (5e7, the floor ``bench/bench_simulation.py``
        checks) when nothing was measured.

    Returns
    -------
    float
        Uniformized events per second (dummy events included) of one chain on one core.
        It depends on the machine's load at the time of the calibration.
    """
    global _measured_rate
    if _measured_rate is not None:
        return _measured_rate
    if not measure:
        return DEFAULT_EVENTS_PER_SECOND
    n = 10_000
    s = _inv.invariant_state(0.9, 0.1)
    best = math.inf
    for rep in range(4):
        rng_state, _ = _engine.streams(np.random.SeedSequence(12345 + rep))
        sys_ = _engine.System(n, 0.9, 0.1, _engine.initial_counts(n, s), rng_state,
                              track=False)
        t0 = time.perf_counter()
        sys_.run(2_000_000 if rep else 200_000)
        dt = time.perf_counter() - t0
        if rep:
            best = min(best, dt)
    _measured_rate = 2_000_000 / best
    return _measured_rate


def mm1_sigma2(rho):
    """Asymptotic variance constant 2 rho (1 + rho)/(1 - rho)^4 of the M/M/1 queue length."""
    return 2.0 * rho * (1.0 + rho) / (1.0 - rho) ** 4


def mm1_tau(rho):
    """Mean lag (1 + 3 rho + rho^2)/((1 - rho)^2 (1 + rho)) of the M/M/1 autocovariance."""
    return (1.0 + 3.0 * rho + rho * rho) / ((1.0 - rho) ** 2 * (1.0 + rho))


def variance_model(n, lam, p):
    """:func:`qtheory.planning.variance_model` for validated arguments (a dict)."""
    if lam == 0.0:
        return dict(sigma2=0.0, correlation_time=0.0, relaxation_rate=math.inf,
                    model="empty", fluid_mean=0.0)
    if p == 0.0 or n == 1:
        mu = (1.0 - math.sqrt(lam)) ** 2
        # tau: the larger of the mean lag (1 + 3 rho + rho^2)/((1 - rho)^2 (1 + rho)) and
        # 2(1 + rho)/(1 - rho)^2, the integrated time simulate's p = 0 check uses (so
        # that a planned run never trips that check).
        tau = max(mm1_tau(lam), MM1_TAU_INT * (1.0 + lam) / (1.0 - lam) ** 2)
        return dict(sigma2=mm1_sigma2(lam), correlation_time=tau,
                    relaxation_rate=mu, model="mm1", fluid_mean=lam / (1.0 - lam))
    if lam <= p:
        m = n * p + (1.0 - p)
        rho = n * lam / m
        return dict(sigma2=mm1_sigma2(rho) / (m * n), correlation_time=mm1_tau(rho) / m,
                    relaxation_rate=m * (1.0 - math.sqrt(rho)) ** 2, model="pooled",
                    fluid_mean=0.0)
    s = _inv.invariant_state(lam, p)
    mu = _ln.relaxation_rate(lam, p)
    sigma2, tau = _ln.mean_queue_noise(lam, p, s, dense_levels=DENSE_LEVELS)
    if tau is None:
        tau = 1.0 / mu
    # Empirical finite-N factor fitted to bench/plan_validation.py: the linear-noise
    # variance is an N -> infinity approximation and under-predicts at small N.
    sigma2 *= 1.0 + FINITE_N / n
    return dict(sigma2=sigma2, correlation_time=tau, relaxation_rate=mu,
                model="linear-noise", fluid_mean=float(_inv.mean_queue_length(lam, p)))


# The identity estimator's variance relative to the plain one, an envelope of the ratios
# measured by bench/identity_model.py (sigma^2 ratio <= 0.30 at N = 100, <= 0.065 at
# N = 1000, <= 0.015 at N = 1e4 over lam in {0.7, 0.9, 0.95, 0.99}, p in {0.05, 0.1, 0.2,
# 0.5}) with a margin of about 1.7: min(1, IDENTITY_RATIO_A * N**-IDENTITY_RATIO_B).
IDENTITY_RATIO_A = 10.0
IDENTITY_RATIO_B = 0.65


def identity_model(n, lam, p):
    """:func:`variance_model` of the identity estimator, for validated 0 < p < 1.

    The identity estimator leaves out the fluctuations of the levels below the fluid
    top; what it keeps (the longest queue's excursions below i*, the jobs above it) has
    no closed-form variance.  The model is measured (``bench/identity_model.py``): its
    sigma^2 is the plain model's times ``min(1, 10 N**-0.65)``, an envelope of the
    measured ratios (they lie far below it at most points: 1e-3 at (0.99, 0.05),
    N = 1e4); its correlation time is the plain model's, since at every batch length
    measured the lag-1 autocorrelation of its batch values was at most that of the
    plain batch means (within sampling error); its relaxation rate (the warm-up) is
    the fluid one, the same as the plain average's: its transient from an empty start
    decays with the same slowest mode (book/simulation.md measures it).
    """
    m = dict(variance_model(n, lam, p))
    ratio = min(1.0, IDENTITY_RATIO_A * float(n) ** -IDENTITY_RATIO_B)
    m["sigma2"] = m["sigma2"] * ratio
    m["model"] = m["model"] + " x identity ratio"
    m["identity_ratio"] = ratio
    return m


def start_distance(n, lam, p, start):
    """l1 distance of the start from the fluid invariant state (the empty start: the
    fluid mean; the invariant start: 0)."""
    if start != "empty":
        return 0.0
    if p == 0.0 or n == 1:
        return lam / (1.0 - lam)
    return float(_inv.mean_queue_length(lam, p)) if lam > p else 0.0


def _p0_top(n, lam):
    # lam**i rounded to multiples of 1/N: the levels that hold a station
    return max(int(math.floor(math.log(0.5 / n) / math.log(lam))), 0)


def start_levels(n, lam, p, start):
    """Number of levels of the start state, computed without building it."""
    if start == "empty" or (p == 0.0 and lam == 0.0):
        return 1
    if p == 0.0:
        return _p0_top(n, lam) + 1
    return int(_inv.invariant_state(lam, p).size)


def start_state(n, lam, p, start):
    """s0 for simulate: None (empty) or the fluid invariant state's tail fractions."""
    if start == "empty" or (p == 0.0 and lam == 0.0):
        return None
    if p == 0.0:
        return lam ** np.arange(_p0_top(n, lam) + 1, dtype=np.float64)
    s = _inv.invariant_state(lam, p)
    return s if s.size > 1 else None


def warmup_rule(mu, lam, d0, h):
    """(warm-up, relaxation time 1/mu): at least MIN_RELAXATIONS relaxation times, and
    long enough that the bias d0 exp(-mu w) of a start at l1 distance d0 is below
    BIAS_FRACTION of the half-width h; (0, 0) when nothing relaxes (lam = 0, mu = inf)."""
    if math.isinf(mu) or lam == 0.0:
        return 0.0, 0.0
    relax = 1.0 / mu
    m = MIN_RELAXATIONS
    if d0 > 0.0:  # in logs: h may be as small as the smallest double
        m = max(m, math.log(d0) - math.log(BIAS_FRACTION) - math.log(h))
    return m * relax, relax


def min_batch_length(tau, max_lag1, rate):
    """Shortest batch: tau / (2 max_lag1) (expected lag-1 correlation max_lag1 of the
    batch means) and at least MIN_BATCH_EVENTS events at ``rate`` events per unit time."""
    return max(tau / (2.0 * max_lag1), MIN_BATCH_EVENTS / rate)


def measured_time(sigma2, n, h, n_batches, b_min):
    """(total measured time T, Student quantile t_{B-1, 0.975}): the shortest T with
    t sqrt(sigma2 / (N T)) <= h over B = n_batches batches, each at least b_min long."""
    tq = float(stats.t.ppf(0.975, n_batches - 1))
    ratio = tq / h  # inf rather than OverflowError for absurdly small h
    need = sigma2 * ratio * ratio / n if sigma2 > 0.0 else 0.0
    return max(need, n_batches * b_min), tq
