r"""Compiled kernels of the N-station simulator (private; see :mod:`qtheory.simulation`).

State representation
--------------------
The system of N stations is kept *sorted by queue length*:

``L`` : uint8[N] (uint16 or int32 when queues grow longer)
    ``L[j]`` is the queue length at sorted position ``j``; ``L`` is non-decreasing, so
    the stations with at least ``k`` jobs occupy the last ``cnt[k]`` positions.
``cnt`` : int64[cap]
    ``cnt[k]`` = number of stations with at least ``k`` jobs (``cnt[0] == N``); the
    occupancy fractions are ``s = cnt / N``.

A uniformly chosen station is a uniformly chosen *position* ``j``; its level is one read,
``L[j]``.  Moving a station from level ``k`` to ``k + 1`` changes only the last position
of the block of level ``k`` (``N - cnt[k+1] - 1``); moving one from ``k`` to ``k - 1``
changes only the first position of the block of level ``k`` (``N - cnt[k]``).  So every
event costs O(1) whatever N is, and memory is one byte per station while no queue exceeds 254 jobs.  When station
identities are wanted (``track``), ``perm[j]`` is the station at position ``j`` and
``pos`` its inverse; a move then swaps the chosen station with the block's end first.

Randomness
----------
A xoshiro256+ generator whose 256-bit state (``rng``, uint64[4]) is passed in and out, so
that the seed is applied inside compiled code, results do not depend on numba's
per-thread global generator, and a run can be split into chunks without changing a bit.
One double per event chooses both the station (integer part of ``u N``) and the event
type (fractional part), which is the minimum number of random numbers per event.

Uniformization
--------------
Events occur at total rate N(1 + lam): an arrival with probability lam/(1 + lam), a
local-server token at the chosen station with probability (1 - p)/(1 + lam), a
central-server token with probability p/(1 + lam).  Tokens that find nothing to serve
are "dummy" events; they still count as steps.

Time averages
-------------
Given n events in a time window of length T, the event epochs are uniform order
statistics, so each of the n + 1 states visited has expected sojourn T/(n + 1): the
*step average* over those n + 1 states is the conditional expectation of the time
average (exact, and with less variance than the time average itself).  The step integral
of ``cnt[k]`` is kept by parts: with the state after the event at clock t occupying the
step interval [t, t + 1),

    integral_0^W cnt[k] = cnt[k](end) * W - sum over changes (d * t),

so each event adds ``d * clock`` (d = +1, -1 or 0) to one integer ``acc[idx]``: O(1) per
event, no floating point, no per-level timestamps.  ``flush`` evaluates the formula and
restarts the window; the caller flushes after every chunk so that ``acc`` stays far from
int64 overflow.

Reference: Tsitsiklis and Xu (2012), Section 4 (the uniformized
construction); uniformization: Jensen (1953), Stewart (1994) Ch. 8.
"""

from __future__ import annotations

import numpy as np

from ._numba import jit

# xoshiro256+ constants as uint64 so numba never promotes the arithmetic to float.
_S17 = np.uint64(17)
_S45 = np.uint64(45)
_S11 = np.uint64(11)
_S64M45 = np.uint64(19)
_TWO_M53 = 1.0 / 9007199254740992.0  # 2**-53

# Indices into the small int64 "scalars" array that carries the state between chunks.
TOP = 0        # current top level (longest queue)
CLOCK = 1      # step clock within the current accumulation window
LAST_TOP = 2   # clock at which the top level last changed
NSCAL = 3


@jit
def _next_double(rng):
    """Next uniform double in [0, 1) from the xoshiro256+ state (53 random bits)."""
    s0 = rng[0]
    s1 = rng[1]
    s2 = rng[2]
    s3 = rng[3]
    result = s0 + s3
    t = s1 << _S17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = (s3 << _S45) | (s3 >> _S64M45)
    rng[0] = s0
    rng[1] = s1
    rng[2] = s2
    rng[3] = s3
    return np.float64(result >> _S11) * _TWO_M53


@jit
def run_events(n_events, lam, p, L, cnt, acc, top_acc, scal, rng, track, perm, pos,
               level_max):
    """Advance the uniformized chain by up to ``n_events`` events.

    Parameters
    ----------
    n_events : int
        Events to simulate.
    lam, p : float
        Model parameters (validated by the caller).
    L : uint8[N], uint16[N] or int32[N]
        Sorted queue lengths (modified in place); the narrowest type that holds the
        levels is used, since a smaller array stays in cache at large N.
    cnt : int64[cap]
        ``cnt[k]`` stations with at least k jobs; ``cap >= top + 2``.
    acc : int64[cap]
        ``sum(d * clock)`` over the changes of ``cnt[k]`` in the current window.
    top_acc : float64[cap]
        Step integral of the indicator {top level == k}.
    scal : int64[NSCAL]
        Top level, clock, clock of the last top-level change.
    rng : uint64[4]
        Generator state.
    track : bool
        Keep station identities in ``perm``/``pos`` (int32[N]; else length-1 dummies).
    level_max : int
        Largest value ``L``'s type holds.

    Returns
    -------
    int
        Events done; fewer than ``n_events`` only when the top level reached
        ``cap - 2`` or ``level_max - 1`` (the caller then enlarges
        ``cnt``/``acc``/``top_acc`` or widens ``L`` and calls again; no random
        number has been drawn for the pending event).
    """
    n = L.shape[0]
    nf = np.float64(n)
    limit = min(cnt.shape[0] - 2, level_max - 1)
    a_thr = lam
    l_thr = lam + (1.0 - p)
    scale = 1.0 + lam
    top = scal[TOP]
    clock = scal[CLOCK]
    last_top = scal[LAST_TOP]
    done = 0
    while done < n_events:
        if top >= limit:
            break
        done += 1
        clock += 1
        x = _next_double(rng) * nf
        j = min(np.int64(x), n - 1)
        f = (x - j) * scale
        if f < l_thr:
            # Arrival (a = 1) or local-server token (a = 0) at the station in position
            # j, written without data-dependent branches (the two are equally likely):
            # an arrival moves the last station of level k's block to k + 1; a local
            # token moves the first one to k - 1 (d = -1), or nothing when k = 0 (d = 0;
            # the write below then stores 0 into L[0], which already holds 0).
            k = np.int64(L[j])
            a = np.int64(f < a_thr)
            d = a + (a - 1) * np.int64(k > 0)
            idx = k + a
            c = cnt[idx]
            b = n - c - a
            L[b] = k + d
            acc[idx] += d * clock
            cnt[idx] = c + d
            if idx > top or c + d == 0:
                # the longest queue changed: up to idx (arrival) or down to idx - 1
                top_acc[top] += np.float64(clock - last_top)
                last_top = clock
                top = idx if a == 1 else idx - 1
            if track:
                sj = perm[j]
                sb = perm[b]
                perm[j] = sb
                perm[b] = sj
                pos[sb] = j
                pos[sj] = b
        elif top > 0:
            # central-server token: one job from a longest queue (uniform among ties)
            k = top
            c = cnt[k]
            b = n - c
            if track:
                g = (f - l_thr) / p  # the unused part of u, uniform in [0, 1)
                jj = min(b + np.int64(g * c), n - 1)
                sj = perm[jj]
                sb = perm[b]
                perm[jj] = sb
                perm[b] = sj
                pos[sb] = jj
                pos[sj] = b
            L[b] = k - 1
            acc[k] -= clock
            cnt[k] = c - 1
            if c == 1:
                top_acc[top] += np.float64(clock - last_top)
                last_top = clock
                top = k - 1
    scal[TOP] = top
    scal[CLOCK] = clock
    scal[LAST_TOP] = last_top
    return done


@jit
def flush(cnt, acc, top_acc, scal, out_s, out_top, inclusive):
    """Close the current window, add its step integrals to ``out_s``/``out_top``, restart.

    The window covers step time [0, W) with W = clock + 1 when ``inclusive`` (the state
    after the last event is counted for one full step: the end of a batch) and W = clock
    otherwise (that state then opens the next window at step time 0).  Adds
    ``integral cnt[k]`` to ``out_s[k]`` and ``integral 1{top == k}`` to ``out_top[k]``
    (both arrays at least as long as ``cnt``), zeroes the accumulators and the clock, and
    returns W.
    """
    clock = scal[CLOCK]
    width = clock + 1 if inclusive else clock
    wf = np.float64(width)
    for k in range(cnt.shape[0]):
        out_s[k] += cnt[k] * wf - np.float64(acc[k])
        out_top[k] += top_acc[k]
        acc[k] = 0
        top_acc[k] = 0.0
    out_top[scal[TOP]] += np.float64(width - scal[LAST_TOP])
    scal[CLOCK] = 0
    scal[LAST_TOP] = 0
    return width


@jit
def rng_limit(n_events, L, rng):
    """Benchmark baseline: draw the same random numbers and read one queue entry.

    Returns the sum of the entries read (so that the compiler cannot drop the loop).
    """
    n = L.shape[0]
    nf = np.float64(n)
    total = 0
    for _ in range(n_events):
        x = _next_double(rng) * nf
        j = np.int64(x)
        if j >= n:
            j = n - 1
        total += L[j]
    return total
