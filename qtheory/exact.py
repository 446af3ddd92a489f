r"""Exact stationary distributions of small N-station systems.

For a handful of stations the Markov chain of the N-station system can be solved
numerically to machine precision, with no Monte Carlo error and no large-N limit: a third
witness beside simulation and the fluid model.

The state space
---------------
Stations are exchangeable, so the chain of *sorted* queue-length vectors
:math:`a_1 \le \dots \le a_N` is itself Markov (equivalently the occupancy vector
:math:`(n_0, n_1, \dots)`).  The chain is truncated at ``max_queue`` :math:`= K`: an
arrival to a station that already holds :math:`K` jobs is *blocked* (lost).  The
truncated space holds the multisets of :math:`N` values in :math:`\{0, \dots, K\}`,

.. math:: |\mathcal S_{N,K}| = \binom{K + N}{N},

enumerated in the colexicographic order of the combinatorial number system: state
:math:`a` has rank :math:`\sum_j \binom{a_j + j}{j + 1}` (0-based :math:`j`), and a
neighbour's rank follows from the current one in :math:`O(1)`.

The generator
-------------
From a state with :math:`m` stations holding exactly :math:`a` jobs (the transitions of Tsitsiklis and Xu 2012, Section 2):
an arrival to one of them at total rate :math:`m\lambda` (if :math:`a < K`), a local
service at total rate :math:`m(1-p)` (if :math:`a \ge 1`), and, at the top level
:math:`a = \max_j a_j \ge 1`, the central service at rate :math:`Np`.

Truncation
----------
Blocking changes the chain only through states with a station at :math:`K`.  The
stationary probability of those states (``boundary_mass`` = :math:`P(M = K)`, with
:math:`M` the longest queue) and a geometric extrapolation of the tail of :math:`M`
(``truncation_error_estimate``) say how much the truncation matters.  Balance of the
flow across level :math:`i` holds exactly in the truncated chain in the form

.. math:: \lambda E[s_{i-1}] - (1-p) E[s_i] - p P(M \ge i) = \lambda E[s_K],
   \qquad 1 \le i \le K,

whose right-hand side, the blocked arrival rate per station, vanishes as
:math:`K \to \infty` and gives the identity of Tsitsiklis and Xu for the untruncated
chain.

References
----------
J. N. Tsitsiklis and K. Xu, "On the power of (even a little) resource pooling",
Stochastic Systems 2(1), 2012, Section 2 (the model) and Section 6 (the stationary
distributions of the N-systems).  W. J. Stewart, *Introduction to the Numerical Solution
of Markov Chains*, Princeton University Press, 1994, Chapters 2-4 (direct and
preconditioned projection methods for :math:`\pi Q = 0`).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from . import _exact_cost as _cost
from . import _exact_kernels as _k
from ._validation import check_flag, check_lam, check_p, check_positive_int, check_real, \
    check_s0, check_size, count_text

__all__ = [
    "ExactResult",
    "TruncationWarning",
    "exact_stationary",
    "exact_state_space_size",
    "exact_memory_estimate",
    "exact_cost_estimate",
    "CostWarning",
]

# Largest state space solved by a sparse direct factorisation under method="auto".
_DIRECT_LIMIT = 5_000
_AGGREGATION_FROM = 10.0  # seconds of estimated GMRES time
# Largest state space exact_stationary builds, whatever memory_limit says: ranks and
# generator indices are int64 in the compiled kernels; far beyond any memory anyway.
_MAX_STATES = 2**40
# Largest GMRES iteration count: with a tolerance that cannot be met, the solve runs
# until maxiter; 1e5 iterations are hours on the largest chains, not years.
_MAX_ITER = 100_000
_RESTART = 60


# Counts up to this many bits are returned as exact integers (math.comb is then a
# matter of microseconds to milliseconds); larger ones, far beyond any solvable chain,
# as math.inf, so that no call spends minutes writing out a number with a billion digits.
_EXACT_COUNT_BITS = 4096


def _log_comb(n, k):
    """Natural logarithm of C(n, k), for integers 0 <= k <= n of any size (float)."""
    return _cost.log_comb(n, k)


def _gb_text(nbytes):
    return "more than 1e299 GB" if nbytes == math.inf else f"about {nbytes / 1e9:.3g} GB"


def exact_state_space_size(n_stations, max_queue):
    r"""Number of states of the truncated chain, :math:`\binom{K + N}{N}`.

    Parameters
    ----------
    n_stations : int
        Number of stations N, at least 1.
    max_queue : int
        Truncation level K (largest queue length per station), at least 1.

    Returns
    -------
    int or float
        The number of multisets of N queue lengths in ``{0, ..., max_queue}``: an exact
        Python integer when it is below :math:`2^{4096}` (about :math:`10^{1233}`);
        ``math.inf`` beyond, where writing the integer out would take minutes for
        inputs such as ``(10**9, 10**9)`` and no such chain can be solved.  The answer
        comes within microseconds for every input (the size of the count is decided
        from :math:`\log\binom{K+N}{N}` by ``math.lgamma`` first).

    Raises
    ------
    ValueError
        If ``n_stations`` or ``max_queue`` is not an integer >= 1.
    """
    n = check_positive_int(n_stations, "n_stations")
    k = check_positive_int(max_queue, "max_queue")
    if _log_comb(n + k, n) / math.log(2.0) > _EXACT_COUNT_BITS - 64:
        return math.inf
    return math.comb(k + n, n)


def exact_memory_estimate(n_stations, max_queue, method="gmres"):
    r"""Peak memory in bytes that :func:`exact_stationary` is estimated to need.

    For ``method="gmres"`` the estimate counts the stored states (int16), the sparse
    generator and its transpose (8-byte values, 4- or 8-byte indices; at most
    ``1 + 2 min(N, K + 1)`` entries per state), the ILU(0) factor values and the GMRES
    basis of ``61`` vectors, plus 10% and 250 MB for the interpreter and its libraries
    (compared with the measured peak resident memory in ``bench/exact_limits.py``).  For
    ``method="direct"`` it adds the fill-in of the sparse LU factors, about
    :math:`0.5\, S \binom{K+N-1}{N-1}` entries (see :func:`exact_cost_estimate`).
    Evaluated in floating point from the closed form, so it answers at once for any
    sizes.

    Parameters
    ----------
    n_stations : int
        Number of stations N, at least 1.
    max_queue : int
        Truncation level K, at least 1.
    method : {"gmres", "direct", "aggregation"}
        The solver whose memory is estimated (default ``"gmres"``).

    Returns
    -------
    int or float
        Bytes, as an integer; ``math.inf`` when the estimate exceeds the range of double
        precision (about 1.8e308 bytes, e.g. ``(2000, 2000)``, with
        :math:`\binom{4000}{2000} \approx 10^{1203}` states).

    Raises
    ------
    ValueError
        If ``n_stations`` or ``max_queue`` is not an integer >= 1, or ``method`` is not
        ``"gmres"``, ``"direct"`` or ``"aggregation"``.
    """
    n = check_positive_int(n_stations, "n_stations")
    k = check_positive_int(max_queue, "max_queue")
    if method not in ("gmres", "direct", "aggregation"):
        raise ValueError("method must be 'gmres', 'direct' or 'aggregation', got "
                         f"{method!r}")
    if method in ("direct", "aggregation"):
        total = _cost.estimate(n, k, method, 3_000, _RESTART).bytes
    else:
        S = exact_state_space_size(n, k)
        try:
            S = float(S)
        except OverflowError:  # an exact integer beyond the double range
            S = math.inf
        total = _cost.gmres_memory(S, n, k, _RESTART)
    return int(total) if math.isfinite(total) else math.inf


def exact_cost_estimate(n_stations, max_queue, method="gmres", *, maxiter=3_000):
    r"""Estimated time and memory of one :func:`exact_stationary` solve, before it starts.

    The cost model (module ``qtheory._exact_cost``): ``"gmres"`` costs about
    :math:`\min(\text{maxiter}, 30 + 6K)` iterations, each about
    :math:`1.2\,\text{ns} \times (3E/S + 124)` per state (E stored generator entries,
    S states); ``"direct"`` (SuperLU, COLAMD ordering) about :math:`6 \cdot 10^{-11}
    S w^2` seconds with :math:`w = \binom{K+N-1}{N-1}` the largest rank distance between
    neighbouring states, and :math:`0.5\, S w` entries of fill-in.  Fitted on one idle
    core (N = 2..6); within a factor of about three there, slower on a loaded machine.

    Parameters
    ----------
    n_stations : int
        Number of stations N, at least 1.
    max_queue : int
        Truncation level K, at least 1.
    method : {"gmres", "direct", "aggregation"}
        The solver.
    maxiter : int
        The iteration cap of GMRES (the estimate never exceeds it), 1 to 1e5.

    Returns
    -------
    qtheory._exact_cost.ExactCost
        ``method``, ``n_states``, ``nonzeros``, ``fill``, ``iterations``, ``seconds``
        and ``bytes`` (floats; ``inf`` beyond the double range) and ``text()``.

    Raises
    ------
    ValueError
        If ``n_stations`` or ``max_queue`` is not an integer >= 1, ``method`` is unknown
        or ``maxiter`` is outside ``[1, 1e5]``.
    """
    n = check_positive_int(n_stations, "n_stations")
    k = check_positive_int(max_queue, "max_queue")
    if method not in ("gmres", "direct", "aggregation"):
        raise ValueError("method must be 'gmres', 'direct' or 'aggregation', got "
                         f"{method!r}")
    maxiter = check_size(maxiter, "maxiter", minimum=1, maximum=_MAX_ITER,
                         what="each GMRES iteration costs a pass over the generator")
    return _cost.estimate(n, k, method, maxiter, _RESTART)


def _num(v):
    """An integer input for a message: written out below 1e15, else its magnitude."""
    return str(v) if v < 10**15 else f"about 10^{math.log10(v):.1f}"


def _physical_memory():
    """Bytes of physical memory of this machine, or None where it cannot be read."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


@dataclass(frozen=True)
class ExactResult:
    r"""The stationary distribution of a truncated N-station system and its summaries.

    Attributes
    ----------
    n_stations, lam, p, max_queue : int, float, float, int
        The inputs.
    n_states : int
        Size of the truncated state space, :math:`\binom{K+N}{N}`.
    states : ndarray of int16, shape (n_states, n_stations)
        Every state as a non-decreasing vector of queue lengths, in rank order.
    probabilities : ndarray of float64, shape (n_states,)
        Stationary probability of each state (non-negative, summing to 1).
    s : ndarray of float64, shape (max_queue + 1,)
        ``s[i]`` = E[fraction of stations with at least i jobs]; ``s[0] == 1``.  By
        exchangeability also the probability that a given station holds at least i jobs.
    mean_queue_length : float
        Expected number of jobs per station, ``s[1:].sum()``.
    longest_queue_tail : ndarray of float64, shape (max_queue + 1,)
        ``longest_queue_tail[i]`` = P(M >= i), M the longest queue.
    boundary_mass : float
        P(M = max_queue): probability that some station is full (arrivals blocked).
    blocked_rate : float
        Blocked arrivals per station per unit time, ``lam * s[max_queue]``.
    truncation_error_estimate : float
        Estimated P(M > max_queue) in the untruncated system, extrapolating the last
        two values of the law of M geometrically (``inf`` when the tail does not decay).
    residual : float
        ``max_j |(pi Q)_j|`` of the returned distribution (rates per unit time).
    method : str
        ``"direct"`` (sparse LU) or ``"gmres"`` (ILU(0)-preconditioned GMRES).
    iterations : int
        GMRES iterations (0 for the direct method).
    seconds : float
        Wall time of the build and the solve.
    """

    n_stations: int
    lam: float
    p: float
    max_queue: int
    n_states: int
    states: np.ndarray = field(repr=False)
    probabilities: np.ndarray = field(repr=False)
    s: np.ndarray = field(repr=False)
    mean_queue_length: float
    longest_queue_tail: np.ndarray = field(repr=False)
    boundary_mass: float
    blocked_rate: float
    truncation_error_estimate: float
    residual: float
    method: str
    iterations: int
    seconds: float

    @property
    def station_queue_law(self):
        """P(a given station holds exactly i jobs), i = 0..max_queue; shape (K + 1,)."""
        s = np.append(self.s, 0.0)
        return s[:-1] - s[1:]

    @property
    def longest_queue_law(self):
        """P(M = i), i = 0..max_queue, for the longest queue M; shape (K + 1,)."""
        t = np.append(self.longest_queue_tail, 0.0)
        return t[:-1] - t[1:]

    def expected_distance(self, target):
        r"""Expected :math:`\ell_1` distance :math:`E \sum_{i \ge 1} |s_i - t_i|`.

        Parameters
        ----------
        target : array_like of float, shape (levels,)
            Tail fractions ``t`` (``t[0] == 1``), e.g. the invariant state
            :func:`qtheory.invariant_state`; missing levels count as 0.

        Returns
        -------
        float
            The stationary mean of the distance between the random occupancy vector
            :math:`s^N` of the truncated chain and ``target``.

        Raises
        ------
        ValueError
            If ``target`` is not valid tail fractions (see ``check_s0``).
        """
        t = check_s0(target, "target")
        L = max(self.max_queue, t.size - 1)
        padded = np.zeros(L + 1)
        padded[: t.size] = t
        return float(_k.expected_l1_distance(self.states, self.probabilities, padded))

    def balance_defect(self):
        r"""Left side minus right side of the exact identity, for i = 1..max_queue.

        Returns
        -------
        ndarray of float64, shape (max_queue,)
            :math:`\lambda E[s_{i-1}] - (1-p)E[s_i] - pP(M \ge i)`.  In the truncated
            chain it equals the blocked arrival rate ``blocked_rate`` for every i, up to
            the solver's residual; it tends to 0 as ``max_queue`` grows.

        References
        ----------
        Tsitsiklis and Xu (2012), the balance of positions at or above level i (proved in
        the book's steady-state chapter).
        """
        s, t = self.s, self.longest_queue_tail
        return self.lam * s[:-1] - (1.0 - self.p) * s[1:] - self.p * t[1:]


def _build_generator(n, K, lam, p):
    """CSR arrays of Q (rows = source) and the states, in rank order."""
    S = math.comb(K + n, n)
    binom = _k.binomial_table(K + n, n)
    counts = _k.count_entries(n, K, S)
    indptr = np.zeros(S + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    del counts
    nnz = int(indptr[-1])
    itype = np.int32 if max(S, nnz) < 2**31 else np.int64
    indices = np.empty(nnz, dtype=itype)
    data = np.empty(nnz)
    states = np.empty((S, n), dtype=np.int16)
    _k.fill_generator(n, K, lam, p, binom, indptr, indices, data, states)
    if itype is np.int32:
        indptr = indptr.astype(np.int32)
    return indptr, indices, data, states


class TruncationWarning(UserWarning):
    """The truncation level of an exact solve is too low for the requested accuracy."""


class CostWarning(UserWarning):
    """An explicitly chosen exact method is estimated to take longer than ``max_seconds``."""


# Solves with more states than this show a progress bar by default (about 10 s or more).
_AUTO_PROGRESS_STATES = 200_000
# Pilot solves of the boundary_mass search stay below this many states.
_PILOT_STATES = 20_000
_PILOT_LEVELS = 40


def exact_stationary(n_stations, lam, p, *, max_queue=None, boundary_mass=None,
                     method="auto", tol=1e-13, maxiter=3_000, memory_limit=4 * 10**9,
                     max_seconds=300.0, progress=None, truncation_tol=1e-6):
    r"""Stationary distribution of the N-station system, truncated at ``max_queue``.

    Builds the generator :math:`Q` of the chain of sorted queue-length vectors as a
    sparse matrix and solves :math:`\pi Q = 0`, :math:`\sum \pi = 1`.  Before building
    anything it estimates the time and memory of the solve
    (:func:`exact_cost_estimate`) and refuses one over budget.

    Parameters
    ----------
    n_stations : int
        Number of stations N, at least 1.
    lam : float
        Arrival rate per station (jobs per mean service time), ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``: local servers have rate ``1 - p``,
        the central server rate ``N p``.
    max_queue : int or None
        Truncation level K >= 1: an arrival to a station holding K jobs is blocked.
        Give either ``max_queue`` or ``boundary_mass``.
    boundary_mass : float or None
        Target for the boundary mass P(M = K), in ``(0, 1)``: K is then chosen for the
        caller.  Two pilot solves (below 20,000 states and 40 levels each) give the geometric decay
        of the boundary mass in K; K is extrapolated from them, the chain is solved
        from the pilot's solution (padded with zeros: the ranks of the states do not
        depend on K), the boundary mass of the result is checked, and K is enlarged
        from the new decay estimate until it is met (at most six solves after the
        pilots; when the extrapolated chain is large, the first of them aims halfway,
        in log scale, to measure the decay further out).  ``truncation_tol`` is then ignored.
    method : {"auto", "direct", "gmres", "aggregation"}
        ``"direct"`` factorises with SuperLU (exact to rounding; the fill-in of the
        factors grows like :math:`S \binom{K+N-1}{N-1}`, so it is for a few thousand
        states); ``"gmres"`` runs restarted GMRES(60) with an ILU(0) preconditioner;
        ``"aggregation"`` runs multilevel aggregation-disaggregation W-cycles with
        Gauss-Seidel smoothing (see Notes); ``"auto"`` picks direct up to 5000 states,
        and beyond where its estimated time is under half of GMRES's (e.g. two
        stations with hundreds of levels), when its estimate is within the budgets;
        otherwise aggregation for four or more stations where GMRES is estimated to
        take more than 10 s and aggregation less, GMRES else.
    tol : float
        Convergence target: the returned :math:`\pi` satisfies
        :math:`\max_j |(\pi Q)_j| \le` ``tol`` times the largest total event rate
        ``N(1 + lam)`` (``0 < tol < 1``).
    maxiter : int
        Largest number of GMRES iterations (aggregation: of W-cycles), at most 1e5.
    memory_limit : int or float
        Bytes; if the estimated peak memory of the method
        (:func:`exact_memory_estimate`) exceeds it a ``ValueError`` is raised before
        anything is built, whatever the method.  ``math.inf`` lifts this limit but not
        the physical memory of the machine: an estimate beyond it is refused as well.
    max_seconds : float
        Time budget in seconds, > 0 (default 300).  With ``method="auto"`` a solve
        estimated to take longer is refused with a ``ValueError`` giving the estimate;
        with an explicitly chosen method a :class:`CostWarning` is issued and the solve
        runs.  ``math.inf`` lifts the budget.
    progress : bool or None
        Show a tqdm bar over GMRES iterations (on stderr in scripts, a widget in
        notebooks).  ``None`` (default): when the state space has more than 200,000
        states (solves that take about ten seconds or more).
    truncation_tol : float
        Largest acceptable ``boundary_mass`` (the probability that some station is full,
        which bounds how much the truncation changes the law), in ``[0, 1]``; default
        1e-6.  Above it a :class:`TruncationWarning` gives the boundary mass, this
        tolerance and a larger ``max_queue`` to try.  Pass 1.0 to study coarse
        truncations on purpose.

    Returns
    -------
    ExactResult
        Inputs, ``n_states``, the states and their probabilities, ``s``,
        ``mean_queue_length``, ``longest_queue_tail``, ``boundary_mass``,
        ``truncation_error_estimate``, the residual and solver details.

    Raises
    ------
    ValueError
        If ``n_stations`` or ``max_queue`` is not an integer >= 1, ``lam`` is outside
        ``[0, 1)``, ``p`` outside ``[0, 1]``, ``method`` unknown, ``tol`` not in
        ``(0, 1)``, neither or both of ``max_queue`` and ``boundary_mass`` given; if the
        estimated memory exceeds ``memory_limit`` or the machine's physical memory, or
        (``method="auto"``) the estimated time exceeds ``max_seconds`` (the message
        gives the number of states and the estimate); or ``max_queue > 32767``.
    RuntimeError
        If GMRES does not reach ``tol`` within ``maxiter`` iterations (never a silent
        unconverged answer), or ``boundary_mass`` is not met after five enlargements.

    Warns
    -----
    TruncationWarning
        When ``boundary_mass > truncation_tol`` (``max_queue`` given).
    CostWarning
        When an explicitly chosen ``method`` is estimated over ``max_seconds``.

    Notes
    -----
    Truncation: see the module docstring.  With ``max_queue`` large enough the results
    converge to those of the untruncated chain; ``truncation_error_estimate`` estimates
    the probability mass cut off.  For ``lam = 0`` the system stays empty.  Ctrl-C
    interrupts GMRES between two iterations and aggregation between two cycles.

    Aggregation: the states are grouped by halving every queue length; the groups are
    the states of the chain truncated at ``max_queue // 2``, and halving is repeated
    down to at most 600 states.  A W-cycle on a level runs a forward and a backward
    Gauss-Seidel sweep, builds the aggregated generator weighted by the current
    iterate (exact at the stationary law), runs two W-cycles on it (a dense solve on the
    coarsest level), rescales each group to the coarse solution and sweeps again.  The
    number of cycles hardly grows with ``max_queue`` (about 40 for 1e-13), and one cycle
    costs about six passes over the generator: (6, 0.9, 0.1) at ``max_queue = 40``,
    9.4e6 states, takes about a minute on one core.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 2 (the N-system) and Theorem 3.7 (its stationary
    distributions concentrate on the invariant state).  Stewart (1994), Sections 2.3 and
    4.5-4.6 (direct solution and preconditioned GMRES for Markov chains) and Chapter 6
    (iterative aggregation-disaggregation, Koury, McAllister and Stewart 1984).  G. Horton
    and S. T. Leutenegger, "A multi-level solution algorithm for steady-state Markov
    chains", ACM SIGMETRICS 1994 (the recursive aggregation cycles).

    Examples
    --------
    >>> r = exact_stationary(1, 0.5, 0.3, max_queue=60)   # M/M/1, service rate 1
    >>> round(r.mean_queue_length, 10)
    1.0
    >>> exact_stationary(2, 0.5, 0.3, boundary_mass=1e-8).boundary_mass <= 1e-8
    True
    """
    n = check_positive_int(n_stations, "n_stations")
    progress = check_flag(progress, "progress", allow_none=True)
    truncation_tol = check_real(truncation_tol, "truncation_tol", low=0.0, high=1.0)
    lam = check_lam(lam)
    p = check_p(p)
    if (max_queue is None) == (boundary_mass is None):
        raise ValueError("give exactly one of max_queue (the truncation level) and "
                         "boundary_mass (a target for P(M = max_queue)), got "
                         f"max_queue={max_queue!r}, boundary_mass={boundary_mass!r}")
    if method not in ("auto", "direct", "gmres", "aggregation"):
        raise ValueError("method must be 'auto', 'direct', 'gmres' or 'aggregation', "
                         f"got {method!r}")
    tol = check_real(tol, "tol", low=0.0, high=1.0, low_open=True, high_open=True)
    maxiter = check_size(maxiter, "maxiter", minimum=1, maximum=_MAX_ITER,
                         what="each GMRES iteration costs a pass over the generator")
    memory_limit = check_real(memory_limit, "memory_limit", low=0.0, low_open=True)
    max_seconds = check_real(max_seconds, "max_seconds", low=0.0, low_open=True)
    opts = dict(method=method, tol=tol, maxiter=maxiter, memory_limit=memory_limit,
                max_seconds=max_seconds, progress=progress)
    if boundary_mass is not None:
        target = check_real(boundary_mass, "boundary_mass", low=0.0, high=1.0,
                            low_open=True, high_open=True)
        return _solve_to_boundary_mass(n, lam, p, target, opts)
    K = check_positive_int(max_queue, "max_queue")
    r = _solve(n, lam, p, K, **opts)
    _warn_truncation(r, truncation_tol)
    return r


def _check_budget(n, K, method, maxiter, memory_limit, max_seconds):
    """The method to use after the cost checks; raises or warns over budget."""
    def refuse(cost, what):
        raise ValueError(
            f"the exact solve for n_stations={_num(n)}, max_queue={K} is estimated at "
            f"{cost.text()}, {what}; lower n_stations or max_queue, or raise "
            + ("memory_limit" if "memory_limit" in what else "max_seconds"))
    if K > np.iinfo(np.int16).max:
        raise ValueError(f"max_queue must be at most 32767, got {_num(K)}")
    S = exact_state_space_size(n, K)
    used = method
    if method == "auto":
        used = "gmres"
        d = _cost.estimate(n, K, "direct", maxiter, _RESTART)
        g = _cost.estimate(n, K, "gmres", maxiter, _RESTART)
        # direct up to 5000 states, and beyond where its estimate is under half of
        # GMRES's (narrow chains: N = 2 with hundreds of levels factorise in seconds)
        # aggregation for N >= 4 where GMRES would take more than 10 s and aggregation is
        # estimated faster (below that, GMRES: its residual is the tighter one)
        a = _cost.estimate(n, K, "aggregation", maxiter, _RESTART)
        if n >= 4 and g.seconds > _AGGREGATION_FROM and a.seconds < g.seconds:
            used, g = "aggregation", a
        if (S <= _DIRECT_LIMIT or d.seconds < 0.5 * g.seconds) \
                and d.seconds <= max_seconds and d.bytes <= memory_limit:
            used = "direct"
    cost = _cost.estimate(n, K, used, maxiter, _RESTART)
    if cost.bytes > memory_limit:
        refuse(cost, f"more than memory_limit={memory_limit / 1e9:.3g} GB")
    ram = _physical_memory()
    if S > _MAX_STATES or (ram is not None and cost.bytes > ram):
        raise ValueError(
            f"the state space for n_stations={_num(n)}, max_queue={K} has "
            f"{count_text(S)} states and needs {_gb_text(cost.bytes)}"
            + (f", more than this machine's {ram / 1e9:.3g} GB of memory"
               if ram is not None and cost.bytes > ram else
               f", more than the {_MAX_STATES:,} states the solver indexes")
            + " (whatever memory_limit says); lower n_stations or max_queue")
    if cost.seconds > max_seconds:
        if method == "auto":
            refuse(cost, f"more than max_seconds={max_seconds:.3g}")
        warnings.warn(
            f"exact_stationary: method={method!r} for n_stations={n}, max_queue={K} is "
            f"estimated at {cost.text()}, more than max_seconds={max_seconds:.3g}; "
            "Ctrl-C interrupts GMRES, not a direct factorisation",
            CostWarning, stacklevel=4)
    return used


def _solve(n, lam, p, K, *, method, tol, maxiter, memory_limit, max_seconds, progress,
           x0=None):
    """One solve at truncation level K (inputs checked); x0: a start for GMRES."""
    used = _check_budget(n, K, method, maxiter, memory_limit, max_seconds)
    S = math.comb(K + n, n)
    if progress is None:
        progress = S > _AUTO_PROGRESS_STATES
    t0 = time.perf_counter()
    t_iter = 0
    if lam == 0.0:
        pi = np.zeros(S)
        pi[0] = 1.0
        # Nothing ever arrives: the empty state (rank 0) is absorbing and is the law.
        states = _build_generator(n, K, 0.0, p)[3]
        residual, used = 0.0, "direct"
    else:
        indptr, indices, data, states = _build_generator(n, K, lam, p)
        Q = sp.csr_matrix((data, indices, indptr), shape=(S, S))
        del indptr, indices, data
        # CSC of Q is CSR of Q^T: row j of Q^T lists the rates into state j.
        Qc = Q.tocsc()
        del Q
        Qc.sort_indices()
        tp, ti, td = Qc.indptr, Qc.indices, Qc.data
        # Replace the balance equation of the empty state (rank 0) by pi_0 = 1.
        saved = td[tp[0]:tp[1]].copy()
        td[tp[0]:tp[1]] = 0.0
        td[tp[0]] = 1.0  # indices are sorted and column 0 is the diagonal of row 0
        rhs = np.zeros(S)
        rhs[0] = 1.0
        if used == "direct":
            A = sp.csr_matrix((td, ti, tp), shape=(S, S))
            x = spla.spsolve(A.tocsc(), rhs)
        elif used == "aggregation":
            td[tp[0]:tp[1]] = saved
            x, t_iter = _solve_aggregation(tp, ti, td, states, n, K, tol * n * (1.0 + lam),
                                           maxiter, progress, x0)
            saved = td[tp[0]:tp[1]].copy()
        else:
            x, t_iter = _solve_gmres(tp, ti, td, rhs, tol, maxiter, progress, n, lam, x0)
        td[tp[0]:tp[1]] = saved
        x = np.maximum(x, 0.0)  # rounding can leave -1e-20 where pi is ~1e-20
        pi = x / x.sum()
        residual = float(_k.max_abs_residual(tp, ti, td, pi, 0))
        if used == "gmres" and residual > tol * n * (1.0 + lam):
            raise RuntimeError(
                f"GMRES stopped with residual {residual:.3g} > tol * N(1 + lam) = "
                f"{tol * n * (1 + lam):.3g}; raise maxiter or tol"
            )
        del Qc, tp, ti, td
    s, tail = _k.state_statistics(states, pi, K)
    law_k = tail[K]
    law_k1 = tail[K - 1] - tail[K]
    if law_k == 0.0:
        est = 0.0
    elif law_k1 <= law_k:
        est = math.inf
    else:
        rho = law_k / law_k1
        est = law_k * rho / (1.0 - rho)
    return ExactResult(
        n_stations=n, lam=lam, p=p, max_queue=K, n_states=S, states=states,
        probabilities=pi, s=s, mean_queue_length=float(math.fsum(s[1:])),
        longest_queue_tail=tail, boundary_mass=float(law_k),
        blocked_rate=float(lam * s[K]), truncation_error_estimate=float(est),
        residual=residual, method=used, iterations=int(t_iter),
        seconds=time.perf_counter() - t0,
    )


def _warn_truncation(r, truncation_tol):
    if r.boundary_mass > truncation_tol:
        warnings.warn(
            f"exact_stationary: boundary mass P(M = max_queue) = {r.boundary_mass:.3g} "
            f"exceeds truncation_tol = {truncation_tol:.3g} (n_stations={r.n_stations}, "
            f"lam={r.lam!r}, p={r.p!r}, max_queue={r.max_queue}): the truncation is too "
            f"coarse for this tolerance (estimated mass beyond it: "
            f"{r.truncation_error_estimate:.3g}); raise max_queue (memory: "
            f"exact_memory_estimate) or pass truncation_tol",
            TruncationWarning, stacklevel=3)


def _solve_to_boundary_mass(n, lam, p, target, opts):
    """Choose K for P(M = K) <= target: pilots, geometric extrapolation, checks."""
    k2 = 2
    while k2 < _PILOT_LEVELS and math.comb(k2 + 1 + n, n) <= _PILOT_STATES:
        k2 += 1
    k1 = max(1, k2 - max(2, k2 // 3))
    pilot = dict(opts, method="auto", max_seconds=math.inf, progress=False)
    r1 = _solve(n, lam, p, k1, **pilot)
    if r1.boundary_mass <= target:
        return r1
    r2 = _solve(n, lam, p, k2, **pilot)
    for _ in range(6):
        if r2.boundary_mass <= target:
            return r2
        b1, b2 = r1.boundary_mass, r2.boundary_mass
        rate = (b2 / b1) ** (1.0 / (r2.max_queue - r1.max_queue)) if b1 > 0 else 0.5
        rate = min(max(rate, 1e-3), 0.999)
        step = math.ceil(math.log(target / b2) / math.log(rate)) + 1
        K = r2.max_queue + max(1, step)
        if r2.n_states <= _PILOT_STATES and math.comb(K + n, n) > 10 * _PILOT_STATES:
            # The decay seen at pilot levels is slower than further out: a first solve
            # halfway (in log of the mass) measures it where it matters, instead of
            # overshooting K on the largest solve.
            half = math.ceil(0.5 * math.log(target / b2) / math.log(rate)) + 1
            K = r2.max_queue + max(1, half)
        if K > 32767:
            raise ValueError(
                f"boundary_mass={target:.3g} needs max_queue of about {K}, more than "
                "32767; raise boundary_mass")
        # The ranks of the states do not depend on K: the smaller solution, padded
        # with zeros and scaled to pi_0 = 1, starts GMRES at the larger level.
        # the budget is checked before the start vector is allocated (a K far out would
        # otherwise raise MemoryError instead of the documented ValueError)
        _check_budget(n, K, opts["method"], opts["maxiter"], opts["memory_limit"],
                      opts["max_seconds"])
        S = math.comb(K + n, n)
        x0 = np.zeros(S)
        x0[:r2.n_states] = r2.probabilities / max(r2.probabilities[0], 1e-300)
        r1, r2 = r2, _solve(n, lam, p, K, x0=x0, **opts)
    raise RuntimeError(
        f"boundary_mass={target:.3g} not reached: P(M = K) = {r2.boundary_mass:.3g} at "
        f"max_queue={r2.max_queue} after six enlargements; pass max_queue")


def _solve_aggregation(tp, ti, td, states, n, K, target, maxiter, progress, x0):
    """Multilevel aggregation W-cycles on x Q = 0 (column form tp, ti, td of Q).

    Returns x (normalised) and the number of cycles; RuntimeError if ``maxiter`` cycles
    do not bring max |(x Q)_j| below ``target``.
    """
    from . import _exact_aggregation as _ag
    # tp, ti, td are Q^T in CSR with sorted indices: move each diagonal entry first
    td2, ti2 = _ag.diagonal_first(tp, ti, td)
    levels = _ag.hierarchy(n, K, states)
    S = states.shape[0]
    if x0 is None:
        x = np.full(S, 1.0 / S)
    else:
        x = np.maximum(np.asarray(x0, dtype=float), 0.0) + 1e-300
        x /= x.sum()
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=maxiter, desc="aggregation cycles", leave=False)
    cycles = 0
    try:
        while cycles < maxiter:
            _ag.vcycle(0, (tp, ti2, td2), levels, x, 1, 2)
            x /= x.sum()
            cycles += 1
            if bar is not None:
                bar.update(1)
            if _ag.residual_max(tp, ti2, td2, x) <= target:
                break
        else:
            raise RuntimeError(
                f"aggregation did not reach the residual {target:.3g} in maxiter={maxiter}"
                " cycles; raise maxiter or tol")
    finally:
        if bar is not None:
            bar.close()
    return x, cycles


def _solve_gmres(tp, ti, td, rhs, tol, maxiter, progress, n, lam, x0=None):
    """ILU(0)-preconditioned GMRES(_RESTART) on the replaced system; returns x, its.

    The restart cycle is driven from Python one Arnoldi step at a time (each step is
    one compiled call), so that KeyboardInterrupt is honoured between two iterations.
    """
    S = rhs.shape[0]
    lu, diag = _k.ilu0(tp, ti, td)
    V = np.empty((_RESTART + 1, S))
    x = np.zeros(S) if x0 is None else np.array(x0, dtype=float)
    target = tol * n * (1.0 + lam)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=maxiter, desc="GMRES iterations", leave=False)
    its = 0
    # The inner tolerance is on the unnormalised system (pi_0 = 1); the true test is on
    # the normalised pi, done after each cycle.
    inner = tol
    try:
        while its < maxiter:
            k = _gmres_cycle(tp, ti, td, lu, diag, rhs, x, inner,
                             min(_RESTART, maxiter - its), V, bar)
            its += k
            tot = x.sum()
            if tot > 0:
                res = _k.max_abs_residual(tp, ti, td, x / tot, 1)
                if res <= target:
                    break
            if k == 0:
                inner *= 0.1  # the unnormalised residual is met but pi is not: tighten
                if inner < 1e-300:
                    break
    finally:
        if bar is not None:
            bar.close()
    return x, its


def _gmres_cycle(tp, ti, td, lu, diag, b, x, rtol, restart, V, bar):
    """One restart cycle of right-preconditioned GMRES on A x = b (|b| = 1), in place.

    Returns the number of inner iterations.
    """
    r = b - _k.csr_matvec(tp, ti, td, x)
    beta = float(np.sqrt(r @ r))
    if beta <= rtol:
        return 0
    V[0] = r / beta
    del r
    H = np.zeros((restart + 1, restart))
    cs = np.zeros(restart)
    sn = np.zeros(restart)
    g = np.zeros(restart + 1)
    g[0] = beta
    k = 0
    for j in range(restart):
        hn = _k.gmres_step(tp, ti, td, lu, diag, V, H, j)
        for i in range(j):
            tmp = cs[i] * H[i, j] + sn[i] * H[i + 1, j]
            H[i + 1, j] = -sn[i] * H[i, j] + cs[i] * H[i + 1, j]
            H[i, j] = tmp
        d = math.hypot(H[j, j], H[j + 1, j])
        cs[j] = H[j, j] / d
        sn[j] = H[j + 1, j] / d
        H[j, j] = d
        H[j + 1, j] = 0.0
        g[j + 1] = -sn[j] * g[j]
        g[j] = cs[j] * g[j]
        k = j + 1
        if bar is not None:
            bar.update(1)
        if abs(g[j + 1]) <= rtol or hn == 0.0:
            break
    y = np.zeros(k)
    for i in range(k - 1, -1, -1):
        y[i] = (g[i] - H[i, i + 1:k] @ y[i + 1:k]) / H[i, i]
    _k.gmres_update(tp, ti, lu, diag, V, y, x)
    return k
