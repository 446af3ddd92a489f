r"""Computations that put the theorems of Part III to work.

Each function here turns one statement proved in the book into numbers that can be
checked:

* :func:`fluid_distance_curve` -- the distance between two fluid solutions over time,
  in :math:`\ell_1` or as the positive part :math:`\sum_i (s_i - \tilde s_i)^+` (the
  order contraction of the stability chapter: both never increase);
* :func:`shifted_invariant_state` -- the invariant state lifted by ``shift`` levels,
  a state from which the fluid solution decreases monotonically (the upper barrier in
  the proof of global stability);
* :func:`relaxation_rate_bound` -- an upper bound on the relaxation rate at the
  invariant state (Collatz--Wielandt), which vanishes as :math:`\lambda \to 1`;
* :func:`longest_queue_limit` -- the limit of :math:`P(M^N \ge i)` as
  :math:`N \to \infty` implied by the exact balance identity and the concentration of
  the stationary laws;
* :func:`stationary_balance` -- both sides of the exact finite-N identity
  :math:`\lambda E[s_{i-1}] - (1-p) E[s_i] = p P(M \ge i)` from an exact solution or a
  simulation, with batch-means intervals;
* :func:`lower_bound_check` -- the finite-N lower bound :math:`E[s^N_i] \ge s^I_i`
  (steady-state chapter) on an exact solution, level by level, with the tolerance that
  truncation and the solver's residual allow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _invariant as _inv
from .._validation import check_lam, check_p, check_real, check_s0, check_size, check_times
from ..fluid import fluid_trajectory, l1_distance
from ..invariant import invariant_state
from ..statistics import batch_means

__all__ = [
    "fluid_distance_curve",
    "shifted_invariant_state",
    "relaxation_rate_bound",
    "longest_queue_limit",
    "BalanceCheck",
    "stationary_balance",
    "LowerBoundCheck",
    "lower_bound_check",
]

# Largest state (number of levels) these functions return: 80 MB, as invariant_state.
_MAX_LEVELS = 10_000_000


def _pad(S, width):
    out = np.zeros(S.shape[:-1] + (width,))
    out[..., : S.shape[-1]] = S
    return out


def fluid_distance_curve(lam, p, times, s0_a, s0_b, *, part="l1"):
    r"""Distance between the fluid solutions from two initial states, over time.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    times : array_like of float, shape (m,)
        Non-decreasing times >= 0 (mean service times).
    s0_a, s0_b : array_like of float
        Initial tail fractions (``s[0] = 1``, non-increasing, in [0, 1]).
    part : {"l1", "plus", "minus"}
        ``"l1"``: :math:`\sum_{i\ge1} |s_i(t) - \tilde s_i(t)|`; ``"plus"``:
        :math:`\sum_{i\ge1} (s_i(t) - \tilde s_i(t))^+`; ``"minus"``:
        :math:`\sum_{i\ge1} (\tilde s_i(t) - s_i(t))^+`, where :math:`s` starts at
        ``s0_a`` and :math:`\tilde s` at ``s0_b``.

    Returns
    -------
    ndarray of float64, shape (m,)
        The distance at each time, in jobs per station.  By the order contraction
        (Part III, stability chapter) each of the three is non-increasing in t, up to
        the solver's tolerance (1e-10).

    Raises
    ------
    ValueError
        If ``lam``, ``p``, ``times``, an initial state or ``part`` is invalid.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.2 (uniqueness of fluid solutions); the
    contraction argument is the book's own (stability chapter).
    """
    lam = check_lam(lam)
    p = check_p(p)
    t = check_times(times)
    a = check_s0(s0_a, "s0_a")
    b = check_s0(s0_b, "s0_b")
    if part not in ("l1", "plus", "minus"):
        raise ValueError(f"part must be 'l1', 'plus' or 'minus', got {part!r}")
    A = fluid_trajectory(lam, p, t, a)
    B = fluid_trajectory(lam, p, t, b)
    if part == "l1":
        return np.asarray(l1_distance(A, B), dtype=np.float64).reshape(t.shape)
    w = max(A.shape[1], B.shape[1])
    D = _pad(A, w) - _pad(B, w)
    if part == "minus":
        D = -D
    return np.maximum(D[:, 1:], 0.0).sum(axis=1)


def shifted_invariant_state(lam, p, shift):
    r"""The invariant state lifted by ``shift`` levels: every station holds ``shift``
    extra jobs.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 < p <= 1``.
    shift : int
        Number of levels L >= 0, with ``L + i*`` at most 1e7 (the returned array).

    Returns
    -------
    ndarray of float64, shape (L + i* + 1,)
        :math:`w_i = 1` for :math:`i \le L` and :math:`w_{L+j} = s^I_j` for
        :math:`1 \le j \le i^*`.  The fluid drift at :math:`w` is :math:`\le 0` in every
        coordinate, so the fluid solution from :math:`w` is non-increasing in time and
        decreases to :math:`s^I` (the upper barrier in the proof of global stability).
        ``shift = 0`` gives :math:`s^I`.

    Raises
    ------
    ValueError
        If ``lam`` or ``p`` is out of range (``p = 0`` has no finite invariant top
        level), or ``shift`` is not an integer in ``[0, 1e7 - i*]``.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.5 (global stability); the barrier is the
    book's own device (stability chapter).
    """
    lam = check_lam(lam)
    p = check_real(p, "p", low=0.0, high=1.0, low_open=True)
    L = check_size(shift, "shift", minimum=0, maximum=_MAX_LEVELS,
                   what="the state has shift + i* + 1 entries of 8 bytes")
    istar = _inv.top_level(lam, p)
    if L + istar > _MAX_LEVELS:
        raise ValueError(f"shift + i* = {L:,} + {istar:,} levels at lam={lam!r}, "
                         f"p={p!r} is more than {_MAX_LEVELS:,}; use a smaller shift")
    sI = _inv.invariant_state(lam, p)
    return np.concatenate([np.ones(L + 1), sI[1:]])


def relaxation_rate_bound(lam, p):
    r"""Upper bound on the relaxation rate at the invariant state, for
    :math:`\lambda + p > 1`.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 < p < 1``, with ``lam + p > 1`` (so that
        :math:`r = \lambda/(1-p) > 1`) and ``lam > p`` (so that :math:`i^* \ge 1`).

    Returns
    -------
    float
        :math:`\bar\mu = (\lambda + p - 1)/(r^{i^*} - 1)`, per mean service time.  The
        relaxation rate :func:`qtheory.relaxation_rate` never exceeds it, and since
        :math:`r^{i^*} \ge p / (r(1-\lambda))`,
        :math:`\bar\mu \le (\lambda+p-1)\, r (1-\lambda) / (p - r(1-\lambda))
        \sim (1-\lambda)/(1-p)` as :math:`\lambda \to 1`.

    Raises
    ------
    ValueError
        If ``lam`` or ``p`` is out of range, ``lam + p <= 1`` or ``lam <= p``.

    Notes
    -----
    The matrix :math:`A` of the fluid model linearized at :math:`s^I` (top level
    :math:`i^*` fixed) is Metzler and irreducible.  For the positive vector
    :math:`y_j = 1 - r^{-j}` every column of :math:`y^\top A` is 0 except the last,
    which is :math:`-(\lambda+p-1) r^{-i^*}`; the Collatz--Wielandt inequality
    :math:`\max \operatorname{Re}\operatorname{spec} A \ge \min_j (y^\top A)_j / y_j`
    gives the bound.  Proof in the stability chapter.

    References
    ----------
    Horn and Johnson, *Matrix Analysis*, Section 8.1 (Collatz--Wielandt); Tsitsiklis and
    Xu (2012), Section 3 (the invariant state).
    """
    lam = check_lam(lam)
    p = check_real(p, "p", low=0.0, high=1.0, low_open=True, high_open=True)
    if not lam + p > 1.0:
        raise ValueError(f"relaxation_rate_bound needs lam + p > 1, got lam={lam!r}, "
                         f"p={p!r}")
    istar = _inv.top_level(lam, p)  # no state array: i* may be huge for tiny p
    if istar == 0:
        raise ValueError(f"relaxation_rate_bound needs lam > p (i* >= 1), got "
                         f"lam={lam!r}, p={p!r}: the fluid empties in finite time")
    excess = lam - (1.0 - p)  # lam + p - 1, exact when lam is close to 1 - p (Sterbenz)
    # r^{i*} - 1 with r - 1 = excess / (1 - p)
    return excess / math.expm1(istar * math.log1p(excess / (1.0 - p)))


def longest_queue_limit(lam, p):
    r"""Limit as :math:`N \to \infty` of the tail :math:`P(M^N \ge i)` of the longest
    queue in steady state.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 < p <= 1``.

    Returns
    -------
    ndarray of float64, shape (i* + 2,)
        ``out[i]`` = :math:`\lim_N P(M^N \ge i)`: 1 for :math:`i \le i^*`,
        :math:`\lambda s^I_{i^*}/p` for :math:`i = i^*+1`, and 0 beyond (not stored).
        With :math:`i^* = 0` (``lam <= p``) ``out[1]`` is :math:`\lambda/p`.

    Raises
    ------
    ValueError
        If ``lam`` is out of range, ``p`` is not in (0, 1], or the top level
        :math:`i^*` exceeds 1e7 (tiny ``p`` with ``lam`` near 1).

    Notes
    -----
    From the exact identity :math:`p P(M \ge i) = \lambda E[s_{i-1}] - (1-p)E[s_i]` and
    :math:`E[s^N_i] \to s^I_i` (steady-state chapter).  The value at :math:`i^*+1` is
    the share of the central server's effort spent on jobs that arrive at stations
    holding :math:`i^*` jobs.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.7 (concentration of the stationary laws); the
    corollary for the longest queue is the book's own (steady-state chapter).
    """
    lam = check_lam(lam)
    p = check_real(p, "p", low=0.0, high=1.0, low_open=True)
    istar = _inv.top_level(lam, p)
    if istar > _MAX_LEVELS:
        raise ValueError(f"longest_queue_limit: the invariant state at lam={lam!r}, "
                         f"p={p!r} has {istar:,} levels, more than {_MAX_LEVELS:,}: the "
                         f"tail array would not fit; use a larger p or a smaller lam")
    sI = _inv.invariant_state(lam, p)
    out = np.ones(istar + 2)
    out[istar + 1] = min(lam * sI[istar] / p, 1.0)
    return out


@dataclass(frozen=True)
class BalanceCheck:
    r"""Both sides of :math:`\lambda E[s_{i-1}] - (1-p)E[s_i] = p P(M \ge i)`.

    Attributes
    ----------
    lam, p : float
        The model.
    n_stations : int
        N.
    source : str
        ``"exact"`` or ``"simulation"``.
    levels : ndarray of int64, shape (k,)
        i = 1..k.
    lhs : ndarray of float64, shape (k,)
        :math:`\lambda E[s_{i-1}] - (1-p)E[s_i]` (jobs per station per unit time).
    rhs : ndarray of float64, shape (k,)
        :math:`p P(M \ge i)`.
    defect : ndarray of float64, shape (k,)
        ``lhs - rhs``.
    half_width : ndarray of float64, shape (k,)
        95% batch-means half-width of ``defect`` (0 for exact results).
    """

    lam: float
    p: float
    n_stations: int
    source: str
    levels: np.ndarray
    lhs: np.ndarray
    rhs: np.ndarray
    defect: np.ndarray
    half_width: np.ndarray

    def z_scores(self):
        """``defect / (half_width / 1.96)`` (approximately standard normal for a correct
        simulation); NaN where the half-width is 0.  Shape (k,)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.half_width > 0,
                            self.defect / (self.half_width / 1.96), np.nan)


def stationary_balance(result):
    r"""Check the exact finite-N identity on an exact solution or a simulation.

    Parameters
    ----------
    result : ExactResult or SimulationResult
        From :func:`qtheory.exact_stationary` or :func:`qtheory.simulate`.

    Returns
    -------
    BalanceCheck
        For levels :math:`i = 1, \dots, k` (k = number of levels the result holds
        minus one): both sides and their difference.  For a simulation the defect is
        computed batch by batch (both sides are linear in the time averages) and
        ``half_width`` is its 95% batch-means half-width, so a correct simulator gives
        defects within about two half-widths.  For a truncated exact solution the defect
        equals the blocked arrival rate :math:`\lambda E[s_K]` at every level, up to the
        solver's residual.

    Raises
    ------
    ValueError
        If ``result`` is neither kind of result.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 3.3 and the book's steady-state chapter (the balance of
    positions at or above level i); proof in the steady-state chapter.
    """
    from ..exact import ExactResult
    from ..simulation import SimulationResult

    if isinstance(result, ExactResult):
        s = np.asarray(result.s, dtype=np.float64)
        tail = np.asarray(result.longest_queue_tail, dtype=np.float64)
        lam, p = result.lam, result.p
        lhs = lam * s[:-1] - (1.0 - p) * s[1:]
        rhs = p * tail[1:]
        hw = np.zeros_like(lhs)
        source = "exact"
    elif isinstance(result, SimulationResult):
        lam, p = result.lam, result.p
        w = max(result.batch_s.shape[1], result.batch_longest_queue_tail.shape[1]) + 1
        bs = _pad(np.asarray(result.batch_s, dtype=np.float64), w)
        bt = _pad(np.asarray(result.batch_longest_queue_tail, dtype=np.float64), w)
        bd = lam * bs[:, :-1] - (1.0 - p) * bs[:, 1:] - p * bt[:, 1:]
        lhs_b = lam * bs[:, :-1] - (1.0 - p) * bs[:, 1:]
        lhs = lhs_b.mean(axis=0)
        rhs = (p * bt[:, 1:]).mean(axis=0)
        hw = np.array([batch_means(bd[:, j]).half_width if np.any(bd[:, j] != bd[0, j])
                       else 0.0 for j in range(bd.shape[1])])
        source = "simulation"
    else:
        raise ValueError("result must be an ExactResult or a SimulationResult, got "
                         f"{type(result).__name__}")
    k = lhs.size
    return BalanceCheck(float(lam), float(p), int(result.n_stations), source,
                        np.arange(1, k + 1, dtype=np.int64), lhs, rhs, lhs - rhs, hw)


@dataclass(frozen=True)
class LowerBoundCheck:
    r"""Margins of the finite-N lower bound :math:`E[s^N_i] \ge s^I_i`, level by level.

    Attributes
    ----------
    lam, p : float
        The model.
    n_stations : int
        N.
    max_queue : int
        Truncation level K of the exact solution.
    levels : ndarray of int64, shape (K,)
        i = 1..K.
    expected : ndarray of float64, shape (K,)
        :math:`E[s^N_i]` of the (truncated) exact stationary law.
    fluid : ndarray of float64, shape (K,)
        :math:`s^I_i` (0 above the fluid top level :math:`i^*`).
    margin : ndarray of float64, shape (K,)
        ``expected - fluid``; the proposition says it is :math:`\ge 0` for the
        untruncated chain.
    tolerance : ndarray of float64, shape (K,)
        How far below 0 a margin of the *truncated* chain may lie:
        :math:`(b + \delta)/(1-p) \sum_{j<i} r^j` plus rounding for
        :math:`i \le i^*`, rounding only above :math:`i^*`, where :math:`b` is the blocked
        arrival rate, :math:`\delta` bounds the solver's residual in the identity and
        :math:`r = \lambda/(1-p)`.
    """

    lam: float
    p: float
    n_stations: int
    max_queue: int
    levels: np.ndarray
    expected: np.ndarray
    fluid: np.ndarray
    margin: np.ndarray
    tolerance: np.ndarray

    @property
    def holds(self):
        """True when every margin is at least ``-tolerance``."""
        return bool(np.all(self.margin >= -self.tolerance))

    @property
    def min_margin(self):
        """The smallest margin over all levels (jobs per station)."""
        return float(self.margin.min())

    @property
    def mean_queue_margin(self):
        r""":math:`E[v^N_1] - v^I_1` over the levels held, i.e. ``margin.sum()``."""
        return float(self.margin.sum())


def lower_bound_check(result):
    r"""Check :math:`E[s^N_i] \ge s^I_i` on an exact stationary solution.

    Parameters
    ----------
    result : ExactResult
        From :func:`qtheory.exact_stationary` (any N, ``lam``, ``p``, ``max_queue``).

    Returns
    -------
    LowerBoundCheck
        Per level :math:`i = 1..K` the stationary mean :math:`E[s^N_i]`, the invariant
        state :math:`s^I_i`, the margin (their difference) and the tolerance within
        which the truncated chain must meet the bound.  ``holds`` says whether every
        margin is at least ``-tolerance``.

    Raises
    ------
    ValueError
        If ``result`` is not an :class:`~qtheory.ExactResult`.

    Notes
    -----
    For the untruncated chain the bound is exact (steady-state chapter, proposition
    ``steady-prop-lower-bound``): from the identity
    :math:`(1-p)E[s_i] = \lambda E[s_{i-1}] - p P(M \ge i) \ge \lambda E[s_{i-1}] - p`
    and :math:`(1-p)s^I_i = \lambda s^I_{i-1} - p` for :math:`i \le i^*`, by induction
    on :math:`i`.  In the chain truncated at K the identity is off by the blocked rate
    :math:`b = \lambda E[s_K]` (exactly) and by the solver's error, at most
    :math:`\delta = K \cdot n_{\text{states}} \cdot \max_x |(\pi Q)_x|` (the identity at
    level i is :math:`\sum_x (\pi Q)_x v_i(x)` with :math:`0 \le v_i \le K`).  The
    same induction then gives
    :math:`E[s_i] - s^I_i \ge -\frac{b + \delta}{1-p} \sum_{j<i} r^j` for
    :math:`i \le i^*`, which is the tolerance (plus :math:`10^{-12}` for rounding).  At
    ``p = 0`` (independent M/M/1 queues, :math:`s^I_i = \lambda^i`) truncation makes
    the margin equal to minus this tolerance: the tolerance is sharp.

    References
    ----------
    Tsitsiklis and Xu (2012), the balance of positions at or above level i; the lower
    bound as a consequence is the book's (steady-state chapter, suggested by the
    referee's report).
    """
    from ..exact import ExactResult

    if not isinstance(result, ExactResult):
        raise ValueError("result must be an ExactResult from qtheory.exact_stationary, "
                         f"got {type(result).__name__}")
    lam, p, K = float(result.lam), float(result.p), int(result.max_queue)
    es = np.asarray(result.s, dtype=np.float64)[1 : K + 1]
    if p == 0.0:
        fluid = lam ** np.arange(1, K + 1, dtype=np.float64)
        top = K
    else:
        sI = invariant_state(lam, p)
        fluid = np.zeros(K)
        m = min(K, sI.size - 1)
        fluid[:m] = sI[1 : m + 1]
        top = sI.size - 1
    rounding = 1e-12
    tol = np.full(K, rounding)
    if top >= 1:
        delta = K * int(result.n_states) * float(result.residual)
        r = lam / (1.0 - p)
        i = np.arange(1, K + 1)
        geo = np.cumsum(np.concatenate([[1.0], np.full(K - 1, r)]).cumprod())  # sum_{j<i} r^j
        below = i <= top
        tol[below] += (float(result.blocked_rate) + delta) / (1.0 - p) * geo[below]
    return LowerBoundCheck(lam, p, int(result.n_stations), K,
                           np.arange(1, K + 1, dtype=np.int64), es, fluid, es - fluid, tol)
