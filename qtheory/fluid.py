r"""The fluid model: its drift, an exact solver, and its stability numerics.

The fluid model (Tsitsiklis and Xu 2012, Definition 3.1 and eq. (3.2)) describes the
occupancy fractions :math:`s_i(t)` of an infinitely large system.  With top level
:math:`k = \max\{i : s_i > 0\}` its drift is

* levels :math:`i < k`: :math:`\lambda(s_{i-1}-s_i) - (1-p)(s_i-s_{i+1})`;
* the top level: :math:`\lambda(s_{k-1}-s_k) - (1-p)s_k - (p - \min(\lambda s_k, p))`;
* the level above: :math:`(\lambda s_k - p)^+`.

The drift is discontinuous where the top level changes: the central server's whole
rate :math:`p` acts on the top level, and when the top level empties it jumps down.
While :math:`\lambda s_k \le p` the level above stays empty because the central server
serves its inflow as fast as it arrives ("sliding").

How :func:`fluid_trajectory` solves it
--------------------------------------
Call the *active top level* :math:`K` the highest level the dynamics acts on.  For a
fixed :math:`K` the fluid model is a linear system with constant coefficients (the
sliding top row reads :math:`\dot s_K = \lambda s_{K-1} - (1-p)s_K - p`).  The solver

1. propagates that linear system exactly, by Taylor series of the matrix exponential
   over steps with :math:`\|A_K\|_\infty h \le 2`, summed until the neglected tail is
   below 1e-20 (far below rounding);
2. watches the top component for the two events that change :math:`K`: the top level
   empties while :math:`\lambda s_{K-1} < p` (close it), or :math:`\lambda s_K` reaches
   :math:`p` from below (open level :math:`K+1`), locating them by bisection on the
   Taylor polynomial to machine precision, with a curvature bound so that no crossing
   between sample points is missed;
3. switches regime and continues.  The regime tests use bands of a few rounding units,
   so a state sitting exactly on a switching surface (as the invariant state does at
   ``lam + p = 1``) does not chatter.

This is a Filippov solution in the sense of :cite:`filippov1988differential`: on the
sliding surface it follows the unique convex combination of the two adjacent vector
fields that keeps the empty level empty, which is the MODEL's :math:`\min(\lambda s_k,
p)` term.  With ``p = 0`` the model has no discontinuity but infinitely many occupied
levels; it is truncated at a level ``L`` beyond which arrivals are blocked, and ``L``
is doubled until the blocked flow :math:`\lambda\int_0^T s_L\,dt` (a bound for the l1
truncation error, by coupling) is below the tolerance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _invariant as _inv
from . import _linear_noise as _ln
from ._fluid_kernels import fluid_run
from ._validation import check_flag, check_lam, check_p, check_real, check_s0, check_size, \
    check_times, real_array

__all__ = [
    "fluid_drift",
    "fluid_trajectory",
    "l1_distance",
    "relaxation_rate",
    "time_to_invariant",
]
# naive_fluid_solve and NaiveSolveResult (below) are the book's: the approach that fails,
# shown in the fluid chapter.  They live here because they are built from the solver's
# private parts (the raw drift, the reference solution and its limits), and are
# documented and imported as qtheory.book.naive_fluid_solve.

_THETA = 2.0        # ||A|| h per step
_NSUB = 8           # event samples per step
_NTERMS = 48        # largest Taylor order (never reached with theta = 2)
_TINY = 1e-20       # neglected Taylor tail per step (l1)
_INV_TOL = 1e-12    # slack for the invariants 0 <= s <= 1, non-increasing


# --------------------------------------------------------------------------- drift

def _as_state(s, name, validate):
    a = real_array(s, name)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return a


def _drift_s(s, lam, p, sliding=True):
    """Drift in s-coordinates for levels 0..L (same shape); also the flow to L+1."""
    L = s.size - 1
    pos = np.flatnonzero(s[1:] > 0.0)
    k = int(pos[-1]) + 1 if pos.size else 0
    ds = np.zeros_like(s)
    if k >= 1:
        i = np.arange(1, k)
        ds[i] = lam * (s[i - 1] - s[i]) - (1.0 - p) * (s[i] - s[i + 1])
        absorbed = min(lam * s[k], p) if sliding else 0.0
        ds[k] = lam * (s[k - 1] - s[k]) - (1.0 - p) * s[k] - (p - absorbed)
    spill = max(lam * s[k] - p, 0.0) if sliding else lam * s[k]
    if k + 1 <= L:
        ds[k + 1] = spill
        spill = 0.0
    return ds, spill


def _drift_v(v, lam, p, sliding=True):
    """Drift in tail-sum coordinates, straight from the g_i(v) form."""
    L = v.size - 1
    dv = np.zeros_like(v)
    for i in range(1, L + 1):
        vm = v[i - 1]
        vi = v[i]
        vp = v[i + 1] if i < L else 0.0
        if vi > 0.0:
            g = p
        elif vm > 0.0 and sliding:
            g = min(lam * (vm - vi), p)
        else:
            g = 0.0
        dv[i] = lam * (vm - vi) - (1.0 - p) * (vi - vp) - g
    dv[0] = dv[1] if L >= 1 else 0.0
    # flow into level L+1 (lost from the array): only when v_L = 0 < v_{L-1} cannot
    # happen; it happens when v_L > 0 is the top and arrivals outrun the server
    spill = 0.0
    top = v[L] if L >= 1 else 1.0
    if L == 0 or v[L] > 0.0:
        spill = max(lam * top - p, 0.0) if sliding else lam * top
    return dv, spill


def fluid_drift(s, lam, p, *, coords="s", validate=True, sliding=True):
    r"""Drift of the fluid model (the right-hand side of the fluid equations).

    Parameters
    ----------
    s : array_like of float, shape (L + 1,)
        With ``coords="s"``: tail fractions, ``s[0] = 1`` and ``s[i]`` the fraction of
        stations with at least ``i`` jobs; levels above ``L`` are empty.  With
        ``coords="v"``: tail sums ``v[i] = sum_{j >= i} s[j]``, so ``v[0] = 1 + v[1]``
        and ``v[1]`` is the mean queue length per station.
    lam : float
        Arrival rate per station (jobs per mean service time), ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    coords : {"s", "v"}
        Coordinate system of ``s`` and of the result.
    validate : bool
        If True (default), ``s`` must be a state: entries in [0, 1] (``s``-coordinates)
        non-increasing, ``s[0] = 1``; and there must be room for a level that opens
        (the top level must be below ``L`` when it spills over).  If False, the same
        formula is evaluated at any finite vector, with the top level
        :math:`\max\{i: s_i > 0\}` and any flow beyond level ``L`` dropped: this is
        what a generic ODE solver sees when it is handed the drift (see
        :func:`naive_fluid_solve`).
    sliding : bool
        If True (default), the fluid drift: when the level above the top is empty,
        the central server first absorbs the arrivals to the top level,
        :math:`\min(\lambda s_k, p)`, and spends the rest on the top level.  If
        False, the *pre-limit drift*: the mean rate of change per station of the
        N-system itself, in which the central server works at full rate :math:`p` on
        the top occupied level and arrivals to it open the level above at rate
        :math:`\lambda s_k`.  The two differ only at the top; the fluid drift is the
        average of the pre-limit drift over the fast back-and-forth of the top level
        that the N-system performs at such states.

    Returns
    -------
    ndarray of float64, shape (L + 1,)
        The time derivative (per mean service time) in the same coordinates; entry 0
        is 0 for ``s``-coordinates and equals entry 1 for ``v``-coordinates.

    Raises
    ------
    ValueError
        If ``lam``, ``p`` or ``coords`` are invalid, ``validate`` or ``sliding`` is not
        True or False (a string such as ``"no"`` is refused), if ``s`` is not a finite
        1-D array,
        or (with ``validate=True``) if it is not a state or a new level would open
        beyond the array (append a zero).

    Notes
    -----
    In ``v``-coordinates (Tsitsiklis and Xu 2012, eq. (3.2)),
    :math:`\dot v_i = \lambda(v_{i-1}-v_i) - (1-p)(v_i-v_{i+1}) - g_i(v)` with
    :math:`g_i = p` if :math:`v_i > 0`, :math:`\min(\lambda(v_{i-1}-v_i), p)` if
    :math:`v_i = 0 < v_{i-1}`, and 0 otherwise.  The two coordinate versions are
    implemented independently (the test suite checks they agree).

    References
    ----------
    Tsitsiklis and Xu (2012), Definition 3.1 and eq. (3.2); Xu (2011), Section 3.2.
    """
    lam = check_lam(lam)
    p = check_p(p)
    validate = check_flag(validate, "validate")
    sliding = check_flag(sliding, "sliding")
    if not isinstance(coords, str) or coords not in ("s", "v"):
        raise ValueError(f"coords must be 's' or 'v', got {coords!r}")
    a = _as_state(s, "s" if coords == "s" else "v", validate)
    if coords == "s":
        if validate:
            check_s0(a, "s", atol=0.0)
        ds, spill = _drift_s(a, lam, p, bool(sliding))
        if validate and spill > 0.0:
            raise ValueError("s has no room for the level that opens: append a zero "
                             "level to s")
        return ds
    if validate:
        if abs(a[0] - 1.0 - (a[1] if a.size > 1 else 0.0)) > 1e-12 * max(1.0, a[0]):
            raise ValueError("v must satisfy v[0] = 1 + v[1] (that is, s[0] = 1)")
        sv = np.append(a[:-1] - a[1:], a[-1])
        sv[0] = 1.0
        check_s0(sv, "s (from v)", atol=1e-12)
    dv, spill = _drift_v(a, lam, p, bool(sliding))
    if validate and spill > 0.0:
        raise ValueError("v has no room for the level that opens: append a zero "
                         "level to v")
    return dv


# ------------------------------------------------------------------------- solver

def _solve(lam, p, x0, times, theta, nsub, L_fixed, *, guess=None, slice_work=None,
           max_levels=None):
    """One run of the kernel. Returns (out, kmax, leak).

    ``guess``: levels to allocate at first (default from the invariant state); the arrays
    grow when more open.  ``slice_work``: if given, each compiled call covers at most that
    many level-time units (levels times time), so that Python sees Ctrl-C between calls;
    the state and the active top level carry over unchanged from one call to the next.
    ``max_levels``: a ValueError if the solution opens more levels than that.
    """
    m = times.size
    K = x0.size - 1
    blocked = L_fixed is not None
    if blocked:
        cap = L_fixed
        K = L_fixed
    else:
        if guess is None:
            guess = K
            if lam > p:
                guess = max(guess, _inv.top_level(lam, p))
            guess = 2 * guess
        cap = max(K, int(guess)) + 16
    x = np.zeros(cap + 1)
    x[: x0.size] = x0
    out = np.zeros((m, cap + 1))
    C = np.zeros((_NTERMS + 1, cap + 2))
    stack = np.zeros((512, 3))
    t = 0.0
    j = 0
    events = 0
    kmax = 0
    leak = 0.0
    max_events = 1_000_000
    tt = times.copy()  # the slice end is written into tt[k] while a slice runs
    t_last = float(times[-1])
    while True:
        k = m
        if slice_work is not None and j < m:
            # the arrays' width bounds the levels the slice can use (the active top
            # level may grow from 0 to the guess within one slice)
            t_stop = t + max(float(slice_work) / (cap + 1), 1e-3)
            if t_stop < t_last:
                k = int(np.searchsorted(times, t_stop, side="right"))
                if k < m:
                    tt[k] = t_stop  # a scratch row: overwritten when t reaches times[k]
        run_times = tt[: k + 1] if k < m else tt
        status, K, t, j, events, km, leak = fluid_run(
            float(lam), float(p), x, int(K), float(t), run_times, int(j), out,
            bool(blocked), float(theta), int(nsub), _TINY, int(max_events), int(events),
            C, stack, float(leak))
        kmax = max(kmax, km)
        if k < m:
            # row k held the state at the slice end only: clear it (it is written again,
            # up to the active top level of that time, when t reaches times[k])
            tt[k] = times[k]
            out[k, :] = 0.0
            if status == 0:
                j = k
                events = 0
                continue
        if status == 0:
            return out[:, : kmax + 1], kmax, leak
        if status == 1:
            new = 2 * cap
            if max_levels is not None and cap >= max_levels:
                raise ValueError(
                    f"fluid_trajectory: the solution at lam={lam!r}, p={p!r} opens more "
                    f"than {max_levels:,} levels before t = {t:g}; use shorter times or "
                    f"an s0 with fewer levels")
            x = np.concatenate([x, np.zeros(new - cap)])
            out = np.concatenate([out, np.zeros((m, new - cap))], axis=1)
            C = np.zeros((_NTERMS + 1, new + 2))
            cap = new
            continue
        if status == 2:
            raise RuntimeError(
                f"fluid_trajectory: more than {max_events} regime switches before "
                f"t = {t!r} at lam={lam!r}, p={p!r}; this should not happen, please "
                "report it")
        raise RuntimeError(
            f"fluid_trajectory: a non-finite value appeared at t = {t!r} "
            f"(lam={lam!r}, p={p!r}); please report it")


# p = 0: largest truncation level, and largest work (levels x horizon, one solve) that
# fluid_trajectory accepts; each compiled call covers at most _P0_SLICE level-time units
# so that Ctrl-C is honoured within about a second.
_P0_MAX_LEVELS = 200_000
_P0_MAX_WORK = 2e9
_P0_SLICE = 5e5


def _p0_levels(lam, x0, t_end, tol):
    """Truncation level for p = 0: where the invariant tail lam**L falls below tol, or
    where mass starting at the top of x0 cannot arrive by t_end (a Poisson(lam t_end)
    number of arrivals: mean + 12 standard deviations), whichever is lower."""
    k0 = x0.size - 1
    if lam == 0.0:
        return k0 + 8
    l_inv = math.log(tol) / math.log(lam) + 8
    l_walk = k0 + lam * t_end + 12.0 * math.sqrt(lam * t_end + 1.0) + 16
    return int(math.ceil(min(l_inv, l_walk)))


def _solve_sliced(lam, x0, times, theta, nsub, L):
    """_solve with p = 0 and a fixed L, in slices of bounded work (interruptible)."""
    dt = max(1.0, _P0_SLICE / L)
    t_end = float(times[-1])
    if t_end <= dt:
        out, _, leak = _solve(lam, 0.0, x0, times, theta, nsub, L)
        return out, leak
    rows = np.zeros((times.size, L + 1))
    x = x0
    t0 = 0.0
    leak = 0.0
    j = 0
    while True:
        t1 = min(t0 + dt, t_end)
        # output times in (t0, t1] plus the slice end, relative to t0
        k = int(np.searchsorted(times, t1, side="right"))
        seg = np.append(times[j:k], t1) - t0
        out, _, lk = _solve(lam, 0.0, x, np.maximum(seg, 0.0), theta, nsub, L)
        leak += lk
        rows[j:k, : out.shape[1]] = out[:-1]
        x = out[-1]
        nz = np.flatnonzero(x > 0)
        x = x[: nz[-1] + 1] if nz.size else x[:1]
        j = k
        t0 = t1
        if t1 >= t_end:
            break
    nz = np.flatnonzero(rows.max(axis=0) > 0)
    return rows[:, : (nz[-1] + 1 if nz.size else 1)], leak


def _solve_p0(lam, x0, times, theta, nsub, tol, L_start):
    """p = 0: truncate at L levels (arrivals beyond L blocked), doubling L."""
    L = max(L_start, x0.size - 1 + 8, _p0_levels(lam, x0, float(times[-1]), tol))
    while True:
        out, leak = _solve_sliced(lam, x0, times, theta, nsub, L)
        if lam * leak <= 0.1 * tol:
            return out, L
        L *= 2
        if L > 2 * _P0_MAX_LEVELS:
            raise RuntimeError(f"fluid_trajectory: p = 0 needs more than "
                               f"{2 * _P0_MAX_LEVELS} levels for this horizon and "
                               f"tolerance")


def _check_invariants(out, lam, p):
    if not np.all(np.isfinite(out)):
        raise RuntimeError("fluid_trajectory: non-finite value in the result")
    bad = (np.any(out < -_INV_TOL) or np.any(out > 1.0 + _INV_TOL)
           or np.any(np.diff(out, axis=1) > _INV_TOL) or np.any(out[:, 0] != 1.0))
    if bad:
        raise RuntimeError(
            f"fluid_trajectory: the result breaks 1 >= s_1 >= s_2 >= ... >= 0 by more "
            f"than {_INV_TOL:g} at lam={lam!r}, p={p!r}; this is a bug, please report it")
    out = np.clip(out, 0.0, 1.0)
    return np.minimum.accumulate(out, axis=1)


def _pad(a, width):
    if a.shape[1] >= width:
        return a
    return np.concatenate([a, np.zeros((a.shape[0], width - a.shape[1]))], axis=1)


# Longest horizon fluid_trajectory accepts, in mean service times.
_MAX_TIME = 1e6
# p > 0: largest number of levels and largest work (levels x horizon, one solve) that
# fluid_trajectory accepts, as for p = 0; each compiled call covers at most _SLICE_WORK
# level-time units (a fraction of a second) so that Ctrl-C is honoured at once.
_MAX_LEVELS = 200_000
_MAX_WORK = 2e9
_SLICE_WORK = 5e5
# Largest result, in numbers (times x levels): 400 MB.
_MAX_OUTPUT = 5e7


def _arrival_levels(lam, p, t_end):
    """For p > 0: how many levels above the initial top level can open by t_end.

    Level k + 1 opens only when lam s_k > p.  A station's queue never exceeds its initial
    length plus its arrivals, a Poisson(lam t) number A(t), so s_{k0 + j}(t) <=
    P(A(t) >= j) <= exp(-m + j - j log(j/m)) (Chernoff, m = lam t, j > m).  Levels above
    k0 + j stay closed once that bound is at most p/lam; this returns that j (+ 1).
    """
    m = lam * t_end
    if lam <= p or m <= 0.0:
        return 1
    target = math.log(p / lam)  # < 0

    def bound(j):
        return -m + j - j * math.log(j / m)

    lo, hi = m, max(2.0 * m, m + 1.0)  # bound(m) = 0 > target; bound decreases above m
    while bound(hi) > target:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 0.5:
        mid = 0.5 * (lo + hi)
        if bound(mid) > target:
            lo = mid
        else:
            hi = mid
    return int(math.ceil(hi)) + 1


def _levels_bound(lam, p, x0, t_end):
    """Levels a p > 0 solution from x0 can occupy up to t_end (without building a state).

    Two bounds: the fluid stays below the shifted invariant state (every level up to the
    top k0 of x0 full, then s^I), whose top level is k0 + i*; and levels open only where
    arrivals can reach by t_end (:func:`_arrival_levels`).  Plus 2 for the level that is
    opening and the array's end.
    """
    k0 = x0.size - 1
    istar = _inv.top_level(lam, p)
    return k0 + 2 + min(istar, _arrival_levels(lam, p, t_end))


def fluid_trajectory(lam, p, times, s0=None, *, tol=1e-10, check=True):
    r"""The fluid solution :math:`s(t)` at the requested times.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    times : array_like of float, shape (m,)
        Observation times in mean service times: finite, ``>= 0``, non-decreasing, at
        most 1e6 (beyond that the fluid state is the invariant state to rounding for
        every p > 0 and lam < 0.99; the cost grows linearly with the horizon).
    s0 : array_like of float, shape (L0 + 1,), optional
        Initial tail fractions at time 0: ``s0[0] = 1``, entries in [0, 1],
        non-increasing, finite (hence finite mean).  Default: the empty system
        ``[1.0]``.  Mass may sit at any level; levels open and close as needed.
    tol : float, optional
        Accuracy target for the l1 distance (over levels) at every output time, in
        ``[1e-14, 1e-3]``.  For ``p > 0`` the solver is exact up to rounding (errors
        of order 1e-14 at ``t = 1e4`` for ``lam = 0.99, p = 0.05``) whatever ``tol``;
        ``tol`` is what ``check`` holds it to.  For ``p = 0`` it also sets the
        truncation level.  Rounding sets a floor: each step adds a few rounding units
        per level, and the dynamics damps them only over the relaxation time
        ``1/relaxation_rate(lam, p)``, so with ``lam`` very close to 1 and a long
        horizon the error grows with the number of steps (``lam = 1 - 1e-12, p = 0.5``:
        about 1e-10 at ``t = 1e6``, over 1.5e6 steps); a ``tol`` below that floor is
        refused (see Raises).
    check : bool, optional
        If True (default), solve a second time with half the step, twice the event
        sampling (and, for ``p = 0``, twice the truncation level), and raise if the
        two differ by more than ``tol`` at any output time.  Costs a second solve.

    Returns
    -------
    ndarray of float64, shape (m, levels)
        ``out[j, i]`` is :math:`s_i(t_j)`, the fraction of stations with at least
        ``i`` jobs; ``out[:, 0] = 1``.  ``levels - 1`` is the highest level occupied
        at some output time (higher levels are empty).  Every row satisfies
        ``1 = s_0 >= s_1 >= ... >= 0`` exactly (after checking that the raw solution
        does so to 1e-12).

    Raises
    ------
    ValueError
        For ``lam`` outside ``[0, 1)``, ``p`` outside ``[0, 1]``, invalid ``times``
        (NaN, infinite, negative, decreasing, empty, not real numbers) or ``s0`` (not
        finite, entries outside [0, 1], not non-increasing, ``s0[0] != 1``), or
        ``tol`` out of range.  Before any solving, when the solution needs more than
        200,000 levels or the work (levels times horizon) exceeds 2e9 level-time units
        (minutes of computing), rather than running for hours: for ``p = 0`` with
        ``lam`` very close to 1 and long times (the truncation level), for ``p > 0``
        with tiny ``p`` and ``lam`` close to 1 (``lam = 0.999, p = 1e-6`` has a top
        level of 6911: times up to about 2.9e5), or an ``s0`` with very many levels;
        the number of levels is bounded without building any state (the initial top
        level plus the least of the invariant top level and the levels arrivals can
        reach by then).  Also when the result would hold more than 5e7 numbers
        (``times`` entries times levels).  With ``check=True``, when the two solves
        differ by more than ``tol`` by no more than rounding explains: ``tol`` is then
        below the rounding floor (``lam`` close to 1 with a long horizon, see ``tol``),
        and the message names ``lam``, ``p``, the horizon and the ``tol`` that holds.
    RuntimeError
        If the result breaks the invariants, if the two solves of ``check`` disagree by
        more than rounding can explain, or if the solver meets an inconsistency; never
        a silent wrong number.

    Notes
    -----
    See the module docstring for the method: exact propagation of the linear system of
    each regime (fixed active top level), with the regime switches located to machine
    precision.  Cost is proportional to ``max(times) * levels`` with a small constant:
    ``lam = 0.99, p = 0.05`` to ``t = 1e4`` takes a few hundredths of a second per
    solve (``bench/fluid_speed.py``).  The compiled solver runs in slices of at most
    5e5 level-time units, a fraction of a second each, so that Ctrl-C (which compiled
    code does not see) interrupts a long solve between two slices.

    References
    ----------
    Tsitsiklis and Xu (2012), Definition 3.1, eq. (3.2), and Theorem 3.2 (existence and
    uniqueness of fluid solutions); Filippov (1988) for solutions of discontinuous
    differential equations.

    Examples
    --------
    >>> s = fluid_trajectory(0.9, 0.1, [0.0, 1000.0])
    >>> s.shape[0], round(float(s[1, 1]), 9)
    (2, 0.888888889)
    """
    check = check_flag(check, "check")
    lam = check_lam(lam)
    p = check_p(p)
    t = check_times(times)
    tol = check_real(tol, "tol", low=1e-14, high=1e-3)
    x0 = np.array([1.0]) if s0 is None else check_s0(s0)
    return _fluid_trajectory(lam, p, t, x0, tol, check)


def _fluid_trajectory(lam, p, t, x0, tol, check):
    """fluid_trajectory for validated arguments (``x0`` as check_s0 returns it); the
    limits on the horizon and the p = 0 work still apply."""
    if t[-1] > _MAX_TIME:
        raise ValueError(f"times must lie in [0, {_MAX_TIME:.0e}] mean service times (the "
                         f"cost grows linearly with the horizon), got {t[-1]:g}")
    t_end = float(t[-1])
    if p == 0.0:
        need = _p0_levels(lam, x0, t_end, tol)
        if need > _P0_MAX_LEVELS or need * t_end > _P0_MAX_WORK:
            raise ValueError(
                f"at p = 0 each station is an M/M/1 queue with infinitely many levels; "
                f"lam={lam!r} with times up to {t_end:g} needs about {need:.3g} "
                f"levels (limit {_P0_MAX_LEVELS:,}) and {need * t_end:.3g} "
                f"level-time units of work (limit {_P0_MAX_WORK:.0e}); use a smaller "
                f"lam, shorter times or a larger tol (the fluid mean is "
                f"lam/(1 - lam) = {lam / (1.0 - lam):.6g} at equilibrium)")
    else:
        need = _levels_bound(lam, p, x0, t_end)
        if need > _MAX_LEVELS or need * t_end > _MAX_WORK:
            k0 = x0.size - 1
            where = (f"the {k0:,} levels of s0 plus up to " if k0 else "up to ")
            t_ok = _MAX_WORK / need
            raise ValueError(
                f"fluid_trajectory at lam={lam!r}, p={p!r} with times up to {t_end:g} "
                f"needs about {need:.3g} levels ({where}"
                f"{need - k0 - 2:,} that can open: the invariant state has "
                f"{_inv.top_level(lam, p):,}) and {need * t_end:.3g} level-time "
                f"units of work; the limits are {_MAX_LEVELS:,} levels and "
                f"{_MAX_WORK:.0e} units (minutes of computing). Use shorter times (up "
                f"to about {t_ok:.3g} here), fewer levels in s0, a smaller lam or a "
                f"larger p")
    if t.size * (need + 1) > _MAX_OUTPUT:
        raise ValueError(
            f"times has {t.size:,} entries and the solution about {need + 1:,} levels: "
            f"the result would hold {t.size * (need + 1):.3g} numbers, more than "
            f"{_MAX_OUTPUT:.0e} ({8 * _MAX_OUTPUT / 1e6:.0f} MB); use fewer times")

    def run(theta, nsub, level_factor):
        if p == 0.0:
            out, L = _solve_p0(lam, x0, t, theta, nsub, tol, 16 * level_factor)
            return out
        out, _, _ = _solve(lam, p, x0, t, theta, nsub, None, guess=need,
                           slice_work=_SLICE_WORK, max_levels=_MAX_LEVELS)
        return out

    out = _check_invariants(run(_THETA, _NSUB, 1), lam, p)
    if check:
        ref = _check_invariants(run(_THETA / 2, 2 * _NSUB, 2), lam, p)
        w = max(out.shape[1], ref.shape[1])
        diff = np.abs(_pad(out, w) - _pad(ref, w)).sum(axis=1).max()
        if not diff <= tol:
            steps, damp, floor = _rounding_floor(lam, p, w - 1, t_end)
            if diff <= floor:
                raise ValueError(
                    f"fluid_trajectory: tol={tol:g} cannot be met at lam={lam!r}, "
                    f"p={p!r} with times up to {t_end:g}: two solves with different "
                    f"step sizes differ by {diff:.3g}, the rounding error of about "
                    f"{steps:.3g} steps on {w - 1} levels, which the dynamics damps only "
                    f"over {damp:.3g} time units (1/relaxation_rate; lam close to 1 "
                    f"relaxes slowly). Valid here: tol >= {2 * diff:.1e} (or check=False), "
                    f"or shorter times, or lam farther from 1")
            raise RuntimeError(
                f"fluid_trajectory: two step sizes disagree by {diff:.3g} > tol={tol:g} "
                f"(lam={lam!r}, p={p!r}), more than rounding explains; please report it")
    return out


def _rounding_floor(lam, p, levels, t_end):
    """How far two correct solves may differ by rounding alone: (steps, damping time,
    bound).  Each step adds a few rounding units per level; the errors add up over the
    steps until the dynamics damps them, at the relaxation rate mu (l1 contraction).  The
    bound is 64 rounding units per level and step, over min(steps, 1/(mu h)) steps."""
    h = _THETA / max(2.0 * (lam + 1.0 - p), 1.0)
    steps = t_end / h + 1.0
    mu = _ln.relaxation_rate(lam, p)
    damp = 1.0 / mu if mu > 0.0 else math.inf
    n = min(steps, damp / h + 1.0)
    return steps, damp, 64.0 * (levels + 1) * np.finfo(float).eps * n


# ---------------------------------------------------------------- distances, rates

def l1_distance(a, b):
    r"""l1 distance :math:`\sum_{i \ge 1} |a_i - b_i|` between occupancy vectors.

    Parameters
    ----------
    a, b : array_like of float, shape (..., La) and (..., Lb)
        Tail fractions (last axis = level, level 0 included); the shorter is padded
        with empty levels.  Leading axes broadcast.

    Returns
    -------
    float or ndarray of float64, shape (...)
        In units of jobs per station: the l1 distance of two s-vectors is the expected
        number of jobs per station that would have to move between levels to turn one
        into the other.

    Raises
    ------
    ValueError
        If an input is not a finite numeric array with at least one dimension.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 3 (the weighted norm on the state space; the l1
    norm of s is the mean queue length).
    """
    A = real_array(a, "a")
    B = real_array(b, "b")
    for name, X in (("a", A), ("b", B)):
        if X.ndim == 0 or not np.all(np.isfinite(X)):
            raise ValueError(f"{name} must be a finite array with at least one axis")
    w = max(A.shape[-1], B.shape[-1])
    A = np.concatenate([A, np.zeros(A.shape[:-1] + (w - A.shape[-1],))], axis=-1)
    B = np.concatenate([B, np.zeros(B.shape[:-1] + (w - B.shape[-1],))], axis=-1)
    try:
        d = np.abs(A - B)[..., 1:].sum(axis=-1)
    except ValueError:
        raise ValueError(f"the leading axes of a {A.shape[:-1]} and b {B.shape[:-1]} "
                         f"do not broadcast") from None
    return float(d) if d.ndim == 0 else d


def relaxation_rate(lam, p):
    r"""Exponential rate at which fluid solutions approach the invariant state.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.

    Returns
    -------
    float
        :math:`\mu = -\max \operatorname{spec}(A_{i^*})`, per mean service time, where
        :math:`A_{i^*}` is the matrix of the fluid model linearized at the invariant
        state (exactly linear near it: the top level :math:`i^*` is fixed there).  When
        the invariant state sits on the switching surface (:math:`\lambda s_{i^*} = p`
        to rounding, tolerance :math:`64\,\varepsilon\max(p, \lambda r^{i^*})`; on the
        line ``lam + p = 1`` exactly when ``lam/p`` is an integer, as at (0.9, 0.1)) a
        perturbation may open level :math:`i^*+1`, and the smaller of the rates of both
        regimes is returned.  For ``lam < p`` the fluid empties in finite time:
        ``math.inf``.  For ``p = 0`` (an M/M/1 queue per
        station, infinitely many levels): :math:`(1-\sqrt\lambda)^2`, the spectral gap
        of the M/M/1 queue.  Distances decay like :math:`e^{-\mu t}` for large t.

    Raises
    ------
    ValueError
        If ``lam`` or ``p`` are out of range.

    Notes
    -----
    :math:`A_{i^*}` is tridiagonal with sub-diagonal :math:`\lambda`, super-diagonal
    :math:`1-p`, so it is similar to a symmetric matrix and its spectrum is real; its
    column sums are :math:`\le 0`, so :math:`\|e^{A t}\|_1 \le 1` (the l1 contraction
    seen in the regime).  Its largest eigenvalue is the root of a scalar secular
    equation (see ``qtheory._linear_noise.regime_matrix_eigmax``), solved without building the matrix:
    the cost and memory do not depend on :math:`i^*` (which is about 6534 at
    ``p = 1e-300``, ``lam = 0.9``, and unbounded as ``p -> 0``), and a tiny rate (a
    slowly relaxing invariant state) keeps its relative accuracy.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.5 (global stability); for the relaxation rate
    :math:`(1-\sqrt\lambda)^2` of the M/M/1 queue see Kleinrock (1975), vol. 1, on
    its transient behaviour.
    """
    lam = check_lam(lam)
    p = check_p(p)
    return _ln.relaxation_rate(lam, p)


def time_to_invariant(lam, p, *, eps=1e-3, s0=None, t_max=1e7):
    r"""First time the fluid solution is within ``eps`` of the invariant state.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 < p <= 1``.
    eps : float, optional
        Radius of the neighbourhood, in l1 distance (jobs per station), ``> 0`` and at
        least the rounding floor of the fluid solution at ``(lam, p)``: about
        :math:`(i^* + 2)\,u\,(1 + 1/(\mu h))` with :math:`u` the unit roundoff,
        :math:`\mu` the relaxation rate and :math:`h \approx 1/(1 + \lambda)` the
        solver's step (1.6e-13 at ``lam = 0.9, p = 0.1``; distances below it are not
        resolved).
    s0 : array_like, optional
        Initial state (default: empty system), as in :func:`fluid_trajectory`.
    t_max : float, optional
        Give up after this time (mean service times), in ``(0, 1e9]``.  The march
        continues past the horizon of a single :func:`fluid_trajectory` call, so every
        ``t_max`` can be reached.

    Returns
    -------
    float
        :math:`\inf\{t : \|s(t) - s^I\|_1 \le \varepsilon\}`, to a relative accuracy of
        about 1e-6 (bisection on the fluid solution).

    Raises
    ------
    ValueError
        If an argument is out of range, if ``p = 0`` (infinitely many levels), if
        ``eps`` is below the rounding floor, or if reaching ``eps`` would take longer
        than ``t_max`` or more work than the fluid solver allows (levels times time up
        to 2e9): the estimate :math:`\log(d_0/\varepsilon)/\mu` from the initial distance
        :math:`d_0` and the relaxation rate is in the message (refused when it exceeds
        four times ``t_max``, or its work the limit; a march that runs four times over
        the work limit is stopped with the same error).
    RuntimeError
        If the neighbourhood is not reached by ``t_max``.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.5 (every fluid solution converges to the
    invariant state).
    """
    lam = check_lam(lam)
    p = check_real(p, "p", low=0.0, high=1.0, low_open=True)
    eps = check_real(eps, "eps", low=0.0, low_open=True)
    t_max = check_real(t_max, "t_max", low=0.0, low_open=True, high=1e9)
    x0 = np.array([1.0]) if s0 is None else check_s0(s0)
    istar = _inv.top_level(lam, p)
    if x0.size + istar + 2 > _MAX_LEVELS // 2:
        raise ValueError(
            f"time_to_invariant: the invariant state at lam={lam!r}, p={p!r} has {istar:,} "
            f"levels (with s0: {x0.size + istar:,}), more than the fluid solver follows "
            f"over long times ({_MAX_LEVELS // 2:,}); use a larger p or a smaller lam")
    target = _inv.invariant_state(lam, p)
    d0 = l1_distance(x0, target)
    if d0 <= eps:
        return 0.0
    mu = _ln.relaxation_rate(lam, p)
    h = _THETA / max(2.0 * (lam + 1.0 - p), 1.0)
    floor = (istar + 2) * np.finfo(float).eps * (1.0 + (1.0 / (mu * h) if mu > 0 else 0.0))
    if eps < floor:
        raise ValueError(
            f"time_to_invariant: eps={eps:g} is below the rounding floor of the fluid "
            f"solution at lam={lam!r}, p={p!r}, about {floor:.1e} (rounding errors of "
            f"{istar + 2} levels, damped at the relaxation rate {mu:.3g}): distances "
            f"below it are not resolved; use eps >= {floor:.1e}")
    t_est = math.log(d0 / eps) / mu if math.isfinite(mu) else 0.0
    levels = x0.size + istar + 2
    if t_est > 4.0 * t_max or levels * t_est > _MAX_WORK:
        raise ValueError(
            f"time_to_invariant: at lam={lam!r}, p={p!r} the distance to the invariant "
            f"state decays like exp(-mu t) with mu = relaxation_rate = {mu:.3g}, so "
            f"reaching eps={eps:g} from the initial distance {d0:.3g} takes about "
            f"log(d0/eps)/mu = {t_est:.3g} time units: "
            + (f"far beyond t_max={t_max:g}" if t_est > 4.0 * t_max else
               f"with {levels:,} levels, beyond the fluid solver's work limit "
               f"({_MAX_WORK:.0e} level-time units)")
            + "; use a larger eps, a larger t_max, a smaller lam or a larger p")
    # march forward on doubling horizons (the distance to the invariant state never
    # increases, by the l1 contraction), then refine the bracket from its left end; each
    # call stays within fluid_trajectory's horizon and work limits
    t_now, s_now, span, work = 0.0, x0, 1.0, 0.0
    while True:
        x_now = check_s0(s_now)  # the last row of a solution, trailing zeros trimmed
        k_now = x_now.size - 1
        span = min(span, _MAX_TIME, 0.5 * _MAX_WORK / (k_now + istar + 2))
        if t_max > t_now:
            span = min(span, max(t_max - t_now, 1e-9))
        if work + levels * span > 4.0 * _MAX_WORK:
            raise ValueError(
                f"time_to_invariant: not within eps={eps:g} of the invariant state by "
                f"t = {t_now:g} at lam={lam!r}, p={p!r}, after the fluid solver's work "
                f"limit (relaxation rate {mu:.3g}); use a larger eps or a smaller t_max")
        grid = np.linspace(0.0, span, 257)
        sol = _fluid_trajectory(lam, p, grid, x_now, 1e-10, False)
        hit = np.flatnonzero(l1_distance(sol, target) <= eps)
        if hit.size:
            k = int(hit[0])
            a, b, sa = t_now + grid[k - 1], t_now + grid[k], sol[k - 1]
            break
        t_now += span
        work += levels * span
        s_now = sol[-1]
        if t_now >= t_max:
            raise RuntimeError(f"time_to_invariant: not within eps={eps:g} of the "
                               f"invariant state by t_max={t_max:g}")
        span *= 2.0
    while b - a > 1e-7 * b:
        fine = np.linspace(0.0, b - a, 65)
        ss = _fluid_trajectory(lam, p, fine, check_s0(sa), 1e-10, False)
        k = int(np.flatnonzero(l1_distance(ss, target) <= eps)[0])
        a, b, sa = a + fine[k - 1], a + fine[k], ss[k - 1]
    return float(b)


# ------------------------------------------------------------- the naive approach
# (the book's: qtheory.book.naive_fluid_solve)

@dataclass
class NaiveSolveResult:
    """What a generic ODE solver reports for the fluid model with the raw drift.

    Attributes
    ----------
    method : str
        SciPy ``solve_ivp`` method.
    sliding : bool
        Which drift the solver was given (see :func:`fluid_drift`).
    lam, p, t_end, rtol : float
        The inputs.
    success : bool
        What SciPy reported (``sol.success``); False also when the evaluation budget
        ran out.
    stalled : bool
        True if the solver used up ``max_evaluations`` drift evaluations before
        ``t_end`` (its step size collapsed at a discontinuity).
    t_reached : float
        Last time the solver reached.
    s_end : ndarray, shape (levels + 1,)
        Its state there (``s[0] = 1`` prepended).
    n_evaluations : int
        Drift evaluations used.
    error : float
        l1 distance between ``s_end`` and :func:`fluid_trajectory` at ``t_reached``.
    min_value : float
        Smallest fraction the solver returned at ``t_reached`` (negative = impossible).
    message : str
        SciPy's message, or the reason it was stopped.
    """

    method: str
    sliding: bool
    lam: float
    p: float
    t_end: float
    rtol: float
    success: bool
    stalled: bool
    t_reached: float
    s_end: np.ndarray
    n_evaluations: int
    error: float
    min_value: float
    message: str


class _Budget(Exception):
    pass


# naive_fluid_solve: largest sizes it accepts.
_NAIVE_MAX_LEVELS = 10**6
_NAIVE_MAX_LEVELS_IMPLICIT = 2_000   # a dense Jacobian of 32 MB, LU in a fraction of a second
_NAIVE_MAX_EVALUATIONS = 10**6
_NAIVE_MAX_WORK = 2e9


def _check_reference_solvable(lam, p, t_end):
    """naive_fluid_solve compares with fluid_trajectory at the time reached (<= t_end):
    refuse, naming t_end, what fluid_trajectory would refuse as times."""
    x0 = np.array([1.0])
    if p == 0.0:
        need = _p0_levels(lam, x0, t_end, 1e-10)
        ok = need <= _P0_MAX_LEVELS and need * t_end <= _P0_MAX_WORK
    else:
        need = _levels_bound(lam, p, x0, t_end)
        ok = need <= _MAX_LEVELS and need * t_end <= _MAX_WORK
    if not ok:
        raise ValueError(
            f"t_end={t_end:g} at lam={lam!r}, p={p!r} is beyond what the reference "
            f"solution (fluid_trajectory) computes in bounded time: about {need:.3g} "
            f"levels for {need * t_end:.3g} level-time units; use a shorter t_end")


def naive_fluid_solve(lam, p, t_end, *, method="RK45", rtol=1e-6, atol=1e-9,
                      levels=None, max_evaluations=100_000, sliding=True):
    r"""Hand the raw fluid drift to a generic SciPy ODE solver, from the empty system.

    This is the approach that fails; qtheory provides it so that the book can show
    *how* it fails.  The state is a fixed vector of ``levels`` fractions and the
    right-hand side is :func:`fluid_drift` with ``validate=False``.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    t_end : float
        Horizon, mean service times, in ``(0, 1e6]`` (the reference solution
        :func:`fluid_trajectory` must be computable at the time reached).
    method : {"RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA"}
        SciPy ``solve_ivp`` method.
    rtol, atol : float
        Solver tolerances, in (0, 1).
    levels : int, optional
        Number of levels (default ``2 i* + 10``; 200 for ``p = 0``): at most 1e6, and at
        most 2000 for the implicit methods Radau, BDF and LSODA, which build a dense
        ``levels x levels`` Jacobian (1e5 levels would need 80 GB).
    max_evaluations : int
        Budget of drift evaluations, at most 1e6; the solver is stopped when it is used
        up (deterministic, unlike a wall-clock limit).  ``levels * max_evaluations``
        must be at most 2e9.
    sliding : bool
        Passed to :func:`fluid_drift`: True hands the solver the fluid drift, False
        the pre-limit drift (the N-system's mean drift read literally).

    Returns
    -------
    NaiveSolveResult

    Raises
    ------
    ValueError
        If an argument is out of range (``sliding`` must be True or False; the sizes
        above have ceilings).

    References
    ----------
    Hairer and Wanner's solvers as wrapped by SciPy (``scipy.integrate.solve_ivp``);
    Filippov (1988), Chapter 2, on why steppers chatter at a discontinuity.
    """
    lam = check_lam(lam)
    p = check_p(p)
    sliding = check_flag(sliding, "sliding")
    t_end = check_real(t_end, "t_end", low=0.0, low_open=True, high=_MAX_TIME)
    methods = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")
    if not isinstance(method, str) or method not in methods:
        raise ValueError(f"method must be one of {methods}, got {method!r}")
    rtol = check_real(rtol, "rtol", low=0.0, high=1.0, low_open=True, high_open=True)
    atol = check_real(atol, "atol", low=0.0, high=1.0, low_open=True, high_open=True)
    max_evaluations = check_size(max_evaluations, "max_evaluations", minimum=1,
                                 maximum=_NAIVE_MAX_EVALUATIONS,
                                 what="each evaluation costs tens of microseconds")
    implicit = method in ("Radau", "BDF", "LSODA")
    cap = _NAIVE_MAX_LEVELS_IMPLICIT if implicit else _NAIVE_MAX_LEVELS
    why = (f"{method} builds a dense levels x levels Jacobian" if implicit else
           "each level is one equation of the ODE system")
    if levels is None:
        levels = 2 * _inv.top_level(lam, p) + 10 if p > 0 else 200
        if levels > cap:
            raise ValueError(
                f"the default levels (2 i* + 10 = {levels:,}, i* the top level of the "
                f"invariant state at lam={lam!r}, p={p!r}) exceed {cap:,} ({why}); "
                f"pass levels <= {cap:,}")
    levels = check_size(levels, "levels", minimum=1, maximum=cap, what=why)
    if levels * max_evaluations > _NAIVE_MAX_WORK:
        raise ValueError(
            f"levels x max_evaluations = {levels:,} x {max_evaluations:,} = "
            f"{levels * max_evaluations:.3g} level-evaluations, more than "
            f"{_NAIVE_MAX_WORK:.0e} (minutes of NumPy work); lower levels or "
            f"max_evaluations")
    _check_reference_solvable(lam, p, t_end)
    count = [0]
    last = [0.0, np.zeros(levels)]

    def rhs(t, y):
        count[0] += 1
        if count[0] > max_evaluations:
            raise _Budget()
        if not np.all(np.isfinite(y)):
            return np.zeros_like(y)
        return _drift_s(np.concatenate([[1.0], y]), lam, p, bool(sliding))[0][1:]

    from scipy.integrate import BDF, DOP853, LSODA, RK23, RK45, Radau

    cls = dict(RK45=RK45, RK23=RK23, DOP853=DOP853, Radau=Radau, BDF=BDF,
               LSODA=LSODA)[method]
    y = np.zeros(levels)
    t_reached = 0.0
    stalled = False
    message = ""
    solver = None
    try:
        # the solver's set-up already evaluates the drift: keep it inside the budget
        solver = cls(rhs, 0.0, y.copy(), t_end, rtol=rtol, atol=atol)
        while solver.status == "running":
            msg = solver.step()
            if msg:
                message = str(msg)
            t_reached, y = float(solver.t), solver.y.copy()
    except _Budget:
        stalled = True
        message = f"stopped after {max_evaluations} drift evaluations"
    success = solver is not None and solver.status == "finished" and not stalled
    if success:
        message = "The solver successfully reached the end of the integration interval."
    s_end = np.concatenate([[1.0], y])
    ref = _fluid_trajectory(lam, p, check_times([t_reached]), np.array([1.0]), 1e-10,
                            False)[0]
    err = l1_distance(s_end, ref) if np.all(np.isfinite(s_end)) else math.inf
    return NaiveSolveResult(method, bool(sliding), lam, p, t_end, rtol, success,
                            stalled, t_reached, s_end, min(count[0], max_evaluations), err,
                            float(np.min(s_end)), message)
