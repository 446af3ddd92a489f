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

__all__ = ["CHUNK", "MAX_STATIONS", "MAX_EVENTS", "MAX_TOTAL_EVENTS", "Cancelled",
           "System", "available_cores", "check_system", "initial_counts", "level_dtype",
           "streams"]

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


def initial_counts(n_stations, s0, name="s0"):
    """Counts cnt[k] = #stations with >= k jobs from None, an int level or fractions."""
    if s0 is None:
        return np.array([n_stations], dtype=np.int64)
    if isinstance(s0, (numbers.Number, np.generic)) or (
            isinstance(s0, np.ndarray) and s0.ndim == 0):
        # One rule for scalars (_validation.check_int): an integer, NumPy integer or 0-d
        # integer array is a level; anything else (3.5, 3.0, True) is refused.
        level = check_int(s0, name, minimum=0,
                          what="a level: every station starts with that many jobs; "
                               "or pass tail fractions as a 1-D array with s0[0] = 1")
        if level >= 2_000_000_000:
            raise ValueError(f"{name} as a level must be below 2e9 jobs, got {level}")
        return np.full(level + 1, n_stations, dtype=np.int64)
    s = check_s0(s0, name)
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
        cap = max(64, 2 * (top + 2))
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
            else:
                done = _k.run_events(step, self.a_thr, self.l_thr, self.L, self.cnt,
                                     self.acc, self.tacc, self.scal, self.rng,
                                     self.level_max)
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
