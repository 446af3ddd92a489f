r"""The simulation engine: the state of one uniformized run and what sets it up.

Shared by :mod:`qtheory.simulation` (which runs chains and estimates) and the run-length
rules (:mod:`qtheory._runlength`, which time the engine to estimate this machine's event
rate).  The names are public so that those modules may use them; the module is not part
of qtheory's user API.  Nothing here validates ``lam`` or ``p``: :func:`check_system`
is the one check of the system's parameters and the public functions call it once.
See :mod:`qtheory.simulation` for the model and :mod:`qtheory._kernels` for the
compiled event loop.
"""

from __future__ import annotations

import numbers
import os

import numpy as np

from . import _kernels as _k
from ._validation import check_int, check_lam, check_n_stations, check_p, check_s0

__all__ = ["CHUNK", "MAX_STATIONS", "MAX_EVENTS", "MAX_TOTAL_EVENTS", "MAX_LEVEL",
           "RESULT_BYTES", "Cancelled", "System", "available_cores", "check_system",
           "initial_counts", "level_dtype", "streams", "memory_budget", "start_levels",
           "run_bytes", "check_run_memory"]

# Events per compiled call: about 0.1 s, so Ctrl-C and the progress bar respond quickly.
CHUNK = 1 << 23


def available_cores():
    """Number of cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        return max(1, os.cpu_count() or 1)


def streams(ss):
    """Two independent child streams of a SeedSequence, without mutating it."""
    kern = np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (0,),
                                  pool_size=ss.pool_size)
    pois = np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (1,),
                                  pool_size=ss.pool_size)
    rng_state = kern.generate_state(4, np.uint64)
    if not rng_state.any():  # xoshiro's one forbidden state (probability 2**-256)
        rng_state[0] = np.uint64(1)
    return rng_state, np.random.default_rng(pois)


# Highest start level.  A start at level k has k + 1 levels, and every level costs
# memory and time in each chain (five level arrays) and in each batch of the result (its
# rows of s and of the longest-queue tail): at 1e6 levels and 20 batches about 0.7 GiB
# and some seconds.  Queues may grow past it during a run (the widest level type,
# int32, holds 2e9).
MAX_LEVEL = 1_000_000
# Memory of one result of simulate or replicate besides its per-batch arrays (the
# dataclass, its small arrays, the chain's generator and its place in the pool), bytes;
# measured about 6 KiB, with a margin.
RESULT_BYTES = 16_384


def memory_budget():
    """Bytes one call may plan to hold: half the physical memory, at most 16 GiB."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # pragma: no cover
        phys = 8 * 2**30
    return int(min(phys // 2, 16 * 2**30))


def _is_scalar(s0):
    return isinstance(s0, (numbers.Number, np.generic)) or (
        isinstance(s0, np.ndarray) and s0.ndim == 0)


def _start_level(s0, name):
    # One rule for scalars (_validation.check_int): an integer, NumPy integer or 0-d
    # integer array is a level; anything else (3.5, 3.0, True) is refused.
    level = check_int(s0, name, minimum=0,
                      what="a level: every station starts with that many jobs; "
                           "or pass tail fractions as a 1-D array with s0[0] = 1")
    if level > MAX_LEVEL:
        raise ValueError(f"{name} as a level must be an integer in [0, {MAX_LEVEL:,}] "
                         f"(each level costs memory in every chain and every batch of "
                         f"the result), got {level:,}")
    return level


def start_levels(n_stations, s0, name="s0"):
    """Number of levels (highest occupied + 1) of a start, without allocating it."""
    if s0 is None:
        return 1
    if _is_scalar(s0):
        return _start_level(s0, name) + 1
    levels = int(check_s0(s0, name).size)
    if levels > MAX_LEVEL + 1:
        raise ValueError(f"{name} must have at most {MAX_LEVEL + 1:,} levels (its highest "
                         f"occupied level at most {MAX_LEVEL:,}), got {levels:,}")
    return levels


def run_bytes(n_stations, levels, rows, systems, *, track=False, results=0):
    """Estimated peak memory (bytes) of a run.

    ``systems`` Systems of ``n_stations`` stations alive at once (threads), each with
    ``levels`` levels (sorted queues, five level arrays of int64 or float64 with room
    for twice the levels), ``rows`` per-batch rows of ``levels`` entries kept (the rows
    of s and of the longest-queue tail, and their stacked copies: four arrays of
    float64), and ``results`` results of :data:`RESULT_BYTES` each.
    """
    item = np.dtype(level_dtype(int(levels))).itemsize
    per_system = n_stations * (item + (8 if track else 0)) + 40 * max(128, 2 * (levels + 1))
    return systems * per_system + 32 * rows * levels + RESULT_BYTES * results


def check_run_memory(n_stations, levels, rows, systems, *, name, what, track=False,
                     results=0):
    """Raise a ValueError naming ``name`` when :func:`run_bytes` exceeds the budget."""
    need = run_bytes(n_stations, levels, rows, systems, track=track, results=results)
    budget = memory_budget()
    if need > budget:
        raise ValueError(
            f"{name}: {what} needs about {need / 2**30:.3g} GiB ({n_stations:,} "
            f"stations x {systems} at once, {levels:,} levels, {rows:,} recorded rows), "
            f"more than the {budget / 2**30:.3g} GiB (half this machine's memory, at "
            f"most 16 GiB) one call may use; {_advice(name)}")
    return need


def _advice(name):
    return {"s0": "start lower (a smaller level or fewer levels)",
            "n_replications": "use fewer replications (or fewer batches)",
            "times": "use fewer observation times",
            "start": "use start='empty'"}.get(name, "use a smaller run")


def initial_counts(n_stations, s0, name="s0"):
    """Counts cnt[k] = #stations with >= k jobs from None, an int level or fractions."""
    if s0 is None:
        return np.array([n_stations], dtype=np.int64)
    if _is_scalar(s0):
        level = _start_level(s0, name)
        return np.full(level + 1, n_stations, dtype=np.int64)
    s = check_s0(s0, name)
    if s.size > MAX_LEVEL + 1:
        raise ValueError(f"{name} must have at most {MAX_LEVEL + 1:,} levels (its highest "
                         f"occupied level at most {MAX_LEVEL:,}), got {s.size:,}")
    cnt = np.rint(s * n_stations).astype(np.int64)
    cnt[0] = n_stations
    nz = np.flatnonzero(cnt > 0)
    return cnt[: nz[-1] + 1]


def level_dtype(top):
    """Narrowest unsigned type for sorted queue lengths up to ``top`` (with headroom)."""
    if top < 200:
        return np.uint8
    if top < 60_000:
        return np.uint16
    if top < 2_000_000_000:
        return np.int32
    raise ValueError("a queue longer than 2e9 jobs cannot be simulated")  # pragma: no cover


class System:
    """The mutable state of one run (sorted levels, counts, accumulators, generator)."""

    def __init__(self, n_stations, lam, p, cnt0, rng_state, track, shuffle_rng=None):
        self.n = n_stations
        self.lam = lam
        self.p = p
        top = len(cnt0) - 1
        # room for levels above the start: the kernels check it once per block of
        # events, so ample room means long blocks (it never changes a result)
        cap = max(128, 2 * (top + 2))
        self.cnt = np.zeros(cap, dtype=np.int64)
        self.cnt[: top + 1] = cnt0
        # Stations with exactly k jobs, in sorted position (one pass, not one per level:
        # a start with every station at level 1e6 costs O(N), not O(levels)).
        exact = self.cnt[: top + 1] - self.cnt[1: top + 2]
        occupied = np.flatnonzero(exact)
        self.L = np.repeat(occupied.astype(level_dtype(top)), exact[occupied])
        self.cancel = None  # a threading.Event set when another chain was interrupted
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
        # Large systems draw their random numbers ahead and prefetch the queue entries
        # (_kernels.run_events_ahead); the path is the same as with run_events.
        self.ring = (np.zeros(2 * _k.AHEAD, dtype=np.uint64)
                     if not self.track and n_stations >= _k.AHEAD_STATIONS else None)
        # Small systems read each event's level before the previous write
        # (_kernels.run_events, pipelined); the path is the same.
        self.pipelined = n_stations < _k.PIPE_STATIONS
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
            self.L = self.L.astype(level_dtype(self.top))
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
            if self.cancel is not None and self.cancel.is_set():
                raise Cancelled()
            # The window's clock never exceeds CHUNK: every integer the kernels and
            # flush add stays below 2**53, so the float sums are exact and the result
            # does not depend on where flushes happen (nor on the chunk size).
            step = min(remaining, CHUNK - int(self.scal[_k.CLOCK]))
            if self.track:
                done = _k.run_events_tracked(step, self.a_thr, self.l_thr, self.L,
                                             self.cnt, self.acc, self.tacc, self.scal,
                                             self.rng, self.level_max, self.perm,
                                             self.pos)
            elif self.ring is not None:
                done = _k.run_events_ahead(step, self.a_thr, self.l_thr, self.L,
                                           self.cnt, self.acc, self.tacc, self.scal,
                                           self.rng, self.level_max, self.ring)
            else:
                done = _k.run_events(step, self.a_thr, self.l_thr, self.L, self.cnt,
                                     self.acc, self.tacc, self.scal, self.rng,
                                     self.level_max, self.pipelined)
            remaining -= done
            self.n_events += done
            if self.scal[_k.CLOCK] >= CHUNK:  # flush full windows only: a short batch
                # costs one flush (O(levels)) at its end, not one per call
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
        nz = np.flatnonzero(self.win_s)  # levels above the highest occupied are 0
        hi = int(nz[-1]) + 1 if nz.size else 1
        out = (self.win_s[:hi].copy(), self.win_tail[:hi].copy(), self.win_width)
        self.win_s[:] = 0.0  # reuse the arrays: no fresh pages per batch
        self.win_tail[:] = 0.0
        self.win_width = 0
        return out

    def s(self):
        return self.cnt[: self.top + 1] / self.n

    def queues(self):
        """Queue length of every station, int64[N] (tracking only)."""
        return self.L[self.pos].astype(np.int64)


# Largest system and run the simulator accepts: one byte per station, and about three
# hours of events at 1e8 events per second.
MAX_STATIONS = 10**9
MAX_EVENTS = 1e12
# Largest total over the chains of simulate or the runs of replicate.
MAX_TOTAL_EVENTS = 1e13


def check_system(n_stations, lam, p):
    n_stations = check_n_stations(n_stations)
    if n_stations > MAX_STATIONS:
        raise ValueError(f"n_stations must be an integer in [1, {MAX_STATIONS:.0e}] "
                         f"(one byte of memory per station), got {n_stations}")
    return n_stations, check_lam(lam), check_p(p)


class Cancelled(Exception):
    """Raised inside a worker thread when another thread was interrupted."""
