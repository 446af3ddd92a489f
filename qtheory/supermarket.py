r"""The supermarket model (join the shortest of ``d`` sampled queues), for contrast.

N stations with rate-1 servers; jobs arrive at total rate :math:`N\lambda`; each job
samples ``d`` stations uniformly at random and joins the shortest of them.  As
:math:`N \to \infty` the fraction :math:`s_i` of stations with at least ``i`` jobs
follows a fluid limit whose unique fixed point is

.. math:: s_i = \lambda^{(d^i - 1)/(d - 1)}, \qquad i \ge 0,

(:math:`s_i = \lambda^i` for ``d = 1``: independent M/M/1 queues).  For ``d >= 2`` the
tail decays doubly exponentially and the mean queue grows like
:math:`\log_d \frac{1}{1-\lambda}` in heavy traffic, a logarithm as in the
partially centralized model, reached by a different mechanism: information sampled at
arrival instead of a pooled server.

Sources: Vvedenskaya, Dobrushin and Karpelevich (1996), Theorem 1 (d = 2 and general
d); Mitzenmacher (2001), Theorem 3.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import check_lam, check_positive_int, check_size

__all__ = ["supermarket_fixed_point", "supermarket_mean_queue_length"]

# Levels with s_i below this are dropped (they underflow or are negligible).
_TINY = 1e-300


def supermarket_fixed_point(lam, d, *, max_levels=10_000_000):
    r"""Fixed point of the supermarket model's fluid limit, as tail fractions.

    Parameters
    ----------
    lam : float
        Arrival rate per station (each server has rate 1), ``0 <= lam < 1``.
    d : int
        Number of stations sampled by each arriving job, ``d >= 1`` (any size: for
        ``d`` beyond about ``690 / log(1/lam)`` only ``s_1 = lam`` is above 1e-300);
        ``d = 1`` is random assignment, i.e. independent M/M/1 queues.
    max_levels : int, optional
        Largest number of levels this call may return (a memory guard, at most 1e8): a
        profile that needs more is refused, never truncated.  Only ``d = 1`` with ``lam`` near 1
        needs that many (``lam > 1 - 6.9e-5`` with the default 1e7).

    Returns
    -------
    s : ndarray of float64, shape (k + 1,)
        ``s[0] == 1`` and ``s[i] = lam ** ((d**i - 1)/(d - 1))`` (``lam ** i`` for
        ``d = 1``) for ``i = 1..k``, where ``k`` is the last level with
        ``s[i] >= 1e-300``; levels beyond are dropped (their total is below 1e-290).

    Raises
    ------
    ValueError
        If ``lam`` is outside ``[0, 1)``, ``d`` is not an integer ``>= 1``, or the
        profile needs more than ``max_levels`` levels.

    References
    ----------
    Vvedenskaya, Dobrushin and Karpelevich (1996), Theorem 1; Mitzenmacher (2001),
    Theorem 3 (the fixed point :math:`\pi_i = \lambda^{(d^i-1)/(d-1)}`).

    Examples
    --------
    >>> supermarket_fixed_point(0.5, 2)[:4]
    array([1.       , 0.5      , 0.125    , 0.0078125])
    """
    lam = check_lam(lam)
    d = check_positive_int(d, "d")
    max_levels = check_size(max_levels, "max_levels", minimum=1, maximum=10**8,
                            what="each level takes 8 bytes of the returned array")
    if lam == 0.0:
        return np.ones(1)
    log_lam = math.log(lam)  # < 0
    limit = math.log(_TINY)
    if d == 1:
        # s_i = lam**i: the levels above 1e-300 are i <= limit / log(lam), which is
        # huge near lam = 1; never return a silently truncated profile
        k = int(math.floor(limit / log_lam))
        if k > max_levels:
            raise ValueError(
                f"with d = 1 and lam = {lam!r} the fixed point has {k:,} levels above "
                f"1e-300, more than max_levels = {max_levels:,}; raise max_levels or use "
                f"supermarket_mean_queue_length (lam/(1 - lam) = {lam / (1 - lam):.6g})")
        return np.power(lam, np.arange(k + 1, dtype=np.float64))
    out = [1.0]
    exponent = 0  # (d**i - 1)/(d - 1) = 1 + d + ... + d**(i-1), an exact integer
    # levels are kept while exponent * log(lam) >= log(1e-300), i.e. exponent <= stop;
    # comparing the exact integer with the float stop never converts a huge exponent
    # (d = 10**309 makes it 1 + 10**309) to a float
    stop = limit / log_lam
    for _ in range(max_levels + 1):
        exponent = exponent * d + 1
        if exponent > stop:
            return np.array(out, dtype=np.float64)
        out.append(lam ** exponent)  # correctly rounded pow, not exp(log): no drift
    raise ValueError(f"with d = {d} and lam = {lam!r} the fixed point has more than "
                     f"max_levels = {max_levels:,} levels above 1e-300; raise max_levels")


def supermarket_mean_queue_length(lam, d):
    r"""Mean number of jobs per station at the supermarket model's fixed point.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    d : int
        Number of sampled stations, ``d >= 1``.

    Returns
    -------
    float
        :math:`\sum_{i \ge 1} \lambda^{(d^i-1)/(d-1)}`; exactly
        :math:`\lambda/(1-\lambda)` for ``d = 1``.  For ``d >= 2`` the sum has at most
        a few dozen terms above 1e-300 and is summed exactly (``math.fsum``).

    Raises
    ------
    ValueError
        If ``lam`` is outside ``[0, 1)`` or ``d`` is not an integer ``>= 1``.

    References
    ----------
    Mitzenmacher (2001), Theorem 3 and Section 3 (expected time in the system,
    :math:`\sum_i \pi_i/\lambda` by Little's law).
    """
    lam = check_lam(lam)
    d = check_positive_int(d, "d")
    if d == 1:
        return lam / (1.0 - lam)
    return math.fsum(supermarket_fixed_point(lam, d)[1:])
