r"""Inverse questions: how much centralization does a delay target need?

The invariant state's mean queue length :math:`v^I_1(\lambda, p)` (see
:mod:`qtheory.invariant`) falls from the M/M/1 value :math:`\lambda/(1-\lambda)` at
``p = 0`` to 0 at ``p = lam``.  A designer asks the inverse question: given the load
``lam`` and a target for the mean queue (or, through Little's law, for the mean time a
job spends in the system), what is the smallest ``p`` that meets it?

The mean is a continuous, strictly decreasing function of ``p`` on ``[0, lam]``, but only
piecewise smooth: each time the top level :math:`i^*` drops by one (at the values of
``p`` where :math:`p/(1-\lambda)` is a power of :math:`r = \lambda/(1-p)`) its
derivative jumps.  A bracketing root finder (Brent's method) needs nothing more than
continuity and a sign change, so it is robust across those kinks, where Newton-type
methods are not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _invariant as _inv
from ._validation import check_lam, check_n_stations, check_p, check_real, real_array
from .rate import rate_constants

__all__ = [
    "DesignPoint",
    "design_point",
    "min_centralization",
    "min_centralization_for_delay",
    "mean_sojourn_time",
    "littles_law_sojourn_time",
    "capacity_without_pooling",
    "guaranteed_mean_queue_bound",
    "guaranteed_min_centralization",
]

_EPS = 2.220446049250313e-16


def _check_target(value, name):
    """A target must be a positive real number (``inf`` allowed: no constraint)."""
    return check_real(value, name, low=0.0, low_open=True)


def min_centralization(lam, target_mean_queue, *, xtol=1e-12):
    r"""Smallest centralization fraction whose invariant state meets a mean-queue target.

    Parameters
    ----------
    lam : float
        Arrival rate per station (jobs per mean service time), ``0 <= lam < 1``.
    target_mean_queue : float
        Largest acceptable mean number of jobs per station in the invariant state,
        ``> 0`` (``inf`` is allowed and needs no centralization).
    xtol : float, optional
        Absolute tolerance on ``p`` passed to :func:`scipy.optimize.brentq`,
        ``0 < xtol <= 1e-3``.

    Returns
    -------
    p : float
        A fraction in ``[0, lam]`` with ``mean_queue_length(lam, p) <= target_mean_queue``
        and ``p - p_min <= 2 * (xtol + 4 * eps * p)``, where
        :math:`p_{\min} = \inf\{p : v^I_1(\lambda, p) \le \text{target}\}`.
        Exactly ``0.0`` when the target is at least the M/M/1 mean
        :math:`\lambda/(1-\lambda)` (no centralization is needed; a relative slack
        of ``8 * eps`` absorbs rounding in that value); close to ``lam``
        when the target is tiny (for ``p >= lam`` the fluid state is empty).

    Raises
    ------
    ValueError
        If ``lam`` is outside ``[0, 1)``, if ``target_mean_queue`` is not a positive
        number (zero, negative, NaN, not a real number), or if ``xtol`` is outside
        ``(0, 1e-3]``.

    Notes
    -----
    :math:`f(p) = v^I_1(\lambda, p) - \text{target}` is continuous and strictly
    decreasing on :math:`[0, \lambda]`, with :math:`f(0) > 0` and
    :math:`f(\lambda) = -\text{target} < 0` when the target is below the M/M/1 mean, so
    it has exactly one root.  Brent's method brackets it; if the bracketed point still
    misses the target by rounding, it is moved up by one tolerance step until it meets
    it, so the answer is always feasible.  This is a statement about the fluid limit
    (``N`` to infinity).  For a finite system it is a necessary condition: the
    stationary means satisfy ``E[v^N_1] >= v^I_1`` for every ``N`` (the lower bound of
    the book's steady-state chapter), so no ``p`` below the returned value meets the
    target in any finite system; whether it suffices for a given ``N`` must be checked
    (exactly for a few stations, otherwise by simulation; the book's chapter *Design*).

    References
    ----------
    Tsitsiklis and Xu (2012), the closed form of the fluid invariant state whose mean is
    inverted here; R. P. Brent, *Algorithms for Minimization without Derivatives* (1973),
    Ch. 4.

    Examples
    --------
    >>> p = min_centralization(0.99, 24.0298)
    >>> round(p, 4)
    0.05
    """
    lam = check_lam(lam)
    target = _check_target(target_mean_queue, "target_mean_queue")
    xtol = check_real(xtol, "xtol", low=0.0, high=1e-3, low_open=True)
    return _inv.min_centralization(lam, target, xtol)


def mean_sojourn_time(lam, p):
    r"""Mean time a job spends in the system in the invariant state (Little's law).

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 < lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.

    Returns
    -------
    float
        :math:`W = v^I_1(\lambda, p)/\lambda`, in mean service times (waiting plus
        service).  ``1/(1 - lam)`` at ``p = 0`` (the M/M/1 sojourn time); 0 when
        ``lam <= p``: in the fluid limit the central server, of rate ``N p``, clears
        every job almost at once.

    Raises
    ------
    ValueError
        If ``lam`` is not in ``(0, 1)`` (with no arrivals the sojourn time of an
        arriving job is undefined) or ``p`` is outside ``[0, 1]``.

    References
    ----------
    Little (1961) for :math:`L = \lambda W`, applied to the whole system (``N lam`` jobs
    per unit time, ``N`` times the mean queue per station in the system); Tsitsiklis
    and Xu (2012), the fluid invariant state, for :math:`v^I_1`.
    """
    lam = _check_positive_lam(lam)
    p = check_p(p)
    return _inv.mean_queue_length(lam, p) / lam


def littles_law_sojourn_time(mean_queue, lam):
    r"""Mean sojourn time from a mean queue length per station: :math:`W = L/\lambda`.

    Use it for simulated or exact means of a finite system as well: Little's law holds
    for every ``N`` (whole system: ``N L`` jobs, ``N lam`` arrivals per unit time).

    Parameters
    ----------
    mean_queue : float or array_like of float
        Mean number of jobs per station, finite and ``>= 0`` (any shape; e.g. an
        estimate and the two ends of its confidence interval).  Real numbers only: a
        string such as ``"3"`` or a bool is refused, not read as a number.
    lam : float
        Arrival rate per station, ``0 < lam < 1``.

    Returns
    -------
    float or ndarray of float64 (same shape as ``mean_queue``)
        Mean time in the system, in mean service times.

    Raises
    ------
    ValueError
        If ``lam`` is not in ``(0, 1)`` or ``mean_queue`` has a negative, NaN, infinite
        or non-real entry (str, bool, complex, None).

    References
    ----------
    Little (1961).
    """
    lam = _check_positive_lam(lam)
    q = real_array(mean_queue, "mean_queue")  # no str ('3'), bool (True), complex, None
    if not np.all(np.isfinite(q)) or np.any(q < 0):
        bad = q.ravel()[~(np.isfinite(q.ravel()) & (q.ravel() >= 0))][0]
        raise ValueError(f"mean_queue must be finite and non-negative (no NaN or inf), "
                         f"got {float(bad)!r}")
    w = q / lam
    return float(w) if w.ndim == 0 else w


def min_centralization_for_delay(lam, target_sojourn_time, *, xtol=1e-12):
    r"""Smallest centralization fraction that meets a target for the mean sojourn time.

    By Little's law a mean sojourn time ``W`` corresponds to a mean queue ``lam * W``
    per station, so this is ``min_centralization(lam, lam * target_sojourn_time)``.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 < lam < 1``.
    target_sojourn_time : float
        Largest acceptable mean time in the system (waiting plus service), in mean
        service times, ``> 0``.
    xtol : float, optional
        As in :func:`min_centralization`.

    Returns
    -------
    p : float
        As in :func:`min_centralization`; ``0.0`` when ``target_sojourn_time`` is at
        least the M/M/1 sojourn time ``1/(1 - lam)``.

    Raises
    ------
    ValueError
        If ``lam`` is not in ``(0, 1)`` or ``target_sojourn_time`` is not a positive
        number.

    References
    ----------
    Little (1961); Tsitsiklis and Xu (2012), the fluid invariant state.
    """
    lam = _check_positive_lam(lam)
    w = _check_target(target_sojourn_time, "target_sojourn_time")
    xtol = check_real(xtol, "xtol", low=0.0, high=1e-3, low_open=True)  # before any return
    if w >= (1.0 / (1.0 - lam)) * (1.0 - 8 * _EPS):
        return 0.0
    return _inv.min_centralization(lam, lam * w, xtol)


def capacity_without_pooling(lam, target_mean_queue):
    r"""Service rate per station that meets a mean-queue target without any pooling.

    The alternative to pooling a fraction ``p`` of the capacity is to buy more of it:
    with local servers of rate :math:`C` and no central server, each station is an M/M/1
    queue with load :math:`\lambda/C` and mean queue :math:`\lambda/(C - \lambda)`
    (the chapter ``book/design.md`` writes :math:`C` for this capacity).

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1`` (jobs per unit of the *current*
        service rate, which is 1).
    target_mean_queue : float
        Largest acceptable mean number of jobs per station, ``> 0``.

    Returns
    -------
    float
        :math:`C = \lambda (1 + 1/L)`, the smallest service rate per station, in
        units of the current one, for which :math:`\lambda/(C-\lambda) \le L`.  A
        value below 1 means the current capacity already meets the target without
        pooling; :math:`C - 1` is the extra capacity that pooling would save.

    Raises
    ------
    ValueError
        If ``lam`` is outside ``[0, 1)`` or ``target_mean_queue`` is not a positive
        number.

    References
    ----------
    Kleinrock (1975), Section 3.2 (the M/M/1 mean number in system).
    """
    lam = check_lam(lam)
    target = _check_target(target_mean_queue, "target_mean_queue")
    return _capacity_without_pooling(lam, target)


def _capacity_without_pooling(lam, target):
    if math.isinf(target):
        return lam
    # lam + lam/target, not lam*(1 + 1/target): 1/target overflows for a subnormal
    # target, and 0*inf would be nan where the answer is 0 (lam = 0)
    return lam + lam / target


def _check_positive_lam(lam):
    lam = check_lam(lam)
    if lam == 0.0:
        raise ValueError("lam must satisfy 0 < lam < 1 here: with no arrivals "
                         "(lam = 0) a sojourn time is undefined")
    return lam


@dataclass(frozen=True)
class DesignPoint:
    """The answer to one design question, with what it implies (fluid limit).

    Attributes
    ----------
    lam : float
        Arrival rate per station.
    target_mean_queue : float
        The mean-queue target per station.
    p_min : float
        :func:`min_centralization` of ``(lam, target_mean_queue)``.
    mean_queue_length : float
        Invariant-state mean queue at ``p_min`` (at most the target).
    top_level : int
        :math:`i^*` at ``p_min``: no station holds more jobs in the fluid limit (``-1``
        when ``p_min == 0``, where every level is occupied).
    mean_sojourn_time : float
        Mean time in the system at ``p_min`` by Little's law (``nan`` if ``lam == 0``).
    mm1_mean_queue_length : float
        The mean without centralization, :math:`\\lambda/(1-\\lambda)`.
    capacity_without_pooling : float
        Service rate per station that meets the target with no pooling
        (:func:`capacity_without_pooling`).
    """

    lam: float
    target_mean_queue: float
    p_min: float
    mean_queue_length: float
    top_level: int
    mean_sojourn_time: float
    mm1_mean_queue_length: float
    capacity_without_pooling: float

    def summary(self):
        """A few lines for a reader (str)."""
        if self.p_min == 0.0:
            head = (f"lam = {self.lam:g}, target mean queue {self.target_mean_queue:g}: "
                    f"no centralization needed (M/M/1 mean {self.mm1_mean_queue_length:.4g})")
        else:
            head = (f"lam = {self.lam:g}, target mean queue {self.target_mean_queue:g}: "
                    f"p_min = {self.p_min:.5g}")
        return "\n".join([
            head,
            f"  mean queue at p_min {self.mean_queue_length:.5g} (M/M/1: "
            f"{self.mm1_mean_queue_length:.5g}); top level i* = "
            f"{'unbounded' if self.top_level < 0 else self.top_level}",
            f"  mean sojourn time {self.mean_sojourn_time:.5g} mean service times",
            (f"  without pooling: local servers {self.capacity_without_pooling:.4g} times "
             "as fast would be needed" if self.capacity_without_pooling > 1.0 else
             "  without pooling: the present capacity already meets the target"),
        ])


def design_point(lam, target_mean_queue):
    r"""Minimal centralization for a target, and what the design implies.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    target_mean_queue : float
        Largest acceptable mean number of jobs per station, ``> 0``.

    Returns
    -------
    DesignPoint
        ``p_min``, the mean queue and top level there, the mean sojourn time (Little's
        law), the M/M/1 mean and the capacity that would be needed without pooling.
        Handy as the function of a :func:`qtheory.sweep` (its fields become columns).

    Raises
    ------
    ValueError
        As :func:`min_centralization`.

    References
    ----------
    Tsitsiklis and Xu (2012), the fluid invariant state; Little (1961).
    """
    lam = check_lam(lam)
    target = _check_target(target_mean_queue, "target_mean_queue")
    p = _inv.min_centralization(lam, target, 1e-12)
    mean = _inv.mean_queue_length(lam, p)
    return DesignPoint(
        lam=lam,
        target_mean_queue=target,
        p_min=p,
        mean_queue_length=mean,
        top_level=-1 if p == 0.0 else _inv.top_level(lam, p),
        mean_sojourn_time=mean / lam if lam > 0 else math.nan,
        mm1_mean_queue_length=lam / (1.0 - lam),
        capacity_without_pooling=_capacity_without_pooling(lam, target),
    )


def _guaranteed_bound(n, lam, p):
    """The proved upper bound on E[v^N_1] at one p (no validation; 0 < p <= 1)."""
    mm1 = lam / (1.0 - lam)
    if lam == 0.0:
        return 0.0
    rc = rate_constants(lam, p)
    gap = min(float(rc.distance_bound(n)), float(rc.excess_bound(n)))
    return min(mm1, _inv.mean_queue_length(lam, p) + gap)


def guaranteed_mean_queue_bound(n_stations, lam, p):
    r"""A proved upper bound on the stationary mean queue per station of N stations.

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
    float
        :math:`U_N(\lambda, p) = \min\bigl(\lambda/(1-\lambda),\;
        v^I_1(\lambda, p) + \min(b_1, b_2)\bigr)`, with :math:`b_1` the bound
        :math:`C_1 N^{-1/2} + C_2 N^{-1}` on :math:`E\|s^N - s^I\|_1`
        (:meth:`RateConstants.distance_bound`) and :math:`b_2` the bound on the excess
        :math:`E[v^N_1] - v^I_1` (:meth:`RateConstants.excess_bound`).  For ``p = 0``
        it is :math:`\lambda/(1-\lambda)`, the exact mean (N independent M/M/1
        queues).  Always :math:`E[v^N_1] \le U_N` under the stationary law.

    Raises
    ------
    ValueError
        If ``n_stations`` is not an integer >= 1, ``lam`` is outside ``[0, 1)`` or
        ``p`` outside ``[0, 1]``.

    Notes
    -----
    Every ingredient is proved in the book: :math:`E[v^N_1] \le \lambda/(1-\lambda)`
    for every N and p (proposition ``finite-n-prop-bounds``), and
    :math:`E[v^N_1] - v^I_1 \le E\|s^N - s^I\|_1` together with the rate theorem
    ``rate-thm-rate`` and corollary ``rate-cor-top`` (the chapter ``book/rate.md``).
    The bound is not monotone in ``p`` in general: its constants change with the
    top level :math:`i^*` of :math:`s^I`.

    References
    ----------
    The book's chapters ``book/rate.md`` and ``book/design.md`` (proposition
    ``design-prop-guaranteed``); Tsitsiklis and Xu (2012) for :math:`v^I_1`.

    Examples
    --------
    >>> round(guaranteed_mean_queue_bound(10_000, 0.9, 0.4), 3)
    1.635
    """
    n = check_n_stations(n_stations)
    lam = check_lam(lam)
    p = check_p(p)
    if p == 0.0:
        return lam / (1.0 - lam)
    return _guaranteed_bound(n, lam, p)


def guaranteed_min_centralization(n_stations, lam, target_mean_queue, *, grid=1000,
                                  ptol=1e-6):
    r"""Smallest p whose proved upper bound on the N-station mean meets a target.

    A design with a guarantee: at the returned ``p`` the stationary mean queue per
    station of the N-station system is at most ``target_mean_queue``, by
    :func:`guaranteed_mean_queue_bound` (proved bounds only, no simulation, no
    heuristic).

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    target_mean_queue : float
        Largest acceptable mean number of jobs per station, ``> 0`` (``inf`` allowed).
    grid : int, optional
        Number of grid points on :math:`[p_{\min}(\infty), 1]` searched for the first
        feasible p, in ``[10, 10**6]`` (default 1000).
    ptol : float, optional
        Width, in ``[1e-12, 1e-2]``, to which the first feasible grid cell is refined by
        bisection (default 1e-6).

    Returns
    -------
    float
        ``0.0`` when the target is at least :math:`\lambda/(1-\lambda)` (every p meets
        it; a relative slack of ``8 * eps`` absorbs rounding, as in
        :func:`min_centralization`); otherwise a p in :math:`[p_{\min}(\infty), 1]` with
        ``guaranteed_mean_queue_bound(n_stations, lam, p) <= target_mean_queue``, the
        first such point of the grid refined by bisection; ``inf`` if no grid point
        meets the target (for instance N = 1, where the mean is
        :math:`\lambda/(1-\lambda)` for every p).

    Raises
    ------
    ValueError
        If ``n_stations`` is not an integer >= 1, ``lam`` is outside ``[0, 1)``,
        ``target_mean_queue`` is not a positive number, or ``grid`` or ``ptol`` is out
        of range.

    Notes
    -----
    The returned p is always guaranteed: the bound is evaluated at p itself, so no
    monotonicity of :math:`E[v^N_1]` in p is needed (none is proved).  Minimality is up
    to the grid: the bound is not monotone in p (its constants change with
    :math:`i^*`), so a feasible p between two infeasible grid points below the answer
    cannot be excluded.  No p below the fluid answer :func:`min_centralization` can meet
    the target in any finite system (:math:`E[v^N_1] \ge v^I_1`), so the search starts
    there; as N grows the answer tends to it.  Each evaluation costs one
    :func:`qtheory.rate_constants` (about a millisecond).

    References
    ----------
    The book's chapter ``book/design.md`` (proposition ``design-prop-guaranteed``);
    ``book/rate.md`` (theorem ``rate-thm-rate``).

    Examples
    --------
    >>> p = guaranteed_min_centralization(1000, 0.9, 2.0)
    >>> round(p, 3), guaranteed_mean_queue_bound(1000, 0.9, p) <= 2.0
    (0.346, True)
    """
    n = check_n_stations(n_stations)
    lam = check_lam(lam)
    target = _check_target(target_mean_queue, "target_mean_queue")
    if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) \
            or not 10 <= grid <= 10**6:
        raise ValueError(f"grid must be an integer in [10, 1e6], got {grid!r}")
    ptol = check_real(ptol, "ptol", low=1e-12, high=1e-2)
    if target >= lam / (1.0 - lam) * (1.0 - 8 * _EPS):
        return 0.0
    lo = _inv.min_centralization(lam, target, 1e-12)
    ps = np.linspace(lo, 1.0, int(grid))
    ps[0] = max(ps[0], _EPS)

    def ok(q):
        return _guaranteed_bound(n, lam, float(q)) <= target

    first = next((k for k, q in enumerate(ps) if ok(q)), None)
    if first is None:
        return math.inf
    if first == 0:
        return float(ps[0])
    a, b = float(ps[first - 1]), float(ps[first])     # ok(a) is False, ok(b) is True
    while b - a > ptol:
        mid = 0.5 * (a + b)
        if ok(mid):
            b = mid
        else:
            a = mid
    return b
