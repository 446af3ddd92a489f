r"""Finite N, quantitatively: fluctuations around the invariant state and the finite-N excess.

Two computations, both derived in the chapter ``book/finite-n.md``.

* :func:`fluctuation_covariance`: the stationary covariance of
  :math:`\sqrt N (s^N - s^I)` in the linear-noise (diffusion) approximation, from the
  Jacobian of the fluid drift at :math:`s^I` and the covariance of the jumps (a Lyapunov
  equation).  For ``p = 0`` the drift is linear and the answer is exact at every N.
* :func:`finite_n_mean`: a prediction of the stationary mean queue length per station
  :math:`E[v^N_1]` of N stations, with the regime it used and an error estimate.  It rests
  on the exact identity of the steady-state chapter,
  :math:`(1-p)(E s_i - s^I_i) = \lambda (E s_{i-1} - s^I_{i-1}) + p P(M < i)` for
  :math:`i \le i^*`: when the top level :math:`i^*` is well populated, :math:`P(M < i)` is
  negligible and the whole excess sits above the top level.

References
----------
T. G. Kurtz, "Solutions of ordinary differential equations as limits of pure jump Markov
processes", J. Appl. Probab. 7, 1970; T. G. Kurtz, "Strong approximation theorems for
density dependent Markov chains", Stoch. Proc. Appl. 6, 1978.  N. G. van Kampen,
*Stochastic Processes in Physics and Chemistry*, 3rd ed., 2007, Ch. X.  N. Gast and B. Van
Houdt, "A refined mean field approximation", Proc. ACM Meas. Anal. Comput. Syst. 1(2),
2017; N. Gast, L. Bortolussi and M. Tribastone, "Size expansions of mean field
approximation: transient and steady-state analysis", Performance Evaluation 129, 2019
(the 1/N and 1/N^2 terms for smooth drifts; not applicable as they stand here because the
drift is discontinuous at the top level).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ._validation import check_lam, check_n_stations, check_p, check_positive_int
from .invariant import invariant_state, mean_queue_length

__all__ = ["fluctuation_covariance", "finite_n_mean", "FiniteNMean",
           "finite_n_min_centralization"]

# Dense Lyapunov solves up to this many levels (p = 0 truncation included).
_MAX_DENSE = 800


def _drift_jacobian_and_noise(lam, p, s, *, sliding_top=True):
    r"""Jacobian A (K x K) and diagonal jump covariance D (K,) of the linear-noise model.

    ``s`` holds :math:`s_0 = 1, s_1, \dots, s_K` (the levels 1..K are the coordinates;
    :math:`s_{K+1} = 0`).  Below the top, row i of the drift
    :math:`\lambda(s_{i-1}-s_i) - (1-p)(s_i - s_{i+1})` gives sub-diagonal
    :math:`\lambda`, diagonal :math:`-(\lambda + 1 - p)`, super-diagonal :math:`1-p`, and
    D_ii is the total jump rate of level i.  With ``sliding_top`` (p > 0) level K is the
    top level of the invariant state: its drift
    :math:`\lambda s_{K-1} - (1-p) s_K - p` has diagonal :math:`-(1-p)`, and its noise
    gets the central tokens (rate p) and the arrivals to top stations (rate
    :math:`\lambda s_K`) that lift a station above K and are served at once: the tokens
    that hit level K are the difference of these two independent Poisson streams.
    Returns the three diagonals of A and D.
    """
    K = s.size - 1
    sp_ = np.append(s, 0.0)
    D = lam * (sp_[:-2] - sp_[1:-1]) + (1.0 - p) * (sp_[1:-1] - sp_[2:])
    diag = np.full(K, -(lam + 1.0 - p))
    if sliding_top:
        D[-1] += p + lam * s[-1]
        diag[-1] = -(1.0 - p)
    return diag, D


def _dense(lam, p, diag):
    K = diag.size
    return (np.diag(diag) + np.diag(np.full(K - 1, lam), -1)
            + np.diag(np.full(K - 1, 1.0 - p), 1))


def _lyapunov(lam, p, s, *, sliding_top=True):
    """Stationary covariance Sigma of the OU model: A Sigma + Sigma A^T + D = 0."""
    from scipy.linalg import solve_continuous_lyapunov

    diag, D = _drift_jacobian_and_noise(lam, p, s, sliding_top=sliding_top)
    A = _dense(lam, p, diag)
    return solve_continuous_lyapunov(A, -np.diag(D))


def fluctuation_covariance(lam, p, *, levels=None):
    r"""Stationary covariance of :math:`\sqrt N (s^N - s^I)` in the linear-noise approximation.

    Solves :math:`A\Sigma + \Sigma A^\top + D = 0`, with :math:`A` the Jacobian of the
    fluid drift at the invariant state :math:`s^I` (in :math:`s`-coordinates, levels
    :math:`1, \dots, K`) and :math:`D` the diagonal covariance of the jumps
    (each event moves one :math:`s_i` by :math:`\pm 1/N`).

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p < 1``.
    levels : int, optional
        Number of levels K returned (levels 1..K).  For ``p = 0``: any K >= 1 (default
        20).  For ``p > 0``: ``1 <= K <= i*`` (default ``i*``, the top level of
        :math:`s^I`); levels above the top have :math:`s^I_i = 0` and no Gaussian
        fluctuations.

    Returns
    -------
    ndarray of float64, shape (K, K)
        :math:`\Sigma_{ij} \approx N\,\mathrm{Cov}(s^N_i, s^N_j)` (dimensionless) for
        levels i, j = 1..K.  Empty (0, 0) when ``i* = 0`` (``lam <= p``) or ``lam = 0``.

    Raises
    ------
    ValueError
        If ``lam``, ``p`` or ``levels`` is out of range (``p = 1`` has no station
        fluctuations to speak of and is rejected).

    Notes
    -----
    *p = 0, exact.*  The stations are independent M/M/1 queues; the drift
    :math:`\lambda(s_{i-1}-s_i) - (s_i - s_{i+1})` is linear on every level and the jump
    covariance is linear in :math:`s`, so the Lyapunov equation holds exactly for
    :math:`N\,\mathrm{Cov}(s^N)` at every N, and its solution is
    :math:`\lambda^{\max(i,j)} - \lambda^{i+j}` (the covariance of
    :math:`1\{Q \ge i\}` and :math:`1\{Q \ge j\}` for one geometric queue).  The infinite
    system is truncated at :math:`L` levels with :math:`\lambda^{L} \le 10^{-17}` (at most
    800 levels; for ``lam`` above about 0.95 the truncation error is
    :math:`\lambda^{800}`).

    *p > 0, the top level.*  Assumptions: ``i* >= 1``, the top level is well populated
    (:math:`N s^I_{i^*}` large) and not critical (:math:`\lambda s^I_{i^*} < p`).  Then
    the jobs above level :math:`i^*` form a fast M/M/1-like queue (arrivals
    :math:`N\lambda s_{i^*}`, central service :math:`Np`) that holds O(1) jobs; the central
    tokens that reach level :math:`i^*` are all tokens minus those used above it, i.e.
    minus the arrivals to top stations, up to O(1).  So level :math:`i^*` has drift
    :math:`\lambda s_{i^*-1} - (1-p)s_{i^*} - p` (Jacobian entry :math:`-(1-p)`) and noise
    :math:`\lambda(s_{i^*-1}-s_{i^*}) + (1-p)s_{i^*} + p + \lambda s_{i^*}`: both Poisson
    streams add their variance.  The same model underlies the run planner
    (:func:`qtheory.planning.variance_model`).  At a critical top level the split is not
    fast and the model fails (see :func:`finite_n_mean`).  Checked against one long
    sample path (chapter ``book/finite-n.md``, ``tests/test_finite_n.py``): at
    (0.9, 0.2) with N = 1e4 every level 1..5 agrees within its 95% interval; at a sparse
    top level, (0.7, 0.2) with N = 2000 (about 20 stations at the top), the top level's
    variance is overstated by a factor of about two.

    References
    ----------
    N. G. van Kampen, *Stochastic Processes in Physics and Chemistry*, 3rd ed., 2007,
    Ch. X (linear-noise approximation); T. G. Kurtz, J. Appl. Probab. 7 (1970) and Stoch.
    Proc. Appl. 6 (1978) (diffusion approximations of density dependent chains).

    Examples
    --------
    >>> S = fluctuation_covariance(0.5, 0.0, levels=3)
    >>> bool(abs(S[0, 1] - (0.5**2 - 0.5**3)) < 1e-12)
    True
    """
    lam = check_lam(lam)
    p = check_p(p)
    if p >= 1.0:
        raise ValueError(f"p must be in [0, 1) for fluctuation_covariance, got {p!r}")
    if p == 0.0:
        L = 20 if levels is None else check_positive_int(levels, "levels")
        if L > _MAX_DENSE:
            raise ValueError(f"levels must be an integer in [1, {_MAX_DENSE}] for p = 0, "
                             f"got {L}")
        if lam == 0.0:
            return np.zeros((L, L))
        extra = int(math.ceil(math.log(1e-17) / math.log(lam)))
        K = min(_MAX_DENSE, L + extra)
        s = lam ** np.arange(K + 1, dtype=np.float64)
        S = _lyapunov(lam, 0.0, s, sliding_top=False)
        return S[:L, :L]
    s = invariant_state(lam, p)
    top = s.size - 1
    if top == 0:
        if levels is not None:
            raise ValueError(f"levels must be None when lam <= p (no populated level), "
                             f"got {levels!r}")
        return np.zeros((0, 0))
    L = top if levels is None else check_positive_int(levels, "levels")
    if L > top:
        raise ValueError(f"levels must be an integer in [1, {top}] (the top level i* of "
                         f"the invariant state) for lam = {lam}, p = {p}, got {L}")
    if top > _MAX_DENSE:
        raise ValueError(f"the invariant state has {top} levels, more than the "
                         f"{_MAX_DENSE} of the dense Lyapunov solver (lam too close to 1)")
    return _lyapunov(lam, p, s)[:L, :L]


@dataclass(frozen=True)
class FiniteNMean:
    r"""Predicted stationary mean queue length of N stations (see :func:`finite_n_mean`).

    Attributes
    ----------
    n_stations, lam, p : int, float, float
        Inputs.
    fluid_mean : float
        :math:`v^I_1` (jobs per station), the N = infinity value and a lower bound.
    excess : float
        Predicted :math:`E[v^N_1] - v^I_1` (jobs per station), >= 0.
    mean : float
        ``fluid_mean + excess``.
    error : float
        Error estimate of ``excess`` (jobs per station; see the regime's notes).
    regime : str
        ``"exact"``, ``"well-populated"``, ``"critical"`` or ``"sparse"``.
    rho : float
        :math:`\lambda s^I_{i^*}/p`, the load of the central server by arrivals to top
        stations (``lam / p`` when ``i* = 0``; nan for p = 0).
    kappa : float
        :math:`\sqrt N (p - \lambda s^I_{i^*})`, the drift that pushes the mass above the
        top level back, in diffusion units (nan for p = 0).
    top_z : float
        :math:`\sqrt N s^I_{i^*}/\sqrt{\Sigma_{i^* i^*}}`: how many standard deviations the
        top level's population sits above 0 (inf when ``i* = 0``, nan for p = 0).
    details : dict
        Intermediate values (Monte Carlo standard error of the critical coefficient, ...).
    """

    n_stations: int
    lam: float
    p: float
    fluid_mean: float
    excess: float
    mean: float
    error: float
    regime: str
    rho: float
    kappa: float
    top_z: float
    details: dict = field(default_factory=dict)


# Regime thresholds (see the chapter): the top level is "sparse" when its population is
# within _SPARSE_Z standard deviations of 0; the reflected diffusion is used unless the
# push-back kappa/((1-p) sigma_Y) is below _CRITICAL_Z, otherwise the M/M/1 form.
_SPARSE_Z = 3.0
_CRITICAL_Z = 4.0


@functools.lru_cache(maxsize=256)
def _reflected_cached(lam, p, kappa):
    return _reflected_top_mean(lam, p, invariant_state(lam, p), kappa)


def _reflected_top_mean(lam, p, s, kappa, *, paths=200, dt=0.02, seed=20261201):
    r"""Stationary mean of Y in the reflected linear diffusion at the top (Monte Carlo).

    Coordinates :math:`(Z_1, \dots, Z_{i^*}, Y)`, :math:`Z_i = \sqrt N (s_i - s^I_i)`,
    :math:`Y = \sqrt N \sum_{i > i^*} s_i \ge 0`.  Interior drift: the linear-noise model
    with top level :math:`i^*+1` (diagonal :math:`-(1-p)`), plus the constant push
    :math:`+\kappa` on :math:`Z_{i^*}` and :math:`-\kappa` on :math:`Y`; reflection at
    :math:`Y = 0` in the direction :math:`e_Y - e_{i^*}` (a central token that finds no
    job above :math:`i^*` serves level :math:`i^*`).  Euler scheme; the reflection of Y
    over a step uses the minimum of the Brownian bridge (the regulator of the step).
    Returns (mean, standard error over paths).
    """
    s2 = np.append(s, 0.0)
    diag, D = _drift_jacobian_and_noise(lam, p, s2)
    A = _dense(lam, p, diag)
    K = diag.size
    mu = max(1e-3, -float(np.max(np.linalg.eigvals(A).real)))
    T = max(100.0, 15.0 / mu)
    # at most 20,000 steps: slow relaxation (heavy traffic) gets longer steps, up to 0.1
    # (stable: the eigenvalues of A are at most 2 (1 + lam) in modulus)
    dt = min(max(dt, T / 20_000), 0.1)
    T = min(T, 20_000 * dt)
    n = int(T / dt)
    burn = n // 4
    rng = np.random.default_rng(seed)
    M = np.eye(K) + dt * A.T
    sd = np.sqrt(D * dt)
    X = np.zeros((paths, K))
    acc = np.zeros(paths)
    for t in range(n):
        xi = rng.standard_normal((paths, K)) * sd
        y = X[:, -1]
        X = X @ M + xi
        X[:, -2] += kappa * dt
        # Y: increment w over the step; reflect with the minimum of the Brownian bridge
        # from 0 to w (exact for a Brownian motion with constant drift over the step),
        # which removes the sqrt(dt) bias of projecting only the end point.
        w = X[:, -1] - y - kappa * dt
        u = rng.random(paths)
        m = 0.5 * (w - np.sqrt(w * w - 2.0 * sd[-1] ** 2 * np.log(u)))
        L = np.maximum(-(y + m), 0.0)
        X[:, -1] = y + w + L
        X[:, -2] -= L
        if t >= burn:
            acc += X[:, -1]
    per_path = acc / (n - burn)
    return float(per_path.mean()), float(per_path.std(ddof=1) / math.sqrt(paths))


def _closure_mean(n, lam, p, top):
    r"""Sparse-top heuristic: the exact identity closed by a law for the counts.

    :math:`\lambda E s_{i-1} - (1-p) E s_i = p P(M \ge i)` with
    :math:`P(M \ge i) = 1 - e^{-N E s_i}` on levels :math:`i \le i^*` (Poisson counts)
    and :math:`N E s_i / (1 + N E s_i)` above (geometric counts, the M/M/1
    queue above the top; independence again if that law would let the tail grow).  Solved level by level (the left side is increasing in :math:`E s_i`).
    """
    from scipy.optimize import brentq

    prev, total = 1.0, 0.0

    def solve(rhs, phi):
        def f(x):
            return (1.0 - p) * x + p * phi(x) - rhs
        hi = min(1.0, rhs / (1.0 - p))
        if f(hi) <= 0.0:
            return hi
        return brentq(f, 0.0, hi, xtol=1e-17, rtol=1e-13)

    def binomial(x):
        return -math.expm1(n * math.log1p(-min(x, 1.0))) if x < 1.0 else 1.0

    for i in range(1, 100_000):
        rhs = lam * prev
        if rhs < 1e-15:
            break
        if i < top:
            x = solve(rhs, lambda x: -math.expm1(-n * x))
        else:
            x = solve(rhs, lambda x: n * x / (1.0 + n * x))
            if x > prev:   # the geometric law lets the tail grow: use independence
                x = solve(rhs, binomial)
        total += x
        prev = x
    return total


def finite_n_mean(n_stations, lam, p):
    r"""Predict the stationary mean queue length per station of N stations.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p < 1``.

    Returns
    -------
    FiniteNMean
        ``mean`` (jobs per station), ``excess`` over the fluid value, ``error``,
        ``regime`` and the quantities that chose it.

    Raises
    ------
    ValueError
        If a parameter is out of range.

    Notes
    -----
    Write :math:`\rho = \lambda s^I_{i^*}/p \le 1`, :math:`\kappa = \sqrt N(p - \lambda
    s^I_{i^*})`, :math:`\sigma_Y^2 = (\lambda s^I_{i^*} + p)/(2(1-p))`, and let
    ``top_z`` be the top population in standard deviations (from
    :func:`fluctuation_covariance`).

    * ``p = 0`` or ``N = 1`` (``"exact"``): :math:`\lambda/(1-\lambda)` (independent
      M/M/1 queues; one M/M/1 queue of service rate 1).  ``fluid_mean`` is then that
      value too, and the excess 0 is the excess over it.
    * ``"sparse"`` (``top_z < 3``, heuristic): the top level empties now and then, so
      :math:`P(M < i)` in the gap formula matters; the exact identity is closed by
      Poisson counts below the top level and geometric counts from it on
      (``_closure_mean``).
      Error estimate: half the excess (checked against exact solutions with N = 2..4,
      where it errs by up to about 40%).
    * ``"well-populated"`` (:math:`\kappa/((1-p)\sigma_Y) \ge 4`): :math:`P(M < i)`
      is negligible (Gaussian tail), so by the gap formula
      :math:`E s_i = s^I_i` up to that tail for :math:`i \le i^*`, and the excess is
      the mean number of jobs above :math:`i^*` per station.  They form a fast M/M/1
      queue with load :math:`\rho`: excess :math:`\approx \rho/((1-\rho) N)` (O(1/N)),
      plus the correction :math:`\mathrm{Var}(\rho_t)/((1-\rho)^3 N)` from the
      fluctuating load :math:`\rho_t = \lambda s_{i^*}(t)/p`, with
      :math:`\mathrm{Var}(\rho_t) = (\lambda/p)^2 \Sigma_{i^*i^*}/N` (the queue follows
      its load quasi-statically; second-order Taylor expansion of
      :math:`\rho/(1-\rho)`).
    * ``"critical"`` (:math:`\kappa/((1-p)\sigma_Y) < 4`, with ``top_z >= 3``): the
      mass above the top is of order :math:`N^{-1/2}`; excess
      :math:`\approx E[Y]/\sqrt N`, Y the stationary reflected linear diffusion at the
      top (computed by a seeded Monte Carlo of the diffusion).  At :math:`\kappa = 0` this
      is :math:`c/\sqrt N`.  For large :math:`\kappa`, :math:`E[Y] \approx p/\kappa` and the
      excess tends to :math:`1/(N(1-\rho))`, which differs from the M/M/1 value by the
      O(1/N) of discreteness.

    The error estimates are heuristics, calibrated on the validation of
    ``bench/finite_n_validation.py`` (the chapter's table); they are not bounds.

    References
    ----------
    Kurtz (1978); van Kampen (2007), Ch. X; Gast and Van Houdt (2017) (why a 1/N
    expansion needs a smooth drift); Tsitsiklis and Xu (2012).
    """
    n = check_n_stations(n_stations)
    lam = check_lam(lam)
    p = check_p(p)
    if p >= 1.0:
        raise ValueError(f"p must be in [0, 1) for finite_n_mean, got {p!r}")
    nan = float("nan")
    if p == 0.0 or lam == 0.0 or n == 1:
        # independent M/M/1 queues; N = 1 is one M/M/1 queue of rate 1 for every p
        m = lam / (1.0 - lam)
        return FiniteNMean(n, lam, p, m, 0.0, m, 0.0, "exact", nan, nan, nan)
    fluid = float(mean_queue_length(lam, p)) if lam > p else 0.0
    s = invariant_state(lam, p) if lam > p else np.ones(1)
    top = s.size - 1
    s_top = float(s[-1])
    rho = lam * s_top / p
    kappa = math.sqrt(n) * (p - lam * s_top)
    sig_y = math.sqrt((lam * s_top + p) / (2.0 * (1.0 - p)))
    push = kappa / ((1.0 - p) * sig_y)
    if top == 0:
        # level 0 is always full; the M/M/1 picture above it needs the central server
        # to dominate the local servers of the few busy stations: N p (1 - rho) large
        top_z = math.inf if n * p * (1.0 - rho) >= 10.0 else 0.0
    else:
        S = fluctuation_covariance(lam, p)
        top_z = math.sqrt(n) * s_top / math.sqrt(S[-1, -1])
    details = dict(push=push, sigma_y=sig_y)
    if top_z < _SPARSE_Z:
        ex = _closure_mean(n, lam, p, top) - fluid
        ex = max(ex, 0.0)
        return FiniteNMean(n, lam, p, fluid, ex, fluid + ex, 0.5 * ex, "sparse", rho,
                           kappa, top_z, details)
    regime = "well-populated" if push >= _CRITICAL_Z else "critical"
    if push >= _CRITICAL_Z:
        # M/M/1 above the top with load rho, plus the first correction: the load
        # lam s_{i*}(t)/p fluctuates with variance (lam/p)^2 Sigma/N and the queue follows
        # it quasi-statically, E f(rho) ~ f + f''/2 Var, f = rho/(1-rho), f'' = 2/(1-rho)^3
        var_rho = (lam / p) ** 2 * (S[-1, -1] if top else 0.0) / n
        mm1 = rho / ((1.0 - rho) * n)
        jensen = var_rho / ((1.0 - rho) ** 3 * n)
        ex = mm1 + jensen
        # error: the correction itself (the next term is of its order), the local
        # servers of the stations above the top (relative 1/(N p (1 - rho))), 10% floor
        err = 0.1 * ex + jensen + ex / (n * p * (1.0 - rho))
        details.update(formula="mm1 + load fluctuation", mm1=mm1, load_correction=jensen)
        return FiniteNMean(n, lam, p, fluid, ex, fluid + ex, err, regime, rho, kappa,
                           top_z, details)
    if top == 0:
        # 1-D reflected OU with drift -kappa - (1-p) Y: truncated normal mean
        from scipy.stats import norm
        m = -kappa / (1.0 - p)
        z = m / sig_y
        ey = m + sig_y * math.exp(norm.logpdf(z) - norm.logcdf(z))
        se = 0.0
    else:
        ey, se = _reflected_cached(lam, p, round(kappa, 12))
    ex = max(ey / math.sqrt(n) - 1.0 / n, 0.0)
    err = 2.0 * se / math.sqrt(n) + 1.0 / n + 0.15 * ex
    details.update(formula="reflected diffusion", ey=ey, ey_se=se)
    return FiniteNMean(n, lam, p, fluid, ex, fluid + ex, err, regime, rho, kappa, top_z,
                       details)


def finite_n_min_centralization(n_stations, lam, target_mean_queue, *, conservative=True,
                                ptol=1e-4):
    r"""Smallest p whose predicted N-station mean queue meets a target (heuristic design).

    Bisection on p in :math:`[p_{\min}(\infty), 1)` for the predicted mean of
    :func:`finite_n_mean` (plus its error estimate when ``conservative``), started at the
    fluid answer :func:`qtheory.min_centralization`: by the proved lower bound
    :math:`E[v^N_1] \ge v^I_1` no smaller p can meet the target, so the result is always
    :math:`\ge p_{\min}(\infty)`.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam : float
        Arrival rate per station, ``0 < lam < 1``.
    target_mean_queue : float
        Largest acceptable mean number of jobs per station, > 0.
    conservative : bool, optional
        Require ``mean + error <= target`` (default) instead of ``mean <= target``.
    ptol : float, optional
        Bisection tolerance on p, in ``(0, 0.01]`` (default 1e-4).

    Returns
    -------
    float
        The smallest p (to ``ptol``, rounded up) that meets the target by the prediction,
        ``0.0`` if the target is at least :math:`\lambda/(1-\lambda)` (no pooling needed,
        exact since p = 0 is exact), or ``inf`` if no p < 1 does (e.g. N = 1).

    Raises
    ------
    ValueError
        If a parameter is out of range.

    Notes
    -----
    Assumes the predicted mean is non-increasing in p between :math:`p_{\min}(\infty)` and
    the answer (not proved for the N-system; the chapter checks it on a grid).  The
    prediction is a heuristic with the error estimates of :func:`finite_n_mean`.

    References
    ----------
    Tsitsiklis and Xu (2012) (the fluid design); the finite-N excess of
    :func:`finite_n_mean`.
    """
    from ._validation import check_real
    from .design import min_centralization

    n = check_n_stations(n_stations)
    lam = check_lam(lam)
    target = check_real(target_mean_queue, "target_mean_queue", low=0.0, low_open=True)
    ptol = check_real(ptol, "ptol", low=0.0, low_open=True, high=0.01)
    if target >= lam / (1.0 - lam):
        return 0.0

    def ok(p):
        r = finite_n_mean(n, lam, p)
        return r.mean + (r.error if conservative else 0.0) <= target

    lo = min_centralization(lam, target)
    hi = 1.0 - 1e-9
    if not ok(hi):
        return math.inf
    if ok(lo):
        return float(lo)
    while hi - lo > ptol:
        mid = 0.5 * (lo + hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return float(hi)
