r"""The coupled construction of the fluid-limit proof, and the quantities its lemmas bound.

Part III proves the fluid limit pathwise: every N-station system is built from *one*
rate-1 Poisson clock with points :math:`\tau_1 < \tau_2 < \dots` and *one* sequence of
i.i.d. uniforms :math:`U_1, U_2, \dots`; the N-system has its k-th event at time
:math:`\tau_k/(Nq)`, :math:`q = 1 + \lambda`, and the uniform :math:`U_k` decides what the
event does (an arrival if :math:`U_k < \lambda/q`, to a station with at least
:math:`i - 1` jobs exactly when :math:`U_k < (\lambda/q) s_{i-1}`; a local token at a
station with at least :math:`i` jobs exactly when
:math:`\lambda/q \le U_k < \lambda/q + (1-p)s_i/q`; a central token otherwise).  The
lemmas of the proof bound, for every N and every sample, quantities that this module
computes from one run:

* :func:`coupled_driver` -- the common randomness (clock points and uniforms), the same
  prefix for every N;
* :func:`coupled_run` -- one N-system of the coupled construction, with its path on a
  grid, the largest tail sums reached, and the counting errors of the proof (arrivals
  and local tokens against the integrals of their state-dependent thresholds, and the
  tail-sum increments against the fluid drift);
* :func:`counting_bound` -- the explicit bound of the counting lemma (state-dependent
  thresholds) computed from the run's clock and uniforms;
* :func:`increments_bound` -- the error of the increments lemma (tail sums against the
  fluid drift with a fully working central server);
* :func:`tail_bound` -- the explicit bound of the tail lemma on the largest tail sums;
* :func:`dkw_uniform_bound` -- the Dvoretzky--Kiefer--Wolfowitz--Massart bound on the
  uniform counting error, with probability at least ``1 - beta``;
* :func:`truncated_fluid_trajectory` -- the truncated, regularized fluid model of the
  existence proof (a Lipschitz ODE on ``n_levels`` levels), whose solutions approach the
  fluid solution as ``eps`` decreases and ``n_levels`` grows.

References: Tsitsiklis and Xu (2012), Section 4 (the coupled construction); Massart
(1990) (the DKW inequality with constant 2); the chapters "Fluid solutions" and "The
fluid limit" of the book (the lemmas whose bounds are computed here).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .._numba import jit
from .._validation import check_lam, check_n_stations, check_p, check_positive_int, \
    check_real, check_s0, check_seed, check_times

__all__ = [
    "CoupledDriver",
    "coupled_driver",
    "CoupledRun",
    "coupled_run",
    "CountingBound",
    "counting_bound",
    "increments_bound",
    "TailBound",
    "tail_bound",
    "dkw_uniform_bound",
    "truncated_fluid_trajectory",
]

# Largest number of clock points one call draws (16 bytes each): 2e8 is 3.2 GB.
_MAX_EVENTS = 5e7
_MAX_STATIONS = 10**7


# ----------------------------------------------------------------------------- driver
@dataclass(frozen=True)
class CoupledDriver:
    r"""The common randomness of the coupled construction.

    Attributes
    ----------
    tau : ndarray of float64, shape (n,)
        The first n points :math:`\tau_1 < \dots < \tau_n` of a rate-1 Poisson process
        on :math:`[0, \infty)`.
    u : ndarray of float64, shape (n,)
        The first n uniforms :math:`U_1, \dots, U_n` on [0, 1), independent of ``tau``.
    seed : numpy.random.SeedSequence
        The seed that generated them; :func:`coupled_driver` with the same seed and a
        larger ``n_events`` returns the same values as a prefix.
    """

    tau: np.ndarray
    u: np.ndarray
    seed: np.random.SeedSequence = field(repr=False)

    @property
    def n_events(self):
        """Number of points held."""
        return int(self.tau.size)


def coupled_driver(n_events, seed=0):
    r"""The first ``n_events`` clock points and uniforms of the coupled construction.

    Parameters
    ----------
    n_events : int
        How many points and uniforms to draw, ``1 <= n_events <= 5e7``.
    seed : None, int >= 0 or numpy.random.SeedSequence, optional
        Seed.  The points and the uniforms come from two independent streams spawned
        from it, each drawn one value at a time from its own stream, so the result for
        ``n_events = n`` is the prefix of the result for any larger ``n_events``: all
        N-systems of the construction use the same randomness.

    Returns
    -------
    CoupledDriver
        ``tau`` (points of a rate-1 Poisson process, from exponential gaps
        :math:`-\log(1 - V)` with :math:`V` uniform) and ``u`` (uniforms on [0, 1)).

    Raises
    ------
    ValueError
        If ``n_events`` is not an integer in ``[1, 5e7]`` or ``seed`` is invalid.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 4 (all N-systems driven by one uniformized clock
    and one sequence of uniforms).
    """
    n = check_positive_int(n_events, "n_events")
    if n > _MAX_EVENTS:
        raise ValueError(f"n_events must be an integer in [1, {_MAX_EVENTS:.0e}], got {n}")
    ss = check_seed(seed)
    # children derived from the seed without spawning (spawn() would change the
    # SeedSequence passed in, and a second call would draw other numbers)
    clock_ss, unif_ss = (np.random.SeedSequence(ss.entropy, spawn_key=ss.spawn_key + (j,),
                                                pool_size=ss.pool_size) for j in (0, 1))
    gaps = -np.log1p(-np.random.default_rng(clock_ss).random(n))
    u = np.random.default_rng(unif_ss).random(n)
    return CoupledDriver(np.cumsum(gaps), u, ss)


def _driver_for(n_needed, seed, driver):
    """A driver with at least ``n_needed`` points (the given one, or a fresh draw)."""
    if driver is not None:
        if not isinstance(driver, CoupledDriver):
            raise ValueError(f"driver must be a CoupledDriver (from coupled_driver), got "
                             f"{type(driver).__name__}")
        return driver
    # The same seed gives the same prefix, whatever the length drawn: draw a length
    # that covers the horizon with overwhelming probability (mean + 10 sd + 100).
    n = int(n_needed + 10.0 * math.sqrt(n_needed) + 100)
    if n > _MAX_EVENTS:
        raise ValueError(f"the horizon asks for about {n_needed:.3g} events, more than the "
                         f"{_MAX_EVENTS:.0e} this construction draws in one call; use a "
                         f"smaller t_end or fewer stations")
    return coupled_driver(n, seed)


# ----------------------------------------------------------------------------- kernel
@jit
def _find_length(m, top, r):
    """Largest j in [0, top] with m[j] > r (m non-increasing, m[0] > r)."""
    lo, hi = 0, top
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if m[mid] > r:
            lo = mid
        else:
            hi = mid - 1
    return lo


@jit
def _coupled_kernel(n, lam, p, t_end, tau, u, n_ev, cnt0, times, n_check):
    q = 1.0 + lam
    a_thr = lam / q
    l_thr = (lam + 1.0 - p) / q
    inv_n = 1.0 / n
    cap = cnt0.size + 64
    m = np.zeros(cap, np.int64)
    m[: cnt0.size] = cnt0
    m[0] = n
    top = 0
    for j in range(1, cnt0.size):
        if m[j] > 0:
            top = j
    # W[L] = sum_{j >= L} m[j] (jobs at positions >= L, times N)
    W = np.zeros(cap + 1, np.int64)
    for L in range(cap - 1, 0, -1):
        W[L] = W[L + 1] + m[L]
    wmax = W.copy()
    nt = times.size
    path = np.zeros((nt, cap), np.float64)
    ic = n_check + 1
    F = np.zeros(ic)      # arrivals raising v_i, minus int lam s_{i-1}
    Fhi = np.zeros(ic)
    Flo = np.zeros(ic)
    G = np.zeros(ic)      # local tokens at stations with >= i jobs, minus int (1-p) s_i
    Ghi = np.zeros(ic)
    Glo = np.zeros(ic)
    Y = np.zeros(ic)      # v_i(t) - v_i(0) - int (lam s_{i-1} - (1-p) s_i - p)
    Yrun = np.zeros(ic)   # running max of Y
    ddown = np.zeros(ic)  # largest Y(a) - Y(b), a <= b
    busy = np.zeros(ic, np.bool_)
    ehi = np.zeros(ic)
    elo = np.zeros(ic)
    brange = np.zeros(ic)
    for i in range(1, ic):
        busy[i] = m[i] > 0 if i < cap else False
    Z = 0.0               # central tokens minus p t
    Zhi = 0.0
    Zlo = 0.0
    g = 0
    t_prev = 0.0
    for k in range(n_ev + 1):
        if k < n_ev:
            t = tau[k] / (n * q)
        else:
            t = t_end
        while g < nt and times[g] < t:
            for j in range(cap):
                path[g, j] = m[j] * inv_n
            g += 1
        dt = t - t_prev
        # the linear pieces between events, ending just before the event (or at t_end)
        for i in range(1, ic):
            sim1 = m[i - 1] * inv_n if i - 1 < cap else 0.0
            si = m[i] * inv_n if i < cap else 0.0
            F[i] -= lam * sim1 * dt
            G[i] -= (1.0 - p) * si * dt
            Y[i] -= (lam * sim1 - (1.0 - p) * si - p) * dt
            Fhi[i] = max(Fhi[i], F[i])
            Flo[i] = min(Flo[i], F[i])
            Ghi[i] = max(Ghi[i], G[i])
            Glo[i] = min(Glo[i], G[i])
            Yrun[i] = max(Yrun[i], Y[i])
            ddown[i] = max(ddown[i], Yrun[i] - Y[i])
            if busy[i]:
                ehi[i] = max(ehi[i], Y[i])
                elo[i] = min(elo[i], Y[i])
        Z -= p * dt
        Zhi = max(Zhi, Z)
        Zlo = min(Zlo, Z)
        t_prev = t
        if k == n_ev:
            break
        x = u[k]
        lev = 0
        delta = 0
        if x < a_thr:                                   # arrival
            r = int(x * (q / lam) * n)
            if r > n - 1:
                r = n - 1
            ell = _find_length(m, top, r)
            lev = ell + 1
            if lev + 1 >= cap:                          # grow the level arrays
                ncap = 2 * cap
                m2 = np.zeros(ncap, np.int64)
                m2[:cap] = m
                m = m2
                W2 = np.zeros(ncap + 1, np.int64)
                W2[: cap + 1] = W
                W = W2
                w2 = np.zeros(ncap + 1, np.int64)
                w2[: cap + 1] = wmax
                wmax = w2
                p2 = np.zeros((nt, ncap), np.float64)
                p2[:, :cap] = path
                path = p2
                cap = ncap
            m[lev] += 1
            if lev > top:
                top = lev
            delta = 1
            for i in range(1, min(lev, n_check) + 1):
                F[i] += inv_n
        elif x < l_thr:                                 # local token
            r = int((x * q - lam) / (1.0 - p) * n)
            if r > n - 1:
                r = n - 1
            ell = _find_length(m, top, r)
            if ell >= 1:
                lev = ell
                m[lev] -= 1
                delta = -1
                for i in range(1, min(lev, n_check) + 1):
                    G[i] += inv_n
        else:                                           # central token
            Z += inv_n
            if top >= 1:
                lev = top
                m[lev] -= 1
                delta = -1
        if delta != 0:
            while top > 0 and m[top] == 0:
                top -= 1
            for L in range(1, lev + 1):
                W[L] += delta
                if W[L] > wmax[L]:
                    wmax[L] = W[L]
            for i in range(1, min(lev, n_check) + 1):
                Y[i] += delta * inv_n
        # values just after the event
        for i in range(1, ic):
            Fhi[i] = max(Fhi[i], F[i])
            Flo[i] = min(Flo[i], F[i])
            Ghi[i] = max(Ghi[i], G[i])
            Glo[i] = min(Glo[i], G[i])
            Yrun[i] = max(Yrun[i], Y[i])
            ddown[i] = max(ddown[i], Yrun[i] - Y[i])
            now_busy = m[i] > 0 if i < cap else False
            if busy[i] and not now_busy:
                brange[i] = max(brange[i], ehi[i] - elo[i])
            elif now_busy and not busy[i]:
                ehi[i] = Y[i]
                elo[i] = Y[i]
            elif now_busy:
                ehi[i] = max(ehi[i], Y[i])
                elo[i] = min(elo[i], Y[i])
            busy[i] = now_busy
        Zhi = max(Zhi, Z)
        Zlo = min(Zlo, Z)
    while g < nt:
        for j in range(cap):
            path[g, j] = m[j] * inv_n
        g += 1
    for i in range(1, ic):
        if busy[i]:
            brange[i] = max(brange[i], ehi[i] - elo[i])
    width = 1
    for j in range(cap):
        if wmax[j] > 0:
            width = j + 1
    return (path, wmax, width, Fhi - Flo, Ghi - Glo, Zhi - Zlo, ddown, brange)


# ----------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class CoupledRun:
    r"""One N-system of the coupled construction on :math:`[0, T]`.

    Attributes
    ----------
    n_stations, lam, p, t_end :
        The inputs (time in mean service times).
    s0 : ndarray of float64, shape (L0 + 1,)
        The initial state actually used: the requested one rounded down to multiples of
        1/N.
    times : ndarray of float64, shape (m,)
        Observation times in :math:`[0, T]`.
    path : ndarray of float64, shape (m, levels)
        ``path[j, i]`` = :math:`s^N_i` at ``times[j]`` (right-continuous path).
    tail_sup : ndarray of float64, shape (levels,)
        ``tail_sup[L]`` = :math:`\sup_{t \le T} v^N_L(t)`, the largest number of jobs per
        station at positions :math:`\ge L` over the horizon (``tail_sup[0]`` unused).
    arrival_range : ndarray of float64, shape (n_check + 1,)
        ``arrival_range[i]`` = :math:`\sup_{a \le b \le T} |A_i(a, b)/N -
        \int_a^b \lambda s^N_{i-1}|`, where :math:`A_i(a, b)` counts the arrivals in
        :math:`(a, b]` to stations with at least :math:`i - 1` jobs (entry 0 unused).
    local_range : ndarray of float64, shape (n_check + 1,)
        The same for local tokens at stations with at least :math:`i` jobs against
        :math:`\int_a^b (1-p) s^N_i`.
    central_range : float
        The same for all central tokens against :math:`p(b - a)`.
    drawdown : ndarray of float64, shape (n_check + 1,)
        :math:`\sup_{a \le b \le T} \bigl(Y_i(a) - Y_i(b)\bigr)` with
        :math:`Y_i(t) = v^N_i(t) - v^N_i(0) - \int_0^t (\lambda s^N_{i-1} - (1-p)s^N_i
        - p)`: how far the tail sum ever falls below what the drift with a fully
        working central server predicts (the one-sided bound of the increments lemma).
    busy_range : ndarray of float64, shape (n_check + 1,)
        :math:`\sup |Y_i(b) - Y_i(a)|` over intervals :math:`[a, b]` on which
        :math:`s^N_i > 0` throughout (the two-sided bound of the increments lemma).
    clock_error : float
        :math:`d_N = \sup_{t \le T} |\Pi(Nqt)/N - qt|`.
    n_events : int
        :math:`\Pi(NqT)`, the number of events in :math:`[0, T]`.
    driver : CoupledDriver
        The common randomness (its first ``n_events`` values were used).
    """

    n_stations: int
    lam: float
    p: float
    t_end: float
    s0: np.ndarray
    times: np.ndarray
    path: np.ndarray
    tail_sup: np.ndarray
    arrival_range: np.ndarray
    local_range: np.ndarray
    central_range: float
    drawdown: np.ndarray
    busy_range: np.ndarray
    clock_error: float
    n_events: int
    driver: CoupledDriver = field(repr=False)


def _round_down(n, s0):
    """Counts floor(N s_i) of a checked tail vector (``s0[0] == 1``), trailing zeros cut."""
    cnt = np.floor(s0 * n + 1e-9).astype(np.int64)
    cnt[0] = n
    nz = np.flatnonzero(cnt > 0)
    return cnt[: nz[-1] + 1]


def coupled_run(n_stations, lam, p, t_end, *, s0=None, seed=0, driver=None, times=None,
                n_check=8):
    r"""Run one N-system of the coupled construction and measure the proof's errors.

    Parameters
    ----------
    n_stations : int
        Number of stations N, ``1 <= N <= 1e7``.
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    t_end : float
        Horizon T > 0 in mean service times; N (1 + lam) T at most about 5e7.
    s0 : array_like of float, optional
        Initial tail fractions (``s0[0] == 1``, non-increasing, in [0, 1]); rounded down
        to multiples of 1/N.  Default: the empty system.
    seed : None, int >= 0 or numpy.random.SeedSequence, optional
        Seed of the common randomness (ignored when ``driver`` is given).  Runs with
        the same seed and different N are the coupled construction: they share clock
        points and uniforms.
    driver : CoupledDriver, optional
        The common randomness to use; must hold at least :math:`\Pi(NqT)` points.
    times : array_like of float, optional
        Observation times in [0, T] (default: 201 equally spaced times).
    n_check : int, optional
        Number of levels i = 1, ..., n_check for which the counting errors are measured
        (``1 <= n_check <= 200``).

    Returns
    -------
    CoupledRun

    Raises
    ------
    ValueError
        If a parameter is out of range, ``times`` leaves [0, T], or the driver holds
        too few points for the horizon.

    Notes
    -----
    The k-th event of the N-system happens at :math:`\tau_k/(Nq)`.  With
    :math:`W = U_k q/\lambda` an arrival joins the station of rank
    :math:`\lfloor W N\rfloor` in the order of decreasing queue length, so it raises
    :math:`v_i` exactly when :math:`U_k < (\lambda/q) s_{i-1}`; a local token with
    :math:`W' = (U_k q - \lambda)/(1 - p)` hits the station of rank
    :math:`\lfloor W' N \rfloor` (no effect if that station is empty), so it lowers
    :math:`v_i` exactly when :math:`U_k < \lambda/q + (1-p) s_i/q`; a central token
    removes a job from a longest queue.  Given the state, each kind of event has the
    rate of the model, so each run has the law of the N-station system.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 4 (the coupled construction); the fluid-limit
    chapter of the book (the counting, tail and increments lemmas).
    """
    n = check_n_stations(n_stations)
    if n > _MAX_STATIONS:
        raise ValueError(f"n_stations must be an integer in [1, {_MAX_STATIONS:.0e}], got {n}")
    lam = check_lam(lam)
    p = check_p(p)
    t_end = check_real(t_end, "t_end", low=0.0, low_open=True, high=1e9)
    n_check = check_positive_int(n_check, "n_check")
    if n_check > 200:
        raise ValueError(f"n_check must be an integer in [1, 200], got {n_check}")
    s0 = np.array([1.0]) if s0 is None else check_s0(s0)
    cnt0 = _round_down(n, s0)
    if times is None:
        times = np.linspace(0.0, t_end, 201)
    times = check_times(times)
    if times[-1] > t_end:
        raise ValueError(f"times must lie in [0, t_end] = [0, {t_end:g}], got "
                         f"max {times[-1]!r}")
    q = 1.0 + lam
    horizon = n * q * t_end
    drv = _driver_for(horizon, seed, driver)
    n_ev = int(np.searchsorted(drv.tau, horizon, side="right"))
    if n_ev == drv.n_events:
        raise ValueError(f"driver holds {drv.n_events} points, not enough for the horizon "
                         f"N (1 + lam) T = {horizon:.6g} (its last point is "
                         f"{drv.tau[-1]:.6g}); draw a longer one")
    out = _coupled_kernel(n, lam, p, t_end, drv.tau, drv.u, n_ev, cnt0, times, n_check)
    path, wmax, width, arr, loc, cen, ddown, brange = out
    width = max(int(width), cnt0.size)
    k = np.arange(1, n_ev + 1)
    tk = drv.tau[:n_ev]
    d = 0.0
    if n_ev:
        d = float(max(np.abs(k - tk).max(), np.abs(k - 1 - tk).max()) / n)
    d = max(d, abs(n_ev - horizon) / n)
    return CoupledRun(n, lam, p, t_end, cnt0 / n, times, path[:, :width].copy(),
                      wmax[:width] / n, arr, loc, float(cen), ddown, brange, d, n_ev, drv)


# ----------------------------------------------------------------------------- bounds
def _check_run(run):
    if not isinstance(run, CoupledRun):
        raise ValueError(f"run must be a CoupledRun (from coupled_run), got "
                         f"{type(run).__name__}")


@dataclass(frozen=True)
class CountingBound:
    r"""The explicit bound of the counting lemma for one run.

    Attributes
    ----------
    beta : float
        Slope of the threshold in the state (``alpha + beta x`` with ``x`` in [0, 1]).
    m_values : ndarray of int, shape (k,)
        Numbers of blocks tried (block length ``h = T/m``).
    bounds : ndarray of float64, shape (k,)
        The bound :math:`R_N(T/m)` for each.
    m : int
        The number of blocks giving the smallest bound.
    bound : float
        :math:`\min R_N(T/m)` over the ``m_values`` tried: a valid bound for the run,
        never below the lemma's :math:`\inf_m R_N(T/m)` over all :math:`m \ge 1`.
    clock_error : float
        :math:`d_N` of the run.
    block_error : float
        :math:`\sum_j e_j` at the best ``m``, the sum over the blocks of their uniform
        counting errors :math:`e_j = \sup_\theta |\#\{k \in \text{block } j :
        U_k < \theta\} - N\nu_j\theta|/N`.
    """

    beta: float
    m_values: np.ndarray
    bounds: np.ndarray
    m: int
    bound: float
    clock_error: float
    block_error: float


@jit
def _ks_of_sorted(us, a, b, n):
    """sup_theta |#{U < theta} - n_j theta| / N for the sorted block us[a:b]."""
    nj = b - a
    worst = 0.0
    for r in range(nj):
        x = nj * us[a + r]
        worst = max(worst, (r + 1) - x, x - r)
    return worst / n


@jit
def _dyadic_block_errors(u, edges, n, n_levels):
    """Sums of block errors for the dyadic grids with 2^K, 2^(K-1), ..., blocks.

    ``edges`` are the finest block boundaries (2^K blocks, K = n_levels - 1); coarser
    grids merge neighbouring blocks pairwise, so the uniforms are sorted once per block
    of the finest grid and then merged.  Returns ``sums[k]`` for 2^k blocks and the
    largest block size of each grid.
    """
    nb = edges.size - 1
    us = np.empty(edges[-1])
    for j in range(nb):
        us[edges[j]: edges[j + 1]] = np.sort(u[edges[j]: edges[j + 1]])
    sums = np.zeros(n_levels)
    cur = edges.copy()
    buf = np.empty_like(us)
    level = n_levels - 1
    while True:
        tot = 0.0
        for j in range(cur.size - 1):
            tot += _ks_of_sorted(us, cur[j], cur[j + 1], n)
        sums[level] = tot
        if level == 0:
            break
        half = (cur.size - 1) // 2
        nxt = np.empty(half + 1, np.int64)
        for j in range(half):
            a, mid, b = cur[2 * j], cur[2 * j + 1], cur[2 * j + 2]
            i1, i2, o = a, mid, a
            while i1 < mid and i2 < b:
                if us[i1] <= us[i2]:
                    buf[o] = us[i1]
                    i1 += 1
                else:
                    buf[o] = us[i2]
                    i2 += 1
                o += 1
            while i1 < mid:
                buf[o] = us[i1]
                i1 += 1
                o += 1
            while i2 < b:
                buf[o] = us[i2]
                i2 += 1
                o += 1
            nxt[j] = a
        nxt[half] = cur[-1]
        us[: cur[-1]] = buf[: cur[-1]]
        cur = nxt
        level -= 1
    return sums


# Largest number of blocks counting_bound accepts (arrays of m + 1 edges: 32 MB each).
_MAX_BLOCKS = 2**22


def counting_bound(run, *, beta=1.0, m_values=None):
    r"""The explicit bound of the counting lemma for the run's clock and uniforms.

    For a threshold :math:`\alpha + \beta x(t_k-)` with :math:`\alpha, \beta \ge 0`,
    :math:`\alpha + \beta \le 1` and a state coordinate :math:`x` that moves by at most
    the number of events per station, the lemma bounds, for all
    :math:`0 \le a \le b \le T`, the error of the count of events in :math:`(a, b]` with
    :math:`U_k < \alpha + \beta x(t_k-)`, divided by N, against
    :math:`q\int_a^b (\alpha + \beta x)`, by

    .. math::

        R_N(h) &= \beta \sum_j \nu_j (\nu_j + q h) + \sum_j e_j + 2 d_N \\
        &\quad + \beta d_N (qT + d_N) + 2 \max(\nu^*, q h),

    where :math:`h = T/m`, :math:`\nu_j` is the number of events per station in the
    j-th block :math:`(jh, (j+1)h]`, :math:`\nu^* = \max_j \nu_j`,
    :math:`e_j = \sup_\theta |\#\{k \in \text{block } j : U_k < \theta\} - N\nu_j\theta|/N`
    the uniform counting error of block j and :math:`d_N` the clock error.

    Parameters
    ----------
    run : CoupledRun
        A run of :func:`coupled_run`.
    beta : float, optional
        Threshold slope in [0, 1] (default 1, which bounds every count of the proof).
    m_values : array_like of int, optional
        Numbers of blocks to try (default: nine powers of 2 around the m that balances
        the two leading terms); the bound holds for each, the smallest is reported.

    Returns
    -------
    CountingBound

    Raises
    ------
    ValueError
        If ``run`` is not a CoupledRun, ``beta`` is outside [0, 1] or ``m_values`` holds
        an entry outside ``[1, 2**22]`` (the ceiling bounds the memory: a few arrays of
        ``m + 1`` integers).

    References
    ----------
    The counting lemma of the fluid-limit chapter (state-dependent thresholds by
    monotonicity on short blocks).
    """
    _check_run(run)
    beta = check_real(beta, "beta", low=0.0, high=1.0)
    n, T, q = run.n_stations, run.t_end, 1.0 + run.lam
    if m_values is None:
        # The bound is about 2 beta q^2 T h + (T/h) sqrt(q h / N) (block errors of the
        # size of a Brownian bridge's supremum), smallest near
        # h* = (sqrt(q/N) / (4 beta q^2))^(2/3); try the powers of 2 within a factor 16
        # of T/h* (any m gives a valid bound, the window only saves time).
        h_star = (1.5 * math.sqrt(q / n) / (4.0 * max(beta, 0.05) * q * q)) ** (2 / 3)
        centre = int(round(math.log2(max(1.0, T / h_star))))
        m_values = 2 ** np.arange(max(0, centre - 4), centre + 5)
    m_values = np.asarray(m_values)
    if m_values.ndim != 1 or m_values.size == 0 or m_values.dtype.kind not in "iu" \
            or np.any(m_values < 1):
        raise ValueError("m_values must be a non-empty 1-D array of positive integers")
    if int(m_values.max()) > _MAX_BLOCKS:
        raise ValueError(
            f"m_values must be at most {_MAX_BLOCKS:,} (2^22) blocks, got "
            f"{int(m_values.max()):,}: the bound keeps arrays of m + 1 block edges (8 bytes "
            f"each), and this run has {run.n_events:,} events, so blocks much more "
            f"numerous than events only add the error term 2 max(nu, q h)")
    tau = run.driver.tau[: run.n_events]
    u = run.driver.u[: run.n_events]
    d = run.clock_error
    # block errors for every power of 2 up to the largest m asked for, from one sort
    K = int(math.ceil(math.log2(int(m_values.max()))))
    M = 2 ** K
    fine = np.searchsorted(tau, n * q * (T / M) * np.arange(M + 1), side="right")
    fine[-1] = run.n_events
    fine = fine.astype(np.int64)
    dyadic = _dyadic_block_errors(u, fine, n, K + 1)
    bounds, errs = [], []
    for m in m_values:
        h = T / m
        m = int(m)
        if m & (m - 1) == 0:
            edges = fine[:: M // m]
            e_sum = float(dyadic[int(round(math.log2(m)))])
        else:
            edges = np.searchsorted(tau, n * q * h * np.arange(m + 1), side="right")
            edges[-1] = run.n_events
            edges = edges.astype(np.int64)
            e_sum = float(_dyadic_block_errors(u, edges, n, 1)[0])
        nu = np.diff(edges) / n
        R = (beta * np.sum(nu * (nu + q * h)) + e_sum + 2 * d + beta * d * (q * T + d)
             + 2 * max(nu.max(), q * h))
        bounds.append(R)
        errs.append(e_sum)
    bounds = np.array(bounds)
    j = int(np.argmin(bounds))
    return CountingBound(beta, m_values.astype(np.int64), bounds, int(m_values[j]),
                         float(bounds[j]), d, float(errs[j]))


def increments_bound(run):
    r"""The error bound of the increments lemma for one run.

    The tail sum :math:`v^N_i` moves by +1/N at arrivals with
    :math:`U_k < (\lambda/q) s^N_{i-1}`, by -1/N at local tokens with
    :math:`\lambda/q \le U_k < \lambda/q + (1-p)s^N_i/q` and at central tokens while
    :math:`s^N_i > 0`.  Each count is one or two counts of the counting lemma, so for
    all :math:`a \le b \le T`

    .. math::

        v^N_i(b) - v^N_i(a) \ge \int_a^b (\lambda s^N_{i-1} - (1-p)s^N_i - p)
        - \varepsilon_N,

    with equality up to :math:`\pm\varepsilon_N` when :math:`s^N_i > 0` on
    :math:`[a, b]`, where :math:`\varepsilon_N = R_N^{(\lambda/q)} +
    R_N^{((1-p)/q)} + 3 R_N^{(0)}` and :math:`R_N^{(\beta)}` is the bound of
    :func:`counting_bound` for slope :math:`\beta`.

    Parameters
    ----------
    run : CoupledRun
        A run of :func:`coupled_run`.

    Returns
    -------
    float
        :math:`\varepsilon_N`, jobs per station.

    Raises
    ------
    ValueError
        If ``run`` is not a CoupledRun.

    References
    ----------
    The increments lemma of the fluid-limit chapter.
    """
    _check_run(run)
    q = 1.0 + run.lam
    return (counting_bound(run, beta=run.lam / q).bound
            + counting_bound(run, beta=(1.0 - run.p) / q).bound
            + 3.0 * counting_bound(run, beta=0.0).bound)


@dataclass(frozen=True)
class TailBound:
    r"""The tail lemma's bounds on :math:`\sup_{t \le T} v^N_L(t)`, level by level.

    Attributes
    ----------
    levels : ndarray of int, shape (k,)
        The levels L >= 2.
    observed : ndarray of float64, shape (k,)
        :math:`\sup_{t \le T} v^N_L(t)` of the run.
    bound : ndarray of float64, shape (k,)
        :math:`v^N_L(0) + \#\{k \le \Pi(NqT) : U_k < \theta_L\}/N` with
        :math:`\theta_L = \min(1, (\lambda/q) B_N/(L-1))` and
        :math:`B_N = v^N_1(0) + \#\{k \le \Pi(NqT): U_k < \lambda/q\}/N`.
    limit : ndarray of float64, shape (k,)
        :math:`v_L(0) + qT \min\bigl(1, (\lambda/q)(v_1(0) + \lambda T)/(L-1)\bigr)`,
        the value ``bound`` tends to as N grows on the event of probability one of the
        fluid-limit chapter, for initial states converging to the run's (rounded) one;
        it equals :math:`v_L(0) + \lambda T (v_1(0) + \lambda T)/(L-1)`, the limit of
        the explicit form of the bound, whenever the minimum is not 1.
    """

    levels: np.ndarray
    observed: np.ndarray
    bound: np.ndarray
    limit: np.ndarray


def tail_bound(run, levels=None):
    r"""The explicit tail bound of the fluid-limit proof for one run.

    Jobs at positions :math:`\ge L` are created only by arrivals with
    :math:`U_k < (\lambda/q) s^N_{L-1}(t_k-) \le (\lambda/q) v^N_1(t_k-)/(L-1)`, and
    :math:`v^N_1 \le B_N` on :math:`[0, T]`; so the number of such arrivals is at most a
    count with the fixed threshold :math:`\theta_L`.

    Parameters
    ----------
    run : CoupledRun
        A run of :func:`coupled_run`.
    levels : array_like of int, optional
        Levels L >= 2 (default: 2, ..., the run's highest level plus one).

    Returns
    -------
    TailBound

    Raises
    ------
    ValueError
        If ``run`` is not a CoupledRun or a level is below 2.

    References
    ----------
    The tail lemma of the fluid-limit chapter.
    """
    _check_run(run)
    width = run.tail_sup.size
    if levels is None:
        levels = np.arange(2, width + 1)
    levels = np.asarray(levels)
    if levels.ndim != 1 or levels.dtype.kind not in "iu" or np.any(levels < 2):
        raise ValueError("levels must be a 1-D array of integers >= 2")
    lam, T, n = run.lam, run.t_end, run.n_stations
    q = 1.0 + lam
    u = run.driver.u[: run.n_events]
    s0 = run.s0
    v0 = np.concatenate([np.cumsum(s0[::-1])[::-1], [0.0]])       # v0[L], L = 0..len
    v0L = np.array([v0[L] if L < v0.size else 0.0 for L in levels])
    v01 = float(s0[1:].sum())
    B = v01 + np.count_nonzero(u < lam / q) / n
    theta = np.minimum(1.0, (lam / q) * B / (levels - 1))
    us = np.sort(u)
    counts = np.searchsorted(us, theta, side="left")                # #{U < theta}
    bound = v0L + counts / n
    obs = np.array([run.tail_sup[L] if L < width else 0.0 for L in levels])
    limit = v0L + q * T * np.minimum(1.0, (lam / q) * (v01 + lam * T) / (levels - 1))
    return TailBound(levels.astype(np.int64), obs, bound, limit)


def dkw_uniform_bound(n_stations, c, beta):
    r"""A bound on the uniform counting error that holds with probability ``1 - beta``.

    With :math:`\delta_N(c) = \max_{n \le cN} \sup_\theta |\#\{k \le n : U_k < \theta\}
    - n\theta|/N`, the Dvoretzky--Kiefer--Wolfowitz inequality with Massart's constant,
    :math:`P(\sup_\theta |F_n(\theta) - \theta| > x) \le 2 e^{-2 n x^2}`, and a union
    bound over :math:`n \le cN` give
    :math:`P(\delta_N(c) > x) \le 2 c N e^{-2 x^2 N / c}`; the returned value is the
    :math:`x` at which this equals ``beta``.

    Parameters
    ----------
    n_stations : int
        N >= 1.
    c : float
        Number of events per station covered, > 0.
    beta : float
        Failure probability in (0, 1).

    Returns
    -------
    float
        :math:`\sqrt{c \log(2cN/\beta) / (2N)}`.

    Raises
    ------
    ValueError
        If an argument is out of range.

    References
    ----------
    P. Massart, "The tight constant in the Dvoretzky-Kiefer-Wolfowitz inequality",
    Ann. Probab. 18 (1990) 1269-1283.
    """
    n = check_n_stations(n_stations)
    c = check_real(c, "c", low=0.0, low_open=True, high=1e9)
    beta = check_real(beta, "beta", low=0.0, high=1.0, low_open=True, high_open=True)
    if n < 2**1000:
        return math.sqrt(c * math.log(max(2 * c * n / beta, 1.0)) / (2 * n))
    # N beyond the float range (10**400): the same value through logarithms (math.log
    # takes any int), with no float conversion of N to overflow
    log_n = math.log(n)
    big_l = math.log(2 * c / beta) + log_n
    return math.exp(0.5 * (math.log(c * big_l / 2) - log_n))


# ----------------------------------------------------------------------------- existence
def _truncated_rhs(lam, p, K, eps):
    def rhs(_t, x):
        s = np.empty(K + 2)
        s[0] = 1.0
        s[1: K + 1] = x
        s[K + 1] = 0.0
        v = np.concatenate([np.cumsum(x[::-1])[::-1], [0.0]])     # v_1..v_K, v_{K+1}=0
        g = p * np.minimum(1.0, np.maximum(v, 0.0) / eps)
        c = g[:-1] - g[1:]
        return (lam * (s[:K] - s[1: K + 1]) - (1.0 - p) * (s[1: K + 1] - s[2:]) - c)
    return rhs


class _OverBudget(Exception):
    """Raised inside the ODE's right-hand side when the time budget is spent."""


def truncated_fluid_trajectory(lam, p, times, s0=None, *, n_levels, eps, rtol=1e-9,
                               atol=1e-12, max_seconds=60.0):
    r"""The truncated, regularized fluid model of the existence proof.

    On ``n_levels`` = K levels, with arrivals to stations holding K jobs blocked and the
    central server's effort on tail sums regularized,
    :math:`g^\varepsilon_i = p \min(1, v_i/\varepsilon)`, the model is the Lipschitz ODE

    .. math::

        \dot s_i = \lambda (s_{i-1} - s_i) - (1-p)(s_i - s_{i+1})
        - (g^\varepsilon_i - g^\varepsilon_{i+1}), \qquad 1 \le i \le K,

    with :math:`s_0 = 1`, :math:`s_{K+1} = 0`, :math:`g^\varepsilon_{K+1} = 0`.  Its
    solutions stay in :math:`1 \ge s_1 \ge \dots \ge s_K \ge 0`, are
    :math:`(1 + \lambda)`-Lipschitz in :math:`\ell_1`, and converge to the fluid solution
    as :math:`\varepsilon \to 0` and :math:`K \to \infty` (the existence theorem of the
    chapter "Fluid solutions").

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    times : array_like of float, shape (m,)
        Non-decreasing times >= 0, at most 1e5.
    s0 : array_like of float, optional
        Initial tail fractions (default empty); levels above K are dropped.
    n_levels : int
        K, ``1 <= K <= 2000``.
    eps : float
        Regularization scale, ``1e-8 <= eps <= 10``.
    rtol, atol : float, optional
        Tolerances of the ODE solver (SciPy's LSODA), in ``[1e-13, 1e-3]``.
    max_seconds : float, optional
        Work budget in seconds of computing, ``> 0`` (default 60).  With a small ``eps``
        the ODE is stiff and the solver's cost grows fast with K and the horizon
        (K = 200 to time 100 at ``eps = 1e-8``: about 20 s on one core; K = 2000 to time
        1e3: many minutes); the solve stops with a ValueError when the budget is spent,
        rather than run on unannounced.

    Returns
    -------
    ndarray of float64, shape (m, K + 1)
        ``out[j, i]`` = :math:`s_i(t_j)`, ``out[:, 0] = 1``.

    Raises
    ------
    ValueError
        If an argument is out of range, the solver fails, or the solve needs more than
        ``max_seconds`` (the message says how far it got).

    References
    ----------
    The existence theorem of the chapter "Fluid solutions" (truncation, regularization
    and the identification lemma); Tsitsiklis and Xu (2012), Section 3 (the fluid
    model).
    """
    from scipy.integrate import solve_ivp

    lam = check_lam(lam)
    p = check_p(p)
    t = check_times(times)
    if t[-1] > 1e5:
        raise ValueError(f"times must be at most 1e5, got {t[-1]!r}")
    K = check_positive_int(n_levels, "n_levels")
    if K > 2000:
        raise ValueError(f"n_levels must be an integer in [1, 2000], got {K}")
    eps = check_real(eps, "eps", low=1e-8, high=10.0)
    rtol = check_real(rtol, "rtol", low=1e-13, high=1e-3)
    atol = check_real(atol, "atol", low=1e-13, high=1e-3)
    budget = check_real(max_seconds, "max_seconds", low=0.0, low_open=True)
    s = np.array([1.0]) if s0 is None else check_s0(s0)
    x0 = np.zeros(K)
    m = min(K, s.size - 1)
    x0[:m] = s[1: m + 1]
    out = np.empty((t.size, K + 1))
    out[:, 0] = 1.0
    if t[-1] == 0.0:
        out[:, 1:] = x0
        return out
    rhs = _truncated_rhs(lam, p, K, eps)
    deadline = time.monotonic() + budget
    reached = [0.0]

    def guarded(tt, x):
        if time.monotonic() > deadline:
            raise _OverBudget
        reached[0] = max(reached[0], tt)
        return rhs(tt, x)

    try:
        sol = solve_ivp(guarded, (0.0, float(t[-1])), x0,
                        method="LSODA", t_eval=t, rtol=rtol, atol=atol)
    except _OverBudget:
        raise ValueError(
            f"truncated_fluid_trajectory spent its budget max_seconds={budget:g} and had "
            f"reached time {reached[0]:.4g} of {float(t[-1]):.4g} (n_levels={K}, "
            f"eps={eps:g}: a small eps makes the ODE stiff); use fewer levels, a shorter "
            f"horizon, a larger eps, or raise max_seconds") from None
    if not sol.success:  # pragma: no cover - LSODA on a Lipschitz field
        raise ValueError(f"the ODE solver failed: {sol.message}")
    out[:, 1:] = sol.y.T
    return out
