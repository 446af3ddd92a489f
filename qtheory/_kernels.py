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
event costs O(1) whatever N is, and memory is one byte per station while no queue
exceeds 254 jobs.  When station identities are wanted (:func:`run_events_tracked`),
``perm[j]`` is the station at position ``j`` and ``pos`` its inverse; a move then swaps
the chosen station with the block's end first.

Randomness
----------
A xoshiro256++ generator (Blackman and Vigna, 2021) whose 256-bit state (``rng``,
uint64[4]) is passed in and out, so that the seed is applied inside compiled code,
results do not depend on numba's per-thread global generator, and a run can be split
into chunks without changing a bit.  One 64-bit number ``r`` per event, the minimum:
the 128-bit product ``r N`` (one machine multiplication) has high word
``j = floor(r N / 2**64)``, a uniform position (Lemire, 2019; exactly uniform up to a
relative error N / 2**64 < 1e-10), and low word ``lo``, which given ``j`` is uniform on
a grid of step N in [0, 2**64).  Its top 63 bits ``lo >> 1`` are compared with integer
thresholds (:func:`event_thresholds`): ``lo >> 1 < a_thr`` is an arrival,
``lo >> 1 < l_thr`` a local-server token, otherwise a central-server token.  The
thresholds are exact multiples of 2**-63 (p = 0 gives no central token at all, lam = 0
no arrival).  No floating point is used per event.

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
event, no floating point, no per-level timestamps.  The longest queue M is treated the
same way: ``tacc[i]`` sums ``d * clock`` over the changes d of the indicator
{M >= i}, which only happen at i = M + 1 (M rises) or i = M (M falls).  ``flush``
evaluates both formulas and restarts the window; the caller flushes after every chunk so
that the accumulators stay far from int64 overflow.

Speed
-----
What limits the event loop was measured (``bench/bench_simulation.py`` prints the
figures; no hardware counters are available on the benchmark machine, so the evidence
is the generated assembly and timings of variants of the loop with one part removed at a
time).  From about a thousand stations up, the loop is bound by the number of
instructions it issues: 49 per event in the generated code at N = 1e4, against 19 for
the random-number loop of the benchmark (the generator alone is 11), and the measured
speed ratio, 0.40 to 0.42, is that of the instruction counts (19/49 = 0.39); the
compiler keeps several loop constants and array addresses on the stack, since the
generator's state, the clock and the top level fill most registers.  Half the
random-number loop's speed would need at most about 38 instructions per event.  So
:func:`run_events` keeps the instruction count small: an arrival is read from the low
word ``lo`` directly (``lo >> 1 < a_thr`` is ``lo < 2 a_thr``), the idle-station token
is recognized from its index (``idx = 0``), the check for room for one more level is made once per block of events (the top level rises by at most one per
event), and the update of the longest queue M, which changes at a few percent of the
events at most (3.5% at N = 100, less for larger N), is one multiplication and a branch
that is almost never taken.  With few stations a second limit appears: an event's write
to ``L`` often lands on the entry a following event reads, and the processor then holds
each read until the address of the write before it is known (a chain of two dependent
loads per event); removing that write made the loop 1.8 times faster at N = 100.  Below
:data:`PIPE_STATIONS` the loop therefore reads each event's level before the previous
event writes and forwards that write itself (``pipelined``): 1.4 times faster at
N = 10 and 100, slower from about a thousand stations, where the extra instructions
cost more than the wait they remove.  Two chains advanced in one loop (measured with
their reads hoisted above both writes, the same two paths bit for bit) gain as much as
the pipelined loop at N = 100 and nothing at N = 1e4, where the loop is already bound by
its instruction count, so the simulator does not pair chains.  Issue 24's goal of half
the random-number loop's speed is not reached: 0.31 at N = 100, 0.40 to 0.42 at 1e4 and
0.33 to 0.34 at 1e6 (December 2026, quiet machine); the variants tried (the counts and
integrals of a level in one array, a clock counting down to zero, counts of stations
below a level instead of at or above it, both chains' loads first) reached at most 0.45
at 1e4 and 0.37 at 1e2.  For large N (:data:`AHEAD_STATIONS` and more)
:func:`run_events_ahead` draws the random numbers :data:`AHEAD` events ahead into a
ring and asks the processor to prefetch the queue entries they will read, which hides
the cache misses of the random read ``L[j]``; the sequence of numbers consumed, and so
every result, is the same as with :func:`run_events`.  The kernels that do the work are
compiled with ``nogil=True``: they release the GIL, so independent chains run in
parallel in threads (:func:`qtheory.simulate` with ``n_chains``,
:func:`qtheory.replicate`).

References: Tsitsiklis and Xu (2012), Section 4 (the uniformized construction);
uniformization: Jensen (1953), Stewart (1994) Ch. 8; generator: Blackman and Vigna,
"Scrambled linear pseudorandom number generators", ACM TOMS 47 (2021); position from a
multiplication: Lemire, "Fast random integer generation in an interval", ACM TOMACS 29
(2019).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from ._numba import jit

# xoshiro256++ constants as uint64 so numba never promotes the arithmetic to float.
_U = np.uint64
_S17 = _U(17)
_S45 = _U(45)
_S19 = _U(19)  # 64 - 45
_S23 = _U(23)
_S41 = _U(41)  # 64 - 23
_ONE = _U(1)

# Indices into the small int64 "scalars" array that carries the state between chunks.
TOP = 0        # current top level (longest queue)
CLOCK = 1      # step clock within the current accumulation window
RPOS = 2       # run_events_ahead: next slot of the ring of drawn numbers
RFILL = 3      # run_events_ahead: 1 once the ring holds the next AHEAD numbers
NSCAL = 4

# run_events_ahead: numbers drawn ahead (a power of two), and the number of stations
# from which the simulator uses it (below, the levels L fit in the first-level cache and
# the prefetches cost more than they save: measured crossover 1e5 to 3e5 stations).
AHEAD = 16
AHEAD_STATIONS = 1 << 18
# run_events(pipelined=True), which the simulator uses below this many stations: each
# event reads the next event's level before it writes its own (measured crossover 300
# to 1000 stations; bench/bench_simulation.py --pipeline prints both).
PIPE_STATIONS = 512


def event_thresholds(lam, p):
    """Integer thresholds on 63 random bits for the three event types.

    Parameters
    ----------
    lam, p : float
        Arrival rate per station and centralization fraction (validated by the caller).

    Returns
    -------
    a_thr, l_thr : numpy.uint64
        ``floor(2**63 lam / (1 + lam))`` and ``floor(2**63 (1 + lam - p) / (1 + lam))``,
        computed exactly from the binary values of ``lam`` and ``p``; a 63-bit uniform
        ``v`` is an arrival when ``v < a_thr``, a local-server token when
        ``a_thr <= v < l_thr`` and a central-server token otherwise.
    """
    lam_q = Fraction(float(lam))
    p_q = Fraction(float(p))
    full = 1 << 63
    a_thr = (full * lam_q) // (1 + lam_q)
    l_thr = (full * (1 + lam_q - p_q)) // (1 + lam_q)
    return _U(int(a_thr)), _U(int(l_thr))


@intrinsic
def _mul128(typingctx, a, b):
    """(high, low) 64-bit words of the 128-bit product of two uint64 (one ``mul``)."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i128 = ir.IntType(128)
        prod = builder.mul(builder.zext(args[0], i128), builder.zext(args[1], i128))
        hi = builder.trunc(builder.lshr(prod, ir.Constant(i128, 64)), ir.IntType(64))
        lo = builder.trunc(prod, ir.IntType(64))
        return context.make_tuple(builder, signature.return_type, (hi, lo))

    return sig, codegen


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Hint the processor to bring ``arr[idx]`` into the cache (no effect on results)."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), i8p)
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # read access, high temporal locality, data cache
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@jit(inline="always")
def _xoshiro(s0, s1, s2, s3):
    """One xoshiro256++ step: (output, new state words)."""
    t0 = s0 + s3
    out = ((t0 << _S23) | (t0 >> _S41)) + s0
    t = s1 << _S17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = (s3 << _S45) | (s3 >> _S19)
    return out, s0, s1, s2, s3


@jit(inline="always")
def _store(rng, s0, s1, s2, s3):
    """Write the generator state back (the kernels keep it in registers meanwhile)."""
    rng[0] = s0
    rng[1] = s1
    rng[2] = s2
    rng[3] = s3


@jit(inline="always")
def _move(L, cnt, acc, tacc, b, level, idx, c, d, clock, top):
    """Apply one event: the station at sorted position ``b`` gets ``level`` jobs, and
    ``cnt[idx]`` (which was ``c``) changes by ``d``; returns the new top level.

    The longest queue rises to ``idx = top + 1`` or falls when its level empties; both
    accumulators get ``d * clock`` by parts (module docstring).
    """
    L[_U(b)] = level
    acc[_U(idx)] += d * clock
    cnt[_U(idx)] = c + d
    up = np.int64(idx > top)
    dt = up - np.int64(c + d == 0)
    tacc[_U(top + up)] += dt * clock
    return top + dt


@jit(inline="always")
def _apply(lo, k, a2, l_thr, L, cnt, acc, n, clock, top):
    """One event from the low word ``lo`` of its random number and the level ``k`` of
    the position it chose.

    The three event types without a branch.  A central token acts on the first station
    of the top block (k = top, a = 0); an arrival (a = 1) moves the last station of level
    k's block to k + 1; a token moves the first station of level k's block to k - 1
    (d = -1), or nothing when k = 0.  Every event but the last kind has idx = k + a >= 1,
    so ``idx == 0`` marks the token that finds an idle station (d = 0: the write below
    then stores 0 into L[0], which already holds 0).  Returns (position written, level
    written, idx, cnt[idx] before and after) for the caller's check of the top level.
    """
    k = top if (lo >> _ONE) >= l_thr else k  # (l_thr = 2**63 when p = 0: no doubling)
    a = np.int64(lo < a2)
    idx = k + a
    d = (a + a - 1) if idx != 0 else np.int64(0)
    c = cnt[_U(idx)]
    b = n - c - a
    v = k + d
    L[_U(b)] = v
    acc[_U(idx)] += d * clock
    cn = c + d
    cnt[_U(idx)] = cn
    return b, v, idx, c, cn


@jit(inline="always")
def _event(lo, j, a2, l_thr, L, cnt, acc, n, clock, top):
    """One event from the low word ``lo`` and position ``j`` of its random number
    (:func:`_apply` with the level read at ``j``); returns (idx, cnt[idx] before and
    after)."""
    b, v, idx, c, cn = _apply(lo, np.int64(L[j]), a2, l_thr, L, cnt, acc, n, clock, top)
    return idx, c, cn


@jit(inline="always")
def _top_changes(c, cn):
    """Whether the longest queue changes: a level was empty before the event (an arrival
    above the top) or is empty after it (the top level emptied).  Both counts are below
    2**63, so their product as unsigned integers is exact: one multiplication and one
    test, a branch that is almost never taken."""
    return _U(c) * _U(cn) == _U(0)


@jit(inline="always")
def _new_top(idx, c_new, tacc, clock, top):
    """The longest queue after an event that raised it (idx = top + 1) or emptied its
    level (c_new = 0); its indicator integral gets +-clock by parts (module docstring)."""
    up = np.int64(idx > top)
    dt = up - np.int64(c_new == 0)
    tacc[_U(top + up)] += dt * clock
    return top + dt


@jit(nogil=True)
def run_events(n_events, a_thr, l_thr, L, cnt, acc, tacc, scal, rng, level_max,
               pipelined=False):
    """Advance the uniformized chain by up to ``n_events`` events (no station identities).

    Parameters
    ----------
    n_events : int
        Events to simulate.
    a_thr, l_thr : uint64
        Event-type thresholds from :func:`event_thresholds`.
    L : uint8[N], uint16[N] or int32[N]
        Sorted queue lengths (modified in place); the narrowest type that holds the
        levels is used, since a smaller array stays in cache at large N.
    cnt : int64[cap]
        ``cnt[k]`` stations with at least k jobs; ``cap >= top + 2``.
    acc : int64[cap]
        ``sum(d * clock)`` over the changes of ``cnt[k]`` in the current window.
    tacc : int64[cap]
        ``sum(d * clock)`` over the changes of the indicator {top >= k}.
    scal : int64[NSCAL]
        Top level and clock.
    rng : uint64[4]
        Generator state.
    level_max : int
        Largest value ``L``'s type holds.
    pipelined : bool
        Read each event's level before the previous event's write (the caller sets it
        below :data:`PIPE_STATIONS` stations, where it is faster); the same path and
        results either way.

    Returns
    -------
    int
        Events done; fewer than ``n_events`` only when the top level reached
        ``cap - 2`` or ``level_max - 1`` (the caller then enlarges
        ``cnt``/``acc``/``tacc`` or widens ``L`` and calls again; no random number has
        been drawn for the pending event).
    """
    n = L.shape[0]
    nu = _U(n)
    a2 = a_thr << _ONE  # lo >> 1 < a_thr  <=>  lo < 2 a_thr (a_thr < 2**62)
    limit = min(cnt.shape[0] - 2, level_max - 1)
    top = scal[TOP]
    clock = scal[CLOCK]
    start = clock
    end = clock + n_events
    s0, s1, s2, s3 = rng[0], rng[1], rng[2], rng[3]
    while clock < end:
        room = limit - top
        if room <= 0:
            break
        # the top level rises by at most one per event: a block of `room` events
        # cannot outgrow the arrays, so the loops below do not check it
        stop = min(end, clock + room)
        if pipelined:
            # Few stations: an event's write to L often hits the entry the next event
            # reads, and the processor then waits for the write's address before each
            # read.  So each event draws the next event's number and reads its level
            # before it writes its own, and forwards its write to that level itself
            # when both are the same entry.  The numbers are drawn in the same order,
            # one per event, and the block's last event draws none: the path, the
            # generator state and every result are those of the loop below.
            r, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
            jn, lon = _mul128(r, nu)
            kn = np.int64(L[jn])
            while clock < stop - 1:
                clock += 1
                lo = lon
                k = kn
                r, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
                jn, lon = _mul128(r, nu)
                kn = np.int64(L[jn])
                b, v, idx, c, cn = _apply(lo, k, a2, l_thr, L, cnt, acc, n, clock, top)
                kn = v if jn == _U(b) else kn
                if _top_changes(c, cn):
                    top = _new_top(idx, cn, tacc, clock, top)
            clock += 1
            b, v, idx, c, cn = _apply(lon, kn, a2, l_thr, L, cnt, acc, n, clock, top)
            if _top_changes(c, cn):
                top = _new_top(idx, cn, tacc, clock, top)
            continue
        while clock < stop:
            clock += 1
            r, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
            j, lo = _mul128(r, nu)
            idx, c, cn = _event(lo, j, a2, l_thr, L, cnt, acc, n, clock, top)
            if _top_changes(c, cn):  # rare: the longest queue changes
                top = _new_top(idx, cn, tacc, clock, top)
    scal[TOP] = top
    scal[CLOCK] = clock
    _store(rng, s0, s1, s2, s3)
    return clock - start


@jit(nogil=True)
def run_events_ahead(n_events, a_thr, l_thr, L, cnt, acc, tacc, scal, rng, level_max,
                     ring):
    """As :func:`run_events`, with the random numbers drawn :data:`AHEAD` events ahead.

    The next ``AHEAD`` events' positions and low words wait in ``ring`` (uint64[2 AHEAD],
    pairs (j, lo)), and the queue entry ``L[j]`` of each is prefetched when it is drawn,
    so that the read finds it in the cache.  The generator state ``rng`` is then
    ``AHEAD`` numbers ahead of the events done; ``scal[RFILL]`` says whether the ring is
    filled and ``scal[RPOS]`` where the next event's pair is.  The events consume the
    numbers in the order drawn, so the same seed gives the same path as
    :func:`run_events`; a System uses one of the two for its whole run.

    Parameters and returns as for :func:`run_events`, and ``ring`` (modified in place).
    """
    n = L.shape[0]
    nu = _U(n)
    a2 = a_thr << _ONE
    limit = min(cnt.shape[0] - 2, level_max - 1)
    top = scal[TOP]
    clock = scal[CLOCK]
    start = clock
    end = clock + n_events
    s0, s1, s2, s3 = rng[0], rng[1], rng[2], rng[3]
    if scal[RFILL] == 0:
        for q in range(AHEAD):
            r, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
            j, lo = _mul128(r, nu)
            ring[2 * q] = j
            ring[2 * q + 1] = lo
            _prefetch(L, j)
        scal[RPOS] = 0
        scal[RFILL] = 1
    pos = scal[RPOS]
    while clock < end:
        room = limit - top
        if room <= 0:
            break
        stop = min(end, clock + room)
        while clock < stop:
            clock += 1
            j = ring[2 * pos]
            lo = ring[2 * pos + 1]
            r, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
            jn, lon = _mul128(r, nu)
            ring[2 * pos] = jn
            ring[2 * pos + 1] = lon
            _prefetch(L, jn)
            pos = (pos + 1) & (AHEAD - 1)
            idx, c, cn = _event(lo, j, a2, l_thr, L, cnt, acc, n, clock, top)
            if _top_changes(c, cn):
                top = _new_top(idx, cn, tacc, clock, top)
    scal[TOP] = top
    scal[CLOCK] = clock
    scal[RPOS] = pos
    _store(rng, s0, s1, s2, s3)
    return clock - start


@jit(nogil=True)
def run_events_tracked(n_events, a_thr, l_thr, L, cnt, acc, tacc, scal, rng, level_max,
                       perm, pos):
    """As :func:`run_events`, keeping station identities in ``perm``/``pos``.

    The same seed gives the same sample path of ``cnt`` as :func:`run_events`.  A
    central token serves a station chosen uniformly among the longest queues, using the
    part of the event's random number not spent on its type.

    Parameters
    ----------
    n_events, a_thr, l_thr, L, cnt, acc, tacc, scal, rng, level_max
        As for :func:`run_events`.
    perm, pos : int32[N]
        ``perm[j]`` is the station at sorted position ``j``; ``pos`` is its inverse.

    Returns
    -------
    int
        Events done, as for :func:`run_events`.
    """
    n = L.shape[0]
    nu = _U(n)
    limit = min(cnt.shape[0] - 2, level_max - 1)
    top = scal[TOP]
    clock = scal[CLOCK]
    start = clock
    end = clock + n_events
    s0, s1, s2, s3 = rng[0], rng[1], rng[2], rng[3]
    span = np.float64((_ONE << _U(63)) - l_thr)  # > 0 whenever a central token occurs
    while clock < end:
        if top >= limit:
            break
        clock += 1
        r, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
        j, lo = _mul128(r, nu)
        v = lo >> _ONE
        jj = np.int64(j)
        k = np.int64(L[j])
        if v >= l_thr:
            k = top
            if top > 0:
                # uniform among the cnt[top] longest queues
                g = np.float64(v - l_thr) / span
                jj = n - cnt[top] + min(np.int64(g * cnt[top]), cnt[top] - 1)
        a = np.int64(v < a_thr)
        d = a + (a - 1) * np.int64(k > 0)
        idx = k + a
        c = cnt[idx]
        b = n - c - a
        if d != 0:
            sj = perm[jj]
            sb = perm[b]
            perm[jj] = sb
            perm[b] = sj
            pos[sb] = jj
            pos[sj] = b
        top = _move(L, cnt, acc, tacc, b, k + d, idx, c, d, clock, top)
    scal[TOP] = top
    scal[CLOCK] = clock
    _store(rng, s0, s1, s2, s3)
    return clock - start


@jit(nogil=True)
def flush(cnt, acc, tacc, scal, out_s, out_tail, inclusive):
    """Close the current window, add its step integrals to ``out_s``/``out_tail``, restart.

    The window covers step time [0, W) with W = clock + 1 when ``inclusive`` (the state
    after the last event is counted for one full step: the end of a batch) and W = clock
    otherwise (that state then opens the next window at step time 0).  Adds
    ``integral cnt[k]`` to ``out_s[k]`` and ``integral 1{top >= k}`` to ``out_tail[k]``
    (both arrays at least as long as ``cnt``), zeroes the accumulators and the clock, and
    returns W.
    """
    clock = scal[CLOCK]
    top = scal[TOP]
    width = clock + 1 if inclusive else clock
    wf = np.float64(width)
    for k in range(cnt.shape[0]):
        out_s[k] += cnt[k] * wf - np.float64(acc[k])
        out_tail[k] += (wf if k <= top else 0.0) - np.float64(tacc[k])
        acc[k] = 0
        tacc[k] = 0
    scal[CLOCK] = 0
    return width


@jit
def rng_limit(n_events, L, rng):
    """Benchmark baseline: draw the same random numbers and read one queue entry.

    Returns the sum of the entries read (so that the compiler cannot drop the loop).
    """
    nu = _U(L.shape[0])
    s0, s1, s2, s3 = rng[0], rng[1], rng[2], rng[3]
    total = 0
    for _ in range(n_events):
        r, s0, s1, s2, s3 = _xoshiro(s0, s1, s2, s3)
        j, lo = _mul128(r, nu)
        total += L[j]
    _store(rng, s0, s1, s2, s3)
    return total
