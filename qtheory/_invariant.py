r"""The arithmetic of the invariant state, for validated arguments.

The functions of :mod:`qtheory.invariant` check their arguments and call these; other
modules that have checked ``lam`` and ``p`` already call them directly, so that one public
call validates its arguments once (CONTRIBUTING.md).  Nothing here checks its input.
The formulas and their sources are in :mod:`qtheory.invariant`.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
from scipy.optimize import brentq

__all__ = ["EPS", "MP_LEVELS", "top_level", "level", "invariant_state", "mean_queue_length",
           "mm1_mean_queue_length", "heavy_traffic_scaling", "min_centralization"]

EPS = np.finfo(np.float64).eps
# Above this many levels the mean is computed in closed form rather than by summing.
MP_LEVELS = 200_000
# Slack, in units of the rounding error bound, below which s_i counts as zero.
ZERO_SLACK = 16.0
# Levels computed at a time by invariant_state (bounds its temporaries to a few MB).
_CHUNK = 1 << 18


def _delta(lam, p):
    """r - 1 = (lam + p - 1) / (1 - p), as accurately as double precision allows."""
    # The numerator lam + p - 1 is summed exactly and rounded once (math.fsum); forming
    # it as lam - (1 - p) would carry the rounding of 1 - p (up to 5.6e-17), which for
    # tiny p near lam = 1 is a large relative error in r - 1 and moved the top level
    # (top_level(1 - 1e-12, 1e-12) was 1000022122208 instead of 1000011061022).
    # Where lam - (1 - p) is not small (|.| >= 2**-20) that rounding is below 6e-11
    # relative and the plain form is kept, so that ordinary results are unchanged bit
    # for bit (stored results such as the design chapter's p_star reproduce exactly).
    b = 1.0 - p
    num = lam - b
    if abs(num) >= 2.0**-20:
        return num / b
    return math.fsum((lam, p, -1.0)) / b


def _geometric(k, delta):
    """G_k = sum_{j<k} r**j with r = 1 + delta, for integer array or scalar k >= 0."""
    k = np.asarray(k, dtype=np.float64)
    if delta == 0.0:
        return k
    return np.expm1(k * math.log1p(delta)) / delta


def _levels(lam, p, i):
    """Unclipped s_i and a rounding-error bound, for integer array i >= 1.

    Two forms of the same closed form, each free of cancellation where it is used:

    * ``r >= 1`` (``lam + p >= 1``): ``s_i = ((lam - p) - (1 - lam) r G_{i-1}) / (1 - p)``,
      a difference of two terms below ``lam``: absolute error of a few rounding units;
    * ``r < 1``: ``s_i = r**i - p/(1 - p) G_i``, a difference of two terms of the size of
      ``r**i``.  The first form would subtract O(1) terms to get ``s_i ~ r**i``: with tiny
      ``p`` (``s_i ~ lam**i``) it lost every digit below about 1e-15 and cut the top level
      off there (``top_level(0.9, 1e-300)`` was 310 instead of 6534).

    ``s_1 = (lam - p)/(1 - p)`` is exact in both.  The bound covers the rounding of the
    terms, including that of ``r**i = exp(i log r)``, whose relative error grows like
    ``|i log r|`` rounding units.
    """
    i = np.asarray(i)
    a = 1.0 - lam
    b = 1.0 - p
    delta = _delta(lam, p)
    r = lam / b
    if delta >= 0.0:
        tail = a * r * _geometric(i - 1, delta)  # (1 - lam) r G_{i-1}
        s = ((lam - p) - tail) / b
        err = ZERO_SLACK * EPS * (lam + np.abs(tail)) / b
    else:
        logr = math.log1p(delta)
        x = np.asarray(i, dtype=np.float64) * logr
        ri = np.exp(x)
        drain = (p / b) * _geometric(i, delta)  # p/(1-p) G_i
        s = ri - drain
        err = ZERO_SLACK * EPS * (ri * (1.0 + np.abs(x)) + drain)
    first = i == 1
    s = np.where(first, (lam - p) / b, s)
    err = np.where(first, 0.0, err)  # s_1 = (lam - p)/(1 - p) is exact
    return s, err


def level(lam, p, i):
    """s_i for validated (lam, p) with p > 0 and one level 1 <= i <= i* (a float)."""
    return float(_levels(lam, p, np.array([i]))[0][0])


def top_level(lam, p):
    """i* for validated (lam, p); None for p = 0 (every level occupied)."""
    if p == 0.0:
        return None  # infinitely many levels: s_i = lam**i > 0 for all i (if lam > 0)
    if lam <= p:
        return 0
    b = 1.0 - p
    delta = _delta(lam, p)
    # s_i > 0  <=>  i < L = log(p/(1-lam)) / log(r), for r != 1; L = (1-p)/p at r = 1.
    if delta == 0.0:
        guess = b / p
    else:
        guess = (math.log(p) - math.log1p(-lam)) / math.log1p(delta)
    k = max(int(math.ceil(guess)) - 1, 1)

    def positive(i):
        s, err = _levels(lam, p, np.array([i]))
        return bool(s[0] > err[0])

    # The guess can be off where r - 1 is tiny and inexact; s_i is decreasing in i, so
    # gallop from the guess to bracket the boundary, then bisect: lo positive, hi not.
    if not positive(1):
        return 0
    if positive(k):
        lo, step = k, 1
        while positive(lo + step):
            lo, step = lo + step, 2 * step
        hi = lo + step
    else:
        hi, step = k, 1
        while hi - step > 1 and not positive(hi - step):
            hi, step = hi - step, 2 * step
        lo = max(hi - step, 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if positive(mid):
            lo = mid
        else:
            hi = mid
    return lo


def invariant_state(lam, p, max_levels=10_000_000):
    """:func:`qtheory.invariant_state` for validated ``lam``, ``p``, ``max_levels``."""
    if p == 0.0:
        if lam == 0.0:
            return np.ones(1)
        # s_i = lam**i is kept while it is above 1e-300; the mass left out,
        # lam**(n+1)/(1 - lam), is then below 1e-300/(1 - lam) (negligible).  If that
        # needs more than max_levels levels the state is refused, as for p > 0, rather
        # than silently truncated (at lam = 1 - 1e-16 it would hold ~7e18 levels).
        need = -300.0 * math.log(10) / math.log(lam)
        if need > max_levels:
            raise ValueError(
                f"the invariant state at lam={lam!r}, p=0 (s_i = lam**i) needs about "
                f"{need:.3g} levels to reach 1e-300, more than max_levels={max_levels}; "
                f"raise max_levels or use mean_queue_length (mean lam/(1 - lam) = "
                f"{lam / (1.0 - lam):.6g})"
            )
        n = int(math.floor(need))
        return lam ** np.arange(n + 1, dtype=np.float64)
    k = top_level(lam, p)
    if k > max_levels:
        raise ValueError(
            f"the invariant state at lam={lam!r}, p={p!r} has {k} levels, more than "
            f"max_levels={max_levels}; raise max_levels or use mean_queue_length"
        )
    s = np.empty(k + 1)
    s[0] = 1.0
    # in chunks: _levels makes several temporaries the size of its argument, which for
    # the whole state at once peaked at about six times the array returned
    for start in range(1, k + 1, _CHUNK):
        stop = min(start + _CHUNK, k + 1)
        s[start:stop], _ = _levels(lam, p, np.arange(start, stop))
    return s


def _mean_closed_form_mp(lam, p, k):
    """Sum_{i=1}^k s_i in 50-digit arithmetic (exact float inputs, no cancellation)."""
    with mpmath.workdps(50):
        L, P = mpmath.mpf(lam), mpmath.mpf(p)
        a, b = 1 - L, 1 - P
        d = L - b
        if d == 0:
            v = k - P * k * (k + 1) / (2 * b)
        else:
            r = L / b
            v = L * a * (1 - r**k) / d**2 + P * k / d
        return float(v)



def mean_queue_length(lam, p):
    """:func:`qtheory.mean_queue_length` for validated ``lam`` and ``p``."""
    if p == 0.0:
        return lam / (1.0 - lam) + 0.0  # + 0.0: no -0.0 at lam = -0.0
    k = top_level(lam, p)
    if k == 0:
        return 0.0
    if k > MP_LEVELS:
        return _mean_closed_form_mp(lam, p, k)
    s, _ = _levels(lam, p, np.arange(1, k + 1))
    return math.fsum(s)


def mm1_mean_queue_length(lam):
    """:func:`qtheory.mm1_mean_queue_length` for a validated ``lam``."""
    return lam / (1.0 - lam)


def heavy_traffic_scaling(lam, p):
    """:func:`qtheory.heavy_traffic_scaling` for validated ``lam`` and ``0 < p <= 1``."""
    if p == 1.0:
        return 0.0
    return math.log1p(-lam) / math.log1p(-p)


# The smallest relative tolerance brentq accepts (4 machine epsilons).
_RTOL = 4 * 2.220446049250313e-16


def min_centralization(lam, target, xtol):
    """:func:`qtheory.min_centralization` for validated arguments."""
    # The M/M/1 mean, with a few ulps of slack so that a target typed as 9 for
    # lam = 0.9 (where 0.9/0.1 rounds to 9.000000000000002) needs no centralization.
    if target >= (lam / (1.0 - lam)) * (1.0 - 8 * 2.220446049250313e-16):
        return 0.0

    def f(p):
        return mean_queue_length(lam, p) - target

    p = brentq(f, 0.0, lam, xtol=xtol, rtol=_RTOL, maxiter=500)
    # brentq guarantees |p - root| <= xtol + rtol*|p|; make the answer feasible.
    while f(p) > 0.0:
        p = min(lam, p + xtol + _RTOL * p)
    return p
