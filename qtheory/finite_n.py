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
  :math:`i \le i^*`, with :math:`P(M < i)` and the jobs above the top level taken from a
  reflected linear diffusion at the top (a seeded Monte Carlo whose cost does not grow
  with N), from the M/M/1 formula when the top level is well populated, and never below
  the pooled bound :math:`\lambda/(N(1-\lambda))`.
* :func:`excess_by_identity`: the same identity as an estimator of the excess from a
  simulation.

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
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

from . import _engine
from . import _invariant as _inv
from . import _linear_noise as _ln
from ._numba import jit
from ._validation import check_flag, check_lam, check_n_stations, check_p, \
    check_positive_int, check_real
from .simulation import SimulationResult, SimulationWarning
from .statistics import batch_means

__all__ = ["fluctuation_covariance", "finite_n_mean", "finite_n_mean_bounds", "FiniteNMean",
           "finite_n_min_centralization", "excess_by_identity", "ExcessEstimate"]

# Dense Lyapunov solves up to this many levels (p = 0 truncation included).
_MAX_DENSE = 800


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
        fluctuations to speak of and is rejected), or if ``lam`` is so close to 1 that
        the Lyapunov solve cannot be made accurate in double precision (see Notes), or
        if the invariant state has more than 800 levels (the dense solver's limit: lam
        near 1 or a tiny p, e.g. 6534 levels at lam = 0.9, p = 1e-300).

    Notes
    -----
    *p = 0, exact.*  The stations are independent M/M/1 queues; the drift
    :math:`\lambda(s_{i-1}-s_i) - (s_i - s_{i+1})` is linear on every level and the jump
    covariance is linear in :math:`s`, so the Lyapunov equation holds exactly for
    :math:`N\,\mathrm{Cov}(s^N)` at every N, and its solution is
    :math:`\lambda^{\max(i,j)} - \lambda^{i+j}` (the covariance of
    :math:`1\{Q \ge i\}` and :math:`1\{Q \ge j\}` for one geometric queue), which is
    what is returned (no truncation).

    *Accuracy as lam -> 1.*  The Lyapunov solve (p > 0) is refined in extended precision
    and refused (ValueError naming ``lam``) when a variance would still be wrong by more
    than a relative 1e-6; with double precision this happens from about
    :math:`1-\lambda = 10^{-11}` (e.g. at ``p = 0.5``), at ``p = 0.1`` from :math:`10^{-12}`.

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
    return _fluctuation_covariance(lam, p, levels)


def _fluctuation_covariance(lam, p, levels):
    """fluctuation_covariance for validated lam and p (levels is checked here)."""
    if p == 0.0:
        L = 20 if levels is None else check_positive_int(levels, "levels")
        if L > _MAX_DENSE:
            raise ValueError(f"levels must be an integer in [1, {_MAX_DENSE}] for p = 0, "
                             f"got {L}")
        if lam == 0.0:
            return np.zeros((L, L))
        # the exact solution of the (infinite) Lyapunov equation: the covariance of
        # 1{Q >= i} and 1{Q >= j} for one geometric queue (tests/test_finite_n.py checks
        # it against a truncated solve)
        i = np.arange(1, L + 1, dtype=np.float64)
        return lam ** np.maximum.outer(i, i) - lam ** np.add.outer(i, i)
    s = _inv.invariant_state(lam, p)
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
        raise ValueError(f"the invariant state at lam={lam!r}, p={p!r} has {top} levels, "
                         f"more than the {_MAX_DENSE} of the dense Lyapunov solver (the top "
                         f"level grows like log(p/(1 - lam))/log(lam/(1 - p)): large for lam "
                         f"near 1 or a tiny p)")
    return _ln.lyapunov(lam, p, s)[:L, :L]


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
        Intermediate values: ``formula`` (which method), ``push``, ``level_z``,
        ``below_top`` and ``above_top`` (the two parts of the excess), ``mc_se`` (Monte
        Carlo standard error), ``pooled_bound``, ``unfloored_excess``, ...
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


# Regime labels (see the chapter): the top level is "sparse" when its population is
# within _SPARSE_Z standard deviations of 0, "critical" when the push-back
# kappa/((1-p) sigma_Y) is below _CRITICAL_Z; the labels do not choose the method.
_SPARSE_Z = 3.0
_CRITICAL_Z = 4.0
# every level at least _FAR_Z standard deviations above 0: P(M < i) is negligible and the
# well-populated formula needs no diffusion
_FAR_Z = 6.0
# Monte Carlo of the reflected diffusion: the most work (level updates) spent on
# reaching a 3% standard error (a few seconds on two cores), and the most one round of
# paths may need (raise beyond it rather than run for minutes)
_BUDGET = 2e8
_MAX_WORK = 1.2e9
_MAX_N = 10**15
# below this spare capacity N (1 - lam) (jobs per unit time, whole system) the pooled
# bound joins the error estimate: the aggregate queue the diffusion leaves out
_SPARE_MIN = 1.0
# the M/M/1 formula above the top replaces the diffusion when the push-back is strong
_FORMULA_PUSH = 10.0
# the proved bracket of finite_n_mean_bounds replaces the prediction when its width is at
# most this fraction of the M/M/1 mean (p -> 0 at fixed N)
_BRACKET_REL = 1e-3
# the reflected diffusion also holds level 1 at or below 1 (no more busy stations than
# stations) where the idle stations are within 8 standard deviations of 0
_IDLE_BOUNDARY = True
# ... and its model error is at least _IDLE_REL where the idle stations sit fewer than
# _IDLE_Z standard deviations above 0
_IDLE_Z = 4.0
_IDLE_REL = 0.3


def _model_rel(n, idle_z=math.inf):
    """Relative model error of the reflected diffusion: 15%, or 3/sqrt(N) for small N
    (the diffusion drops corrections of relative order N^-1/2), and at least 30% when
    the idle stations are within _IDLE_Z standard deviations of 0 (heavy traffic with
    few idle stations, where the diffusion came out 3-20% low on every such row);
    calibrated on the validation grid of the chapter (simulations N >= 100, exact
    solutions N = 2..4)."""
    rel = max(0.15, 3.0 / math.sqrt(n))
    return max(rel, _IDLE_REL) if idle_z < _IDLE_Z else rel


def _describe_int(n):
    """A huge integer for an error message (float() of it may overflow)."""
    return f"{n:.3g}" if n < 10**300 else f"an integer of {len(str(n))} digits"


@jit(nogil=True)
def _bridge_minimum(w, v, u):
    r"""Minimum over one step of a Brownian bridge from 0 to ``w`` with variance ``v``.

    ``u`` is a uniform draw in [0, 1) (``np.random.random``); the minimum is
    :math:`(w - \sqrt{w^2 - 2 v \log u})/2`, the inverse of the law of the bridge's
    minimum, :math:`P(\min < -m) = e^{-2m(m+w)/v}` for :math:`m \ge 0` (Glasserman,
    *Monte Carlo Methods in Financial Engineering*, 2004, section 6.4).  A draw of
    exactly 0, where :math:`\log 0 = -\infty` would make the path NaN, is read as 1
    (the uniform law on (0, 1] instead of [0, 1), the same law; every other draw is used
    as it is, so the paths of every seed are unchanged).
    """
    if u <= 0.0:
        u = 1.0
    return 0.5 * (w - np.sqrt(w * w - 2.0 * v * np.log(u)))


@jit(nogil=True)
def _reflected_kernel(lam, p, diag, D, x0, kappa, refl, dt, n_steps, burn, seed, idle):
    r"""One path of the Euler scheme of the reflected linear diffusion (see _reflected_top).

    ``idle`` is :math:`\sqrt N (1 - s^I_1)`, the idle stations in diffusion units: when it
    is positive, level 1 is also held at or below 1 (:math:`Z_1 \le` ``idle``, reflection
    in the direction :math:`-e_1`); a value <= 0 leaves that boundary out.

    Returns (sum of Y over the measured steps, regulator increments of each coordinate
    over the measured steps).  numba's generator is
    per thread and seeded here, so a path depends only on its seed.
    """
    np.random.seed(seed)
    K = diag.size
    sd = np.sqrt(D * dt)
    ysum = 0.0
    reg = np.zeros(K)
    Z = np.zeros(K)
    Zn = np.zeros(K)
    for t in range(n_steps):
        for j in range(K):
            f = diag[j] * Z[j]
            if j > 0:
                f += lam * Z[j - 1]
            if j < K - 1:
                f += (1.0 - p) * Z[j + 1]
            Zn[j] = Z[j] + dt * f + sd[j] * np.random.standard_normal()
        Zn[K - 1] -= kappa * dt
        if K >= 2:
            Zn[K - 2] += kappa * dt
        # reflections, top down: a central token that finds no job at or above a level
        # serves the level below it (direction e_j - e_{j-1}; below level 1 it is lost)
        for j in range(K - 1, -1, -1):
            if not refl[j]:
                continue
            a = x0[j] + Z[j]
            e = x0[j] + Zn[j]
            v = sd[j] * sd[j]
            # the bridge from a to e > 0 dips below 0 with probability exp(-2ae/v)
            if a > 0.0 and e > 0.0 and 2.0 * a * e > 40.0 * v:
                continue
            # minimum of the Brownian bridge from a to a + w over the step
            L = -(a + _bridge_minimum(Zn[j] - Z[j], v, np.random.random()))
            if L > 0.0:
                Zn[j] += L
                if j > 0:
                    Zn[j - 1] -= L
                if t >= burn:
                    reg[j] += L
        # at most all stations busy: idle - Z_1 >= 0, pushed down along -e_1 (arrivals
        # to idle stations stop when there are none)
        if idle > 0.0:
            a = idle - Z[0]
            e = idle - Zn[0]
            v = sd[0] * sd[0]
            if not (a > 0.0 and e > 0.0 and 2.0 * a * e > 40.0 * v):
                L = -(a + _bridge_minimum(Z[0] - Zn[0], v, np.random.random()))
                if L > 0.0:
                    Zn[0] -= L
        for j in range(K):
            Z[j] = Zn[j]
        if t >= burn:
            ysum += Z[K - 1]
    return ysum, reg


@functools.lru_cache(maxsize=512)
def _reflected_cached(n, lam, p, use_y):
    s = _inv.invariant_state(lam, p)
    return _reflected_top(n, lam, p, s, use_y)


def _reflected_top(n, lam, p, s, use_y, *, rel_target=0.03, seed=20261201):
    r"""The finite-N excess in the reflected linear diffusion at the top (Monte Carlo).

    Coordinates :math:`(Z_1, \dots, Z_{i^*}, Y)`, :math:`Z_i = \sqrt N (s_i - s^I_i)`,
    :math:`Y = \sqrt N \sum_{i > i^*} s_i \ge 0`.  Interior drift: the linear-noise model
    with top level :math:`i^*+1` (diagonal :math:`-(1-p)`), plus the constant push
    :math:`+\kappa` on :math:`Z_{i^*}` and :math:`-\kappa` on :math:`Y`.  Boundaries:
    :math:`Y \ge 0` and, on every level whose population is within 8 standard deviations
    of 0, :math:`\sqrt N s_i = \sqrt N s^I_i + Z_i \ge 0`; at each the reflection is in
    the direction :math:`e_i - e_{i-1}` (a central token that finds no station with i
    jobs or more serves the level below; below level 1 it is lost).  Euler scheme with the
    regulator of each step from the minimum of the Brownian bridge (no :math:`\sqrt{dt}`
    bias from projecting the end point).

    Each path gives the regulators' rates :math:`\sqrt N p P(M < i)`, hence through the
    identity the part of the excess below the top, and the mean of Y.  Paths run in
    rounds (16 paths, in parallel threads; each path seeded on its own, so the result
    does not depend on the number of threads) until the standard error of the estimated
    excess (below the top, plus ``E[Y]/sqrt(N) - 1/(2N)`` when ``use_y``) is at most
    ``rel_target`` of it or the work reaches ``_BUDGET`` level updates.  Raises
    ValueError when one round alone would exceed ``_MAX_WORK``.
    """
    s2 = np.append(s, 0.0)
    diag, D = _ln.drift_jacobian_and_noise(lam, p, s2)
    K = diag.size
    A = _ln.dense_jacobian(lam, p, diag)
    mu = max(1e-4, -float(np.max(np.linalg.eigvals(A).real)))
    top = s.size - 1
    S = _ln.lyapunov(lam, p, s)
    z = math.sqrt(n) * s[1:] / np.sqrt(np.diag(S))
    refl = np.append(z < 8.0, True)
    x0 = np.append(math.sqrt(n) * s[1:], 0.0)
    kappa = math.sqrt(n) * (p - lam * s[-1])
    sqn = math.sqrt(n)
    # the idle stations, sqrt(N)(1 - s_1) >= 0, within 8 standard deviations of 0
    idle_x = sqn * (1.0 - s[1])
    idle = idle_x if (_IDLE_BOUNDARY and idle_x < 8.0 * math.sqrt(S[0, 0])) else -1.0
    # one round: 16 paths, each a burn-in of 4 relaxation times and then 30 (at least
    # 400 time units), time step 0.01; in heavy traffic, where that exceeds the budget,
    # the step grows to 0.05 (Euler's stationary variance of the fastest mode, |a| <= 4,
    # is then off by a factor 1/(1 - |a| dt/2), at most 10%), the paths drop to 8 and
    # the horizon to 10 relaxation times
    n_paths = 16
    burn_t = max(20.0, 4.0 / mu)
    meas_t = max(400.0, 30.0 / mu)
    dt = 0.01
    while n_paths * K * (burn_t + meas_t) / dt > _BUDGET:
        if dt < 0.05:
            dt = min(0.05, dt * 1.25)
        elif n_paths > 8:
            n_paths //= 2
        elif meas_t > max(400.0, 10.0 / mu):
            meas_t = max(max(400.0, 10.0 / mu), meas_t / 1.25)
        else:
            break
    n_steps = int((burn_t + meas_t) / dt)
    burn = int(burn_t / dt)
    round_work = float(n_paths) * n_steps * K
    if round_work > _MAX_WORK:
        raise ValueError(
            f"finite_n_mean: the reflected diffusion at lam = {lam}, p = {p} relaxes in "
            f"1/mu = {1.0 / mu:.3g} time units over {K} levels; its Monte Carlo would "
            f"need {round_work:.3g} level updates, more than the {_MAX_WORK:.2g} allowed "
            f"(lam too close to 1 for this p); simulate instead")
    T = (n_steps - burn) * dt
    ny = n_steps - burn

    def one(k):
        return _reflected_kernel(lam, p, diag, D, x0, kappa, refl, dt, n_steps, burn,
                                 seed + k, idle)

    below, ey, rates = [], [], []
    work = 0.0
    with ThreadPoolExecutor(max_workers=min(n_paths, _engine.available_cores())) as ex:
        while True:
            for ysum, reg in ex.map(one, range(len(below), len(below) + n_paths)):
                if not (math.isfinite(ysum) and np.all(np.isfinite(reg))):
                    raise FloatingPointError(
                        f"finite_n_mean: a path of the reflected diffusion at lam = {lam}, "
                        f"p = {p}, N = {n} is not finite (NaN or infinity); nothing was "
                        f"stored (please report it)")
                # P(M < i) from the regulator's rate sqrt(N) p P(M < i); a probability, so
                # at most 1 (the diffusion's regulator is not bounded by the token rate,
                # and where levels hold less than a station it exceeds it: p -> 0)
                q = np.minimum(reg[:top] / T / (p * sqn), 1.0)
                d = b = 0.0
                for i in range(top):
                    d = (lam * d + p * q[i]) / (1.0 - p)
                    b += d
                below.append(b)
                ey.append(ysum / ny)
                rates.append(reg[:top] / T)
            work += round_work
            tot = np.array(below) + (np.array(ey) / sqn if use_y else 0.0)
            m = float(tot.mean()) - (0.5 / n if use_y else 0.0)
            se = float(tot.std(ddof=1) / math.sqrt(tot.size))
            if se <= rel_target * abs(m) or work + round_work > _BUDGET:
                break
    below, ey, rates = np.array(below), np.array(ey), np.array(rates)
    k = below.size
    return dict(below=float(below.mean()), below_se=float(below.std(ddof=1) / math.sqrt(k)),
                ey=float(ey.mean()), ey_se=float(ey.std(ddof=1) / math.sqrt(k)),
                total_se=se, rates=rates.mean(axis=0), z=z, dt=dt, horizon=T,
                burn=burn_t, n_paths=k, work=work, mu=mu, kappa=kappa)


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
        If a parameter is out of range (``n_stations`` at most 1e15), if the invariant
        state has more than 800 levels (lam extremely close to 1), if its Lyapunov solve
        cannot be made accurate (lam within about 1e-11 of 1; see
        :func:`fluctuation_covariance`), or if the Monte Carlo
        of the reflected diffusion would be too long (lam close to 1 with a small p: the
        message says so; simulate instead).
    FloatingPointError
        If a Monte Carlo path of the reflected diffusion is not finite (a guard: the
        bridge minimum is computed from a uniform in (0, 1], never from log 0); nothing
        is cached then.

    Notes
    -----
    Write :math:`\rho = \lambda s^I_{i^*}/p \le 1`, :math:`\kappa = \sqrt N(p - \lambda
    s^I_{i^*})`, :math:`\sigma_Y^2 = (\lambda s^I_{i^*} + p)/(2(1-p))`, and let
    ``top_z`` be the top population in standard deviations (from
    :func:`fluctuation_covariance`).

    * ``p = 0`` or ``N = 1`` (``"exact"``): :math:`\lambda/(1-\lambda)` (independent
      M/M/1 queues; one M/M/1 queue of service rate 1).  ``fluid_mean`` is then that
      value too, and the excess 0 is the excess over it.
    * ``p`` so small that the proved bracket of :func:`finite_n_mean_bounds` is
      narrower than 0.1% of :math:`\lambda/(1-\lambda)` (``"exact"``,
      ``details["formula"] == "proved bracket"``): its midpoint, with half its width as
      the error (a bound, not an estimate).  So the prediction tends to the M/M/1 mean
      as :math:`p \to 0`.

    Every other prediction is capped at the proved upper bound
    :math:`\lambda/(1-\lambda)` (``details["upper"]``), and its error at the distance
    to the farther end of the proved bracket (``details["lower"]``, ``details["upper"]``).

    Every prediction rests on the exact identity of the steady state (proved in the
    book): with :math:`\delta_i = E s^N_i - s^I_i`,
    :math:`(1-p)\delta_i = \lambda\delta_{i-1} + p P(M < i)` for :math:`1 \le i \le i^*`
    (:math:`\delta_0 = 0`), so the excess is
    :math:`\sum_{i \le i^*}\delta_i + E[\sum_{i > i^*} s^N_i]`: the deficits that the
    longest queue's drops below a level cause, plus the jobs above the top level.

    * The **reflected diffusion** (heuristic; used unless the formula below applies):
      the linear-noise model of :func:`fluctuation_covariance` for
      :math:`Z_i = \sqrt N (s_i - s^I_i)`, :math:`i \le i^*`, and
      :math:`Y = \sqrt N \sum_{i > i^*} s_i`, with the central server's two constraints
      as reflections: Y stays >= 0 (a token that finds no job above the top serves the
      top level), and every level whose population is within 8 standard deviations of
      0 stays >= 0 (a token that finds no station with i jobs or more serves level
      i - 1), and, when the idle stations :math:`N(1 - s_1)` are within 8 standard
      deviations of 0, level 1 stays at or below 1 (reflection along :math:`-e_1`).  A seeded Monte Carlo of this diffusion (numba; cost independent of N)
      gives :math:`E[Y]` and the regulators' rates :math:`\sqrt N p P(M < i)`; the
      excess is then the identity above with :math:`E[Y]/\sqrt N - 1/(2N)` for the jobs
      above the top (the half job is the exact gap between a reflected random walk and
      its diffusion, as for the M/M/1 queue).  Error estimate: twice the Monte Carlo
      standard error plus :math:`\max(0.15, 3/\sqrt N)` of the excess, and at least
      30% of it when the idle stations are within 4 standard deviations of 0
      (``details["idle_z"] < 4``: heavy traffic with few idle stations, where the
      diffusion came out 3-20% low on every such calibration row), calibrated on the chapter's
      validation grid and then tested on a fresh design
      (``bench/finite_n_out_of_sample.py``); when the top level sits 3 or more standard
      deviations above 0, the part below the top counts at 100% (its regulators are
      then Gaussian tail events, which a diffusion does not get right).
    * The **M/M/1 formula** (when :math:`\kappa/((1-p)\sigma_Y) \ge 10` and every level
      is at least 6 standard deviations above 0): :math:`P(M < i)` is negligible and the
      jobs above :math:`i^*` form a fast M/M/1 queue with load :math:`\rho`: excess
      :math:`\approx \rho/((1-\rho) N)` (order 1/N), plus
      :math:`\mathrm{Var}(\rho_t)/((1-\rho)^3 N)` from the fluctuating load
      :math:`\rho_t = \lambda s_{i^*}(t)/p`, with
      :math:`\mathrm{Var}(\rho_t) = (\lambda/p)^2 \Sigma_{i^*i^*}/N` (quasi-static;
      second-order Taylor expansion of :math:`\rho/(1-\rho)`).
    * ``lam <= p`` (:math:`i^* = 0`, every job above the top): the 1-D reflected
      diffusion has a closed form (truncated normal); with fewer than about
      :math:`10/(p(1-\rho))` stations the closure ``_closure_mean`` (geometric counts),
      error half the excess.

    Every prediction is raised to the pooled bound :math:`\lambda/(N(1-\lambda))` when it
    is below it: the total number of jobs is stochastically larger than in one M/M/1
    queue of service rate N (no configuration serves faster than N), so
    :math:`E[v^N_1] \ge \lambda/(N(1-\lambda))` for every p (the chapter proves it).
    When the spare capacity of the whole system is below one job per unit time,
    :math:`N(1-\lambda) < 1`, the system runs close to its total capacity, an aggregate
    effect the diffusion around the fluid state leaves out (there it underestimated by
    factors of 2 to 4 in the chapter's checks), and the bound is added to the error
    estimate;
    ``details["pooled_bound"]`` holds it, ``details["unfloored_excess"]`` and
    ``details["unfloored_error"]`` the values before this step.

    The ``regime`` names what the top level does: ``"sparse"`` when its population is
    within 3 standard deviations of 0 (``top_z < 3``: it empties now and then and
    :math:`P(M < i^*)` matters), ``"critical"`` when the push-back
    :math:`\kappa/((1-p)\sigma_Y)` is below 4 (the mass above the top is of order
    :math:`N^{-1/2}`), ``"well-populated"`` otherwise (order 1/N).

    The error estimates are heuristics, calibrated on the validation of
    ``bench/finite_n_validation.py`` (the chapter's table); they are not bounds.

    References
    ----------
    Kurtz (1978); van Kampen (2007), Ch. X; Gast and Van Houdt (2017) (why a 1/N
    expansion needs a smooth drift); Tsitsiklis and Xu (2012).
    """
    n = check_n_stations(n_stations)
    if n > _MAX_N:
        raise ValueError("n_stations must be an integer in [1, 1e15] for finite_n_mean "
                         "(the excess is then below float resolution of the mean), got "
                         + _describe_int(n))
    lam = check_lam(lam)
    p = check_p(p)
    if p >= 1.0:
        raise ValueError(f"p must be in [0, 1) for finite_n_mean, got {p!r}")
    return _finite_n_mean(n, lam, p)


def finite_n_mean_bounds(n_stations, lam, p):
    r"""Proved bounds on the stationary mean queue length per station of N stations.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.

    Returns
    -------
    (float, float)
        ``(lower, upper)`` with ``lower <= E[v^N_1] <= upper`` (jobs per station).

    Raises
    ------
    ValueError
        If a parameter is out of range.

    Notes
    -----
    Summing the exact identity :math:`\lambda E s_{i-1} - (1-p) E s_i = p P(M \ge i)`
    (book/steady-state.md, ``steady-state-thm-identity``) over :math:`i \ge 1` gives
    :math:`(1 - \lambda - p) E[v^N_1] = \lambda - p E[M]`.

    With :math:`E[M] \ge E[v^N_1]` (the longest queue is at least the average) this
    gives the upper bound :math:`\lambda/(1-\lambda)`, the M/M/1 mean: for every N and
    p the stationary mean is at most that of N separate queues.  With
    :math:`E[M] \le N E[v^N_1]` (the longest queue holds at most all the jobs) it gives
    the lower bound :math:`\lambda/(1 - \lambda + p(N-1))`, for every p, so the
    mean tends to the M/M/1 value as :math:`p \to 0` at fixed N.  The lower bound is
    the largest of that, the fluid value :math:`v^I_1` (book/steady-state.md,
    ``steady-prop-lower-bound``) and the pooled bound :math:`\lambda/(N(1-\lambda))`
    (book/finite-n.md).  Both bounds are :math:`\lambda/(1-\lambda)` when ``p = 0`` or
    ``N = 1``.  The chapter book/finite-n.md proves them.

    References
    ----------
    Tsitsiklis and Xu (2012) for the model; the identity and the bounds: this book.

    Examples
    --------
    >>> lo, hi = finite_n_mean_bounds(100, 0.9, 1e-12)
    >>> bool(abs(hi - 9.0) < 1e-12 and hi - lo < 1e-8)
    True
    """
    n = check_n_stations(n_stations)
    lam = check_lam(lam)
    p = check_p(p)
    return _mean_bounds(n, lam, p)


def _mean_bounds(n, lam, p):
    """finite_n_mean_bounds for validated arguments."""
    mm1 = lam / (1.0 - lam)
    if p == 0.0 or n == 1 or lam == 0.0:
        return mm1, mm1
    # an N beyond the float range (10**400) counts as infinite: both N-terms vanish
    n = float(n) if n < 2**1023 else math.inf
    lower = lam / (n * (1.0 - lam))
    if lam > p:
        try:
            lower = max(lower, float(_inv.mean_queue_length(lam, p)))
        except ValueError:   # an invariant state too long to compute: skip this bound
            pass
    lower = max(lower, lam / (1.0 - lam + p * (n - 1)))
    return min(lower, mm1), mm1


def _finite_n_mean(n, lam, p):
    """finite_n_mean for validated arguments."""
    lower, upper = _mean_bounds(n, lam, p)
    if 0.0 < p and n > 1 and lam > 0.0 and upper - lower <= _BRACKET_REL * upper:
        # p so small that the proved bracket pins the mean: no diffusion needed
        nan = float("nan")
        try:
            fluid = float(_inv.mean_queue_length(lam, p)) if lam > p else 0.0
        except ValueError:
            fluid = lower
        mean = 0.5 * (lower + upper)
        return FiniteNMean(n, lam, p, fluid, mean - fluid, mean, 0.5 * (upper - lower),
                           "exact", nan, nan, nan,
                           dict(formula="proved bracket", lower=lower, upper=upper))
    r = _finite_n_mean_raw(n, lam, p)
    if r.regime == "exact":
        return r
    # the pooled bound: one M/M/1 queue of service rate N serves at least as fast
    pooled = lam / (n * (1.0 - lam))
    mean = min(max(r.mean, pooled, lower), upper)
    error = r.error + (pooled if n * (1.0 - lam) < _SPARE_MIN else 0.0)
    # the mean lies in the proved bracket: no error beyond the distance to its farther end
    error = min(error, max(mean - lower, upper - mean))
    details = dict(r.details, pooled_bound=pooled, unfloored_excess=r.excess,
                   unfloored_error=r.error, lower=lower, upper=upper)
    return replace(r, mean=mean, excess=mean - r.fluid_mean, error=error, details=details)


def _finite_n_mean_raw(n, lam, p):
    """finite_n_mean before the pooled bound, for checked arguments."""
    nan = float("nan")
    if p == 0.0 or lam == 0.0 or n == 1:
        # independent M/M/1 queues; N = 1 is one M/M/1 queue of rate 1 for every p
        m = lam / (1.0 - lam)
        return FiniteNMean(n, lam, p, m, 0.0, m, 0.0, "exact", nan, nan, nan)
    fluid = float(_inv.mean_queue_length(lam, p)) if lam > p else 0.0
    s = _inv.invariant_state(lam, p) if lam > p else np.ones(1)
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
        S = _fluctuation_covariance(lam, p, None)
        top_z = math.sqrt(n) * s_top / math.sqrt(S[-1, -1])
    details = dict(push=push, sigma_y=sig_y)
    if top == 0:
        return _mean_no_top(n, lam, p, fluid, rho, kappa, top_z, push, sig_y, details)
    z_all = math.sqrt(n) * s[1:] / np.sqrt(np.diag(S))
    # the idle stations N (1 - s_1) in standard deviations above 0
    idle_z = math.sqrt(n) * (1.0 - float(s[1])) / math.sqrt(S[0, 0])
    details.update(level_z=z_all, idle_z=idle_z)
    # the M/M/1 above the top, with the first correction from the fluctuating load
    # lam s_{i*}(t)/p (quasi-static; second-order Taylor expansion of rho/(1 - rho))
    var_rho = (lam / p) ** 2 * S[-1, -1] / n
    mm1 = rho / ((1.0 - rho) * n) if rho < 1.0 else math.inf
    jensen = var_rho / ((1.0 - rho) ** 3 * n) if rho < 1.0 else math.inf
    if push >= _FORMULA_PUSH and float(z_all.min()) >= _FAR_Z:
        ex = mm1 + jensen
        # error: the correction itself (the next term is of its order), the local
        # servers of the stations above the top (k jobs above the top get about
        # (1 - p) k extra service besides the central N p: relative
        # (1 - p) rho/(N p (1 - rho)^2)), 10% floor
        err = 0.1 * ex + jensen + ex * (1.0 - p) * rho / (n * p * (1.0 - rho) ** 2)
        details.update(formula="mm1 + load fluctuation", mm1=mm1, load_correction=jensen)
        return FiniteNMean(n, lam, p, fluid, ex, fluid + ex, err, "well-populated", rho,
                           kappa, top_z, details)
    use_y = push < _FORMULA_PUSH
    mc = _reflected_cached(n, lam, p, use_y)
    # the deficits below the top from the exact identity, with P(M < i) from the
    # regulators: (1 - p) delta_i = lam delta_{i-1} + p P(M < i)
    below = mc["below"]
    if use_y:
        # the reflected diffusion overstates a reflected random walk's mean by 1/2 job
        # (M/M/1: (1 + rho)/(2(1 - rho)) against rho/(1 - rho)): 1/(2N) per station
        above = max(mc["ey"] / math.sqrt(n) - 0.5 / n, 0.0)
        formula = "reflected diffusion"
    else:
        above = mm1 + jensen
        formula = "reflected diffusion (levels) + mm1 above the top"
    ex = below + above
    se = mc["total_se"]
    q = np.minimum(mc["rates"] / (p * math.sqrt(n)), 1.0)
    regime = "sparse" if top_z < _SPARSE_Z else ("critical" if push < _CRITICAL_Z
                                                  else "well-populated")
    # the regulators of levels at least 3 standard deviations above 0 come from the
    # diffusion's Gaussian tail, a large-deviation event whose rate a diffusion does not
    # get right (and which the simulations at (0.7, 0.2), N = 1e5 were too short to
    # see): that part counts at 100%
    rel = _model_rel(n, idle_z)
    rel_below = 1.0 if top_z >= _SPARSE_Z else rel
    err = 2.0 * se + rel * above + rel_below * below
    details.update(formula=formula, below_top=below, above_top=above, mc_se=se,
                   p_longest_below_top=float(q[-1]), dt=mc["dt"], horizon=mc["horizon"],
                   mc_paths=mc["n_paths"], mc_work=mc["work"])
    return FiniteNMean(n, lam, p, fluid, ex, fluid + ex, err, regime, rho, kappa, top_z,
                       details)


def _mean_no_top(n, lam, p, fluid, rho, kappa, top_z, push, sig_y, details):
    """finite_n_mean when lam <= p (i* = 0): every job is above the top level 0."""
    if top_z < _SPARSE_Z:
        ex = max(_closure_mean(n, lam, p, 0) - fluid, 0.0)
        return FiniteNMean(n, lam, p, fluid, ex, fluid + ex, 0.5 * ex, "sparse", rho,
                           kappa, top_z, details)
    if push >= _FORMULA_PUSH:
        ex = rho / ((1.0 - rho) * n)
        err = 0.1 * ex + ex * (1.0 - p) * rho / (n * p * (1.0 - rho) ** 2)
        details.update(formula="mm1")
        return FiniteNMean(n, lam, p, fluid, ex, fluid + ex, err, "well-populated", rho,
                           kappa, top_z, details)
    # 1-D reflected OU with drift -kappa - (1-p) Y: truncated normal mean
    from scipy.stats import norm
    m = -kappa / (1.0 - p)
    zz = m / sig_y
    ey = m + sig_y * math.exp(norm.logpdf(zz) - norm.logcdf(zz))
    ex = max(ey / math.sqrt(n) - 0.5 / n, 0.0)
    err = _model_rel(n) * ex
    details.update(formula="reflected diffusion", ey=ey)
    regime = "critical" if push < _CRITICAL_Z else "well-populated"
    return FiniteNMean(n, lam, p, fluid, ex, fluid + ex, err, regime, rho, kappa,
                       top_z, details)


@dataclass(frozen=True)
class ExcessEstimate:
    r"""Simulated finite-N excess measured through the exact identity (see
    :func:`excess_by_identity`).

    Attributes
    ----------
    excess : float
        Estimate of :math:`E[v^N_1] - v^I_1` (jobs per station).
    ci : tuple of float
        95% batch-means confidence interval ``(low, high)`` (jobs per station):
        Willink's skewness-adjusted interval (:func:`qtheory.statistics.batch_means` with
        ``skew_adjusted=True``; the Student one with 2 batches), as simulate's
        ``identity_ci``.
    half_width : float
        Half the interval's width.
    lag1 : float
        Lag-1 autocorrelation of the batch values (pooled within chains).
    above_top : float
        Part from the jobs above the top level :math:`i^*` (time average).
    below_top : float
        Part from the deficits :math:`\delta_i`, :math:`i \le i^*`.
    batch_values : ndarray of float64, shape (n_chains * n_batches,)
        The estimate from each batch.
    """

    excess: float
    ci: tuple
    half_width: float
    lag1: float
    above_top: float
    below_top: float
    batch_values: np.ndarray


def excess_by_identity(result):
    r"""Estimate the finite-N excess from a simulation through the exact identity.

    With :math:`\delta_i = E s^N_i - s^I_i`, the steady state satisfies
    :math:`(1-p)\delta_i = \lambda\delta_{i-1} + p P(M < i)` for
    :math:`1 \le i \le i^*` (:math:`\delta_0 = 0`), so
    :math:`E[v^N_1] - v^I_1 = \sum_{i \le i^*}\delta_i + \sum_{i > i^*} E s^N_i`.
    This function evaluates the right side on every batch of ``result`` (the time average
    of :math:`1\{M < i\}` and of :math:`s_i`, :math:`i > i^*`) and forms a
    batch-means interval.  The right side is linear in time averages, so in steady state
    its expectation is the excess exactly; it omits the :math:`O(N^{-1/2})` fluctuations
    of the well-populated levels that the plain time average of the queue length
    carries, and its interval is much narrower where the top level is well populated
    (e.g. at (0.5, 0.4), N = 1e4: half-width about 5e-7 against 2e-3 for the same run).

    Parameters
    ----------
    result : SimulationResult
        A run of :func:`qtheory.simulate` (or of a :class:`qtheory.RunPlan`) with
        ``0 < p < 1`` and at least 2 batches in all.

    Returns
    -------
    ExcessEstimate
        The estimate (jobs per station), its 95% interval (Student t with B - 1 degrees
        of freedom over the B batches of all chains) and its parts.

    Raises
    ------
    ValueError
        If ``result`` is not a SimulationResult, ``p`` is 0 or 1 (no identity with a
        top level), or there are fewer than 2 batches.

    Warns
    -----
    SimulationWarning
        If every batch gives the same value (an interval of width 0: a run far too
        short to say anything).

    Notes
    -----
    The interval assumes, as every batch-means interval, that the batches are long
    against the correlation time and that the warm-up removed the start (the plan of
    :func:`qtheory.plan_run` sees to both); check ``lag1``.

    References
    ----------
    The identity is the steady-state chapter's (book/steady-state.md, "an exact identity
    for every N"); batch means: Asmussen and Glynn, *Stochastic Simulation*, 2007, IV.5.
    """
    if not isinstance(result, SimulationResult):
        raise ValueError(f"result must be a SimulationResult from qtheory.simulate, got "
                         f"{type(result).__name__}")
    lam, p = check_lam(float(result.lam)), check_p(float(result.p))
    if not 0.0 < p < 1.0:
        raise ValueError(f"excess_by_identity needs 0 < p < 1, got p = {p!r}")
    bs = np.asarray(result.batch_s, dtype=np.float64)
    bt = np.asarray(result.batch_longest_queue_tail, dtype=np.float64)
    B = bs.shape[0]
    if B < 2:
        raise ValueError(f"result must hold at least 2 batches, got {B}")
    top = int(_inv.invariant_state(lam, p).size - 1) if lam > p else 0
    above = bs[:, top + 1:].sum(axis=1)
    delta = np.zeros(B)
    below = np.zeros(B)
    for i in range(1, top + 1):
        q = 1.0 - (bt[:, i] if i < bt.shape[1] else 0.0)
        delta = (lam * delta + p * q) / (1.0 - p)
        below += delta
    x = above + below
    # the interval of simulate's identity estimate: Willink's skewness-adjusted one
    # (batch values with a sparse top level are skewed; qtheory.statistics.batch_means)
    summ = batch_means(x, skew_adjusted=B >= 3)
    h = summ.half_width
    if not h > 0.0:
        warnings.warn("excess_by_identity: every batch gives the same value, so the "
                      "interval has width 0 and says nothing; the run is far too short "
                      "(see qtheory.plan_run)", SimulationWarning, stacklevel=2)
    xs = x.reshape(int(result.n_chains), -1)
    xs = xs - xs.mean(axis=1, keepdims=True)
    den = float((xs * xs).sum())
    lag1 = float((xs[:, 1:] * xs[:, :-1]).sum() / den) if den > 0 else 0.0
    return ExcessEstimate(summ.mean, summ.ci, h, lag1, float(above.mean()),
                          float(below.mean()), x)


def finite_n_min_centralization(n_stations, lam, target_mean_queue, *, conservative=True,
                                ptol=1e-3):
    r"""Smallest p whose predicted N-station mean queue meets a target (heuristic design).

    A search on p in :math:`[p_{\min}(\infty), 1)` for the predicted mean of
    :func:`finite_n_mean` (plus its error estimate when ``conservative``): upward from the
    fluid answer :func:`qtheory.min_centralization` in steps of 0.01, 0.04, 0.16, ...
    until the target is met, then bisection in the last step.  By the proved lower bound
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
        Bisection tolerance on p, in ``[1e-9, 0.01]`` (default 1e-3, finer than the
        prediction's own error warrants).

    Returns
    -------
    float
        The smallest p (to ``ptol``, rounded up) that meets the target by the prediction,
        ``0.0`` if the target is at least :math:`\lambda/(1-\lambda)` (no pooling needed,
        exact since p = 0 is exact), or ``inf`` if no p < 1 does (e.g. N = 1).

    Raises
    ------
    ValueError
        If a parameter is out of range, or if :func:`finite_n_mean` refuses a p on the
        way (its Monte Carlo would be too long: lam very close to 1 with a small p).

    Notes
    -----
    Assumes the predicted mean is non-increasing in p between :math:`p_{\min}(\infty)` and
    the answer (not proved for the N-system, nor checked beyond the examples of the
    chapters).  The
    prediction is a heuristic with the error estimates of :func:`finite_n_mean`.

    References
    ----------
    Tsitsiklis and Xu (2012) (the fluid design); the finite-N excess of
    :func:`finite_n_mean`.
    """
    n = check_n_stations(n_stations)
    lam = check_lam(lam)
    if lam == 0.0:
        raise ValueError("lam must satisfy 0 < lam < 1 here, got 0.0 (with no arrivals "
                         "every p meets every target: there is nothing to design)")
    target = check_real(target_mean_queue, "target_mean_queue", low=0.0, low_open=True)
    ptol = check_real(ptol, "ptol", low=1e-9, high=0.01)
    conservative = check_flag(conservative, "conservative")
    if n > _MAX_N:
        raise ValueError("n_stations must be an integer in [1, 1e15], got "
                         + _describe_int(n))
    if target >= lam / (1.0 - lam):
        return 0.0

    def ok(p):
        r = _finite_n_mean(n, lam, p)
        return r.mean + (r.error if conservative else 0.0) <= target

    lo = _inv.min_centralization(lam, target, 1e-12)
    if ok(lo):
        return float(lo)
    # gallop up from the fluid answer (the finite-N answer is usually close to it), then
    # bisect: each evaluation may run the Monte Carlo of finite_n_mean
    step = 0.01
    hi = min(lo + step, 1.0 - 1e-9)
    while not ok(hi):
        if hi >= 1.0 - 1e-9:
            return math.inf
        lo = hi
        step *= 4.0
        hi = min(hi + step, 1.0 - 1e-9)
    while hi - lo > ptol:
        mid = 0.5 * (lo + hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return float(hi)
