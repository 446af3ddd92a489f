r"""Fluid-limit numerics: how fast the N-station system closes in on the fluid solution.

Tsitsiklis and Xu (2012, Theorem 4.1) prove that the occupancy fractions
:math:`s^N(t)` of the N-station system converge to the fluid solution uniformly on
every finite horizon, in probability.  This module measures the distance

.. math:: D_N(T) = \sup_{t \le T} \| s^N(t) - s(t) \|_1

on a grid of times, for several N and seeds, and fits :math:`D_N \approx c N^{-a}`;
central-limit heuristics for density-dependent chains
(:cite:`kurtz1970solutions`) suggest :math:`a = 1/2`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_flag, check_lam, check_n_stations, check_p, check_positive_int, \
    check_real, check_s0, check_size, real_array
from ..fluid import fluid_trajectory, l1_distance
from ..simulation import sample_path

__all__ = ["fluid_limit_distance", "fluid_limit_study", "FluidLimitStudy",
           "martingale_tolerance"]


def _grid(t_end, n_times):
    return np.linspace(0.0, t_end, n_times)


# Largest time grid: each time is a row of the sample path and of the fluid solution.
_MAX_TIMES = 100_000


def _check_n_times(n_times):
    return check_size(n_times, "n_times", minimum=2, maximum=_MAX_TIMES,
                      what="each grid time is a row of the sample path and of the fluid "
                           "solution")


def _check_fluid(fluid, n_times, start):
    """The fluid solution a caller passes: shape (n_times, L), each row a state, and the
    first row the sample path's start (else the distance is not the one defined)."""
    F = real_array(fluid, "fluid")
    if F.ndim != 2 or F.shape[0] != n_times or F.shape[1] < 1:
        raise ValueError(f"fluid must be the fluid solution on the grid, an array of "
                         f"shape (n_times, levels) = ({n_times}, L) with L >= 1, got "
                         f"shape {F.shape}")
    if not np.all(np.isfinite(F)):
        raise ValueError("fluid must be finite (no NaN or inf)")
    tol = 1e-12
    if (np.any(F[:, 0] != 1.0) or np.any(F < -tol) or np.any(F > 1.0 + tol)
            or np.any(np.diff(F, axis=1) > tol)):
        raise ValueError("every row of fluid must be tail fractions: fluid[:, 0] == 1, "
                         "entries in [0, 1], non-increasing along the row")
    gap = l1_distance(F[0], start)
    if gap > 1e-9:
        raise ValueError(f"fluid[0] must be the sample path's initial state (s0 rounded "
                         f"to multiples of 1/N); it is {gap:.3g} away in l1: pass the "
                         f"fluid solution from that state, or leave fluid out")
    return F


def fluid_limit_distance(n_stations, lam, p, t_end, *, s0=None, seed=None,
                         n_times=201, fluid=None):
    r"""Sup over a time grid of the l1 distance between a sample path and the fluid.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    t_end : float
        Horizon T in mean service times, ``> 0``.
    s0 : array_like, optional
        Initial tail fractions (default: empty system).  The N-system starts from
        ``s0`` rounded to multiples of 1/N (by :func:`sample_path`), the fluid from
        exactly that rounded state, so the distance at t = 0 is 0.
    seed : None, int or SeedSequence, optional
        Seed of the sample path.
    n_times : int, optional
        Number of equally spaced grid times in [0, T], in ``[2, 1e5]``.
    fluid : ndarray, optional
        The fluid solution on that grid, if already computed: shape (n_times, L), every
        row tail fractions, the first row the sample path's initial state (checked).

    Returns
    -------
    float
        :math:`\max_{t \in \text{grid}} \|s^N(t) - s(t)\|_1`, jobs per station.

    Raises
    ------
    ValueError
        If an argument is out of range.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 4.1 (the fluid limit on finite horizons).
    """
    n_stations = check_n_stations(n_stations)
    lam = check_lam(lam)
    p = check_p(p)
    t_end = check_real(t_end, "t_end", low=0.0, low_open=True, high=1e7)
    n_times = _check_n_times(n_times)
    if fluid is not None:
        fluid = real_array(fluid, "fluid")  # shape and type errors before the long part
        if fluid.ndim != 2 or fluid.shape[0] != n_times:
            _check_fluid(fluid, n_times, np.ones(1))
    grid = _grid(t_end, n_times)
    path = sample_path(n_stations, lam, p, grid, s0=s0, seed=seed)
    if fluid is None:
        fluid = fluid_trajectory(lam, p, grid, path[0], check=False)
    else:
        fluid = _check_fluid(fluid, n_times, path[0])
    return float(np.max(l1_distance(path, fluid)))


def martingale_tolerance(n_stations, lam, p, t_end, *, s0=None, n_times=201,
                         z=4.0):
    r"""A per-level tolerance for :math:`\sup_{t\le T}|s^N_i(t) - s_i(t)|` from N.

    Each :math:`s^N_i` is its compensator plus a martingale :math:`M_i` with jumps
    :math:`\pm 1/N`, so by Doob's inequality
    :math:`E \sup_{t\le T} M_i(t)^2 \le 4 R_i / N` with :math:`R_i` the expected
    number of events per station that change level :math:`i` up to T, evaluated on
    the fluid solution:
    :math:`R_i = \int_0^T [\lambda(s_{i-1}-s_i) + (1-p)(s_i-s_{i+1}) + p\,
    1\{\text{top} = i\}]\,dt`, where the central-server term is bounded by
    :math:`p` on every level whose level below is occupied (the N-system's top may sit
    one level above the fluid's).  The tolerance is ``z`` such standard deviations,
    :math:`z \sqrt{4 R_i / N}`; Chebyshev gives a per-level exceedance probability of
    at most :math:`1/z^2` for the martingale part.  The fluid flow does not amplify
    l1 differences (it is l1 non-expansive), so this is the scale of the deviation.
    It is a heuristic scale, not a proved bound: :math:`R_i` is evaluated on the fluid
    path instead of the N-system's, and the compensator's own deviation is left out.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam, p : float
        Model parameters (``0 <= lam < 1``, ``0 <= p <= 1``).
    t_end : float
        Horizon, ``> 0``.
    s0 : array_like, optional
        Initial state (default empty).
    n_times : int
        Grid for the time integral (trapezoid rule), in ``[2, 1e5]``.
    z : float
        Number of standard deviations, ``> 0``.

    Returns
    -------
    ndarray of float64, shape (levels,)
        Tolerance for each level ``i = 0..levels`` (entry 0 is 0; the last entry is
        the level above the fluid's highest, which the N-system may visit).

    Raises
    ------
    ValueError
        If an argument is out of range.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 4 (the martingale decomposition in the proof of
    the fluid limit); Doob's L2 maximal inequality.
    """
    n_stations = check_n_stations(n_stations)
    lam = check_lam(lam)
    p = check_p(p)
    t_end = check_real(t_end, "t_end", low=0.0, low_open=True, high=1e7)
    z = check_real(z, "z", low=0.0, low_open=True)
    grid = _grid(t_end, _check_n_times(n_times))
    S = fluid_trajectory(lam, p, grid, s0, check=False)
    L = S.shape[1] - 1
    S = np.concatenate([S, np.zeros((S.shape[0], 2))], axis=1)
    R = np.zeros(L + 2)
    for i in range(1, L + 2):
        rate = (lam * (S[:, i - 1] - S[:, i]) + (1 - p) * (S[:, i] - S[:, i + 1])
                + p * (S[:, i - 1] > 0))
        R[i] = np.trapezoid(rate, grid)
    return z * np.sqrt(4.0 * R / n_stations)


@dataclass
class FluidLimitStudy:
    r"""Distances between sample paths and the fluid solution, for several N.

    Attributes
    ----------
    lam, p, t_end : float
        The model and horizon.
    n_values : ndarray of int, shape (k,)
        Numbers of stations.
    seeds : ndarray of int, shape (r,)
        Seeds (one sample path per N and seed).
    distances : ndarray of float, shape (k, r)
        :math:`\sup_{t} \|s^N(t) - s(t)\|_1` over the grid, per N and seed.
    exponent : float
        Fitted :math:`a` in :math:`D_N \approx c N^{-a}` (least squares of
        :math:`\log D` on :math:`\log N` over all runs).
    exponent_se : float
        Standard error of ``exponent`` from the regression.
    prefactor : float
        Fitted :math:`c`.
    """

    lam: float
    p: float
    t_end: float
    n_values: np.ndarray
    seeds: np.ndarray
    distances: np.ndarray
    exponent: float
    exponent_se: float
    prefactor: float

    def scaled(self):
        """``distances * sqrt(N)``: roughly constant in N if the rate is N^-1/2."""
        return self.distances * np.sqrt(self.n_values)[:, None]


def fluid_limit_study(lam, p, t_end, n_values, seeds, *, s0=None, n_times=201,
                      progress=None):
    r"""Measure :math:`\sup_{t\le T}\|s^N(t)-s(t)\|_1` over N and seeds; fit the rate.

    Parameters
    ----------
    lam, p : float
        Model parameters (``0 <= lam < 1``, ``0 <= p <= 1``).
    t_end : float
        Horizon T, ``> 0`` (cost grows like ``N * T``).
    n_values : sequence of int, shape (k,)
        Numbers of stations, at least two distinct values.
    seeds : sequence of int, shape (r,)
        Non-negative seeds; sample path ``(N, seed)`` uses seed
        ``SeedSequence(seed, spawn_key=(N,))`` so that paths for different N are
        independent and each is reproducible.
    s0 : array_like, optional
        Initial tail fractions (default empty).  Use a state whose entries are
        multiples of 1/N for every N studied (or the empty system), so that every
        N-system starts exactly where the fluid does.
    n_times : int
        Time grid size, in ``[2, 1e5]``.
    progress : bool, optional
        Show a tqdm bar over the runs.

    Returns
    -------
    FluidLimitStudy

    Raises
    ------
    ValueError
        If an argument is out of range, ``s0`` is not representable with N stations
        for some N, or some path coincides with the fluid trajectory (distance 0, so
        the rate cannot be fitted).

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 4.1; Kurtz (1970) for the N^-1/2 scale of
    fluctuations of density-dependent Markov chains with smooth drift.
    """
    lam = check_lam(lam)
    p = check_p(p)
    t_end = check_real(t_end, "t_end", low=0.0, low_open=True, high=1e7)
    ns = np.array([check_n_stations(n) for n in n_values], dtype=np.int64)
    if np.unique(ns).size < 2:
        raise ValueError("n_values must contain at least two distinct values")
    seeds = [check_positive_int(sd, "seeds[...]", minimum=0) for sd in seeds]
    progress = check_flag(progress, "progress", allow_none=True)
    if not seeds:
        raise ValueError("seeds must be a non-empty list of non-negative integers")
    x0 = None
    if s0 is not None:
        x0 = check_s0(s0)
        for n in ns:
            if np.max(np.abs(x0 * n - np.round(x0 * n))) > 1e-9:
                raise ValueError(f"s0 is not a multiple of 1/N for N = {n}; use an "
                                 "s0 that every N-system can start from exactly")
    grid = _grid(t_end, _check_n_times(n_times))
    fluid = fluid_trajectory(lam, p, grid, x0)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(ns) * len(seeds), desc="fluid_limit_study")
    D = np.empty((len(ns), len(seeds)))
    for a, n in enumerate(ns):
        for b, sd in enumerate(seeds):
            ss = np.random.SeedSequence(sd, spawn_key=(int(n),))
            path = sample_path(int(n), lam, p, grid, s0=x0, seed=ss)
            D[a, b] = float(np.max(l1_distance(path, fluid)))
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    if np.any(D <= 0.0):
        a, b = np.argwhere(D <= 0.0)[0]
        raise ValueError(
            f"the N = {ns[a]} path (seed {seeds[b]}) coincides with the fluid trajectory "
            f"on the whole grid (distance 0, e.g. an empty system with lam = 0): there "
            f"is no convergence rate to fit; choose lam > 0 or a non-trivial s0")
    X = np.repeat(np.log(ns.astype(float)), len(seeds))
    Y = np.log(D).ravel()
    A = np.vstack([np.ones_like(X), X]).T
    coef, res, *_ = np.linalg.lstsq(A, Y, rcond=None)
    resid = Y - A @ coef
    dof = max(len(Y) - 2, 1)
    cov = (resid @ resid / dof) * np.linalg.inv(A.T @ A)
    return FluidLimitStudy(lam, p, t_end, ns, np.array(seeds), D, float(-coef[1]),
                           float(np.sqrt(cov[1, 1])), float(np.exp(coef[0])))
