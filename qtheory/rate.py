r"""How fast the stationary laws concentrate: the book's finite-N rate and its witnesses.

The interchange of limits (Tsitsiklis and Xu 2012, Theorem 3.7; the book's steady-state
chapter) says that the stationary occupancy vector :math:`s^N` of the N-station system
converges to the invariant state :math:`s^I`.  The book's chapter ``book/rate.md``
proves a rate for every N: with :math:`i^*` the top level of :math:`s^I`,
:math:`r = \lambda/(1-p)`, :math:`\delta = p - \lambda s^I_{i^*} \ge 0` and
:math:`x_i = s^N_i - s^I_i`, the *energy identity*

.. math::

    (1-p)\sum_{i=1}^{n-1} r^{-i} E[x_i^2] + (1-p) r^{-n} E[v_n s_n]
    + \delta r^{-(i^*+1)} E[W] + p\sum_{i=i^*+2}^{n} r^{-i} E[v_i]
    + p\sum_{i=1}^{i^*} r^{-i} v^I_i P(M < i)
    = \frac{\lambda}{N} E\Bigl[\sum_{i=1}^{\min(Q+1, n)} r^{-i}\Bigr]

holds for every :math:`n \ge i^*+1` (:math:`v_i` tail sums, :math:`W = v_{i^*+1}` the mass
above the fluid top level, :math:`M` the longest queue, :math:`Q` the queue at one
station).  Every term on the left is non-negative and the right side is at most
:math:`\lambda T_n/N`, :math:`T_n = \sum_{i=1}^n r^{-i}`, which gives

.. math:: E\|s^N - s^I\|_1 \le \frac{C_1}{\sqrt N} + \frac{C_2}{N}

with explicit constants (:func:`rate_constants`), the mass above the top of order
:math:`1/N` when the top level is not critical (:math:`\delta > 0`) and
:math:`N^{-1/2}` when it is, and the excess of the mean queue likewise (all upper
bounds).

Lower bounds (:func:`rate_lower_bound`; the appendix ``book/lemmas-rate.md``, theorem
``rate-thm-lower``) come from the top identity
:math:`E[W(p - \lambda s_{i^*} + (1-p)s_{i^*+1})] = \lambda E[s_{i^*}]/N`:
:math:`E W^N \ge \lambda s^I_{i^*}/N` always, and at a critical top
:math:`E\|s^N - s^I\|_1^2 \ge p/((1-p+\lambda)N)`.  Below a non-critical top the
generator applied to :math:`u_iu_j` gives, for every N, the Lyapunov equation of the
linear-noise covariance with an explicit remainder (:func:`covariance_limit`,
proposition ``rate-prop-covariance``).  Moments of order three and four
(:func:`quartic_bounds`, theorem ``rate-thm-quartic``), from the generator applied to
the square of the energy and to :math:`W^3`, make that remainder :math:`O(N^{-1/2})`
and the order :math:`N^{-1/2}` of the distance exact, at critical tops too
(corollary ``rate-cor-sharp``).

The module also computes the constants of a first, weaker route (Perron weights and a
smoothed :math:`\ell_1` norm; constants of order :math:`1/\mu`, :math:`\mu` the fluid
relaxation rate).  The witnesses the chapter compares the bound with (exact and
simulated rows, fitted exponents) are the book's: :mod:`qtheory.book.witnesses`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

from ._validation import (check_flag, check_lam, check_n_stations, check_p,
                          check_positive_int, check_real, check_seed, real_array)
from ._linear_noise import top_is_critical
from .invariant import invariant_state, invariant_tail_sums

__all__ = ["CovarianceLimit", "QuarticBounds", "RateConstants", "RateLowerBound",
           "covariance_limit", "quartic_bounds", "rate_constants", "rate_lower_bound"]

# Largest top level for which the Perron-route constants are computed (a dense
# eigenvector of a tridiagonal matrix of this order takes well under a second).
_PERRON_MAX_LEVELS = 5000


def _powers(r, lo, hi):
    """r**i for i = lo..hi (float64 array); r > 0 finite."""
    if hi < lo:
        return np.zeros(0)
    i = np.arange(lo, hi + 1, dtype=np.float64)
    return np.exp(i * math.log(r))


def _as_n(n_stations):
    """n_stations as a float array (scalar or array), each an integer >= 1."""
    arr = np.asarray(n_stations)
    if arr.ndim == 0:
        return _n_float(check_n_stations(n_stations)), True
    flat = [_n_float(check_n_stations(int(v) if isinstance(v, np.integer) else v,
                                      "n_stations"))
            for v in arr.ravel().tolist()]
    return np.array(flat, dtype=np.float64).reshape(arr.shape), False


def _n_float(n):
    """An integer N >= 1 as a float; beyond the float range, inf (the N-bounds are then 0)."""
    try:
        return float(n)
    except OverflowError:
        return math.inf


def _out(x, scalar):
    return float(x) if scalar else x


@dataclass(frozen=True)
class RateConstants:
    r"""Constants of the proved finite-N rate at one :math:`(\lambda, p)`.

    All bounds hold for every number of stations :math:`N \ge 1` under the stationary
    law; they are the statements of the chapter ``book/rate.md`` (theorem
    ``rate-thm-rate``, corollaries ``rate-cor-light`` and ``rate-cor-top``, proposition
    ``rate-prop-perron``).

    Attributes
    ----------
    lam, p : float
        The inputs (``0 <= lam < 1``, ``0 < p <= 1``).
    top_level : int
        :math:`i^*`, the top level of :math:`s^I` (0 when :math:`\lambda \le p`).
    r : float
        :math:`\lambda/(1-p)` (``inf`` for ``p = 1``).
    delta : float
        :math:`\delta = p - \lambda s^I_{i^*} \ge 0` (with :math:`s^I_0 = 1`), the central
        capacity left after the arrivals that climb above the top level; 0 at a critical
        top level.
    critical : bool
        True when :math:`\delta = 0` to rounding (tolerance
        :math:`64\,\varepsilon\max(p, \lambda r^{i^*})`, as in
        :func:`qtheory.relaxation_rate`).
    invariant_state : ndarray of float64, shape (i* + 1,)
        :math:`s^I`.
    weights : ndarray of float64, shape (i* + 3,)
        :math:`r^{-i}`, i = 0..i*+2, the weights of the energy (empty for ``p = 1``).
    c1, c2 : float
        :math:`E\|s^N - s^I\|_1 \le c_1 N^{-1/2} + c_2 N^{-1}` (levels 1..i*+2 of the
        energy identity; every case with ``0 < lam`` and ``p < 1``; ``inf`` for
        ``p = 1``): :math:`c_1 = \sqrt{\lambda \mathcal T^+_{i^*+1} \mathcal T_{i^*+2}/(1-p)}`,
        :math:`c_2 = \lambda r^{i^*+2} \mathcal T_{i^*+2}/p`, with
        :math:`\mathcal T^+_m = \sum_{i=1}^m r^i`, :math:`\mathcal T_n = \sum_{i=1}^n r^{-i}`.
    c1_top, c2_top : float
        The same with levels 1..i*+1 (needs :math:`\delta > 0`; ``inf`` when critical):
        :math:`c_1 = \sqrt{\lambda \mathcal T^+_{i^*} \mathcal T_{i^*+1}/(1-p)}`,
        :math:`c_2 = \lambda r^{i^*+1} \mathcal T_{i^*+1}/\delta`.  For :math:`\lambda < p`:
        ``c1_top = 0``, ``c2_top`` :math:`= \lambda/(p-\lambda)` (light traffic).
    energy_c : float
        :math:`\sum_{i=1}^{i^*+1} r^{-i} E[(s^N_i - s^I_i)^2] \le` ``energy_c`` / N,
        ``energy_c`` :math:`= \lambda T_{i^*+2}/(1-p)`.
    top_mass_c : float
        Non-critical: :math:`E W^N \le` ``top_mass_c`` / N with
        :math:`W = \sum_{j > i^*} s_j`; ``inf`` when critical.
    top_sq_c, tail_c : float
        Every case: :math:`E[(s^N_{i^*+1})^2] \le` ``top_sq_c`` / N and
        :math:`E v^N_{i^*+2} \le` ``tail_c`` / N, hence
        :math:`E W^N \le \sqrt{\text{top\_sq\_c}/N} + \text{tail\_c}/N`.
    longest_c : ndarray of float64, shape (i*,)
        :math:`P(M^N < i) \le` ``longest_c[i-1]`` / N for :math:`1 \le i \le i^*`
        (:math:`M^N` the longest queue).
    excess_c : float
        :math:`E v^N_1 - v^I_1 \le` ``excess_c`` / N + (bound on :math:`E W^N`).
    relaxation_rate : float
        :func:`qtheory.relaxation_rate` (for comparison; ``inf`` for
        :math:`\lambda < p`).
    B : ndarray of float64, shape (i*, i*)
        The Perron route: the matrix of the drift of the tail sums
        :math:`u_i = v_i - v^I_i` on levels 1..i*.
    y : ndarray of float64, shape (i*,)
        Its left Perron vector (positive, summing to 1): :math:`y^\top B = -\mu_B y^\top`.
    mu : float
        :math:`\mu_B`, equal to ``relaxation_rate`` unless the top level is critical (then
        :func:`qtheory.relaxation_rate` reports the slower regime with top i*+1 and
        ``mu`` is larger).  ``inf`` when i* = 0; NaN beyond 5000 levels (not computed).
    c1_perron, c2_perron : float
        Proposition ``rate-prop-perron``:
        :math:`E\|s^N - s^I\|_1 \le c_1 N^{-1/2} + c_2 E W^N` with
        :math:`c_1 = 2\sqrt{(1+\lambda)\|y\|_1 \sum_i y_i |B_{ii}|}/(\mu_B \min_i y_i)` and
        :math:`c_2 = 2 + 2\|y\|_1/\min_i y_i`.
    c1_l2, c2_l2 : float
        The quadratic Perron variant (exercise ``rate-ex-l2``):
        :math:`E\|s^N - s^I\|_1 \le c_1 N^{-1/2} + c_2 \|W^N\|_2 + 2 E W^N`.

    References
    ----------
    The book's chapter ``book/rate.md``; Tsitsiklis and Xu (2012), Section 3 (the model and
    :math:`s^I`).
    """

    lam: float
    p: float
    top_level: int
    r: float
    delta: float
    critical: bool
    invariant_state: np.ndarray = field(repr=False)
    weights: np.ndarray = field(repr=False)
    c1: float
    c2: float
    c1_top: float
    c2_top: float
    energy_c: float
    top_mass_c: float
    top_sq_c: float
    tail_c: float
    longest_c: np.ndarray = field(repr=False)
    excess_c: float
    relaxation_rate: float
    B: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    mu: float
    c1_perron: float
    c2_perron: float
    c1_l2: float
    c2_l2: float

    def distance_bound(self, n_stations):
        r"""The proved bound on :math:`E\|s^N - s^I\|_1` (the better of the two forms).

        Parameters
        ----------
        n_stations : int or array_like of int
            N >= 1.

        Returns
        -------
        float or ndarray of float64 (the shape of ``n_stations``)
            :math:`\min(c_1 N^{-1/2} + c_2/N,\; c^{top}_1 N^{-1/2} + c^{top}_2/N)`, jobs
            per station.

        Raises
        ------
        ValueError
            If an entry of ``n_stations`` is not an integer >= 1.
        """
        n, scalar = _as_n(n_stations)
        if self.lam == 0.0:
            return _out(np.zeros_like(np.asarray(n, dtype=float)), scalar)
        with np.errstate(invalid="ignore"):
            a = self.c1 / np.sqrt(n) + self.c2 / n
            b = self.c1_top / np.sqrt(n) + self.c2_top / n
        return _out(np.fmin(a, b), scalar)

    def top_mass_bound(self, n_stations):
        r"""The proved bound on the mass above the top, :math:`E W^N`.

        Parameters
        ----------
        n_stations : int or array_like of int
            N >= 1.

        Returns
        -------
        float or ndarray of float64
            :math:`\min(\text{top\_mass\_c}/N,\ \sqrt{\text{top\_sq\_c}/N} +
            \text{tail\_c}/N)` (jobs per station).

        Raises
        ------
        ValueError
            If an entry of ``n_stations`` is not an integer >= 1.
        """
        n, scalar = _as_n(n_stations)
        return _out(self._top_mass(n), scalar)

    def _top_mass(self, n):
        if self.lam == 0.0:
            return np.zeros_like(np.asarray(n, dtype=float))
        return np.fmin(self.top_mass_c / n, np.sqrt(self.top_sq_c / n) + self.tail_c / n)

    def excess_bound(self, n_stations):
        r"""The proved bound on the excess of the mean queue, :math:`E v^N_1 - v^I_1`.

        Parameters
        ----------
        n_stations : int or array_like of int
            N >= 1.

        Returns
        -------
        float or ndarray of float64
            ``excess_c / N + top_mass_bound(N)`` (jobs per station).  The excess is also
            at least 0 for every N (the steady-state chapter's lower bound).

        Raises
        ------
        ValueError
            If an entry of ``n_stations`` is not an integer >= 1.
        """
        n, scalar = _as_n(n_stations)
        return _out(self.excess_c / n + self._top_mass(n), scalar)

    def _need_perron(self):
        if not np.isfinite(self.mu):
            raise ValueError(
                "the Perron-route constants are not available here: "
                + ("i* = 0 (lam <= p), there is no level below the top"
                   if self.top_level == 0 else
                   f"i* = {self.top_level} > {_PERRON_MAX_LEVELS} levels (not computed)"))

    def perron_bound(self, n_stations, top_mass=None):
        r"""Proposition ``rate-prop-perron``: :math:`c_1 N^{-1/2} + c_2 E W^N`.

        Parameters
        ----------
        n_stations : int or array_like of int
            N >= 1.
        top_mass : float or array_like of float, optional
            :math:`E W^N` (measured, jobs per station, >= 0); default: the proved bound
            :meth:`top_mass_bound`.

        Returns
        -------
        float or ndarray of float64

        Raises
        ------
        ValueError
            If ``n_stations`` is invalid, ``top_mass`` negative or not finite, or the
            constants are not available (i* = 0, or more than 5000 levels).
        """
        self._need_perron()
        n, scalar = _as_n(n_stations)
        w = self._top_mass(n) if top_mass is None else _nonneg(top_mass, "top_mass")
        return _out(self.c1_perron / np.sqrt(n) + self.c2_perron * w, scalar)

    def l2_bound(self, n_stations, top_mass, top_mass_rms):
        r"""The quadratic Perron variant: :math:`c_1 N^{-1/2} + c_2\|W\|_2 + 2 E W`.

        Parameters
        ----------
        n_stations : int or array_like of int
            N >= 1.
        top_mass, top_mass_rms : float or array_like of float
            :math:`E W^N` and :math:`\sqrt{E (W^N)^2}` (jobs per station, >= 0).

        Returns
        -------
        float or ndarray of float64

        Raises
        ------
        ValueError
            As for :meth:`perron_bound`.
        """
        self._need_perron()
        n, scalar = _as_n(n_stations)
        w = _nonneg(top_mass, "top_mass")
        w2 = _nonneg(top_mass_rms, "top_mass_rms")
        return _out(self.c1_l2 / np.sqrt(n) + self.c2_l2 * w2 + 2.0 * w, scalar)

    def smoothing_scale(self, n_stations):
        r"""The optimal smoothing scale :math:`h^*` of the Perron route at N.

        Parameters
        ----------
        n_stations : int or array_like of int
            N >= 1.

        Returns
        -------
        float or ndarray of float64
            :math:`h^* = \sqrt{(1+\lambda)\|y\|_1 / (N \sum_i y_i |B_{ii}|)}`, the scale at
            which :math:`\varphi_h(u) = \sqrt{u^2 + h^2}` smooths :math:`|u|`.

        Raises
        ------
        ValueError
            As for :meth:`perron_bound`.
        """
        self._need_perron()
        n, scalar = _as_n(n_stations)
        b = float(np.sum(self.y * np.abs(np.diag(self.B))))
        return _out(np.sqrt((1.0 + self.lam) * float(self.y.sum()) / (n * b)), scalar)


def _nonneg(x, name):
    a = real_array(x, name)
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name} must be finite and >= 0")
    return a if a.ndim else float(a)


def _perron(lam, p, K):
    """B, its left Perron vector y (sum 1) and mu_B for the top level K >= 1."""
    from scipy.linalg import eigh_tridiagonal

    B = np.zeros((K, K))
    idx = np.arange(K)
    B[idx, idx] = -(lam + 1.0 - p)
    B[0, 0] = -(1.0 - p)
    B[idx[1:], idx[:-1]] = lam
    B[idx[:-1], idx[1:]] = 1.0 - p
    if K == 1:
        return B, np.ones(1), 1.0 - p
    # D B D^{-1} is symmetric for D = diag(r^{-i/2}); its top eigenvector z gives the left
    # Perron vector y = D z of B (B^T y = D S D^{-1} y).
    d = np.diag(B).copy()
    e = np.full(K - 1, math.sqrt(lam * (1.0 - p)))
    w, z = eigh_tridiagonal(d, e, select="i", select_range=(K - 1, K - 1))
    z = z[:, 0]
    z = z * np.sign(z[np.argmax(np.abs(z))])
    r = lam / (1.0 - p)
    y = np.abs(z) * np.exp(-0.5 * np.arange(1, K + 1) * math.log(r))
    y = y / y.sum()
    return B, y, float(-w[0])


def rate_constants(lam, p):
    r"""Constants of the proved bound on how far the stationary law is from :math:`s^I`.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1`` (jobs per mean service time).
    p : float
        Centralization fraction, ``0 < p <= 1`` (the bound needs a central server).

    Returns
    -------
    RateConstants
        The constants ``c1, c2`` (and ``c1_top, c2_top``) of
        :math:`E\|s^N - s^I\|_1 \le c_1 N^{-1/2} + c_2 N^{-1}` (jobs per station),
        those of the mass above the top level, of the longest queue and of the mean
        excess, and the ingredients and constants of the weaker Perron route
        (``B``, ``y``, ``mu``, ``c1_perron``, ``c2_perron``, ``c1_l2``, ``c2_l2``).
        Its methods evaluate the bounds at given N.

    Raises
    ------
    ValueError
        If ``lam`` is outside ``[0, 1)`` or ``p`` outside ``(0, 1]``.

    Notes
    -----
    For ``lam = 0`` every station stays empty and all bounds are 0.  For ``p = 1`` (so
    :math:`\lambda < p`) only the light-traffic form exists: ``c1_top = 0``,
    ``c2_top`` :math:`= \lambda/(1-\lambda)`, which is then the exact value of
    :math:`N E v^N_1`.  The Perron-route constants are computed for
    :math:`1 \le i^* \le 5000` (NaN otherwise).

    References
    ----------
    The book's chapter ``book/rate.md`` (theorem ``rate-thm-energy``, the energy identity;
    theorem ``rate-thm-rate``; corollaries ``rate-cor-light``, ``rate-cor-top``;
    proposition ``rate-prop-perron``).  Horn and Johnson, *Matrix Analysis*, 2nd ed.
    (2013), Ch. 8 (the Perron vector).

    Examples
    --------
    >>> rc = rate_constants(0.7, 0.2)
    >>> rc.top_level, round(rc.c1, 3), rc.distance_bound(10_000) < 0.05
    (3, 4.388, True)
    """
    lam = check_lam(lam)
    p = check_p(p)
    if p == 0.0:
        raise ValueError("p must satisfy 0 < p <= 1 (the rate needs a central server; "
                         "for p = 0 the stations are independent M/M/1 queues and the "
                         "invariant state has infinitely many levels), got 0.0")
    sI = invariant_state(lam, p)
    K = sI.size - 1
    top = float(sI[K]) if K else 1.0
    delta = p - lam * top
    critical = bool(top_is_critical(lam, p, K, top))
    delta = 0.0 if critical else max(delta, 0.0)
    inf, nan = math.inf, math.nan
    vI = invariant_tail_sums(lam, p) if K else np.zeros(1)

    def perron_fields():
        if K == 0:
            return dict(B=np.zeros((0, 0)), y=np.zeros(0), mu=inf, c1_perron=0.0,
                        c2_perron=1.0, c1_l2=0.0, c2_l2=0.0)
        if K > _PERRON_MAX_LEVELS:
            return dict(B=np.zeros((0, 0)), y=np.zeros(0), mu=nan, c1_perron=nan,
                        c2_perron=nan, c1_l2=nan, c2_l2=nan)
        B, y, mu = _perron(lam, p, K)
        ymin = float(y.min())
        bsum = float(np.sum(y * np.abs(np.diag(B))))
        c1p = 2.0 * math.sqrt((1.0 + lam) * float(y.sum()) * bsum) / (mu * ymin)
        c2p = 2.0 + 2.0 * float(y.sum()) / ymin
        r = lam / (1.0 - p)
        P = _powers(r, -K, -1)[::-1]        # r^{-i}, i = 1..K
        g = 2.0 * math.sqrt(float(np.sum(1.0 / P)))
        c1l = g * math.sqrt((1.0 + lam) * float(P.sum()) / (2.0 * mu))
        c2l = g * (1.0 - p) * math.sqrt(float(P[-1])) / mu
        return dict(B=B, y=y, mu=mu, c1_perron=c1p, c2_perron=c2p, c1_l2=c1l,
                    c2_l2=c2l)

    from .fluid import relaxation_rate
    rr = relaxation_rate(lam, p) if lam > 0 else inf
    if lam == 0.0:
        zero = dict(c1=0.0, c2=0.0, c1_top=0.0, c2_top=0.0, energy_c=0.0,
                    top_mass_c=0.0, top_sq_c=0.0, tail_c=0.0, longest_c=np.zeros(0),
                    excess_c=0.0)
        return RateConstants(lam=lam, p=p, top_level=0, r=0.0, delta=delta,
                             critical=critical, invariant_state=sI,
                             weights=np.zeros(0), relaxation_rate=rr, **zero,
                             **perron_fields())
    if p == 1.0:
        # i* = 0 and lam < 1: (p - lam) E v_1 + (1 - p) E[v_1 s_1] = lam/N exactly
        c2t = lam / (1.0 - lam)
        return RateConstants(lam=lam, p=p, top_level=0, r=inf, delta=delta,
                             critical=False, invariant_state=sI, weights=np.zeros(0),
                             c1=inf, c2=inf, c1_top=0.0, c2_top=c2t, energy_c=inf,
                             top_mass_c=c2t, top_sq_c=inf, tail_c=inf,
                             longest_c=np.zeros(0), excess_c=0.0, relaxation_rate=rr,
                             **perron_fields())
    r = lam / (1.0 - p)
    w = _powers(r, -(K + 2), 0)[::-1]              # r^{-i}, i = 0..K+2
    T1, T2 = float(w[1:K + 2].sum()), float(w[1:K + 3].sum())   # T_{K+1}, T_{K+2}
    S0 = float(_powers(r, 1, K).sum())                        # S_{K}
    S1 = S0 + r ** (K + 1)                                    # S_{K+1}
    rT1 = float(_powers(r, 0, K).sum())                       # r^{K+1} T_{K+1}
    rT2 = float(_powers(r, 0, K + 1).sum())                   # r^{K+2} T_{K+2}
    c1 = math.sqrt(lam * S1 * T2 / (1.0 - p))
    c2 = lam * rT2 / p
    if delta > 0.0:
        c1t = math.sqrt(lam * S0 * T1 / (1.0 - p))
        c2t = lam * rT1 / delta
    else:
        c1t = c2t = inf
    energy_c = lam * T2 / (1.0 - p)
    top_sq_c = lam * r ** (K + 1) * T2 / (1.0 - p)
    tail_c = lam * rT2 / p
    if K:
        ri = _powers(r, 1, K)                                  # r^i, i = 1..K
        longest_c = lam * T1 * ri / (p * vI[1:K + 1])
        inner = np.cumsum(1.0 / vI[1:K + 1])                   # sum_{j<=i} 1/v^I_j
        excess_c = lam * T1 / (1.0 - p) * float(np.sum(ri * inner))
    else:
        longest_c = np.zeros(0)
        excess_c = 0.0
    return RateConstants(
        lam=lam, p=p, top_level=K, r=r, delta=delta, critical=critical,
        invariant_state=sI, weights=w, c1=c1, c2=c2, c1_top=c1t, c2_top=c2t,
        energy_c=energy_c, top_mass_c=lam * rT1 / delta if delta > 0 else inf,
        top_sq_c=top_sq_c, tail_c=tail_c, longest_c=longest_c, excess_c=excess_c,
        relaxation_rate=rr, **perron_fields())


@dataclass(frozen=True)
class RateLowerBound:
    r"""Constants of the proved lower bounds (the book's theorem ``rate-thm-lower``).

    All bounds hold for every number of stations :math:`N \ge 1` under the stationary
    law of the N-station system.  They come from the *top identity*

    .. math::

        E\bigl[W\,(p - \lambda s_{i^*} + (1-p)s_{i^*+1})\bigr] = \frac{\lambda}{N}E[s_{i^*}],

    :math:`W = \sum_{j > i^*} s_j` the mass above the fluid top (jobs per station).

    Attributes
    ----------
    lam, p : float
        The inputs.
    top_level : int
        :math:`i^*` (0 when :math:`\lambda \le p`).
    delta : float
        :math:`\delta = p - \lambda s^I_{i^*}` (0 at a critical top, as in
        :class:`RateConstants`).
    critical : bool
        True when :math:`\delta = 0` to rounding.
    top_mass_c : float
        :math:`\lambda s^I_{i^*}` (with :math:`s^I_0 = 1`): :math:`E W^N \ge` this over N,
        hence also :math:`E\|s^N - s^I\|_1 \ge` this over N (every case).
    rms_c : float
        At a critical top, :math:`\lambda s^I_{i^*}/(1 - p + \lambda)`:
        :math:`E\|s^N - s^I\|_1^2 \ge` this over N.  NaN when the top is not critical.
    top_mass_limit : float
        :math:`\rho/(1-\rho) = \lambda s^I_{i^*}/\delta`, :math:`\rho = \lambda s^I_{i^*}/p`,
        the limit of :math:`N E W^N` when :math:`\delta > 0` and :math:`p < \lambda` (proved:
        the book's ``rate-cor-sharp``, with an error bound from
        :meth:`QuarticBounds.top_mass_limit_error`; ``inf`` at a critical top).
    """

    lam: float
    p: float
    top_level: int
    delta: float
    critical: bool
    top_mass_c: float
    rms_c: float
    top_mass_limit: float

    def top_mass_lower(self, n_stations):
        r"""Lower bound on :math:`E W^N` and on :math:`E\|s^N - s^I\|_1` (jobs per station).

        Parameters
        ----------
        n_stations : int or array of int
            N, each ``>= 1``.

        Returns
        -------
        float or ndarray
            ``top_mass_c / N``, same shape as ``n_stations``.
        """
        n, scalar = _as_n(n_stations)
        return _out(self.top_mass_c / n, scalar)

    def rms_lower(self, n_stations):
        r"""At a critical top: lower bound on :math:`(E\|s^N - s^I\|_1^2)^{1/2}`.

        Parameters
        ----------
        n_stations : int or array of int
            N, each ``>= 1``.

        Returns
        -------
        float or ndarray
            ``sqrt(rms_c / N)`` (NaN when the top level is not critical).
        """
        n, scalar = _as_n(n_stations)
        return _out(np.sqrt(self.rms_c / n), scalar)


def rate_lower_bound(lam, p):
    r"""Constants of the proved lower bounds on the distance to :math:`s^I`.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 < lam < 1``.
    p : float
        Centralization fraction, ``0 < p <= 1``.

    Returns
    -------
    RateLowerBound
        ``top_mass_c`` (:math:`N E W^N \ge \lambda s^I_{i^*}`), ``rms_c`` (at a critical
        top: :math:`N E\|s^N - s^I\|_1^2 \ge \lambda s^I_{i^*}/(1-p+\lambda)`) and
        ``top_mass_limit`` (:math:`\rho/(1-\rho)`).

    Raises
    ------
    ValueError
        If ``lam`` is outside ``(0, 1)`` or ``p`` outside ``(0, 1]``.

    References
    ----------
    The book's appendix ``book/lemmas-rate.md`` (theorem ``rate-thm-lower``, the top
    identity; proof by the generator of :math:`W^2`).

    Examples
    --------
    >>> lb = rate_lower_bound(0.9, 0.1)          # critical top: lam s^I_8 = p
    >>> lb.critical, round(lb.top_mass_c, 12), round(lb.rms_c, 6)
    (True, 0.1, 0.055556)
    """
    lam = check_lam(lam)
    p = check_p(p)
    if lam == 0.0:
        raise ValueError("lam must satisfy 0 < lam < 1 (for lam = 0 the system is empty "
                         "and there is nothing to bound from below), got 0.0")
    if p == 0.0:
        raise ValueError("p must satisfy 0 < p <= 1 (the bound uses the central server), "
                         "got 0.0")
    sI = invariant_state(lam, p)
    K = sI.size - 1
    top = float(sI[K]) if K else 1.0
    delta = p - lam * top
    critical = bool(top_is_critical(lam, p, K, top))
    delta = 0.0 if critical else max(delta, 0.0)
    c = lam * top
    return RateLowerBound(lam=lam, p=p, top_level=K, delta=delta, critical=critical,
                          top_mass_c=c,
                          rms_c=c / (1.0 - p + lam) if critical else math.nan,
                          top_mass_limit=c / delta if delta > 0 else math.inf)


@dataclass(frozen=True)
class CovarianceLimit:
    r"""The stationary Lyapunov equation of the book's ``rate-prop-covariance``.

    For :math:`\delta > 0` and every N (exact),
    :math:`B\Sigma^N_u + \Sigma^N_u B^\top + D^N + R^N = 0` with
    :math:`\Sigma^N_u = N E[u u^\top]` on levels :math:`1..i^*` (tail-sum deviations),
    :math:`D^N_{ij} = 2\lambda E[s_{\max(i,j)-1}]` and a remainder :math:`R^N` made of
    :math:`N E[u_i W]` and :math:`N E[u_i \mathbf 1\{M < j\}]`.

    Attributes
    ----------
    lam, p : float
        The inputs.
    top_level : int
        :math:`i^*`.
    B : ndarray, shape (i*, i*)
        The drift matrix of the tail-sum deviations (as :class:`RateConstants`).
    D : ndarray, shape (i*, i*)
        :math:`D_{ij} = 2\lambda s^I_{\max(i,j)-1}`.
    sigma_u : ndarray, shape (i*, i*)
        :math:`\Sigma_u`, the solution of :math:`B\Sigma_u + \Sigma_u B^\top + D = 0`.
    sigma : ndarray, shape (i*, i*)
        :math:`T^{-1}\Sigma_u T^{-\top}` in s-coordinates (:math:`u = Tx`); equal to
        ``qtheory.fluctuation_covariance(lam, p)``.
    kappa : float
        :math:`\|\mathcal L_B^{-1}\|` for :math:`\mathcal L_B X = BX + XB^\top` in the
        Frobenius norm, :math:`1/\sigma_{\min}(I \otimes B + B \otimes I)`.
    energy_e : float
        :math:`e = \lambda \max_{k \le i^*} r^k\, T_{i^*+1}/(1-p)`, a bound on
        :math:`N\sum_{k \le i^*} E[x_k^2]` for every N (theorem ``rate-thm-energy``).
    """

    lam: float
    p: float
    top_level: int
    B: np.ndarray = field(repr=False)
    D: np.ndarray = field(repr=False)
    sigma_u: np.ndarray = field(repr=False)
    sigma: np.ndarray = field(repr=False)
    kappa: float
    energy_e: float

    def remainder_bound(self, below_top, top_sq):
        r"""Entrywise bound on :math:`|R^N_{ij}|`, given the two quantities it needs.

        Parameters
        ----------
        below_top : float
            :math:`m = N P(M^N < i^*)` (``>= 0``).
        top_sq : float
            :math:`w = N E[(W^N)^2]` (``>= 0``).

        Returns
        -------
        ndarray, shape (i*, i*)
            :math:`2p(v^I_1 + i^*)m + (1-p)(\mathbf 1\{i = i^*\} + \mathbf 1\{j = i^*\})
            \sqrt{(2i^*e + 2w)w}`.
        """
        m = _nonneg(below_top, "below_top")
        w = _nonneg(top_sq, "top_sq")
        K = self.top_level
        v1 = float(invariant_tail_sums(self.lam, self.p)[1])
        tip = np.zeros(K)
        tip[-1] = 1.0
        cross = math.sqrt((2 * K * self.energy_e + 2 * w) * w)
        return (2 * self.p * (v1 + K) * m
                + (1 - self.p) * np.add.outer(tip, tip) * cross)

    def error_bound(self, n_stations, below_top, top_sq):
        r"""Bound on :math:`\|N E[x x^\top] - \Sigma\|_F` at one N.

        Parameters
        ----------
        n_stations : int
            N ``>= 1``.
        below_top : float
            :math:`m = N P(M^N < i^*)`.
        top_sq : float
            :math:`w = N E[(W^N)^2]`.

        Returns
        -------
        float
            :math:`4\kappa(\|D^N - D\|_F + \|R\|_F) + 4\sqrt{i^*}\sqrt{(2i^*e + 2w)w} + w`,
            with :math:`|D^N_{ij} - D_{ij}| \le \frac{2\lambda p\, m}{(1-p)N}
            \sum_{l \le k} r^{k-l}`, :math:`k = \max(i,j) - 1`.  It tends to 0 when
            :math:`m \to 0` and :math:`w \to 0` (conditions (C1), (C2) of the book).
        """
        N = float(check_n_stations(n_stations))
        m = _nonneg(below_top, "below_top")
        w = _nonneg(top_sq, "top_sq")
        K = self.top_level
        r = self.lam / (1.0 - self.p)
        geo = np.array([float(_powers(r, 0, k - 1).sum()) if k else 0.0
                        for k in range(K)])               # sum_{l<=k} r^{k-l}, k = 0..K-1
        idx = np.maximum.outer(np.arange(1, K + 1), np.arange(1, K + 1)) - 1
        dD = 2 * self.lam * self.p * m / ((1 - self.p) * N) * geo[idx]
        R = self.remainder_bound(m, w)
        cross = math.sqrt((2 * K * self.energy_e + 2 * w) * w)
        return float(4 * self.kappa * (np.linalg.norm(dD) + np.linalg.norm(R))
                     + 4 * math.sqrt(K) * cross + w)

    def proved_error_bound(self, n_stations):
        r"""Unconditional bound on :math:`\|N E[x x^\top] - \Sigma\|_F` at one N.

        Parameters
        ----------
        n_stations : int
            N ``>= 1``.

        Returns
        -------
        float
            :meth:`error_bound` with :math:`m` and :math:`w` replaced by their proved
            bounds (:meth:`QuarticBounds.below_top_bound`,
            :meth:`QuarticBounds.top_sq_bound`; theorem ``rate-thm-quartic``); of order
            :math:`N^{-1/2}`.
        """
        qb = quartic_bounds(self.lam, self.p)
        return self.error_bound(n_stations, qb.below_top_bound(n_stations),
                                qb.top_sq_bound(n_stations))


def covariance_limit(lam, p):
    r"""The covariance limit of the stationary fluctuations below a non-critical top.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 < lam < 1``.
    p : float
        Centralization fraction, ``0 < p < lam`` with a non-critical top level
        (:math:`\delta = p - \lambda s^I_{i^*} > 0`).

    Returns
    -------
    CovarianceLimit
        :math:`B`, :math:`D`, :math:`\Sigma_u`, :math:`\Sigma` (s-coordinates),
        :math:`\kappa` and :math:`e`; :meth:`CovarianceLimit.error_bound` evaluates the
        bound on :math:`\|N E[xx^\top] - \Sigma\|_F`.

    Raises
    ------
    ValueError
        If ``lam`` is outside ``(0, 1)``, ``p`` outside ``(0, lam)``, or the top level is
        critical (``delta = 0``) or above 60 levels (dense Kronecker solve).

    References
    ----------
    The book's appendix ``book/lemmas-rate.md`` (proposition ``rate-prop-covariance``).

    Examples
    --------
    >>> import qtheory as qt
    >>> cl = covariance_limit(0.7, 0.2)
    >>> bool(np.allclose(cl.sigma, qt.fluctuation_covariance(0.7, 0.2)))
    True
    """
    lam = check_lam(lam)
    p = check_p(p)
    if not 0.0 < p < lam:
        raise ValueError(f"p must satisfy 0 < p < lam (a populated top level), got p={p}, "
                         f"lam={lam}")
    rc = rate_constants(lam, p)
    K = rc.top_level
    if rc.critical or rc.delta <= 0.0:
        raise ValueError(f"p: the top level is critical at lam={lam}, p={p} (delta = 0); "
                         f"the covariance limit needs delta > 0")
    if K > 60:
        raise ValueError(f"lam: the top level {K} exceeds 60 (dense Kronecker solve)")
    B = rc.B
    sI = rc.invariant_state
    i = np.arange(1, K + 1)
    D = 2 * lam * sI[np.maximum.outer(i, i) - 1]
    I = np.eye(K)
    Lop = np.kron(I, B) + np.kron(B, I)        # vec(BX + XB^T) for row-major vec
    sig_u = np.linalg.solve(Lop, -D.ravel()).reshape(K, K)
    sig_u = 0.5 * (sig_u + sig_u.T)
    Ti = np.eye(K) - np.eye(K, k=1)             # x = T^{-1} u (u_{i*+1} = W dropped)
    sigma = Ti @ sig_u @ Ti.T
    kappa = 1.0 / float(np.linalg.svd(Lop, compute_uv=False).min())
    Kr = max(r ** k for k in (1, K)) if (r := lam / (1 - p)) else 0.0
    T1 = float(_powers(r, -(K + 1), -1).sum())
    return CovarianceLimit(lam=lam, p=p, top_level=K, B=B, D=D, sigma_u=sig_u,
                           sigma=sigma, kappa=kappa,
                           energy_e=lam * Kr * T1 / (1.0 - p))


@dataclass(frozen=True)
class QuarticBounds:
    r"""Constants of the moment bounds of order three and four (``rate-thm-quartic``).

    For :math:`0 < \lambda < 1`, :math:`0 < p < 1`, a level :math:`n \ge i^*+1` with
    :math:`\theta_n > 0` (:math:`\theta_{i^*+1} = \delta`, :math:`\theta_n = p` for
    :math:`n \ge i^*+2`) and every :math:`N \ge 1`, the generator applied to the square
    of the energy :math:`F = \sum_{i \le n} r^{-i}u_i^2` gives, with
    :math:`X = \sum_{i < n} r^{-i}x_i^2` (:math:`x_i = s^N_i - s^I_i`) and the tail
    :math:`v_n = \sum_{j \ge n} s^N_j` (jobs per station),

    .. math::

        E[X^2] \le \frac{K_X(N)}{N^2}, \qquad E[v_n^3] \le \frac{K_3(N)}{N^2},

    .. math::

        P(M < i) \le \frac{K_X(N)}{\xi_i^2 N^2} \quad (1 \le i \le i^*),

    and, when :math:`\delta > 0` and :math:`n = i^*+1` (so :math:`v_n = W`), the cubic
    identity of the top gives :math:`N E[W^2] \le K_W(N)/N`.  :math:`K_X, K_3, K_W`
    decrease in N to finite limits.  The lower bounds of order :math:`N^{-1/2}`
    (``rate-cor-sharp``) follow.

    Attributes
    ----------
    lam, p : float
        The inputs.
    top_level : int
        :math:`i^*`.
    level : int
        :math:`n` (:math:`i^*+1` when the top is not critical, :math:`i^*+2` when it is,
        unless given).
    theta : float
        :math:`\theta_n`: :math:`\delta` for :math:`n = i^*+1`, :math:`p` otherwise.
    r : float
        :math:`\lambda/(1-p)`.
    delta : float
        :math:`\delta = p - \lambda s^I_{i^*}` (0 at a critical top).
    critical : bool
        True when :math:`\delta = 0` to rounding.
    T : float
        :math:`T_n = \sum_{i=1}^{n} r^{-i}`.
    c_F : float
        :math:`c_F = \sum_{j=0}^{n-1} (n-j) r^j`: :math:`F \le c_F(X + r^{-n}v_n^2)`.
    kappa : float
        :math:`\kappa = \frac52(1+\lambda)T_n c_F`.
    xi : ndarray, shape (i*,)
        :math:`\xi_i = \sum_{j=i}^{i^*} r^{-j}(s^I_j)^2`: :math:`X \ge \xi_i` on
        :math:`\{M < i\}`.
    tail_sums : ndarray, shape (i*,)
        :math:`v^I_i`, :math:`i = 1..i^*`.
    longest_c : ndarray, shape (i*,)
        The constants of ``rate-cor-top``: :math:`P(M < i) \le` ``longest_c[i-1]`` / N.
    """

    lam: float
    p: float
    top_level: int
    level: int
    theta: float
    r: float
    delta: float
    critical: bool
    T: float
    c_F: float
    kappa: float
    xi: np.ndarray = field(repr=False)
    tail_sums: np.ndarray = field(repr=False)
    longest_c: np.ndarray = field(repr=False)

    def _J(self, n):
        lam, p, r, th, T, k = self.lam, self.p, self.r, self.theta, self.T, self.kappa
        rn = r ** self.level
        return (k * lam * T / (1 - p)
                + (2 * k ** 2 * lam * rn * T / th ** 2 + (1 + lam) * T ** 2 / 2) / n)

    def _KX(self, n):
        return 2 * (1 + self.r) * self._J(n) / (1 - self.p)

    def _K3(self, n):
        return 2 * self.r ** (2 * self.level) * self._J(n) / self.theta

    def _need_top(self, what):
        if self.critical or self.level != self.top_level + 1 or self.top_level == 0:
            raise ValueError(f"p: {what} needs a non-critical top (delta > 0), i* >= 1 and "
                             f"level = i* + 1; got delta={self.delta}, i*={self.top_level}, "
                             f"level={self.level}")

    def _KW(self, n):
        lam, r, d, K, T = self.lam, self.r, self.delta, self.top_level, self.T
        return (2 / d) * ((1 + lam) * lam * r ** (K + 1) * T / d
                          + lam * self._K3(n) ** (2 / 3)
                          * (2 * lam * r ** (2 * K) * self._KX(n) / d) ** (1 / 3))

    def fourth_moment_bound(self, n_stations):
        r"""Bound on :math:`E[X^2]`, :math:`X = \sum_{i < n} r^{-i}(s^N_i - s^I_i)^2`.

        Parameters
        ----------
        n_stations : int or array of int
            N, each ``>= 1``.

        Returns
        -------
        float or ndarray
            :math:`K_X(N)/N^2` (jobs per station, to the fourth power); same shape as
            ``n_stations``.  :math:`E[(s^N_i - s^I_i)^4] \le r^{2i}` times this
            (:math:`i < n`).
        """
        n, scalar = _as_n(n_stations)
        return _out(self._KX(n) / n ** 2, scalar)

    def tail_cube_bound(self, n_stations):
        r"""Bound on :math:`E[v_n^3]` (for :math:`n = i^*+1`, the mass above the top cubed).

        Parameters
        ----------
        n_stations : int or array of int
            N, each ``>= 1``.

        Returns
        -------
        float or ndarray
            :math:`K_3(N)/N^2`, same shape as ``n_stations``.
        """
        n, scalar = _as_n(n_stations)
        return _out(self._K3(n) / n ** 2, scalar)

    def top_sq_bound(self, n_stations):
        r"""Bound on :math:`w = N E[(W^N)^2]` (condition (C1)): :math:`K_W(N)/N`.

        Parameters
        ----------
        n_stations : int or array of int
            N, each ``>= 1``.

        Returns
        -------
        float or ndarray
            Same shape as ``n_stations``; tends to 0 like :math:`1/N`.

        Raises
        ------
        ValueError
            If the top is critical, :math:`i^* = 0`, or ``level`` is not :math:`i^*+1`.
        """
        self._need_top("top_sq_bound")
        n, scalar = _as_n(n_stations)
        return _out(self._KW(n) / n, scalar)

    def longest_bound(self, n_stations):
        r"""Bounds on :math:`P(M^N < i)`, :math:`i = 1..i^*`, at one N.

        Parameters
        ----------
        n_stations : int
            N ``>= 1``.

        Returns
        -------
        ndarray, shape (i*,)
            :math:`\min\bigl(K_X(N)/(\xi_i^2N^2),\ c_i/N\bigr)`, :math:`c_i` the constant
            of ``rate-cor-top`` (probabilities).
        """
        return self._longest(_n_float(check_n_stations(n_stations)))

    def _longest(self, n):
        return np.minimum(self._KX(n) / (self.xi ** 2 * n ** 2), self.longest_c / n)

    def below_top_bound(self, n_stations):
        r"""Bound on :math:`m = N P(M^N < i^*)` (condition (C2)).

        Parameters
        ----------
        n_stations : int
            N ``>= 1``.

        Returns
        -------
        float
            N times the last entry of :meth:`longest_bound`; tends to 0 like :math:`1/N`.

        Raises
        ------
        ValueError
            If :math:`i^* = 0`.
        """
        if self.top_level == 0:
            raise ValueError("p: below_top_bound needs a populated top level (p < lam)")
        n = _n_float(check_n_stations(n_stations))
        return float(n * self._longest(n)[-1])

    def _eps(self, n):
        lam, p, r, K, T = self.lam, self.p, self.r, self.top_level, self.T
        pm = self._longest(n)
        ri = _powers(r, -K, -1)[::-1]                        # r^{-i}, i = 1..K
        idle = p * float(np.sum(ri * self.tail_sums * pm)) * n
        cross = lam * r ** -(K + 1) * math.sqrt(self._KW(n) * lam * r ** K * T / (1 - p))
        return (idle + cross / math.sqrt(n)) / (1 - p)

    def l2_lower(self, n_stations):
        r"""Below a non-critical top: lower bound on :math:`E\sum_{i \le i^*}(s^N_i - s^I_i)^2`.

        Parameters
        ----------
        n_stations : int
            N ``>= 1``.

        Returns
        -------
        float
            :math:`\min(r, r^{i^*})\,(1 - \varepsilon_N)^+/N` (jobs per station, squared),
            with :math:`\varepsilon_N = O(N^{-1/2})` of ``rate-cor-sharp``.

        Raises
        ------
        ValueError
            As :meth:`top_sq_bound`.
        """
        self._need_top("l2_lower")
        n = _n_float(check_n_stations(n_stations))
        return min(self.r, self.r ** self.top_level) * max(1.0 - self._eps(n), 0.0) / n

    def l1_lower(self, n_stations):
        r"""Lower bound on :math:`E\|s^N - s^I\|_1` at one N (order :math:`N^{-1/2}`).

        Parameters
        ----------
        n_stations : int
            N ``>= 1``.

        Returns
        -------
        float
            Non-critical top (``level`` :math:`= i^*+1`):
            :math:`\sqrt{\min(r, r^{i^*})}\,((1-\varepsilon_N)^+)^{3/2}/\sqrt{K_X(N)N}`.
            Critical top (``level`` :math:`= i^*+2`): :math:`y^3/\sqrt{(i^*+1)^3
            \sum_{i \le i^*+1} r^{2i}K_X(N)/N^2}` with :math:`y` the positive root of
            :math:`c_0(y^2 + \beta y) = p/N`, :math:`c_0 = \max(1-p, \lambda)`,
            :math:`\beta = (K_3(N)/N^2)^{1/3}` (jobs per station).

        Raises
        ------
        ValueError
            If the top is critical and ``level`` is not :math:`i^*+2`, or as
            :meth:`top_sq_bound` otherwise.
        """
        n = _n_float(check_n_stations(n_stations))
        K, r = self.top_level, self.r
        if self.critical:
            if self.level != K + 2:
                raise ValueError(f"level: the critical lower bound uses level = i* + 2 = "
                                 f"{K + 2}, got {self.level}")
            c0 = max(1.0 - self.p, self.lam)
            beta = (self._K3(n) / n ** 2) ** (1 / 3)
            y = 0.5 * (-beta + math.sqrt(beta ** 2 + 4 * self.p / (c0 * n)))
            d4 = (K + 1) ** 3 * float(_powers(r, 2, 2 * (K + 1))[::2].sum()) \
                * self._KX(n) / n ** 2
            return y ** 3 / math.sqrt(d4)
        self._need_top("l1_lower")
        m = min(r, r ** K)
        return math.sqrt(m) * max(1.0 - self._eps(n), 0.0) ** 1.5 / math.sqrt(self._KX(n) * n)

    def l1_lower_limit(self):
        r"""The limit of :math:`\sqrt N` times :meth:`l1_lower` as :math:`N \to \infty`.

        Returns
        -------
        float
            A lower bound on :math:`\liminf_N \sqrt N E\|s^N - s^I\|_1` (jobs per station
            times :math:`\sqrt N`): :math:`\sqrt{\min(r, r^{i^*})/K_X(\infty)}` below a
            non-critical top, :math:`(p/c_0)^{3/2}/\sqrt{(i^*+1)^3K_X(\infty)\sum_{i \le
            i^*+1}r^{2i}}` at a critical one.

        Raises
        ------
        ValueError
            As :meth:`l1_lower`.
        """
        K, r, KX = self.top_level, self.r, self._KX(math.inf)
        if self.critical:
            if self.level != K + 2:
                raise ValueError(f"level: the critical lower bound uses level = i* + 2 = "
                                 f"{K + 2}, got {self.level}")
            c0 = max(1.0 - self.p, self.lam)
            s = float(_powers(r, 2, 2 * (K + 1))[::2].sum())
            return (self.p / c0) ** 1.5 / math.sqrt((K + 1) ** 3 * KX * s)
        self._need_top("l1_lower_limit")
        return math.sqrt(min(r, r ** K) / KX)

    def top_mass_limit_error(self, n_stations):
        r"""Bound on :math:`|N E W^N - \rho/(1-\rho)|`, :math:`\rho = \lambda s^I_{i^*}/p`.

        Parameters
        ----------
        n_stations : int
            N ``>= 1``.

        Returns
        -------
        float
            :math:`\frac1\delta\bigl(\lambda \bar d + \lambda\sqrt{K_W\lambda r^{i^*}T/(1-p)}
            /\sqrt N + (1-p)K_W/N\bigr)`, :math:`\bar d = \frac{p}{1-p}\sum_{j \le i^*}
            r^{i^*-j}\pi_j`, :math:`\pi_j` from :meth:`longest_bound`; order
            :math:`N^{-1/2}`.

        Raises
        ------
        ValueError
            As :meth:`top_sq_bound`.
        """
        self._need_top("top_mass_limit_error")
        n = _n_float(check_n_stations(n_stations))
        lam, p, r, K, T = self.lam, self.p, self.r, self.top_level, self.T
        pm = self._longest(n)
        dbar = p / (1 - p) * float(np.sum(_powers(r, 0, K - 1)[::-1] * pm))
        KW = self._KW(n)
        return (lam * dbar + lam * math.sqrt(KW * lam * r ** K * T / (1 - p) / n)
                + (1 - p) * KW / n) / self.delta


def quartic_bounds(lam, p, level=None):
    r"""Constants of the proved moment bounds of order three and four.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 < lam < 1``.
    p : float
        Centralization fraction, ``0 < p < 1``.
    level : int, optional
        The level :math:`n` of the energy, ``>= i* + 1``, and ``>= i* + 2`` at a
        critical top.  Default: :math:`i^*+1` when the top is not critical (the bounds on
        the mass above the top need it), :math:`i^*+2` when it is.

    Returns
    -------
    QuarticBounds
        Its methods evaluate, at given N, the bounds on :math:`E[X^2]`,
        :math:`E[v_n^3]`, :math:`N E[W^2]`, :math:`P(M < i)`, and the lower bounds of
        order :math:`N^{-1/2}` on the distance to :math:`s^I`.

    Raises
    ------
    ValueError
        If ``lam`` is outside ``(0, 1)``, ``p`` outside ``(0, 1)``, or ``level`` is below
        :math:`i^*+1` (below :math:`i^*+2` at a critical top) or above :math:`i^* + 60`.

    References
    ----------
    The book's appendix ``book/lemmas-rate.md`` (theorem ``rate-thm-quartic``,
    corollary ``rate-cor-sharp``).

    Examples
    --------
    >>> qb = quartic_bounds(0.7, 0.2)
    >>> qb.level, qb.top_sq_bound(10**6) < qb.top_sq_bound(10**3)
    (4, True)
    """
    lam = check_lam(lam)
    p = check_p(p)
    if lam == 0.0:
        raise ValueError("lam must satisfy 0 < lam < 1, got 0.0")
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must satisfy 0 < p < 1, got {p}")
    rc = rate_constants(lam, p)
    K = rc.top_level
    crit = bool(rc.critical or rc.delta <= 0.0)
    lo = K + 2 if crit else K + 1
    if level is None:
        level = lo
    level = check_positive_int(level, "level")
    if not lo <= level <= K + 60:
        raise ValueError(f"level must satisfy {lo} <= level <= {K + 60} (i* = {K}"
                         f"{', critical top' if crit else ''}), got {level}")
    n, r = level, rc.r
    theta = rc.delta if n == K + 1 else p
    T = float(_powers(r, -n, -1).sum())
    cF = float(np.sum((n - np.arange(n)) * _powers(r, 0, n - 1)))
    kappa = 2.5 * (1 + lam) * T * cF
    sI = rc.invariant_state
    if K:
        terms = _powers(r, -K, -1)[::-1] * sI[1:K + 1] ** 2  # r^{-j}(s^I_j)^2, j = 1..K
        xi = np.cumsum(terms[::-1])[::-1]
        vI = np.asarray(invariant_tail_sums(lam, p)[1:K + 1], dtype=float)
    else:
        xi = vI = np.zeros(0)
    return QuarticBounds(lam=lam, p=p, top_level=K, level=n, theta=float(theta), r=r,
                         delta=rc.delta, critical=crit, T=T, c_F=cF, kappa=kappa, xi=xi,
                         tail_sums=vI, longest_c=np.asarray(rc.longest_c, dtype=float))
