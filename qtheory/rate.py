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

The module also computes the constants of a first, weaker route (Perron weights and a
smoothed :math:`\ell_1` norm; constants of order :math:`1/\mu`, :math:`\mu` the fluid
relaxation rate) and the witnesses the chapter compares the bound with:
:func:`rate_witness_exact` (from :func:`qtheory.exact_stationary`) and
:func:`rate_witness_simulated` (planned runs of :func:`qtheory.simulate` and
:func:`qtheory.sample_path`, started empty, with batch-means intervals), and
:func:`fit_exponent` for measured decay exponents with intervals.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

from ._validation import (check_flag, check_lam, check_n_stations, check_p,
                          check_positive_int, check_real, check_seed, real_array)
from .invariant import invariant_state, invariant_tail_sums

__all__ = ["RateConstants", "rate_constants", "RateWitness", "rate_witness_exact",
           "rate_witness_simulated", "fit_exponent"]

# Relative tolerance for the critical case lam * s^I_{i*} = p (as qtheory.relaxation_rate).
_CRIT_TOL = 64 * np.finfo(float).eps
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
        return float(check_n_stations(n_stations)), True
    flat = [check_n_stations(int(v) if isinstance(v, np.integer) else v, "n_stations")
            for v in arr.ravel().tolist()]
    return np.array(flat, dtype=np.float64).reshape(arr.shape), False


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
        True when :math:`\delta = 0` to rounding (relative tolerance 64 eps, as in
        :func:`qtheory.relaxation_rate`).
    invariant_state : ndarray of float64, shape (i* + 1,)
        :math:`s^I`.
    weights : ndarray of float64, shape (i* + 3,)
        :math:`r^{-i}`, i = 0..i*+2, the weights of the energy (empty for ``p = 1``).
    c1, c2 : float
        :math:`E\|s^N - s^I\|_1 \le c_1 N^{-1/2} + c_2 N^{-1}` (levels 1..i*+2 of the
        energy identity; every case with ``0 < lam`` and ``p < 1``; ``inf`` for
        ``p = 1``): :math:`c_1 = \sqrt{\lambda S_{i^*+1} T_{i^*+2}/(1-p)}`,
        :math:`c_2 = \lambda r^{i^*+2} T_{i^*+2}/p`, with
        :math:`S_m = \sum_{i=1}^m r^i`, :math:`T_n = \sum_{i=1}^n r^{-i}`.
    c1_top, c2_top : float
        The same with levels 1..i*+1 (needs :math:`\delta > 0`; ``inf`` when critical):
        :math:`c_1 = \sqrt{\lambda S_{i^*} T_{i^*+1}/(1-p)}`,
        :math:`c_2 = \lambda r^{i^*+1} T_{i^*+1}/\delta`.  For :math:`\lambda < p`:
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
    critical = bool(abs(delta) <= _CRIT_TOL * max(p, lam * top))
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


# ------------------------------------------------------------------------- witnesses
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
    from .exact import ExactResult

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
    from .statistics import batch_means

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
    from .planning import plan_run
    from .simulation import sample_path, simulate
    from .statistics import lag1_autocorrelation

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
