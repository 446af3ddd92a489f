r"""The invariant state of the fluid model and its heavy-traffic asymptotics.

Notation (see the book's chapter *The invariant state*): ``lam`` is the arrival rate per
station, ``p`` the centralization fraction, :math:`r = \lambda/(1-p)`.  Balance of the
flow across level :math:`i` on every level that the central server drains gives

.. math:: \lambda s_{i-1} = (1-p) s_i + p, \qquad s_0 = 1,

whose solution, written so that it is stable in floating point, is

.. math:: s_i = \frac{(\lambda - p) - (1-\lambda)\, r\, G_{i-1}}{1-p},
   \qquad G_k = \sum_{j<k} r^j = \frac{\operatorname{expm1}(k \log r)}{r-1},

for :math:`1 \le i \le i^*`, and :math:`s_i = 0` beyond the top level :math:`i^*`.
Source: Tsitsiklis and Xu (2012), Theorem 3.3 and eq. (3.5); Xu (2011), Ch. 3.

All functions take scalars.  The float path is accurate to about 1e-13 relative error
in the mean; when the top level is very high (more than ``qtheory._invariant.MP_LEVELS`` levels, which
happens only when ``p`` is tiny and ``lam + p`` is close to 1) the mean is evaluated in
closed form with 50-digit arithmetic (mpmath) instead of summing levels.
"""

from __future__ import annotations

import numpy as np

from . import _invariant as _inv
from ._validation import check_lam, check_p, check_size

__all__ = [
    "invariant_state",
    "top_level",
    "mean_queue_length",
    "heavy_traffic_scaling",
    "mm1_mean_queue_length",
    "invariant_tail_sums",
]

# Ceiling of max_levels: an array of this many levels takes 800 MB.
_MAX_LEVELS_CEILING = 10**8


def _check_max_levels(max_levels):
    return check_size(max_levels, "max_levels", minimum=1, maximum=_MAX_LEVELS_CEILING,
                      what="each level takes 8 bytes of the returned array")


def top_level(lam, p):
    r"""Top occupied level :math:`i^*` of the invariant state.

    Parameters
    ----------
    lam : float
        Arrival rate per station (jobs per mean service time), ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 < p <= 1``.

    Returns
    -------
    int
        :math:`i^* = \max\{i : s_i > 0\} = \lceil \log_r (p/(1-\lambda)) \rceil - 1`
        with :math:`r = \lambda/(1-p)`; 0 when ``lam <= p`` (the central server absorbs
        all the work).  When ``p/(1-lam)`` is an exact power of ``r`` the level where
        :math:`s_i` would be exactly zero is not counted.  Values of :math:`s_i` within
        rounding error of zero count as zero, where the rounding error is that of the
        terms of the closed form (of the size of :math:`r^i` when :math:`r < 1`, not of
        1), so the count is right for every ``p > 0`` however small: ``top_level(0.9,
        1e-300)`` is 6534, the largest integer below :math:`\log_r (p/(1-\lambda))`.

    Raises
    ------
    ValueError
        If ``lam`` is outside ``[0, 1)``, ``p`` outside ``[0, 1]``, or ``p == 0`` (then
        every level is occupied: :math:`s_i = \lambda^i`).

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.3 (the invariant state, eq. 3.5 and 3.6).
    """
    lam = check_lam(lam)
    p = check_p(p)
    if p == 0.0:
        raise ValueError(
            "top_level is undefined for p = 0: without a central server every level is "
            "occupied (s_i = lam**i); use p in (0, 1]"
        )
    return _inv.top_level(lam, p)


def invariant_state(lam, p, *, max_levels=10_000_000):
    r"""Invariant state :math:`s^I` of the fluid model, as tail fractions.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    max_levels : int, optional
        Largest number of levels returned, at most 1e8 (800 MB).  For ``p = 0`` the state
        :math:`s_i = \lambda^i` has infinitely many positive entries and is truncated
        where :math:`\lambda^i` falls below 1e-300; if that takes more than
        ``max_levels`` levels a ``ValueError`` is raised (no silent truncation).

    Returns
    -------
    s : ndarray of float64, shape (i* + 1,)
        ``s[0] == 1`` and ``s[i]`` is the fraction of stations with at least ``i`` jobs
        for ``i = 1..i*``; every entry is positive and the array is strictly decreasing.
        ``s[i] = 0`` for ``i > i*`` is implied.

    Raises
    ------
    ValueError
        If ``lam`` or ``p`` are out of range, ``max_levels`` is not an integer in
        ``[1, 1e8]``, or if the state needs more than ``max_levels`` levels (``p > 0``:
        ``i*`` exceeds it; ``p = 0``: ``lam**i`` stays above 1e-300 beyond it, e.g.
        ``lam > 1 - 7e-5`` with the default); use :func:`mean_queue_length`, which
        needs no array.

    Notes
    -----
    Balance of flow across each level drained by the central server gives
    :math:`\lambda s_{i-1} = (1-p) s_i + p`; with :math:`s_0 = 1` and
    :math:`r = \lambda/(1-p)`, :math:`s_i = s^* + (1-s^*) r^i` with
    :math:`s^* = p/(\lambda+p-1)`.  That form divides by zero on the line
    :math:`\lambda + p = 1`, so it is evaluated through the stable geometric sum
    ``expm1(k log1p(r - 1)) / (r - 1)`` instead.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.3, eq. (3.5); Xu (2011), Section 3.3.

    Examples
    --------
    >>> invariant_state(0.7, 0.2).round(5)
    array([1.     , 0.625  , 0.29687, 0.00977])
    """
    lam = check_lam(lam)
    p = check_p(p)
    max_levels = _check_max_levels(max_levels)
    return _inv.invariant_state(lam, p, max_levels)


def mean_queue_length(lam, p):
    r"""Mean number of jobs per station in the invariant state, :math:`v^I_1`.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.

    Returns
    -------
    float
        :math:`\sum_{i=1}^{i^*} s_i`; equal to :math:`\lambda/(1-\lambda)` (M/M/1) when
        ``p = 0`` and to 0 when ``lam <= p``.  In closed form, for
        :math:`\lambda + p \ne 1`,
        :math:`\lambda(1-\lambda)(1-r^{i^*})/(1-p-\lambda)^2 - p\, i^*/(1-p-\lambda)`.

    Raises
    ------
    ValueError
        If ``lam`` is outside ``[0, 1)`` or ``p`` outside ``[0, 1]``.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.3 and Section 3.3 (the phase transition).

    Examples
    --------
    >>> round(mean_queue_length(0.99, 0.05), 4)
    24.0298
    """
    lam = check_lam(lam)
    p = check_p(p)
    return _inv.mean_queue_length(lam, p)


def heavy_traffic_scaling(lam, p):
    r"""The heavy-traffic scale :math:`\log_{1/(1-p)} \frac{1}{1-\lambda}`.

    As :math:`\lambda \to 1` with ``p > 0`` fixed, the mean queue length of the
    invariant state grows like this quantity (their ratio tends to 1, slowly), against
    :math:`1/(1-\lambda)` without centralization.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 < p <= 1``.

    Returns
    -------
    float
        ``log1p(-lam) / log1p(-p)``, computed with ``log1p`` so that tiny ``p`` (down
        to 1e-300) and ``lam`` near 1 keep full precision; 0 when ``p = 1``.

    Raises
    ------
    ValueError
        If ``p == 0``, where the logarithm's base is 1 and the scale is undefined (the
        mean is then :math:`\lambda/(1-\lambda)`: see :func:`mm1_mean_queue_length`);
        or if ``lam`` or ``p`` are out of range.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.4 (the phase transition at p = 0).
    """
    lam = check_lam(lam)
    p = check_p(p)
    if p == 0.0:
        raise ValueError(
            "heavy_traffic_scaling is undefined for p = 0 (logarithm to base 1); "
            "without centralization the mean queue is lam/(1 - lam), see "
            "mm1_mean_queue_length; use p in (0, 1]"
        )
    return _inv.heavy_traffic_scaling(lam, p)


def mm1_mean_queue_length(lam):
    r"""Mean number in an M/M/1 queue with load ``lam``: :math:`\lambda/(1-\lambda)`.

    This is the mean queue per station of the fully distributed system (``p = 0``),
    exact for every number of stations.

    Parameters
    ----------
    lam : float
        Load, ``0 <= lam < 1``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``lam`` is outside ``[0, 1)``.

    References
    ----------
    Any queueing textbook, e.g. Kleinrock, *Queueing Systems* vol. 1 (1975), eq. (3.24).
    """
    lam = check_lam(lam)
    return _inv.mm1_mean_queue_length(lam)


def invariant_tail_sums(lam, p, *, max_levels=10_000_000):
    r"""The invariant state in the paper's tail-sum coordinates :math:`v^I`.

    Tsitsiklis and Xu write the fluid model and its invariant state in the tail sums
    :math:`v_i = \sum_{j \ge i} s_j` (the number of jobs per station sitting at
    position ``i`` or higher of their queue) rather than in the tail fractions
    :math:`s_i` of :func:`invariant_state`.  This function returns :math:`v^I`.

    Parameters
    ----------
    lam : float
        Arrival rate per station (jobs per mean service time), ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    max_levels : int, optional
        Passed to :func:`invariant_state`: the largest number of levels computed
        (at most 1e8).

    Returns
    -------
    v : ndarray of float64, shape (i* + 2,)
        ``v[i]`` is :math:`v^I_i = \sum_{j \ge i} s^I_j` for ``i = 0, 1, ..., i* + 1``,
        indexed like the array ``s`` of :func:`invariant_state` (which has shape
        ``(i* + 1,)``) with one more entry:

        - ``v[0] = 1 + v[1]`` (:math:`v_0` includes :math:`s_0 = 1`; the paper's
          state has :math:`v_0 - v_1 = 1` as well);
        - ``v[1]`` is the mean number of jobs per station, :func:`mean_queue_length`;
        - ``v[i* + 1] = 0``: no job sits above the top level :math:`i^*`;
        - ``s == v[:-1] - v[1:]`` up to rounding, and ``v`` is strictly decreasing.

        For ``p = 0`` every level is occupied (:math:`s_i = \lambda^i`) and
        :func:`invariant_state` truncates; here ``v[i]`` is then the exact tail sum
        :math:`\lambda^i/(1-\lambda)` of the untruncated state at the same indices plus
        one, so the last entry is the (tiny) mass beyond the truncation, not 0.

    Raises
    ------
    ValueError
        If ``lam`` is outside ``[0, 1)``, ``p`` outside ``[0, 1]``, ``max_levels`` is
        not an integer in ``[1, 1e8]``, or the state has more than ``max_levels`` levels (as
        for :func:`invariant_state`).

    Notes
    -----
    The tail sums are accumulated from the top level down (``np.cumsum`` of the
    reversed ``s``), adding small terms first; all terms are positive, so the relative
    error of ``v[i]`` is at most about ``(i* - i + 1)`` rounding units on top of the
    error of the ``s_j`` themselves, also on the line :math:`\lambda + p = 1` where
    closed forms divide by zero.  Summing the geometric series of
    :func:`invariant_state`'s closed form gives, for :math:`\lambda + p \ne 1`,
    :math:`r = \lambda/(1-p)` and :math:`1 \le i \le i^* + 1`,

    .. math:: v^I_i = \frac{\lambda(1-\lambda)\,(r^{i-1} - r^{i^*})}{(1-p-\lambda)^2}
              - \frac{p\,(i^* - i + 1)}{1-p-\lambda},

    which the tests compare with this function; at :math:`i = 1` it is the mean of
    :func:`mean_queue_length`.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 3 (the fluid model in tail-sum coordinates and
    the closed form of its invariant state :math:`v^I`); Xu (2011), Ch. 3.

    Examples
    --------
    >>> invariant_tail_sums(0.9, 0.1).round(4)
    array([5.    , 4.    , 3.1111, 2.3333, 1.6667, 1.1111, 0.6667, 0.3333,
           0.1111, 0.    ])
    """
    lam = check_lam(lam)
    p = check_p(p)
    max_levels = _check_max_levels(max_levels)
    s = _inv.invariant_state(lam, p, max_levels)
    if p == 0.0:
        # s_i = lam**i for every i: the tail sums are exact geometric tails.
        return lam ** np.arange(len(s) + 1, dtype=np.float64) / (1.0 - lam)
    v = np.zeros(len(s) + 1)
    v[:-1] = np.cumsum(s[::-1])[::-1]
    return v
