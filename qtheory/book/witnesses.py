r"""Witnesses of the rate theorem: the quantities it bounds, exact and simulated.

The book's rate chapter proves (see :mod:`qtheory.rate`) that the stationary occupancy
vector :math:`s^N` of the N-station system is within :math:`C_1/\sqrt N + C_2/N` of the
invariant state :math:`s^I`, with explicit constants (:func:`qtheory.rate_constants`).
This module computes the quantities that the bounds are about, for the chapter to set the
bound beside them:

* :func:`rate_witness_exact` from an exact stationary solution
  (:func:`qtheory.exact_stationary`), with both sides of the energy identity;
* :func:`rate_witness_simulated` from planned runs of :func:`qtheory.simulate` and
  :func:`qtheory.sample_path`, started empty, with batch-means intervals;
* :func:`fit_exponent` for measured decay exponents with intervals.

Each row is a :class:`RateWitness`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

from .._validation import (check_flag, check_lam, check_n_stations, check_p,
                           check_positive_int, check_real, check_seed, real_array)
from ..invariant import invariant_state, invariant_tail_sums

__all__ = ["RateWitness", "rate_witness_exact", "rate_witness_simulated", "fit_exponent"]

_FIELDS_HW = ("distance", "top_mass", "top_mass_rms", "tail_mass", "top_level_sq",
              "energy", "excess", "positive_part")


@dataclass(frozen=True)
class RateWitness:
    r"""Stationary quantities of one N-station system that the rate theorem bounds.

    Exact rows (:func:`rate_witness_exact`) have zero half-widths; simulated rows
    (:func:`rate_witness_simulated`) carry 95% batch-means half-widths.

    Attributes
    ----------
    lam, p : float
    n_stations : int
    method : str
        ``"exact"`` or ``"simulation"``.
    top_level : int
        :math:`i^*`.
    distance, distance_hw : float
        :math:`E\|s^N - s^I\|_1` (jobs per station).
    top_mass, top_mass_hw : float
        :math:`E W^N`, :math:`W = \sum_{j > i^*} s_j`.
    top_mass_rms, top_mass_rms_hw : float
        :math:`\sqrt{E (W^N)^2}`.
    tail_mass, tail_mass_hw : float
        :math:`E v^N_{i^*+2}` (mass two or more levels above the top).
    top_level_sq, top_level_sq_hw : float
        :math:`E[(s^N_{i^*+1})^2]`.
    energy, energy_hw : float
        :math:`\sum_{i=1}^{i^*+1} r^{-i} E[(s^N_i - s^I_i)^2]` (NaN for ``p = 1``).
    excess, excess_hw : float
        :math:`E v^N_1 - v^I_1`, the excess of the mean queue.
    positive_part, positive_part_hw : float
        :math:`\sum_i E (s^N_i - s^I_i)^+`.
    level_excess, level_excess_hw : ndarray of float64, shape (i* + 1,)
        :math:`E s^N_i - s^I_i`, i = 1..i*+1.
    below_top : ndarray of float64, shape (i*,)
        :math:`P(M^N < i)`, i = 1..i*.
    energy_lhs, energy_rhs : ndarray of float64, shape (2,)
        Both sides of the energy identity for n = i*+1 and n = i*+2 (exact rows; NaN for
        simulated rows and for ``p = 1``).
    details : dict
        Provenance: truncation level and boundary mass (exact), or plan, seeds, events,
        snapshots and lag-1 autocorrelations (simulation).
    """

    lam: float
    p: float
    n_stations: int
    method: str
    top_level: int
    distance: float
    distance_hw: float
    top_mass: float
    top_mass_hw: float
    top_mass_rms: float
    top_mass_rms_hw: float
    tail_mass: float
    tail_mass_hw: float
    top_level_sq: float
    top_level_sq_hw: float
    energy: float
    energy_hw: float
    excess: float
    excess_hw: float
    positive_part: float
    positive_part_hw: float
    level_excess: np.ndarray = field(repr=False)
    level_excess_hw: np.ndarray = field(repr=False)
    below_top: np.ndarray = field(repr=False)
    energy_lhs: np.ndarray = field(repr=False)
    energy_rhs: np.ndarray = field(repr=False)
    details: dict = field(default_factory=dict, repr=False)

    def to_dict(self):
        """A JSON-ready dict (arrays as lists); :meth:`from_dict` inverts it."""
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, np.ndarray):
                d[k] = v.tolist()
        return d

    @classmethod
    def from_dict(cls, d):
        """Rebuild a witness from :meth:`to_dict` output (e.g. read from JSON).

        Raises
        ------
        ValueError
            If a field is missing or unknown.
        """
        names = {f for f in cls.__dataclass_fields__}
        missing, extra = names - set(d), set(d) - names
        if missing or extra:
            raise ValueError(f"RateWitness.from_dict: missing {sorted(missing)}, "
                             f"unknown {sorted(extra)}")
        kw = dict(d)
        for k in ("level_excess", "level_excess_hw", "below_top", "energy_lhs",
                  "energy_rhs"):
            kw[k] = np.asarray(d[k], dtype=np.float64)
        return cls(**kw)


def _state_quantities(s, sI, r, K):
    """Per-state quantities from tail fractions ``s`` (rows), shape (m, L) with L >= K+3."""
    m, L = s.shape
    t = np.zeros(L)
    t[: sI.size] = sI
    x = s - t
    dist = np.abs(x[:, 1:]).sum(axis=1)
    W = s[:, K + 1:].sum(axis=1)
    tail = s[:, K + 2:].sum(axis=1)
    top_sq = s[:, K + 1] ** 2
    if math.isfinite(r):
        wts = np.exp(-np.arange(1, K + 2) * math.log(r))
        energy = (x[:, 1:K + 2] ** 2) @ wts
    else:
        energy = np.full(m, np.nan)
    pos = np.clip(x[:, 1:K + 1], 0.0, None).sum(axis=1) + W
    return dict(distance=dist, top_mass=W, top_sq_w=W ** 2, tail_mass=tail,
                top_level_sq=top_sq, energy=energy, positive_part=pos)


def rate_witness_exact(result):
    r"""The quantities bounded by the rate theorem, from an exact stationary solution.

    Parameters
    ----------
    result : ExactResult
        From :func:`qtheory.exact_stationary` (``p > 0``).  The truncation at
        ``max_queue`` changes the values by about ``boundary_mass`` (choose it small).

    Returns
    -------
    RateWitness
        With zero half-widths, and both sides of the energy identity for n = i*+1 and
        n = i*+2.  In the truncated chain they differ by at most
        ``details["identity_tolerance"]``:
        :math:`T_n\, b\, (K + v^I_1 + 1) + 10^{-9}` with :math:`b` the blocked rate
        (``blocked_rate``) and :math:`K` = ``max_queue`` (blocked arrivals remove
        :math:`\lambda s_K` from the drift of every tail sum), the last term for the
        solver's residual.

    Raises
    ------
    ValueError
        If ``result`` is not an :class:`qtheory.ExactResult` or has ``p = 0``.

    References
    ----------
    The book's chapter ``book/rate.md`` (theorem ``rate-thm-energy``).
    """
    from ..exact import ExactResult

    if not isinstance(result, ExactResult):
        raise ValueError(f"result must be an ExactResult (from qtheory.exact_stationary), "
                         f"got {type(result).__name__}")
    lam, p, N = result.lam, result.p, result.n_stations
    if p == 0.0:
        raise ValueError("result must have p > 0 (the rate needs a central server)")
    sI = invariant_state(lam, p)
    K = sI.size - 1
    r = lam / (1.0 - p) if p < 1.0 else math.inf
    Q = result.states.astype(np.int64)
    pi = result.probabilities
    L = max(result.max_queue, K + 2) + 1
    # s per state for levels 0..K+2 only (the rest enters through W and the tail)
    lev = np.arange(K + 3)
    s_low = (Q[:, :, None] >= lev[None, None, :]).mean(axis=1)
    W = np.clip(Q - K, 0, None).mean(axis=1)
    tail = np.clip(Q - K - 1, 0, None).mean(axis=1)
    t = np.zeros(K + 3)
    t[: sI.size] = sI
    x = s_low - t
    dist = result.expected_distance(sI)
    M = Q.max(axis=1)
    E = lambda f: float(pi @ f)  # noqa: E731
    level = np.array([E(s_low[:, i]) for i in range(1, K + 2)]) - t[1:K + 2]
    pos = E(np.clip(x[:, 1:K + 1], 0.0, None).sum(axis=1) + W)
    below = np.array([E((M < i).astype(float)) for i in range(1, K + 1)])
    vI = invariant_tail_sums(lam, p) if K else np.zeros(1)
    v1I = float(vI[1]) if K else 0.0
    es = np.zeros(L + 1)
    es[: result.s.size] = result.s
    lhs, rhs = np.full(2, np.nan), np.full(2, np.nan)
    tol = np.full(2, np.nan)
    energy = math.nan
    if math.isfinite(r) and lam > 0:
        w = np.exp(-np.arange(0, L + 2) * math.log(r))
        delta = max(p - lam * (sI[K] if K else 1.0), 0.0)
        energy = float(sum(w[i] * E(x[:, i] ** 2) for i in range(1, K + 2)))
        for k, n in enumerate((K + 1, K + 2)):
            v_n = W if n == K + 1 else tail
            val = (1 - p) * sum(w[i] * E(x[:, i] ** 2) for i in range(1, n))
            val += (1 - p) * w[n] * E(v_n * s_low[:, n])
            val += delta * w[K + 1] * E(W)
            if n == K + 2:
                val += p * w[K + 2] * E(tail)
            val += p * sum(w[i] * vI[i] * below[i - 1] for i in range(1, K + 1))
            Rk = np.cumsum(w[1:n + 1])                      # R_k for k = 1..n
            drop = es[:-1] - es[1:]                          # E s_{k-1} - E s_k, k = 1..
            Rfull = np.concatenate([Rk, np.full(max(0, drop.size - n), Rk[-1])])
            lhs[k] = val
            rhs[k] = lam / N * float(np.sum(drop * Rfull[: drop.size]))
            # truncation: blocked arrivals remove lam s_K from the drift of every v_i
            # (|u_i| <= K + v^I_1) and the rate of the missing level K + 1 from the
            # second-order term, so |lhs - rhs| <= T_n b (K + v^I_1 + 1), b the blocked
            # rate; 1e-9 for the solver's residual
            tol[k] = float(Rk[-1]) * result.blocked_rate * (result.max_queue + v1I + 1) \
                + 1e-9
    return RateWitness(
        lam=lam, p=p, n_stations=N, method="exact", top_level=K,
        distance=dist, distance_hw=0.0, top_mass=E(W), top_mass_hw=0.0,
        top_mass_rms=math.sqrt(E(W ** 2)), top_mass_rms_hw=0.0,
        tail_mass=E(tail), tail_mass_hw=0.0,
        top_level_sq=E(s_low[:, K + 1] ** 2), top_level_sq_hw=0.0,
        energy=energy, energy_hw=0.0,
        excess=float(result.mean_queue_length - vI[1]) if K else
        float(result.mean_queue_length), excess_hw=0.0,
        positive_part=pos, positive_part_hw=0.0,
        level_excess=level, level_excess_hw=np.zeros(K + 1), below_top=below,
        energy_lhs=lhs, energy_rhs=rhs,
        details=dict(max_queue=int(result.max_queue),
                     boundary_mass=float(result.boundary_mass),
                     blocked_rate=float(result.blocked_rate),
                     n_states=int(result.n_states),
                     identity_tolerance=tol.tolist()))


def _bm(batches):
    """Mean and 95% half-width of batch means (Student t)."""
    from ..statistics import batch_means

    s = batch_means(np.asarray(batches, dtype=np.float64))
    return s.mean, s.half_width, s.lag1


def rate_witness_simulated(n_stations, lam, p, *, half_width, seed=None,
                           n_snapshots=2000, n_batches=20, progress=None):
    r"""The quantities bounded by the rate theorem, from planned simulations started empty.

    Plans the run with :func:`qtheory.plan_run` (``start="empty"``, one chain, target
    95% half-width ``half_width`` for the mean queue length); where the whole system's
    relaxation time :math:`1/(N(1-\sqrt\lambda)^2)` (that of one M/M/1 queue of rate N,
    which governs it when :math:`N(1-\lambda)` is small) exceeds the plan's fluid
    relaxation time :math:`1/\mu`, the warm-up and the batches are stretched by their
    ratio.  Two runs of that length follow, both from the empty state:

    * :func:`qtheory.simulate` gives time averages of ``s`` over the measured period,
      hence :math:`E W^N`, :math:`E v^N_{i^*+2}`, the excess of the mean queue and
      :math:`E s^N_i - s^I_i`, with batch-means intervals over ``n_batches`` batches;
    * :func:`qtheory.sample_path` gives ``n_snapshots`` equally spaced snapshots over
      the same period, hence the non-linear quantities (the distance, the energy,
      :math:`E W^2`, :math:`E s_{i^*+1}^2`, the positive part), with batch means over
      ``n_batches`` groups of consecutive snapshots.

    Parameters
    ----------
    n_stations : int
        N >= 1.
    lam : float
        ``0 <= lam < 1``.
    p : float
        ``0 < p <= 1``.
    half_width : float
        Target 95% half-width of the mean queue length for :func:`qtheory.plan_run`
        (jobs per station), > 0.
    seed : None, int or numpy.random.SeedSequence
        Spawns two children (simulate, sample_path); recorded in ``details``.
    n_snapshots : int
        Snapshots, a multiple of ``n_batches`` and >= 2 ``n_batches``.
    n_batches : int
        Batches, >= 2.
    progress : bool or None
        Passed to the simulator (tqdm bars).

    Returns
    -------
    RateWitness
        ``energy_lhs`` and ``energy_rhs`` are NaN (the identity is checked on exact rows);
        ``details`` holds the plan, the stretch factor, the seeds, the events and the
        lag-1 autocorrelations of the batch means.

    Raises
    ------
    ValueError
        For parameters out of range (named in the message), or a plan longer than the
        simulator accepts.

    References
    ----------
    The book's chapter ``book/rate.md``; Asmussen and Glynn (2007), Ch. IV.5 (batch
    means).
    """
    from ..planning import plan_run
    from ..simulation import sample_path, simulate
    from ..statistics import lag1_autocorrelation

    n = check_n_stations(n_stations)
    lam = check_lam(lam)
    p = check_p(p)
    if p == 0.0:
        raise ValueError("p must satisfy 0 < p <= 1, got 0.0")
    check_real(half_width, "half_width", low=0.0, low_open=True, high=math.inf,
               high_open=True)
    n_batches = check_positive_int(n_batches, "n_batches", minimum=2)
    n_snapshots = check_positive_int(n_snapshots, "n_snapshots", minimum=2 * n_batches)
    if n_snapshots % n_batches:
        raise ValueError(f"n_snapshots must be a multiple of n_batches={n_batches}, got "
                         f"{n_snapshots}")
    progress = check_flag(progress, "progress", allow_none=True)
    ss = check_seed(seed)
    sa, sb = ss.spawn(2)
    # one chain and the plain average: the witness reads the time averages of every
    # level (not only the mean), so the plan must not depend on the cores or on the
    # estimator plan_run would choose by default
    plan = plan_run(n, lam, p, half_width=half_width, start="empty", n_batches=n_batches,
                    n_chains=1, estimator="plain", calibrate=False)
    warm, meas = plan.warmup, plan.t_end - plan.warmup
    tau_agg = 1.0 / (n * (1.0 - math.sqrt(lam)) ** 2) if lam > 0 else 0.0
    stretch = 1.0
    if plan.relaxation_time > 0 and tau_agg > plan.relaxation_time:
        stretch = tau_agg / plan.relaxation_time
        warm, meas = warm * stretch, meas * stretch
    t_end = warm + meas
    sim = simulate(n, lam, p, t_end=t_end, warmup=warm, n_batches=plan.n_batches,
                   seed=sa, progress=progress)
    times = np.linspace(warm, t_end, n_snapshots + 1)[1:]
    path = sample_path(n, lam, p, times, seed=sb, progress=progress)

    sI = invariant_state(lam, p)
    K = sI.size - 1
    r = lam / (1.0 - p) if p < 1.0 else math.inf
    vI = invariant_tail_sums(lam, p) if K else np.zeros(1)
    # time averages (simulate)
    L = max(sim.batch_s.shape[1], K + 3)
    bs = np.zeros((sim.batch_s.shape[0], L))
    bs[:, : sim.batch_s.shape[1]] = sim.batch_s
    tI = np.zeros(L)
    tI[: sI.size] = sI
    top_m, top_hw, lag_top = _bm(bs[:, K + 1:].sum(axis=1))
    tail_m, tail_hw, _ = _bm(bs[:, K + 2:].sum(axis=1))
    exc_m, exc_hw, lag_exc = _bm(bs[:, 1:].sum(axis=1) - (vI[1] if K else 0.0))
    lev = [_bm(bs[:, i] - tI[i]) for i in range(1, K + 2)]
    tail_M = np.zeros(K + 1)
    lq = sim.longest_queue_tail
    tail_M[: min(lq.size, K + 1)] = lq[: K + 1]
    below = 1.0 - tail_M[1:K + 1]
    # snapshots (sample_path)
    Ls = max(path.shape[1], K + 3)
    sp = np.zeros((path.shape[0], Ls))
    sp[:, : path.shape[1]] = path
    q = _state_quantities(sp, sI, r, K)
    grp = lambda a: a.reshape(n_batches, -1).mean(axis=1)  # noqa: E731
    dist_m, dist_hw, lag_dist = _bm(grp(q["distance"]))
    w2_m, w2_hw, _ = _bm(grp(q["top_sq_w"]))
    tsq_m, tsq_hw, _ = _bm(grp(q["top_level_sq"]))
    pos_m, pos_hw, _ = _bm(grp(q["positive_part"]))
    if math.isfinite(r) and lam > 0:
        en_m, en_hw, _ = _bm(grp(q["energy"]))
    else:
        en_m, en_hw = math.nan, math.nan
    rms = math.sqrt(max(w2_m, 0.0))
    rms_hw = w2_hw / (2.0 * rms) if rms > 0 else math.sqrt(w2_hw)
    details = dict(
        t_end=float(t_end), warmup=float(warm), n_batches=int(plan.n_batches),
        plan_t_end=float(plan.t_end), plan_warmup=float(plan.warmup),
        plan_half_width=float(half_width), relaxation_time=float(plan.relaxation_time),
        correlation_time=float(plan.correlation_time), aggregate_time=float(tau_agg),
        stretch=float(stretch), n_events=int(sim.n_events),
        n_snapshots=int(n_snapshots),
        seed_entropy=int(ss.entropy), seed_spawn_key=list(ss.spawn_key),
        lag1_top_mass=float(lag_top), lag1_excess=float(lag_exc),
        lag1_distance=float(lag_dist),
        lag1_snapshots=float(lag1_autocorrelation(q["distance"])),
        simulate_warnings=list(sim.warnings))
    return RateWitness(
        lam=lam, p=p, n_stations=n, method="simulation", top_level=K,
        distance=dist_m, distance_hw=dist_hw, top_mass=top_m, top_mass_hw=top_hw,
        top_mass_rms=rms, top_mass_rms_hw=rms_hw, tail_mass=tail_m,
        tail_mass_hw=tail_hw, top_level_sq=tsq_m, top_level_sq_hw=tsq_hw,
        energy=en_m, energy_hw=en_hw, excess=exc_m, excess_hw=exc_hw,
        positive_part=pos_m, positive_part_hw=pos_hw,
        level_excess=np.array([m for m, _, _ in lev]),
        level_excess_hw=np.array([h for _, h, _ in lev]),
        below_top=below, energy_lhs=np.full(2, np.nan), energy_rhs=np.full(2, np.nan),
        details=details)


def fit_exponent(n, y, half_width=None, *, level=0.95):
    r"""Fit :math:`y \approx c N^{-\alpha}` on a log-log scale, with an interval for alpha.

    Parameters
    ----------
    n : array_like of float, shape (m,)
        Numbers of stations, positive, at least two distinct values.
    y : array_like of float, shape (m,)
        Positive measured values.
    half_width : array_like of float, shape (m,), optional
        95% half-widths of ``y`` (0 for exact values).  When given and positive, the fit is
        weighted by :math:`1/\sigma_k^2`, :math:`\sigma_k = h_k/(1.96\,y_k)` (the standard
        error of :math:`\log y_k`), and the interval for alpha is widened by the square
        root of the reduced chi-square when it exceeds 1 (misfit of the power law).
        Otherwise ordinary least squares, with a Student-t interval from the residuals
        (needs m >= 3).
    level : float
        Confidence level of the interval, in (0, 1).

    Returns
    -------
    alpha : float
        Decay exponent.
    alpha_half_width : float
        Half-width of its interval (``inf`` when it cannot be estimated).
    c : float
        Prefactor.

    Raises
    ------
    ValueError
        If the shapes differ, fewer than two distinct N, non-positive or non-finite values,
        negative half-widths, or ``level`` outside (0, 1).
    """
    n = real_array(n, "n")
    y = real_array(y, "y")
    if n.ndim != 1 or n.shape != y.shape:
        raise ValueError("n and y must be 1-D arrays of the same shape")
    if np.unique(n).size < 2:
        raise ValueError("fit_exponent needs at least two distinct values of n")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(y)) and np.all(n > 0)
            and np.all(y > 0)):
        raise ValueError("n and y must be finite and positive")
    level = check_real(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    X = np.column_stack([np.ones(n.size), -np.log(n)])
    ly = np.log(y)
    m = n.size
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    if half_width is not None:
        h = real_array(half_width, "half_width")
        if h.shape != y.shape or not np.all(np.isfinite(h)) or np.any(h < 0):
            raise ValueError("half_width must be finite, >= 0 and shaped like y")
    if half_width is not None and np.all(h > 0):
        sig = h / (1.96 * y)
        Wt = 1.0 / sig ** 2
        A = X.T @ (X * Wt[:, None])
        beta = np.linalg.solve(A, X.T @ (Wt * ly))
        cov = np.linalg.inv(A)
        if m > 2:
            chi2 = float(np.sum(Wt * (ly - X @ beta) ** 2)) / (m - 2)
            cov = cov * max(1.0, chi2)
        hw = z * math.sqrt(cov[1, 1])
    else:
        beta, res, *_ = np.linalg.lstsq(X, ly, rcond=None)
        if m > 2:
            s2 = float(np.sum((ly - X @ beta) ** 2)) / (m - 2)
            cov = s2 * np.linalg.inv(X.T @ X)
            hw = float(stats.t.ppf(0.5 + level / 2.0, m - 2)) * math.sqrt(cov[1, 1])
        else:
            hw = math.inf
    return float(beta[1]), float(hw), float(math.exp(beta[0]))
