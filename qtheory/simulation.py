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
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import stats

from . import _engine, _runlength
from . import _identity as _id
from . import _invariant as _inv
from ._validation import (
    check_flag,
    check_positive_int,
    check_real,
    check_seed,
    check_times,
    unwrap_scalar,
)
from .statistics import (
    BatchMeansSummary,
    batch_means,
    correlation_threshold,
    lag1_autocorrelation,
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

# Largest per-station record sample_path(per_station=True) will allocate (entries).
_MAX_STATION_RECORD = 50_000_000
# Most observation times of sample_path: each costs a step of Python (a few
# microseconds) and a row of the record.
_MAX_TIMES = 1_000_000
# A progress bar appears by default (scripts and notebooks) for runs expected to take
# longer than this many seconds (at events_per_second per core, qtheory._runlength).
_AUTO_PROGRESS_SECONDS = 10.0
# Runs with more events than this calibrate the event rate before deciding.
_CALIBRATE_EVENTS = 3e8
# Fewer batches than this in all (chains times batches) get a warning: the t quantile
# and the uncertainty of the half-width grow fast below it (t_{9, 0.975} = 2.26, the
# half-width uncertain by about 24%; with 2 batches t = 12.7 and about 100%).
_MIN_BATCHES_WARN = 10


class SimulationWarning(UserWarning):
    """A simulation estimate may be unreliable (run too short, correlated batches)."""


@dataclass(frozen=True, repr=False)
class SimulationResult:
    r"""Steady-state estimates from one simulation run of the N-station system.

    Every estimate comes from the simulation; no fluid (N = infinity) value is stored here.

    Attributes
    ----------
    n_stations, lam, p, t_end, warmup, n_batches : inputs of :func:`simulate`
        (``n_batches`` per chain).
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
    n_chains : int
        Independent chains pooled (1 unless ``simulate(n_chains=...)``); the batch
        arrays hold ``n_chains * n_batches`` rows, chain after chain.
    estimator : str
        The estimator the run was made for (``simulate(estimator=...)``, or the plan's):
        ``"plain"`` or ``"identity"``; :attr:`best` and the warnings follow it.
    identity_mean_queue_length : float
        The mean queue length estimated through the exact identity
        (:mod:`qtheory._identity`): :math:`v^I_1` plus the measured deficits below the
        fluid top level :math:`i^*`, from the time fractions of :math:`\{M < i\}`,
        plus the time-average jobs per station above :math:`i^*`.  Unbiased in
        stationarity like the plain average, with a much narrower interval where the top
        level is well populated; never below :math:`v^I_1`.  NaN for ``p = 0`` and
        ``p = 1`` (for ``lam <= p``, :math:`i^* = 0`, it equals the plain average).
    identity_ci : tuple of float
        Its 95% batch-means interval over the same batches, adjusted for their skewness
        (Willink, 2005; :func:`qtheory.statistics.batch_means` with
        ``skew_adjusted=True``): where the top level is sparse (small N) the
        identity's batch values are right-skewed, and the Student interval misses low
        more often than high (at (0.9, 0.1), N = 100, 4000 planned runs: 7.3% of its intervals below the truth against 0.6%
        above, coverage 0.921; Willink's 0.936; ``bench/coverage_study.py``, shown in
        the simulation chapter).  Not centred on the estimate;
        :attr:`identity_half_width` is half its length.
    identity_lag1 : float
        Lag-1 autocorrelation of its batch values (pairs within a chain).
    batch_identity_mean_queue_length : ndarray of float64, shape (n_chains * n_batches,)
        Its per-batch values (empty for ``p = 0`` or ``p = 1``).
    identity_top_level : int
        :math:`i^*` used by the identity (-1 when it is not defined).
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
    n_chains: int = 1
    estimator: str = "plain"
    identity_mean_queue_length: float = math.nan
    identity_ci: tuple = (math.nan, math.nan)
    identity_lag1: float = math.nan
    batch_identity_mean_queue_length: np.ndarray = field(
        default_factory=lambda: np.empty(0))
    identity_top_level: int = -1

    @property
    def half_width(self):
        """Half-width of the 95% interval for the mean queue length (plain average)."""
        return (self.ci[1] - self.ci[0]) / 2.0

    @property
    def identity_half_width(self):
        """Half-width of the 95% interval of the identity estimate (NaN if undefined)."""
        return (self.identity_ci[1] - self.identity_ci[0]) / 2.0

    def estimate(self, estimator=None):
        """The estimate of the mean queue length by one estimator, with its interval.

        Parameters
        ----------
        estimator : {None, "plain", "identity"}, optional
            ``None`` (default): :attr:`estimator`, the one the run was made for.

        Returns
        -------
        qtheory.statistics.BatchMeansSummary
            ``mean``, ``ci``, ``half_width``, ``level`` (0.95), ``n_batches`` (all
            chains) and ``lag1``.

        Raises
        ------
        ValueError
            If ``estimator`` is not one of these, or is ``"identity"`` where the
            identity is undefined (``p = 0`` or ``p = 1``).
        """
        name = self.estimator if estimator is None else estimator
        if name not in ("plain", "identity"):
            raise ValueError(f"estimator must be None, 'plain' or 'identity', got "
                             f"{estimator!r}")
        nb = self.n_chains * self.n_batches
        if name == "plain":
            return BatchMeansSummary(self.mean_queue_length, self.ci, self.half_width,
                                     0.95, nb, self.lag1)
        if self.identity_top_level < 0:
            raise ValueError(f"the identity estimator needs 0 < p < 1, got p = {self.p!r}")
        return BatchMeansSummary(self.identity_mean_queue_length, self.identity_ci,
                                 self.identity_half_width, 0.95, nb, self.identity_lag1)

    @property
    def best(self):
        """:meth:`estimate` of the estimator the run was made for."""
        return self.estimate()

    def summary(self):
        """A few lines describing the run and its estimates (str)."""
        lines = [
            f"Simulation of N = {self.n_stations} stations, lam = {self.lam:g}, "
            f"p = {self.p:g}",
            f"  time [0, {self.t_end:g}], warm-up {self.warmup:g}, "
            + (f"{self.n_chains} chains x " if self.n_chains > 1 else "")
            + f"{self.n_batches} batches, {self.n_events:,} events",
            f"  mean queue length per station: {self.mean_queue_length:.5g}  "
            f"(95% CI {self.ci[0]:.5g} .. {self.ci[1]:.5g})"
            + (" [plain time average]" if self.identity_top_level >= 0 else ""),
        ]
        if self.identity_top_level >= 0:
            lines.append(
                f"  through the identity:          {self.identity_mean_queue_length:.5g}  "
                f"(95% CI {self.identity_ci[0]:.5g} .. {self.identity_ci[1]:.5g}), "
                f"lag-1 {self.identity_lag1:.3f}"
                + ("  <- planned estimator" if self.estimator == "identity" else ""))
        lines += [
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
            f"ci=({self.ci[0]:.6g}, {self.ci[1]:.6g}), "
            f"identity_mean_queue_length={self.identity_mean_queue_length:.6g}, "
            f"estimator={self.estimator!r}, n_events={self.n_events}, "
            f"warnings={len(self.warnings)})"
        )


# --------------------------------------------------------------------------- internals


def _check_horizon(n_stations, lam, horizon, name):
    events = n_stations * (1.0 + lam) * horizon
    if events > _engine.MAX_EVENTS:
        raise ValueError(
            f"{name} = {horizon:g} asks for about N(1 + lam) {name} = {events:.3g} events, "
            f"more than the {_engine.MAX_EVENTS:.0e} this simulator accepts in one call; "
            f"use a smaller {name} (or fewer stations)")


def _stack(rows, width):
    out = np.empty((len(rows), width))
    for b, r in enumerate(rows):
        m = min(width, r.size)
        out[b, :m] = r[:m]
        out[b, m:] = 0.0
    return out


# --------------------------------------------------------------------------- chains


class _SharedBar:
    """A progress bar several threads may update."""

    def __init__(self, bar):
        self.bar = bar
        self.lock = threading.Lock()

    def update(self, n):
        with self.lock:
            self.bar.update(n)

    def close(self):
        self.bar.close()


def _check_workers(workers):
    """None (all available cores) or an integer >= 1; returns the number of threads."""
    if workers is None:
        return _engine.available_cores()
    w = unwrap_scalar(workers)
    if isinstance(w, (bool, np.bool_)) or not isinstance(w, numbers.Integral) \
            or not 1 <= int(w) <= 1024:
        raise ValueError(f"workers must be None (all available cores) or an integer in "
                         f"[1, 1024], got {type(w).__name__} {w!r}")
    return int(w)


def _draw_chain(n_stations, lam, warmup, t_end, n_batches, ss):
    """Generator state and event counts of one chain (warm-up, then batches)."""
    rng_state, gen = _engine.streams(ss)
    rate = n_stations * (1.0 + lam)
    batch_len = (t_end - warmup) / n_batches
    n_warm = int(gen.poisson(rate * warmup)) if warmup > 0 else 0
    counts = gen.poisson(rate * batch_len, size=n_batches).astype(np.int64)
    return rng_state, n_warm, counts


def _run_chain(n_stations, lam, p, cnt0, rng_state, n_warm, counts, bar, cancel):
    """Simulate one chain; per-batch step averages of s and of 1{M >= i}."""
    system = _engine.System(n_stations, lam, p, cnt0, rng_state, track=False)
    system.cancel = cancel
    rows_s, rows_tail = [], []
    if n_warm:
        system.run(n_warm, bar)
    system.close_window()  # discard the warm-up window
    for c in counts:
        system.run(int(c), bar)
        out_s, out_tail, width = system.close_window()
        rows_s.append(out_s / (n_stations * float(width)))
        rows_tail.append(out_tail / float(width))
    return rows_s, rows_tail, int(system.n_events)


def _run_parallel(jobs, workers):
    """Run ``job(cancel)`` for every job, in up to ``workers`` threads; results in order.

    The kernels release the GIL, so chains run in parallel.  Results do not depend on
    the number of workers (each job owns its generator).  An interrupt (or an error) in
    one place stops the others within one chunk of events.
    """
    if workers <= 1 or len(jobs) <= 1:
        return [job(None) for job in jobs]
    cancel = threading.Event()
    pool = ThreadPoolExecutor(max_workers=min(workers, len(jobs)))
    futures = [pool.submit(job, cancel) for job in jobs]
    try:
        for f in futures:
            while True:
                try:
                    f.result(timeout=0.2)  # short waits keep Ctrl-C responsive
                    break
                except FutureTimeout:
                    continue
    except BaseException:
        cancel.set()
        for f in futures:
            f.cancel()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    return [f.result() for f in futures]


def _run_chains(n_stations, lam, p, cnt0, seeds, warmup, t_end, n_batches, progress,
                n_workers, desc):
    """Draw the event counts of one chain per seed and run the chains on n_workers threads.

    Returns ``(draws, chains)``: the per-chain draws of :func:`_draw_chain` and the
    per-chain outputs of :func:`_run_chain`, in seed order (independent of n_workers).
    """
    draws = [_draw_chain(n_stations, lam, warmup, t_end, n_batches, c) for c in seeds]
    total = sum(d[1] + int(d[2].sum()) for d in draws)
    bar = _auto_bar(progress, total, min(n_workers, len(seeds)), desc)

    def job(d):
        return lambda cancel: _run_chain(n_stations, lam, p, cnt0, d[0], d[1], d[2], bar,
                                         cancel)

    try:
        chains = _run_parallel([job(d) for d in draws], n_workers)
    finally:
        if bar is not None:
            bar.close()
    return draws, chains


def _pooled_lag1(x, n_chains):
    """Lag-1 autocorrelation of batch means, using pairs within each chain only."""
    x = np.asarray(x, dtype=np.float64)
    if n_chains == 1:
        return lag1_autocorrelation(x)
    B = x.size // n_chains
    if B < 2 or x.size < 3:
        return math.nan
    d = (x - x.mean()).reshape(n_chains, B)
    den = float(np.sum(d * d)) / x.size
    if den == 0.0:
        return math.nan
    num = float(np.sum(d[:, :-1] * d[:, 1:])) / (n_chains * (B - 1))
    return num / den


@lru_cache(maxsize=64)
def _theory(n_stations, lam, p):
    """Relaxation rate, correlation time and fluid mean (cached; see planning)."""
    return _runlength.variance_model(n_stations, lam, p)


def _diagnose(n_stations, lam, p, t_end, warmup, n_batches, n_chains, cnt0, counts,
              summ, lag1, estimator="plain", plain=None):
    """The reliability messages of a run (see simulate's Warns section).

    ``summ`` and ``lag1`` are those of the estimator the run was made for; ``plain`` the
    plain average's summary (for the lower-bound check; ``summ`` when omitted).
    """
    msgs = []
    plain = summ if plain is None else plain
    batch_len = (t_end - warmup) / n_batches
    thr = correlation_threshold(n_chains * (n_batches - 1) + 1)
    what = ("the batch means" if estimator == "plain" else
            "the batch values of the identity estimate")
    if np.isfinite(lag1) and lag1 > thr:
        msgs.append(
            f"{what} are correlated (lag-1 autocorrelation {lag1:.2f} > "
            f"{thr:.2f}): the confidence interval is too narrow; run longer (longer "
            f"batches)"
        )
    total_batches = n_chains * n_batches
    if total_batches < _MIN_BATCHES_WARN:
        tq = float(stats.t.ppf(0.975, total_batches - 1))
        msgs.append(
            f"only {total_batches} batches in all: the t-interval uses the quantile "
            f"t = {tq:.3g} and its half-width is itself uncertain by about "
            f"{100.0 / math.sqrt(2.0 * (total_batches - 1)):.0f}%; use at least "
            f"{_MIN_BATCHES_WARN} batches (n_batches, n_chains)"
        )
    if summ.ci[0] < 0.0 <= summ.mean:
        msgs.append(
            f"the 95% interval ({summ.ci[0]:.4g}, {summ.ci[1]:.4g}) reaches below 0, "
            f"where no mean queue length lies: the batches vary too much for this "
            f"number of them; run longer or use more batches"
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
    elif lam > p:
        th = _theory(n_stations, lam, p)
        mu, tau = th["relaxation_rate"], th["correlation_time"]
        if estimator == "identity":
            tau = _runlength.identity_model(n_stations, lam, p)["correlation_time"]
        s_inv = _inv.invariant_state(lam, p)
        s_start = cnt0 / float(n_stations)
        w = max(s_inv.size, s_start.size)
        d0 = float(np.abs(np.pad(s_start, (0, w - s_start.size))
                          - np.pad(s_inv, (0, w - s_inv.size)))[1:].sum())
        T = t_end - warmup
        bias = d0 * math.exp(-mu * warmup) / (mu * T)
        if warmup < _runlength.MIN_RELAXATIONS / mu:
            if d0 <= 0.05 * max(th["fluid_mean"], 1e-300) + 1.0 / n_stations:
                msgs.append(
                    f"the run starts at (l1 distance {d0:.3g} from) the fluid invariant "
                    f"state s^I, the answer, and its warm-up {warmup:g} is shorter than "
                    f"three fluid relaxation times 3/mu = {3.0 / mu:.4g} (mu = "
                    f"relaxation_rate(lam, p) = {mu:.4g}): too short to forget the "
                    f"start, so the estimate cannot show how far the N-system is from "
                    f"s^I; use warmup >= {3.0 / mu:.4g} (qtheory.plan_run)"
                )
            else:
                msgs.append(
                    f"warm-up {warmup:g} is shorter than three fluid relaxation times "
                    f"3/mu = {3.0 / mu:.4g} (mu = relaxation_rate(lam, p) = {mu:.4g}) "
                    f"and the start is at l1 distance {d0:.3g} from the invariant "
                    f"state: the estimate is biased by the initial state; use a longer "
                    f"warm-up (qtheory.plan_run)"
                )
        elif bias > summ.half_width:
            msgs.append(
                f"the initial state (l1 distance {d0:.3g} from s^I) may still bias the "
                f"estimate by up to d0 exp(-mu warmup)/(mu (t_end - warmup)) = "
                f"{bias:.3g}, more than the half-width {summ.half_width:.3g} "
                f"(mu = {mu:.4g}); use a longer warm-up (qtheory.plan_run)"
            )
        if batch_len < 5.0 * tau:
            msgs.append(
                f"batches of length {batch_len:.4g} are shorter than five correlation "
                f"times of the mean queue length (tau = {tau:.4g}, about 1/mu; "
                f"qtheory.plan_run uses at least 10 tau): the batch means are correlated "
                f"and the interval too narrow; use t_end - warmup >= "
                f"{10.0 * tau * n_batches:.4g}"
            )
    if lam > 0.0 and lam > p:
        v_inv = lam / (1.0 - lam) if p == 0.0 else float(_inv.mean_queue_length(lam, p))
        if plain.ci[1] < v_inv * (1.0 - 1e-12):
            msgs.append(
                f"the whole 95% interval ({plain.ci[0]:.5g}, {plain.ci[1]:.5g}) of the "
                f"plain average lies below "
                f"the fluid value v^I_1 = {v_inv:.6g}, which the mean queue length of no "
                f"finite system can be below in expectation (E[v^N_1] >= v^I_1, the "
                f"lower bound of the steady-state chapter): the run is too short for its "
                f"initial state (or this is a rare chance event); use qtheory.plan_run"
            )
    if counts.min() < 100:
        msgs.append(
            f"some batches hold fewer than 100 events (smallest: {int(counts.min())}; "
            f"{int(counts.sum())} events measured in all): the estimate and its interval "
            f"describe the initial state, not the steady state; run much longer"
        )
    return msgs


def _assemble(n_stations, lam, p, t_end, warmup, n_batches, ss, cnt0, chains, counts,
              estimator="plain"):
    """Pool the batches of one or more chains into a SimulationResult (no warning).

    Both estimators are formed from the same batches; ``estimator`` (checked: "plain",
    or "identity" where it is defined) is the one the warnings judge.
    """
    n_chains = len(chains)
    rows_s = [r for c in chains for r in c[0]]
    rows_tail = [r for c in chains for r in c[1]]
    # Rows end at their highest occupied level (close_window), so the widest row gives
    # the levels occupied in some batch.
    levels = max(r.size for r in rows_s)
    bs = _stack(rows_s, levels)
    btail = _stack(rows_tail, levels)  # time-average of 1{M >= i} per batch
    np.minimum(btail, 1.0, out=btail)
    bs[:, 0] = 1.0
    btail[:, 0] = 1.0
    bmean = bs[:, 1:].sum(axis=1)

    summ = batch_means(bmean)
    lag1 = _pooled_lag1(bmean, n_chains)
    s = bs.mean(axis=0)
    nb = bs.shape[0]
    tq = float(stats.t.ppf(0.975, nb - 1))
    s_hw = tq * bs.std(axis=0, ddof=1) / math.sqrt(nb)  # one vectorized pass, any levels
    s_hw[0] = 0.0
    ident = {}
    if _id.identity_valid(lam, p):
        bid = _id.identity_batches(lam, p, bs, btail)[0]
        # skewed where the top level is sparse: Willink's interval (3 batches or more)
        isumm = batch_means(bid, skew_adjusted=bid.size >= 3)
        ident = dict(identity_mean_queue_length=float(isumm.mean), identity_ci=isumm.ci,
                     identity_lag1=_pooled_lag1(bid, n_chains),
                     batch_identity_mean_queue_length=bid,
                     identity_top_level=_id.identity_top_level(lam, p))
    if estimator == "identity":
        msgs = _diagnose(n_stations, lam, p, t_end, warmup, n_batches, n_chains, cnt0,
                         counts, isumm, ident["identity_lag1"], "identity", summ)
    else:
        msgs = _diagnose(n_stations, lam, p, t_end, warmup, n_batches, n_chains, cnt0,
                         counts, summ, lag1)
    return SimulationResult(
        n_stations=n_stations, lam=lam, p=p, t_end=t_end, warmup=warmup,
        n_batches=n_batches, seed_entropy=ss.entropy,
        seed_spawn_key=tuple(ss.spawn_key),
        s=s, s_half_width=s_hw, mean_queue_length=float(summ.mean), ci=summ.ci,
        longest_queue_tail=btail.mean(axis=0),
        n_events=int(sum(c[2] for c in chains)),
        n_events_measured=int(counts.sum()), batch_s=bs,
        batch_longest_queue_tail=btail, batch_mean_queue_length=bmean,
        lag1=lag1, warnings=msgs, n_chains=n_chains, estimator=estimator, **ident,
    )


def _check_run(n_stations, lam, p, t_end, warmup, n_batches, progress, copies, name):
    """Validate the common arguments of simulate and replicate (before any seed work)."""
    n_stations, lam, p = _engine.check_system(n_stations, lam, p)
    t_end = check_real(t_end, "t_end", low=0.0, low_open=True, high=math.inf,
                       high_open=True)
    warmup = check_real(warmup, "warmup", low=0.0, high=t_end, high_open=True)
    _check_horizon(n_stations, lam, t_end, "t_end")
    n_batches = check_positive_int(n_batches, "n_batches", minimum=2)
    progress = check_flag(progress, "progress", allow_none=True)
    if n_batches > 10**6:
        raise ValueError(f"n_batches must be an integer in [2, 1e6], got {n_batches}")
    huge = copies >= 10**300  # beyond double precision: certainly too many
    total = math.inf if huge else float(copies) * n_stations * (1.0 + lam) * t_end
    if total > _engine.MAX_TOTAL_EVENTS:
        shown = "more than 1e300" if huge else (
            f"{copies}" if copies < 10**6 else f"{float(copies):.3g}")
        raise ValueError(
            f"{name} = {shown} runs of about N(1 + lam) t_end = "
            f"{n_stations * (1.0 + lam) * t_end:.3g} events each ask for {total:.3g} "
            f"events in all, more than the {_engine.MAX_TOTAL_EVENTS:.0e} accepted in one "
            f"call; "
            f"use a smaller {name} (or shorter runs)")
    return n_stations, lam, p, t_end, warmup, n_batches, progress


def _check_memory(n_stations, s0, rows, systems, *, results=0, rows_name, count,
                  per_count, track=False):
    """Check, before anything is allocated or spawned, that a run fits in memory.

    ``rows_name`` is the parameter that sets ``rows`` and ``results`` (``count`` of it,
    ``per_count`` rows each).  The parameter named in the error is the one whose share
    of the estimate is largest: the start ``s0`` (its levels), ``rows_name``, or
    ``workers`` (the systems alive at once); the message gives its largest value that
    fits.
    """
    levels = _engine.start_levels(n_stations, s0)

    def need(lv=levels, rw=rows, sy=systems, rs=results):
        return _engine.run_bytes(n_stations, lv, rw, sy, track=track, results=rs)

    budget = _engine.memory_budget()
    if need() <= budget:
        return levels
    per_result = results // count if count else 0
    shares = {"s0": need() - need(lv=1), rows_name: need() - need(rw=0, rs=0),
              "workers": need() - need(sy=0)}
    name = max(shares, key=shares.get)
    if name == "s0":
        unit = need(lv=2) - need(lv=1)
        top = max(0, int((budget - need(lv=1)) // max(unit, 1)))
        what = f"the start with {levels:,} levels"
        fits = f"s0 may reach level {top:,} here"
    elif name == "workers":
        unit = need(sy=1) - need(sy=0)
        top = max(0, int((budget - need(sy=0)) // max(unit, 1)))
        what = f"{systems} systems of {n_stations:,} stations at once"
        fits = f"at most {top} systems fit here (workers, n_chains)"
    else:
        unit = need(rw=per_count, rs=per_result) - need(rw=0, rs=0)
        top = max(0, int((budget - need(rw=0, rs=0)) // max(unit, 1)))
        what = f"{rows_name} = {count:,} ({rows:,} recorded rows of {levels:,} levels)"
        fits = f"{rows_name} must be at most {top:,} here"
    raise ValueError(
        f"{name}: {what} needs about {need() / 2**30:.3g} GiB, more than the "
        f"{budget / 2**30:.3g} GiB (half this machine's memory, at most 16 GiB) one "
        f"call may use: {fits}")


def _check_estimator(estimator, n_stations, lam, p):
    """The estimator name ("plain" or "identity") a run is made for."""
    if estimator is None:
        return "plain"
    if not isinstance(estimator, str) or estimator not in ("plain", "identity", "auto"):
        raise ValueError(f"estimator must be None, 'plain', 'identity' or 'auto', got "
                         f"{estimator!r}")
    if estimator == "auto":
        return ("identity" if _id.identity_valid(lam, p) and lam > p and n_stations >= 2
                else "plain")
    if estimator == "identity" and not _id.identity_valid(lam, p):
        raise ValueError(f"estimator='identity' needs 0 < p < 1 (a fluid top level), "
                         f"got p = {p!r}; use 'plain'")
    return estimator


def _auto_bar(progress, total_events, parallel, desc):
    """A shared progress bar, or None.  Auto: runs planned to take more than ~10 s."""
    if progress is None:
        # Runs that may take more than a second measure this machine's rate once per
        # process (about 0.2 s); shorter ones use the cached or default figure.
        rate = _runlength.events_per_second(measure=total_events > _CALIBRATE_EVENTS)
        progress = total_events / (rate * max(1, parallel)) > _AUTO_PROGRESS_SECONDS
    if not progress:
        return None
    from tqdm.auto import tqdm

    return _SharedBar(tqdm(total=int(total_events), desc=desc, unit="ev",
                           unit_scale=True))


# --------------------------------------------------------------------------- public API


def simulate(n_stations, lam, p, *, t_end, warmup, seed=None, n_batches=20, s0=None,
             progress=None, n_chains=1, workers=None, estimator=None):
    r"""Simulate the N-station system and estimate its steady state by batch means.

    Simulates the exact continuous-time Markov chain on ``[0, t_end]`` from the initial
    state ``s0`` (empty by default), discards ``[0, warmup)``, cuts ``[warmup, t_end]``
    into ``n_batches`` batches of equal length and reports time averages over
    ``[warmup, t_end]`` with 95% batch-means confidence intervals.  With ``n_chains > 1``
    it does so for independent chains in parallel and pools their batches.
    :func:`qtheory.plan_run` chooses ``t_end``, ``warmup`` and ``n_batches`` for a
    target half-width: ``simulate(**plan_run(...), seed=1)``.

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
        End of the run (of each chain), in mean service times; finite and > 0.
    warmup : float
        Warm-up period removed from every estimate (in each chain),
        ``0 <= warmup < t_end``.
    seed : None, int >= 0 or numpy.random.SeedSequence, optional
        The same seed gives bit-identical results on the same machine, whatever
        ``workers`` is (the generator is seeded inside compiled code; NumPy's global
        seed plays no role).  ``None`` draws fresh entropy, recorded in the result's
        ``seed_entropy``.  With ``n_chains = k > 1``, chain c uses the c-th child of
        ``SeedSequence(seed).spawn(k)``, so its batches are those of
        ``replicate(k, ..., seed=seed)[c]``.
    n_batches : int, optional
        Number of batches per chain, B >= 2 (default 20).
    s0 : None, int or array_like of float, optional
        Initial state: ``None`` (empty), an integer k in [0, 1e6] (every station holds k
        jobs; Python or NumPy integer or 0-d integer array) or tail fractions ``s0``
        (``s0[0] == 1``, non-increasing, at most 1e6 + 1 levels), rounded to multiples
        of 1/N.  Each level of the start costs memory in every chain and in every batch
        of the result; queues may grow beyond 1e6 during the run.
    progress : bool or None, optional
        Show a tqdm progress bar (on stderr in scripts, a widget in notebooks).  ``None``
        (default): when the run is expected to take more than about 10 s at
        :func:`qtheory.planning.events_per_second` per core (measured once per process
        for runs of more than 3e8 events; 5e7 events/s assumed before that).
    n_chains : int, optional
        Number of independent chains k >= 1 (default 1), each simulated on
        ``[0, t_end]`` from ``s0`` with its own warm-up.
    workers : None or int, optional
        Threads running the chains (the compiled kernel releases the GIL); ``None``
        (default): the number of cores available to this process.  Never changes a
        result.
    estimator : None, "plain", "identity" or "auto", optional
        The estimator of the mean queue length the run is made for: its interval is
        the one the warnings judge and ``result.best`` returns.  Both are always
        computed.  ``None`` or ``"plain"`` (default): the plain time average;
        ``"identity"``: the estimate through the exact identity (needs ``0 < p < 1``);
        ``"auto"``: the identity where it is defined and differs from the plain average
        (``0 < p < 1``, ``lam > p``, ``N >= 2``), else plain.  A
        :class:`qtheory.RunPlan` passes the estimator it was planned for.

    Returns
    -------
    SimulationResult
        Inputs, ``s`` (shape (levels,)), ``mean_queue_length`` with ``ci`` (the plain
        time average), ``identity_mean_queue_length`` with ``identity_ci`` (through the
        identity), ``longest_queue_tail`` (shape (levels,)), ``n_events``, per-batch
        arrays (all chains, chain after chain: shape (k B, levels)), ``estimator`` and
        ``warnings``.

    Raises
    ------
    ValueError
        If ``n_stations`` is not an integer in [1, 1e9], ``lam`` is outside ``[0, 1)``,
        ``p`` outside ``[0, 1]``, ``t_end`` not finite and positive, ``warmup`` outside
        ``[0, t_end)``, ``n_batches`` not an integer in [2, 1e6], ``n_chains`` not an
        integer in [1, 1e4], ``workers`` not None or an integer in [1, 1024], any of
        them NaN, ``s0`` invalid (see ``s0``), ``estimator`` not one of the names above
        (or ``"identity"`` with ``p = 0`` or ``p = 1``), the run asks for more than 1e12
        events per chain or 1e13 in all, or its memory (the sorted queues of the chains
        running at once, the levels of the start in every chain and every batch of the
        result) would exceed half of this machine's memory (at most 16 GiB): checked
        before anything is allocated, the message names the parameter and the largest
        value that fits.
    KeyboardInterrupt
        Honoured between chunks of about 8 million events (every chain stops).

    Warns
    -----
    SimulationWarning
        With the numbers in the message (also stored in ``result.warnings``):

        * the lag-1 autocorrelation of the batch values of the run's estimator (pairs
          within a chain) exceeds :func:`qtheory.statistics.correlation_threshold` (the
          interval is then too narrow);
        * fewer than 10 batches in all (``n_chains * n_batches``): the t quantile is
          large and the half-width itself uncertain (2.26 and about 24% at 10 batches;
          12.7 and about 100% at 2), or the estimator's interval reaches below 0;
        * ``p = 0`` or ``N = 1`` (M/M/1 queues, relaxation time
          :math:`1/(1-\sqrt\lambda)^2`): the warm-up is shorter than one relaxation
          time, or the batches are shorter than ten integrated autocorrelation times
          :math:`2(1+\lambda)/(1-\lambda)^2`;
        * ``p > 0``, ``N >= 2``, ``lam > p``: the warm-up is shorter than three fluid
          relaxation times :math:`3/\mu` (:func:`qtheory.relaxation_rate`), whether the
          run starts far from the invariant state or at it (a start at :math:`s^I` is a
          start at the fluid answer: the warm-up must be long enough to forget it); or
          the bias bound :math:`d_0 e^{-\mu w}/(\mu(t_{end}-w))` of the initial state at
          :math:`\ell_1` distance :math:`d_0` from :math:`s^I` exceeds the half-width;
          or the batches are shorter than five correlation times :math:`\tau` of the
          run's estimator (:func:`qtheory.planning.variance_model`; expected lag-1
          correlation above 0.1);
        * the whole interval of the plain average lies below the fluid value
          :math:`v^I_1`, impossible in
          expectation for every N by the lower bound :math:`E[v^N_1] \ge v^I_1`
          (``p = 0``: the exact mean :math:`\lambda/(1-\lambda)`);
        * a batch holds fewer than 100 events.

    Notes
    -----
    Uniformization at rate N(1 + lam) (the book's chapter on the occupancy chain): each
    event is an arrival (probability lam/(1+lam)), a local token (probability
    (1-p)/(1+lam)) at a uniform station, or a central token (probability p/(1+lam)) at a
    longest queue.  The number of events in each batch is Poisson(N (1 + lam) T_batch);
    averages are step averages over the states visited, the conditional expectation of
    the time average.  Dummy events count: an event average over real jumps only would
    be biased (for N = 1, p = 0, lam = 0.5 it would give about 1.5 instead of 1).  Cost
    per event is O(1) and independent of N; memory is one byte per station (two or four
    once a queue exceeds 254 or 65534 jobs) per chain.

    The identity estimate (:mod:`qtheory._identity`, the simulation chapter's proof of
    its unbiasedness) is formed from the same batches: per batch,
    :math:`v^I_1 + \sum_{i \le i^*} \hat d_i + \sum_{i > i^*} \bar s_i` with
    :math:`(1-p)\hat d_i = \lambda \hat d_{i-1} + p\,\hat P(M < i)`, the time
    fractions :math:`\hat P(M < i)` of the batch; its interval and lag-1 come from these
    batch values.

    Several chains: the k B batch means (B per chain, equal lengths) are pooled as one
    sample; the estimate is their average and the interval Student-t with k B - 1
    degrees of freedom.  Batches of different chains are independent; batches within a
    chain are nearly so when they are long compared with the correlation time, which the
    lag-1 diagnostic (computed from pairs within chains) checks.  Every chain pays its
    own warm-up, so k chains cost k warm-ups (Asmussen and Glynn 2007, IV.5 and III on
    replications; Law 2015, Ch. 9).

    References
    ----------
    Tsitsiklis and Xu (2012), Section 2 (the model) and Section 4 (the uniformized
    construction); Jensen (1953) (uniformization); Asmussen and Glynn (2007), Ch. IV.5
    (batch means); Law, *Simulation Modeling and Analysis* (2015), Ch. 9 (warm-up).

    Examples
    --------
    >>> r = simulate(1, 0.5, 0.0, t_end=2e4, warmup=100.0, seed=1)
    >>> abs(r.mean_queue_length - 1.0) < 0.1
    True
    """
    n_chains = check_positive_int(n_chains, "n_chains")
    if n_chains > 10**4:
        raise ValueError(f"n_chains must be an integer in [1, 1e4], got {n_chains}")
    n_workers = _check_workers(workers)
    n_stations, lam, p, t_end, warmup, n_batches, progress = _check_run(
        n_stations, lam, p, t_end, warmup, n_batches, progress, n_chains, "n_chains")
    est = _check_estimator(estimator, n_stations, lam, p)
    _check_memory(n_stations, s0, n_chains * n_batches, min(n_workers, n_chains),
                  rows_name="n_batches", count=n_batches, per_count=n_chains)
    cnt0 = _engine.initial_counts(n_stations, s0)
    ss = check_seed(seed)
    if n_chains == 1:
        seeds = [ss]
    else:
        seeds = np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key),
                                       pool_size=ss.pool_size).spawn(n_chains)
    draws, chains = _run_chains(n_stations, lam, p, cnt0, seeds, warmup, t_end,
                                n_batches, progress, n_workers, "simulate")
    counts = np.concatenate([d[2] for d in draws])
    res = _assemble(n_stations, lam, p, t_end, warmup, n_batches, ss, cnt0, chains,
                    counts, est)
    for m in res.warnings:
        warnings.warn(m, SimulationWarning, stacklevel=2)
    return res


def replicate(n_replications, n_stations, lam, p, *, t_end, warmup, seed=None,
              n_batches=20, s0=None, progress=None, workers=None, estimator=None):
    r"""Independent replications of :func:`simulate`, run in parallel.

    Parameters
    ----------
    n_replications : int
        Number of runs R >= 1; ``R N (1 + lam) t_end`` (the expected number of events
        in all) must not exceed 1e13.
    n_stations, lam, p, t_end, warmup, n_batches, s0, progress, estimator
        As for :func:`simulate`.
    seed : None, int >= 0 or numpy.random.SeedSequence
        Replication r uses the r-th child of ``SeedSequence(seed).spawn(R)`` (statistically
        independent streams); the same seed gives the same list, whatever ``workers``.
    workers : None or int, optional
        Threads (default: the cores available); never changes a result.

    Returns
    -------
    list of SimulationResult, length R
        Each as ``simulate(..., seed=child_r)`` would return it (with its warnings, which
        are also issued, in order).

    Raises
    ------
    ValueError
        As for :func:`simulate`, if ``n_replications`` is not an integer >= 1, or if
        the replications together ask for more than 1e13 events (checked before any seed
        is spawned).

    References
    ----------
    Asmussen and Glynn (2007), Ch. III (independent replications).
    """
    n_replications = check_positive_int(n_replications, "n_replications")
    n_workers = _check_workers(workers)
    n_stations, lam, p, t_end, warmup, n_batches, progress = _check_run(
        n_stations, lam, p, t_end, warmup, n_batches, progress, n_replications,
        "n_replications")
    est = _check_estimator(estimator, n_stations, lam, p)
    # the results must fit in memory: checked before any seed is spawned (a billion
    # replications of a tiny run passed the event cap and took all memory)
    _check_memory(n_stations, s0, n_replications * n_batches,
                  min(n_workers, n_replications), results=n_replications,
                  rows_name="n_replications", count=n_replications,
                  per_count=n_batches)
    cnt0 = _engine.initial_counts(n_stations, s0)
    ss = check_seed(seed)
    children = np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key),
                                      pool_size=ss.pool_size).spawn(n_replications)
    draws, chains = _run_chains(n_stations, lam, p, cnt0, children, warmup, t_end,
                                n_batches, progress, n_workers, "replicate")
    out = []
    for c, d, chain in zip(children, draws, chains):
        res = _assemble(n_stations, lam, p, t_end, warmup, n_batches, c, cnt0, [chain],
                        d[2], est)
        for m in res.warnings:
            warnings.warn(m, SimulationWarning, stacklevel=2)
        out.append(res)
    return out


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
        Observation times (mean service times), finite, >= 0, non-decreasing, at most
        1e6 of them; the path starts at time 0 in ``s0``.
    s0 : None, int or array_like of float, optional
        Initial state: ``None`` (empty system), an integer k in [0, 1e6] (all stations at
        level k), or tail fractions (``s0[0] == 1``, non-increasing, at most 1e6 + 1
        levels), rounded to multiples of 1/N.
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
        If any parameter is out of range (named in the message), ``per_station`` would
        record more than 5e7 entries, or the record would exceed the memory a call may
        use (see :func:`simulate`).

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
    n_stations, lam, p = _engine.check_system(n_stations, lam, p)
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
    if t.size > _MAX_TIMES:
        raise ValueError(f"times must hold at most {_MAX_TIMES:,} observation times (one "
                         f"step of Python per time), got {t.size:,}")
    # a row of s per time (a quarter of the four per-batch arrays of run_bytes)
    _check_memory(n_stations, s0, (t.size + 3) // 4, 1, rows_name="times",
                  count=t.size, per_count=1, track=per_station)
    cnt0 = _engine.initial_counts(n_stations, s0)
    ss = check_seed(seed)
    rng_state, gen = _engine.streams(ss)
    rate = n_stations * (1.0 + lam)
    gaps = np.diff(np.concatenate(([0.0], t)))
    counts = gen.poisson(rate * gaps).astype(np.int64)
    system = _engine.System(n_stations, lam, p, cnt0, rng_state, track=per_station,
                     shuffle_rng=gen)
    rows = []
    q = np.empty((t.size, n_stations), dtype=np.int64) if per_station else None
    bar = _auto_bar(progress, int(counts.sum()), 1, "sample_path")
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
