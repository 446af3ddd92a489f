r"""Exact simulation of the N-station system with partial centralization.

The continuous-time Markov chain of Tsitsiklis and Xu (2012, Section 2):
N stations, Poisson arrivals at rate ``lam`` to each, a local server of rate ``1 - p`` at
each, and a central server of rate ``N p`` that serves a longest queue (ties broken
uniformly at random).  The chain is simulated *exactly* by uniformization at the total rate
N(1 + lam) (Jensen, 1953): the number of events in a time window of length T is drawn as
Poisson(N (1 + lam) T), and each event is an arrival, a local-server token or a
central-server token at a uniformly chosen station.  Time averages are computed as step
averages over the states visited, which is the conditional expectation of the time average
given the events (see :mod:`qtheory._kernels`).  No exponential holding time is ever drawn,
so there is no ``log(0)``.

Public functions: :func:`simulate` (steady-state estimates with batch-means confidence
intervals), :func:`replicate` (independent replications), :func:`sample_path` (the
occupancy fractions, and for small N the queues themselves, at given times).
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import _kernels as _k
from ._validation import (
    check_flag,
    check_lam,
    check_n_stations,
    check_p,
    check_positive_int,
    check_real,
    check_s0,
    check_seed,
    check_times,
)
from .statistics import (
    batch_means,
    correlation_threshold,
    mm1_asymptotic_variance,
    mm1_relaxation_time,
)

__all__ = [
    "SimulationResult",
    "SimulationWarning",
    "simulate",
    "replicate",
    "sample_path",
]

# Events per compiled call: about 0.1 s, so Ctrl-C and the progress bar respond quickly.
_CHUNK = 1 << 23
# Largest per-station record sample_path(per_station=True) will allocate (entries).
_MAX_STATION_RECORD = 50_000_000
# In notebooks a progress bar appears by default for runs with more events than this.
_AUTO_PROGRESS_EVENTS = 500_000_000


class SimulationWarning(UserWarning):
    """A simulation estimate may be unreliable (run too short, correlated batches)."""


@dataclass(frozen=True, repr=False)
class SimulationResult:
    r"""Steady-state estimates from one simulation run of the N-station system.

    Every estimate comes from the simulation; no fluid (N = infinity) value is stored here.

    Attributes
    ----------
    n_stations, lam, p, t_end, warmup, n_batches : inputs of :func:`simulate`.
    seed_entropy : int
        Entropy of the :class:`numpy.random.SeedSequence` used; passing
        ``numpy.random.SeedSequence(seed_entropy, spawn_key=seed_spawn_key)`` as ``seed``
        reproduces the run bit for bit on the same machine.
    seed_spawn_key : tuple of int
    s : ndarray of float64, shape (levels,)
        Time-average fraction of stations with at least ``i`` jobs over
        ``[warmup, t_end]``; ``s[0] == 1``; trailing levels never occupied are dropped.
    s_half_width : ndarray of float64, shape (levels,)
        95% batch-means half-widths of ``s`` (0 for ``s[0]``).
    mean_queue_length : float
        Time-average number of jobs per station, ``s[1:].sum()``.
    ci : tuple of float
        ``(low, high)``, 95% batch-means confidence interval for the mean queue length.
    longest_queue_tail : ndarray of float64, shape (levels,)
        Time-average of the indicator {M >= i}, M the longest queue; entry 0 is 1.
    n_events : int
        Uniformized events simulated, warm-up included (dummy tokens that found nothing to
        serve included).
    n_events_measured : int
        Events after the warm-up.
    batch_s : ndarray of float64, shape (n_batches, levels)
        Per-batch time averages of ``s`` (for further batch-means statistics).
    batch_longest_queue_tail : ndarray of float64, shape (n_batches, levels)
    batch_mean_queue_length : ndarray of float64, shape (n_batches,)
    lag1 : float
        Lag-1 autocorrelation of the batch means of the mean queue length.
    warnings : list of str
        Messages about the reliability of the estimates (also issued as
        :class:`SimulationWarning`).
    """

    n_stations: int
    lam: float
    p: float
    t_end: float
    warmup: float
    n_batches: int
    seed_entropy: int
    seed_spawn_key: tuple
    s: np.ndarray
    s_half_width: np.ndarray
    mean_queue_length: float
    ci: tuple
    longest_queue_tail: np.ndarray
    n_events: int
    n_events_measured: int
    batch_s: np.ndarray
    batch_longest_queue_tail: np.ndarray
    batch_mean_queue_length: np.ndarray
    lag1: float
    warnings: list = field(default_factory=list)

    @property
    def half_width(self):
        """Half-width of the 95% interval for the mean queue length."""
        return (self.ci[1] - self.ci[0]) / 2.0

    def summary(self):
        """A few lines describing the run and its estimates (str)."""
        lines = [
            f"Simulation of N = {self.n_stations} stations, lam = {self.lam:g}, "
            f"p = {self.p:g}",
            f"  time [0, {self.t_end:g}], warm-up {self.warmup:g}, "
            f"{self.n_batches} batches, {self.n_events:,} events",
            f"  mean queue length per station: {self.mean_queue_length:.5g}  "
            f"(95% CI {self.ci[0]:.5g} .. {self.ci[1]:.5g})",
            f"  levels occupied: {len(self.s) - 1}, "
            f"lag-1 correlation of batch means: {self.lag1:.3f}",
        ]
        for w in self.warnings:
            lines.append(f"  warning: {w}")
        return "\n".join(lines)

    def __repr__(self):
        return (
            f"SimulationResult(n_stations={self.n_stations}, lam={self.lam!r}, "
            f"p={self.p!r}, t_end={self.t_end!r}, warmup={self.warmup!r}, "
            f"mean_queue_length={self.mean_queue_length:.6g}, "
            f"ci=({self.ci[0]:.6g}, {self.ci[1]:.6g}), n_events={self.n_events}, "
            f"warnings={len(self.warnings)})"
        )


# --------------------------------------------------------------------------- internals


def _streams(ss):
    """Two independent child streams of a SeedSequence, without mutating it."""
    kern = np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (0,),
                                  pool_size=ss.pool_size)
    pois = np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (1,),
                                  pool_size=ss.pool_size)
    rng_state = kern.generate_state(4, np.uint64)
    if not rng_state.any():  # xoshiro's one forbidden state (probability 2**-256)
        rng_state[0] = np.uint64(1)
    return rng_state, np.random.default_rng(pois)


def _in_notebook():
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    ip = get_ipython()
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def _progress_bar(progress, total, desc):
    if progress is None:
        progress = _in_notebook() and total > _AUTO_PROGRESS_EVENTS
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=int(total), desc=desc, unit="ev", unit_scale=True)


def _initial_counts(n_stations, s0, name="s0"):
    """Counts cnt[k] = #stations with >= k jobs from None, an int level or fractions."""
    if s0 is None:
        return np.array([n_stations], dtype=np.int64)
    if isinstance(s0, numbers.Integral) and not isinstance(s0, (bool, np.bool_)):
        level = int(s0)
        if level < 0:
            raise ValueError(f"{name} as a level must be a non-negative integer, "
                             f"got {level}")
        return np.full(level + 1, n_stations, dtype=np.int64)
    s = check_s0(s0, name)
    cnt = np.rint(s * n_stations).astype(np.int64)
    cnt[0] = n_stations
    nz = np.flatnonzero(cnt > 0)
    return cnt[: nz[-1] + 1]


def _level_dtype(top):
    """Narrowest unsigned type for sorted queue lengths up to ``top`` (with headroom)."""
    if top < 200:
        return np.uint8
    if top < 60_000:
        return np.uint16
    if top < 2_000_000_000:
        return np.int32
    raise ValueError("a queue longer than 2e9 jobs cannot be simulated")  # pragma: no cover


class _System:
    """The mutable state of one run (sorted levels, counts, accumulators, generator)."""

    def __init__(self, n_stations, lam, p, cnt0, rng_state, track, shuffle_rng=None):
        self.n = n_stations
        self.lam = lam
        self.p = p
        top = len(cnt0) - 1
        cap = max(64, 2 * (top + 2))
        self.cnt = np.zeros(cap, dtype=np.int64)
        self.cnt[: top + 1] = cnt0
        self.L = np.empty(n_stations, dtype=_level_dtype(top))
        for k in range(top + 1):  # stations with exactly k jobs, in sorted position
            self.L[n_stations - self.cnt[k]: n_stations - self.cnt[k + 1]] = k
        self.acc = np.zeros(cap, dtype=np.int64)
        self.tacc = np.zeros(cap, dtype=np.int64)
        self.win_s = np.zeros(cap)  # step integrals of the open window, flushed per chunk
        self.win_tail = np.zeros(cap)
        self.win_width = 0
        self.scal = np.zeros(_k.NSCAL, dtype=np.int64)
        self.scal[_k.TOP] = top
        self.a_thr, self.l_thr = _k.event_thresholds(lam, p)
        self.rng = np.asarray(rng_state, dtype=np.uint64).copy()
        self.track = bool(track)
        if self.track:
            if shuffle_rng is not None:
                self.perm = shuffle_rng.permutation(n_stations).astype(np.int32)
            else:
                self.perm = np.arange(n_stations, dtype=np.int32)
            self.pos = np.empty(n_stations, dtype=np.int32)
            self.pos[self.perm] = np.arange(n_stations, dtype=np.int32)
        self.n_events = 0

    @property
    def cap(self):
        return self.cnt.shape[0]

    @property
    def top(self):
        return int(self.scal[_k.TOP])

    @property
    def level_max(self):
        return int(np.iinfo(self.L.dtype).max)

    def _grow(self):
        if self.top + 1 >= self.level_max:
            self.L = self.L.astype(_level_dtype(self.top))
            return
        cap = self.cap
        new = 2 * cap
        for name in ("cnt", "acc", "tacc", "win_s", "win_tail"):
            old = getattr(self, name)
            arr = np.zeros(new, dtype=old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    def run(self, n_events, bar=None):
        """Simulate n_events events in chunks (interruptible between chunks)."""
        remaining = int(n_events)
        while remaining > 0:
            step = min(remaining, _CHUNK)
            if self.track:
                done = _k.run_events_tracked(step, self.a_thr, self.l_thr, self.L,
                                             self.cnt, self.acc, self.tacc, self.scal,
                                             self.rng, self.level_max, self.perm,
                                             self.pos)
            else:
                done = _k.run_events(step, self.a_thr, self.l_thr, self.L, self.cnt,
                                     self.acc, self.tacc, self.scal, self.rng,
                                     self.level_max)
            remaining -= done
            self.n_events += done
            self.win_width += _k.flush(self.cnt, self.acc, self.tacc, self.scal,
                                       self.win_s, self.win_tail, False)
            if bar is not None and done:
                bar.update(done)
            if done < step:
                self._grow()

    def close_window(self):
        """End the accumulation window at the current state (counted for one step).

        Returns (step integral of cnt[k], step integral of 1{top >= k}, number of
        states W) over the window, and opens a new one.
        """
        self.win_width += _k.flush(self.cnt, self.acc, self.tacc, self.scal,
                                   self.win_s, self.win_tail, True)
        out = (self.win_s, self.win_tail, self.win_width)
        self.win_s = np.zeros(self.cap)
        self.win_tail = np.zeros(self.cap)
        self.win_width = 0
        return out

    def s(self):
        return self.cnt[: self.top + 1] / self.n

    def queues(self):
        """Queue length of every station, int64[N] (tracking only)."""
        return self.L[self.pos].astype(np.int64)


# Largest system and run the simulator accepts: one byte per station, and about three
# hours of events at 1e8 events per second.
_MAX_STATIONS = 10**9
_MAX_EVENTS = 1e12


def _check_common(n_stations, lam, p):
    n_stations = check_n_stations(n_stations)
    if n_stations > _MAX_STATIONS:
        raise ValueError(f"n_stations must be an integer in [1, {_MAX_STATIONS:.0e}] "
                         f"(one byte of memory per station), got {n_stations}")
    return n_stations, check_lam(lam), check_p(p)


def _check_horizon(n_stations, lam, horizon, name):
    events = n_stations * (1.0 + lam) * horizon
    if events > _MAX_EVENTS:
        raise ValueError(
            f"{name} = {horizon:g} asks for about N(1 + lam) {name} = {events:.3g} events, "
            f"more than the {_MAX_EVENTS:.0e} this simulator accepts in one call; "
            f"use a smaller {name} (or fewer stations)")


def _stack(rows, width):
    out = np.zeros((len(rows), width))
    for b, r in enumerate(rows):
        m = min(width, r.size)
        out[b, :m] = r[:m]
    return out


# --------------------------------------------------------------------------- public API


def simulate(n_stations, lam, p, *, t_end, warmup, seed=None, n_batches=20, s0=None,
             progress=None):
    r"""Simulate the N-station system and estimate its steady state by batch means.

    Simulates the exact continuous-time Markov chain on ``[0, t_end]`` from the initial
    state ``s0`` (empty by default), discards ``[0, warmup)``, cuts ``[warmup, t_end]``
    into ``n_batches`` batches of equal length and reports time averages over
    ``[warmup, t_end]`` with 95% batch-means confidence intervals.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam : float
        Arrival rate per station, ``0 <= lam < 1`` (jobs per mean service time).
    p : float
        Centralization fraction, ``0 <= p <= 1``: the central server has rate ``N p``,
        each local server rate ``1 - p``.
    t_end : float
        End of the run, in mean service times; finite and > 0.
    warmup : float
        Warm-up period removed from every estimate, ``0 <= warmup < t_end``.
    seed : None, int >= 0 or numpy.random.SeedSequence, optional
        The same seed gives bit-identical results on the same machine (the generator is
        seeded inside compiled code; NumPy's global seed plays no role).  ``None`` draws
        fresh entropy, recorded in the result's ``seed_entropy``.
    n_batches : int, optional
        Number of batches B >= 2 (default 20).
    s0 : None, int or array_like of float, optional
        Initial state: ``None`` (empty), an integer k (every station holds k jobs) or tail
        fractions ``s0`` (``s0[0] == 1``, non-increasing), rounded to multiples of 1/N.
    progress : bool or None, optional
        Show a tqdm progress bar.  ``None`` (default): only in a Jupyter notebook and only
        for runs of more than 5e8 events.

    Returns
    -------
    SimulationResult
        Inputs, ``s`` (shape (levels,)), ``mean_queue_length`` with ``ci``,
        ``longest_queue_tail`` (shape (levels,)), ``n_events``, per-batch arrays and
        ``warnings``.

    Raises
    ------
    ValueError
        If ``n_stations`` is not an integer >= 1, ``lam`` is outside ``[0, 1)``, ``p``
        outside ``[0, 1]``, ``t_end`` not finite and positive, ``warmup`` outside
        ``[0, t_end)``, ``n_batches`` not an integer >= 2, any of them NaN, or ``s0``
        invalid.
    KeyboardInterrupt
        Honoured between chunks of about 8 million events.

    Warns
    -----
    SimulationWarning
        When the lag-1 autocorrelation of the batch means exceeds
        :func:`qtheory.statistics.correlation_threshold` (the interval is then too
        narrow), and, for ``p = 0`` or ``N = 1`` (where each queue is an M/M/1 queue and
        the relaxation time :math:`1/(1-\sqrt\lambda)^2` is known), when the warm-up is
        shorter than one relaxation time or the batches are shorter than ten integrated
        autocorrelation times :math:`2(1+\lambda)/(1-\lambda)^2`.

    Notes
    -----
    Uniformization at rate N(1 + lam) (the book's chapter on the occupancy chain): each event is an arrival
    (probability lam/(1+lam)), a local token (probability (1-p)/(1+lam)) at a uniform
    station, or a central token (probability p/(1+lam)) at a longest queue.  The number of
    events in each batch is Poisson(N (1 + lam) T_batch); averages are step averages over
    the states visited, the conditional expectation of the time average.  Dummy events
    count: an event average over real jumps only would be biased (for N = 1, p = 0, lam = 0.5 it would give about 1.5 instead of 1).  Cost per
    event is O(1) and independent of N; memory is one byte per station (two or four
    once a queue exceeds 254 or 65534 jobs).

    References
    ----------
    Tsitsiklis and Xu (2012), Section 2 (the model) and Section 4 (the uniformized
    construction); Jensen (1953) (uniformization); Asmussen and Glynn (2007), Ch. IV.5
    (batch means).

    Examples
    --------
    >>> r = simulate(1, 0.5, 0.0, t_end=2e4, warmup=100.0, seed=1)
    >>> abs(r.mean_queue_length - 1.0) < 0.1
    True
    """
    n_stations, lam, p = _check_common(n_stations, lam, p)
    t_end = check_real(t_end, "t_end", low=0.0, low_open=True, high=math.inf,
                       high_open=True)
    warmup = check_real(warmup, "warmup", low=0.0, high=t_end, high_open=True)
    _check_horizon(n_stations, lam, t_end, "t_end")
    n_batches = check_positive_int(n_batches, "n_batches", minimum=2)
    progress = check_flag(progress, "progress", allow_none=True)
    if n_batches > 10**6:
        raise ValueError(f"n_batches must be an integer in [2, 1e6], got {n_batches}")
    cnt0 = _initial_counts(n_stations, s0)
    ss = check_seed(seed)
    rng_state, gen = _streams(ss)

    rate = n_stations * (1.0 + lam)
    batch_len = (t_end - warmup) / n_batches
    n_warm = int(gen.poisson(rate * warmup)) if warmup > 0 else 0
    counts = gen.poisson(rate * batch_len, size=n_batches).astype(np.int64)
    total = n_warm + int(counts.sum())

    system = _System(n_stations, lam, p, cnt0, rng_state, track=False)
    bar = _progress_bar(progress, total, "simulate")
    rows_s, rows_tail = [], []
    try:
        if n_warm:
            system.run(n_warm, bar)
        system.close_window()  # discard the warm-up window
        for b in range(n_batches):
            system.run(int(counts[b]), bar)
            out_s, out_tail, width = system.close_window()
            rows_s.append(out_s / (n_stations * float(width)))
            rows_tail.append(out_tail / float(width))
    finally:
        if bar is not None:
            bar.close()

    width = max(r.size for r in rows_s)
    bs = _stack(rows_s, width)
    btail = _stack(rows_tail, width)  # time-average of 1{M >= i} per batch
    occupied = np.flatnonzero(bs.max(axis=0) > 0)
    levels = int(occupied[-1]) + 1
    bs = bs[:, :levels]
    btail = np.minimum(btail[:, :levels], 1.0)
    bs[:, 0] = 1.0
    btail[:, 0] = 1.0
    bmean = bs[:, 1:].sum(axis=1)

    summ = batch_means(bmean)
    s = bs.mean(axis=0)
    s_hw = np.array([batch_means(bs[:, i]).half_width for i in range(levels)])
    s_hw[0] = 0.0

    msgs = []
    thr = correlation_threshold(n_batches)
    if np.isfinite(summ.lag1) and summ.lag1 > thr:
        msgs.append(
            f"the batch means are correlated (lag-1 autocorrelation {summ.lag1:.2f} > "
            f"{thr:.2f}): the confidence interval is too narrow; run longer (longer "
            f"batches)"
        )
    if (p == 0.0 or n_stations == 1) and lam > 0.0:
        tau = mm1_relaxation_time(lam)
        tau_int = mm1_asymptotic_variance(lam) * (1.0 - lam) ** 2 / lam
        if warmup < tau:
            msgs.append(
                f"warm-up {warmup:g} is shorter than the relaxation time "
                f"1/(1 - sqrt(lam))^2 = {tau:.3g} of these M/M/1 queues: the estimate "
                f"is biased by the initial state"
            )
        if batch_len < 10.0 * tau_int:
            msgs.append(
                f"batches of length {batch_len:.3g} are shorter than ten integrated "
                f"autocorrelation times 2(1 + lam)/(1 - lam)^2 = {tau_int:.3g}: the run "
                f"is far too short for this load; use t_end - warmup >= "
                f"{10.0 * tau_int * n_batches:.3g}"
            )
    if counts.min() < 100:
        msgs.append(
            f"some batches hold fewer than 100 events (smallest: {int(counts.min())}; "
            f"{int(counts.sum())} events measured in all): the estimate and its interval "
            f"describe the initial state, not the steady state; run much longer"
        )
    for m in msgs:
        warnings.warn(m, SimulationWarning, stacklevel=2)

    return SimulationResult(
        n_stations=n_stations, lam=lam, p=p, t_end=t_end, warmup=warmup,
        n_batches=n_batches, seed_entropy=ss.entropy,
        seed_spawn_key=tuple(ss.spawn_key),
        s=s, s_half_width=s_hw, mean_queue_length=float(summ.mean), ci=summ.ci,
        longest_queue_tail=btail.mean(axis=0), n_events=int(system.n_events),
        n_events_measured=int(counts.sum()), batch_s=bs,
        batch_longest_queue_tail=btail, batch_mean_queue_length=bmean,
        lag1=summ.lag1, warnings=msgs,
    )


def replicate(n_replications, n_stations, lam, p, *, t_end, warmup, seed=None,
              n_batches=20, s0=None, progress=None):
    r"""Independent replications of :func:`simulate`.

    Parameters
    ----------
    n_replications : int
        Number of runs R >= 1.
    n_stations, lam, p, t_end, warmup, n_batches, s0, progress
        As for :func:`simulate`.
    seed : None, int >= 0 or numpy.random.SeedSequence
        Replication r uses the r-th child of ``SeedSequence(seed).spawn(R)`` (statistically
        independent streams); the same seed gives the same list.

    Returns
    -------
    list of SimulationResult, length R

    Raises
    ------
    ValueError
        As for :func:`simulate`, or if ``n_replications`` is not an integer >= 1.

    References
    ----------
    Asmussen and Glynn (2007), Ch. III (independent replications).
    """
    n_replications = check_positive_int(n_replications, "n_replications")
    ss = check_seed(seed)
    children = np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key),
                                      pool_size=ss.pool_size).spawn(n_replications)
    return [
        simulate(n_stations, lam, p, t_end=t_end, warmup=warmup, seed=c,
                 n_batches=n_batches, s0=s0, progress=progress)
        for c in children
    ]


def sample_path(n_stations, lam, p, times, *, s0=None, seed=None, per_station=False,
                progress=None):
    r"""Occupancy fractions of one sample path of the N-station system at given times.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    times : array_like of float, shape (m,)
        Observation times (mean service times), finite, >= 0, non-decreasing; the path
        starts at time 0 in ``s0``.
    s0 : None, int or array_like of float, optional
        Initial state: ``None`` (empty system), an integer k (all stations at level k), or
        tail fractions (``s0[0] == 1``, non-increasing), rounded to multiples of 1/N.
    seed : None, int >= 0 or numpy.random.SeedSequence, optional
        As for :func:`simulate`.
    per_station : bool, optional
        Also return the queue of every station (for small N: at most 5e7 entries in all).
        Stations are exchangeable; the initial state is assigned to stations in a random
        order.
    progress : bool or None, optional
        As for :func:`simulate`.

    Returns
    -------
    s : ndarray of float64, shape (m, levels)
        ``s[t, i]`` = fraction of stations with at least ``i`` jobs at ``times[t]``;
        ``s[:, 0] == 1``; ``levels`` is one more than the highest level occupied at any
        observation time (at least the length of ``s0``).
    queues : ndarray of int64, shape (m, n_stations)
        Only when ``per_station``: the number of jobs at each station.

    Raises
    ------
    ValueError
        If any parameter is out of range (named in the message), or ``per_station`` would
        record more than 5e7 entries.

    Notes
    -----
    The number of events between consecutive observation times is Poisson with mean
    N (1 + lam) times the gap (exact uniformization), so the values are exact samples of
    the chain at those times.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 4 (the coupled uniformized construction used in the
    fluid-limit theorem); Jensen (1953).
    """
    n_stations, lam, p = _check_common(n_stations, lam, p)
    t = check_times(times)
    _check_horizon(n_stations, lam, float(t[-1]), "times[-1]")
    per_station = check_flag(per_station, "per_station")
    progress = check_flag(progress, "progress", allow_none=True)
    if per_station and t.size * n_stations > _MAX_STATION_RECORD:
        raise ValueError(
            f"per_station=True would record len(times) * n_stations = "
            f"{t.size * n_stations:,} queue lengths (limit {_MAX_STATION_RECORD:,}); "
            f"use fewer times or stations"
        )
    cnt0 = _initial_counts(n_stations, s0)
    ss = check_seed(seed)
    rng_state, gen = _streams(ss)
    rate = n_stations * (1.0 + lam)
    gaps = np.diff(np.concatenate(([0.0], t)))
    counts = gen.poisson(rate * gaps).astype(np.int64)
    system = _System(n_stations, lam, p, cnt0, rng_state, track=per_station,
                     shuffle_rng=gen)
    rows = []
    q = np.empty((t.size, n_stations), dtype=np.int64) if per_station else None
    bar = _progress_bar(progress, int(counts.sum()), "sample_path")
    try:
        for i in range(t.size):
            system.run(int(counts[i]), bar)
            rows.append(system.s())
            if per_station:
                q[i] = system.queues()
            system.close_window()  # averages are not needed here
    finally:
        if bar is not None:
            bar.close()
    width = max(len(cnt0), max(r.size for r in rows))
    s = _stack(rows, width)
    if per_station:
        return s, q
    return s
