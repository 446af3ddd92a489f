r"""Planning steady-state simulations: warm-up, batch length and run length from theory.

:func:`plan_run` turns a target 95% half-width for the mean queue length per station into
the arguments of :func:`qtheory.simulate` (a :class:`RunPlan`), from three ingredients.

Relaxation (warm-up)
    The fluid model forgets its initial state at the exponential rate
    :math:`\mu` = :func:`qtheory.relaxation_rate` (the spectral gap of the fluid model
    linearized at the invariant state :math:`s^I`; for ``p = 0``, and for a single
    station, the M/M/1 gap :math:`(1-\sqrt\lambda)^2`).  A start at distance
    :math:`d_0` (in :math:`\ell_1`, jobs per station; from the empty state
    :math:`d_0 = v^I_1`, the fluid mean queue length) leaves a bias of at most about
    :math:`d_0 e^{-\mu w}` after a warm-up :math:`w`.  The plan takes
    :math:`w = \max(3, \ln(d_0 / (0.1 h)))/\mu`: at least three relaxation times, and
    long enough that the remaining bias is below a tenth of the target half-width
    :math:`h`.

Variance (run length)
    The time average of the mean queue length over a measured period :math:`T` has
    variance :math:`\sigma^2/(N T)` for large :math:`T`, with an asymptotic variance
    constant :math:`\sigma^2` from:

    * ``p = 0`` or ``N = 1`` (``"mm1"``): the stations are independent M/M/1 queues
      (service rate 1), and :math:`\sigma^2 = 2\rho(1+\rho)/(1-\rho)^4` with
      :math:`\rho = \lambda` (Whitt 1989; checked here to 1e-9 against the Poisson
      equation of the birth-death chain, ``tests/test_planning.py``);
    * ``p > 0`` with :math:`i^* \ge 1` (``"linear-noise"``): the linear-noise
      (Ornstein-Uhlenbeck) approximation around :math:`s^I`,
      :math:`\sqrt N (s^N - s^I) \approx X` with :math:`dX = A X\,dt + D^{1/2} dW`, where
      :math:`A = A_{i^*}` is the fluid model's matrix in the regime of the invariant
      state (the matrix behind :func:`qtheory.relaxation_rate`) and :math:`D` is
      diagonal with the total jump rate of each level at :math:`s^I`:
      :math:`D_{ii} = \lambda(s_{i-1}-s_i) + (1-p)(s_i-s_{i+1})` below the top and
      :math:`D_{i^*i^*} = \lambda s_{i^*-1} + (1-p)s_{i^*} + p`: at the top level the
      central server's tokens (rate :math:`p`) serve either the top level or the
      stations that arrivals (rate :math:`\lambda s_{i^*}`) lift to level
      :math:`i^*+1`, so the top level sees the noise of both streams (the sliding of
      the fluid model, with its fluctuations).  Then
      :math:`\sigma^2 = c^\top A^{-1} D A^{-\top} c` with :math:`c = (1, \dots, 1)`
      (van Kampen 2007, Ch. X; Kurtz 1978);
    * ``0 < p``, :math:`\lambda \le p` (``"pooled"``, :math:`i^* = 0`): the total number
      of jobs is bounded by an M/M/1 queue with arrival rate :math:`N\lambda` and service
      rate :math:`m = Np + 1 - p`; :math:`\sigma^2 = \sigma^2_{M/M/1}(N\lambda/m)/(m N)`.

    The plan asks for :math:`t_{B-1,0.975}\,\sigma/\sqrt{N T} \le h` with :math:`B` the
    total number of batches.

Correlation time (batch length)
    Batch means of length :math:`b` have lag-1 autocorrelation about
    :math:`\tau/(2b)`, where :math:`\tau = \int_0^\infty t\,C(t)\,dt / \int_0^\infty
    C(t)\,dt` is the mean lag of the autocovariance :math:`C` of the mean queue length.
    In the linear-noise model :math:`\tau = c^\top A^{-2}\Sigma c / (-c^\top A^{-1}
    \Sigma c)` (:math:`\Sigma` the stationary covariance, :math:`A\Sigma + \Sigma
    A^\top + D = 0`); numerically it equals :math:`1/\mu` to three digits at every
    point tried, and :math:`1/\mu` is used beyond 200 levels.  For the M/M/1 queue
    :math:`\tau = (1 + 3\rho + \rho^2)/((1-\rho)^2(1+\rho))` (identified from the Poisson
    equation of the birth-death chain to 1e-8; it tends to :math:`2.5/(1-\rho)^2`).  The
    plan takes :math:`b \ge \tau/(2 \cdot 0.05) = 10\tau`, so that the expected lag-1
    autocorrelation is about 0.05, well below the threshold at which
    :func:`qtheory.simulate` flags the batches.

Finite N
    The linear-noise variance is an :math:`N \to \infty` approximation; it is
    multiplied by :math:`1 + 30/N`, an empirical factor fitted to the validation below
    (without it the model under-predicts the half-width at N = 10 by up to a factor 3
    for p <= 0.2; with it, it over-predicts there by up to 2).

How far off the variance model can be
    ``bench/plan_validation.py`` runs planned simulations over the grid lam in {0.7, 0.9,
    0.95, 0.99}, p in {0, 0.05, 0.1, 0.2, 0.6}, N in {10, 100, 1000} (4 seeds each,
    about 1e7 events per run; the 8 points whose batch-length floor needs more than 1e8
    events per run skipped) and prints the ratio of the realized half-width to the
    predicted one.  One run's ratio has a sampling spread of about 16% (20 batches).
    Observed (December 2026, 208 runs, ``--seeds 4 --budget 1e7 --max-events 1e8``):

    * N >= 100, p <= 0.2 (p = 0 included): every run in 0.54-1.27, point means
      0.67-1.04 (the model errs on the safe side: runs slightly longer than needed);
    * N >= 100, p = 0.6: 0.62-1.88; the model under-predicts where lam is close to 1
      (point means 1.21 and 1.46 at lam = 0.95, N = 1000 and 100; 1.09-1.16 at 0.99);
    * N = 10: 0.41-3.55, point means mostly 0.5-1 (over-prediction) but 1.50 at
      (0.99, 0.2), 2.71 at (0.95, 0.6) and 6.18 at (0.99, 0.6), where ten stations
      are far from the fluid regime.

    Where the model under-predicts, the realized interval is wider than the target but
    still a valid interval.  ``tests/test_planning.py`` keeps four points of the first
    region with fixed seeds and a factor-2 tolerance.

References
----------
A. M. Law, *Simulation Modeling and Analysis*, 5th ed., McGraw-Hill, 2015, Ch. 9 (warm-up
and batch means).  S. Asmussen and P. W. Glynn, *Stochastic Simulation: Algorithms and
Analysis*, Springer, 2007, Ch. IV (steady-state simulation, batch means, the time-average
variance constant).  W. Whitt, "Planning queueing simulations", Management Science 35(11),
1989 (the M/M/1 constants).  N. G. van Kampen, *Stochastic Processes in Physics and
Chemistry*, 3rd ed., Elsevier, 2007, Ch. X (the linear-noise approximation); T. G. Kurtz,
"Strong approximation theorems for density dependent Markov chains", Stochastic Processes
and their Applications 6, 1978.  J. N. Tsitsiklis and K. Xu, "On the power of (even a
little) resource pooling", Stochastic Systems 2(1), 2012 (the fluid model and its
invariant state).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from . import _engine, _runlength
from .statistics import batch_means_coverage
from ._runlength import DEFAULT_EVENTS_PER_SECOND, events_per_second  # noqa: F401
from ._validation import check_lam, check_n_stations, check_p, check_positive_int, \
    check_real

__all__ = ["RunPlan", "plan_run", "events_per_second", "variance_model"]


def variance_model(n_stations, lam, p):
    r"""Asymptotic variance, correlation time and relaxation rate used by :func:`plan_run`.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.

    Returns
    -------
    dict
        ``sigma2``: :math:`\sigma^2` such that the time average of the mean queue length
        per station over a period T has variance about :math:`\sigma^2/(N T)` (jobs^2
        per station^2 times time units); ``correlation_time``: :math:`\tau` (time units),
        the mean lag of its autocovariance; ``relaxation_rate``: :math:`\mu` (per time
        unit) with which the initial state is forgotten; ``model``: ``"mm1"``,
        ``"linear-noise"``, ``"pooled"`` or ``"empty"`` (lam = 0); ``fluid_mean``: the
        fluid (N = infinity) mean queue length :math:`v^I_1`.

    Raises
    ------
    ValueError
        If a parameter is out of range.

    Notes
    -----
    See the module docstring for the three models and their sources.

    References
    ----------
    Whitt (1989); van Kampen (2007), Ch. X; Asmussen and Glynn (2007), Ch. IV.
    """
    n = check_n_stations(n_stations)
    lam = check_lam(lam)
    p = check_p(p)
    return _runlength.variance_model(n, lam, p)


_KEYS = ("n_stations", "lam", "p", "t_end", "warmup", "n_batches", "s0", "n_chains",
         "estimator")


@dataclass(frozen=True, repr=False)
class RunPlan(Mapping):
    r"""A planned steady-state simulation: the arguments of :func:`qtheory.simulate`.

    A frozen dataclass that is also a read-only mapping of exactly the keyword arguments
    of :func:`qtheory.simulate` it fixes (``n_stations``, ``lam``, ``p``, ``t_end``,
    ``warmup``, ``n_batches``, ``s0``, ``n_chains``, ``estimator``), so
    ``simulate(**plan, seed=1)`` runs it.  The seed is not part of the plan; ``workers`` neither (it never changes a
    result).

    Attributes
    ----------
    n_stations, lam, p : int, float, float
        The system.
    t_end : float
        End of each chain's run (mean service times).
    warmup : float
        Warm-up discarded at the start of each chain.
    n_batches : int
        Batches per chain; ``n_chains * n_batches`` batch means enter the interval.
    n_chains : int
        Independent chains (each with its own warm-up), pooled by :func:`simulate`.
    s0 : None or ndarray
        Initial state passed to simulate: ``None`` (empty) or the invariant state's tail
        fractions.
    start : str
        ``"empty"`` or ``"invariant"``.
    batch_length : float
        ``(t_end - warmup) / n_batches``.
    half_width : float
        The target 95% half-width (jobs per station).
    predicted_half_width : float
        :math:`t_{B-1,0.975}\,\sigma/\sqrt{N T}` with ``B = n_chains * n_batches`` and
        ``T = n_chains * (t_end - warmup)``; at most ``half_width`` (smaller when the
        batch-length floor makes the run longer than the variance needs).
    relaxation_time : float
        :math:`1/\mu` (time units), see :func:`variance_model`.
    correlation_time : float
        :math:`\tau` assumed for the batch length (time units).
    asymptotic_variance : float
        :math:`\sigma^2` (see :func:`variance_model`).
    variance_model : str
        Which model gave it.
    fluid_mean : float
        :math:`v^I_1`, the fluid mean queue length (a lower bound on the finite-N mean).
    expected_events : float
        ``n_chains * N (1 + lam) t_end``.
    events_per_second : float
        Rate of one core used for ``expected_seconds`` (see :func:`events_per_second`).
    expected_seconds : float
        ``expected_events / (events_per_second * min(n_chains, cores))``.
    estimator : str
        The estimator planned for: ``"plain"`` (the time average) or ``"identity"``
        (through the exact identity; see :func:`qtheory.simulate`).
    estimator_note : str
        Why: the predicted variances compared, or why the identity is not used.
    asymptotic_variance_plain, asymptotic_variance_identity : float
        The predicted :math:`\sigma^2` of each estimator (NaN where the identity is not
        defined).
    predicted_coverage : float
        Approximate coverage of the Student 95% interval from these batches, were the
        autocorrelation of the mean queue length exponential with ``correlation_time``
        (:func:`qtheory.statistics.batch_means_coverage`): about 0.939 for 2 x 10
        batches of ten correlation times, 0.95 only for batches much longer.  NaN
        where nothing fluctuates (``lam = 0``).  For the identity estimator, whose
        interval is Willink's, it describes the Student interval of the same batches.
    """

    n_stations: int
    lam: float
    p: float
    t_end: float
    warmup: float
    n_batches: int
    n_chains: int
    s0: object
    start: str
    batch_length: float
    half_width: float
    predicted_half_width: float
    relaxation_time: float
    correlation_time: float
    asymptotic_variance: float
    variance_model: str
    fluid_mean: float
    expected_events: float
    events_per_second: float
    expected_seconds: float
    estimator: str = "plain"
    estimator_note: str = ""
    asymptotic_variance_plain: float = math.nan
    asymptotic_variance_identity: float = math.nan
    predicted_coverage: float = math.nan

    # Mapping protocol: only simulate's keyword arguments.
    def __getitem__(self, key):
        if key not in _KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(_KEYS)

    def __len__(self):
        return len(_KEYS)

    def __eq__(self, other):
        if not isinstance(other, RunPlan):
            return NotImplemented
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                        and np.array_equal(a, b)):
                    return False
            elif a != b and not (a != a and b != b):
                return False
        return True

    __hash__ = None

    def summary(self):
        """A few lines describing the plan (str)."""
        def fmt_t(x):
            return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"

        return "\n".join([
            f"Run plan for N = {self.n_stations}, lam = {self.lam:g}, p = {self.p:g}: "
            f"target 95% half-width {self.half_width:g}",
            f"  start {self.start}; warm-up {fmt_t(self.warmup)} "
            f"(relaxation time 1/mu = {self.relaxation_time:.4g}, "
            f"{self.warmup / self.relaxation_time if self.relaxation_time > 0 else 0:.1f}"
            f" relaxation times)",
            f"  {self.n_chains} chain(s) x {self.n_batches} batches of length "
            f"{fmt_t(self.batch_length)} (correlation time {self.correlation_time:.4g}); "
            f"t_end = {fmt_t(self.t_end)}",
            *([f"  predicted coverage of its Student 95% interval "
               f"{self.predicted_coverage:.3f} (batches of "
               f"{self.batch_length / self.correlation_time:.1f} correlation times)"]
              if math.isfinite(self.predicted_coverage) else []),
            f"  estimator: {self.estimator} ({self.estimator_note})",
            f"  variance model: {self.variance_model}, sigma^2 = "
            f"{self.asymptotic_variance:.4g}; predicted half-width "
            f"{self.predicted_half_width:.3g}",
            f"  expected events {self.expected_events:.3g}, about "
            f"{self.expected_seconds:.3g} s at {self.events_per_second:.3g} events/s "
            f"per core",
        ])

    def __repr__(self):
        return (f"RunPlan(n_stations={self.n_stations}, lam={self.lam!r}, p={self.p!r}, "
                f"t_end={self.t_end:.6g}, warmup={self.warmup:.6g}, "
                f"n_batches={self.n_batches}, n_chains={self.n_chains}, "
                f"start={self.start!r}, estimator={self.estimator!r}, "
                f"predicted_half_width="
                f"{self.predicted_half_width:.4g}, expected_events="
                f"{self.expected_events:.4g})")


def _check_start(start):
    if not isinstance(start, str) or start not in ("empty", "invariant"):
        raise ValueError(f"start must be 'empty' or 'invariant', got {start!r}")
    return start


def _check_estimator(estimator):
    if not isinstance(estimator, str) or estimator not in ("auto", "plain", "identity"):
        raise ValueError(f"estimator must be 'auto', 'plain' or 'identity', got "
                         f"{estimator!r}")
    return estimator


def _choose(n, lam, p, estimator):
    """(name, model dict, note, sigma2 plain, sigma2 identity) for the plan."""
    plain = _runlength.variance_model(n, lam, p)
    valid = _identity_defined(p)
    ident = _runlength.identity_model(n, lam, p) if valid else None
    s2i = ident["sigma2"] if ident else math.nan
    if estimator == "identity":
        if not valid:
            raise ValueError(f"estimator='identity' needs 0 < p < 1 (a fluid top level), "
                             f"got p = {p!r}; use 'plain' or 'auto'")
        return "identity", ident, "asked for", plain["sigma2"], s2i
    if estimator == "plain":
        return "plain", plain, "asked for", plain["sigma2"], s2i
    if not valid:
        why = "p = 0: no fluid top level" if p == 0.0 else "p = 1: no identity"
        return "plain", plain, f"auto; the identity is not defined ({why})", \
            plain["sigma2"], s2i
    if lam <= p or n == 1:
        why = ("lam <= p: the fluid top level is 0 and the identity is the plain "
               "average" if lam <= p else "a single station: an M/M/1 queue")
        return "plain", plain, f"auto; {why}", plain["sigma2"], s2i
    if ident["sigma2"] < plain["sigma2"]:
        return "identity", ident, (f"auto: predicted sigma^2 {ident['sigma2']:.3g} "
                                   f"against {plain['sigma2']:.3g} for the plain "
                                   f"average"), plain["sigma2"], s2i
    return "plain", plain, (f"auto: predicted sigma^2 {plain['sigma2']:.3g} against "
                            f"{ident['sigma2']:.3g} for the identity"), plain["sigma2"], s2i


def _identity_defined(p):
    return 0.0 < p < 1.0


def plan_run(n_stations, lam, p, *, half_width, start="empty", n_batches=20,
             n_chains=None, max_lag1=_runlength.LAG1_TARGET, calibrate=True,
             estimator="auto"):
    r"""Plan a simulation that estimates the mean queue length to a given 95% half-width.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1 (at most 1e9, as for :func:`qtheory.simulate`).
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    half_width : float
        Target half-width of the 95% confidence interval of the mean queue length per
        station (jobs), finite and > 0.
    start : {"empty", "invariant"}, optional
        Initial state: the empty system (default) or the fluid invariant state
        :math:`s^I` rounded to multiples of 1/N.  Either way the warm-up is at least
        three relaxation times: a start at :math:`s^I` is a start at the fluid answer,
        and the finite-N system must have time to leave it.
    n_batches : int, optional
        Total number of batches over all chains, >= 2 (default 20); each chain gets
        ``ceil(n_batches / n_chains)`` (at least 2).
    n_chains : None or int, optional
        Independent chains, >= 1, each with its own warm-up; ``simulate(**plan)`` runs
        them in parallel on the available cores.  ``None`` (default): one per core
        available to this process (:func:`os.sched_getaffinity`), so that a planned run
        uses every core; the plan, and so the result for a given seed, then depends on
        the machine: pass an integer for a plan that does not.
    max_lag1 : float, optional
        Expected lag-1 autocorrelation of the batch means the batch length aims at,
        ``0 < max_lag1 <= 0.1`` (default 0.05): batches of at least
        ``correlation_time / (2 max_lag1)`` (10 correlation times by default, 5 at
        0.1; :func:`qtheory.simulate` flags batches shorter than 5).  A larger value
        halves the run where the batch-length floor decides it (heavy traffic, large
        N), at the price of an interval about ``sqrt(1 + 2 max_lag1)`` too narrow.
        Where the batch-length floor sets the batches (10 correlation times), 20 batch
        means in two chains cover about 0.939 instead of 0.95 (0.938 to 0.944 for 1 to
        16 chains; :func:`qtheory.statistics.batch_means_coverage`, and the simulation
        chapter's coverage study).
    calibrate : bool, optional
        Measure this machine's event rate once per process for ``expected_seconds``
        (about 0.2 s; see :func:`events_per_second`).  False uses the cached or default
        rate.
    estimator : {"auto", "plain", "identity"}, optional
        The estimator of the mean queue length the run is planned for: its variance
        model sets the run length and its correlation time the batch length
        (:func:`qtheory._runlength.identity_model` for the identity).  ``"auto"``
        (default): the one with the smaller predicted variance where the identity is
        defined and differs from the plain average (``0 < p < 1``, ``lam > p``,
        ``N >= 2``), else the plain average; the plan says which and why
        (``estimator``, ``estimator_note``).

    Returns
    -------
    RunPlan
        Also a mapping of simulate's keyword arguments: ``simulate(**plan, seed=1)``.

    Raises
    ------
    ValueError
        If a parameter is out of range (named in the message), ``estimator`` is not one
        of the names above (or ``"identity"`` with ``p = 0`` or ``p = 1``), the plan
        would need more events than :func:`qtheory.simulate` accepts in one call (1e12
        per chain; the message names ``half_width`` and the cost, also for a half-width
        so small that the count overflows), or ``start="invariant"`` needs more memory
        than a call may use (``p = 0`` close to ``lam = 1``: about log(2N)/(1 - lam)
        levels; checked after the budget, before anything is allocated).

    Notes
    -----
    The recipe (module docstring): warm-up :math:`w = \max(3, \ln(d_0/(0.1h)))/\mu`;
    batch length :math:`b \ge \tau/(2\,\text{max\_lag1}) = 10\tau` by default,
    with the correlation time :math:`\tau` of the planned estimator,
    (expected lag-1 autocorrelation about 0.05) and at least 1000 events; measured time :math:`T` per chain such that
    :math:`t_{B-1,0.975}\sqrt{\sigma^2/(N\,k\,T)} \le h` with ``k`` chains and
    ``B = k * n_batches`` batches, and :math:`T \ge` ``n_batches`` :math:`b`.

    Validation (module docstring, ``bench/plan_validation.py``): for N >= 100 and
    p <= 0.2 the realized half-width of every run was 0.54-1.27 times the prediction;
    for N >= 100 and p = 0.6, 0.62-1.88 (under-prediction close to lam = 1); at N = 10
    0.41-3.55, and up to 9 at (0.99, 0.6).  The batch-length floor (10 correlation
    times) often decides the run length in heavy traffic, and then
    ``predicted_half_width`` is below the target.

    References
    ----------
    Law (2015), Ch. 9; Asmussen and Glynn (2007), Ch. IV.5; Whitt (1989); van Kampen
    (2007), Ch. X; Tsitsiklis and Xu (2012).

    Examples
    --------
    >>> plan = plan_run(1000, 0.9, 0.1, half_width=0.05, calibrate=False)
    >>> plan.warmup > 3 * plan.relaxation_time, plan.predicted_half_width <= 0.05
    (True, True)
    """
    n, lam, p = _engine.check_system(n_stations, lam, p)
    h, start, n_batches, k, max_lag1, calibrate, estimator = _check_plan_arguments(
        half_width, start, n_batches, n_chains, max_lag1, calibrate, estimator)
    # 1. the estimator and the model of its variance
    name, model, note, s2_plain, s2_ident = _choose(n, lam, p, estimator)
    mu = model["relaxation_rate"]
    tau = model["correlation_time"]
    sigma2 = model["sigma2"]
    # 2. the warm-up, from the fluid relaxation and the start's distance to equilibrium
    d0 = _runlength.start_distance(n, lam, p, start)
    warmup, relax = _runlength.warmup_rule(mu, lam, d0, h)
    # 3. the batches and the run length for the half-width asked for
    rate = n * (1.0 + lam)
    b_per_chain = max(2, -(-n_batches // k))
    B = b_per_chain * k
    b_min = _runlength.min_batch_length(tau, max_lag1, rate)
    T_total, tq = _runlength.measured_time(sigma2, n, h, B, b_min)
    T_chain = T_total / k
    batch_length = T_chain / b_per_chain
    t_end = warmup + T_chain
    events_chain = rate * t_end
    # 4. within what simulate accepts: the events, then the start state (only after the
    # events: the rounded invariant state of p = 0 has about log(2N)/(1 - lam) levels,
    # checked against the memory budget)
    _check_events(n, h, k, rate, warmup, b_per_chain, b_min, t_end, events_chain)
    levels = _runlength.start_levels(n, lam, p, start)
    _engine.check_run_memory(n, levels, B, min(k, _engine.available_cores()),
                             name="start", what=f"start='{start}' ({levels:,} levels)")
    s0 = _runlength.start_state(n, lam, p, start)
    # 5. what the plan predicts: half-width, time, coverage
    pred = tq * math.sqrt(sigma2 / (n * T_total)) if sigma2 > 0 else 0.0
    eps = events_per_second(measure=calibrate)
    expected_events = k * events_chain
    seconds = expected_events / (eps * min(k, _engine.available_cores()))
    coverage = (batch_means_coverage(batch_length, tau, n_batches=b_per_chain,
                                     n_chains=k).coverage if tau > 0.0 else math.nan)
    return RunPlan(
        n_stations=n, lam=lam, p=p, t_end=float(t_end), warmup=float(warmup),
        n_batches=int(b_per_chain), n_chains=int(k), s0=s0, start=start,
        batch_length=float(batch_length), half_width=h, predicted_half_width=float(pred),
        relaxation_time=float(relax), correlation_time=float(tau),
        asymptotic_variance=float(sigma2), variance_model=model["model"],
        fluid_mean=float(model["fluid_mean"]), expected_events=float(expected_events),
        events_per_second=float(eps), expected_seconds=float(seconds),
        estimator=name, estimator_note=note,
        asymptotic_variance_plain=float(s2_plain),
        asymptotic_variance_identity=float(s2_ident),
        predicted_coverage=float(coverage),
    )


def _check_plan_arguments(half_width, start, n_batches, n_chains, max_lag1, calibrate,
                          estimator):
    """plan_run's arguments other than the system, checked: (h, start, n_batches, k,
    max_lag1, calibrate, estimator), k the number of chains (one per core for None)."""
    h = check_real(half_width, "half_width", low=0.0, low_open=True, high=math.inf,
                   high_open=True)
    start = _check_start(start)
    n_batches = check_positive_int(n_batches, "n_batches", minimum=2)
    if n_batches > 10**6:
        raise ValueError(f"n_batches must be an integer in [2, 1e6], got {n_batches}")
    if n_chains is None:
        k = _engine.available_cores()
    else:
        k = check_positive_int(n_chains, "n_chains")
        if k > 10**4:
            raise ValueError(f"n_chains must be None (one per core) or an integer in "
                             f"[1, 1e4], got {k}")
    max_lag1 = check_real(max_lag1, "max_lag1", low=0.0, low_open=True, high=0.1)
    if not isinstance(calibrate, (bool, np.bool_)):
        raise ValueError(f"calibrate must be True or False, got {calibrate!r}")
    return h, start, n_batches, k, max_lag1, calibrate, _check_estimator(estimator)


def _check_events(n, h, k, rate, warmup, b_per_chain, b_min, t_end, events_chain):
    """Refuse a plan whose chains would exceed simulate's cap on events, saying whether
    a larger half-width or more chains can help."""
    if math.isfinite(events_chain) and events_chain <= _engine.MAX_EVENTS:
        return
    floor_events = rate * (warmup + b_per_chain * b_min)
    why = (f"ask for a larger half_width or use more chains (n_chains)"
           if floor_events <= _engine.MAX_EVENTS else
           f"even the shortest valid run (warm-up {warmup:.3g} and {b_per_chain} "
           f"batches of 10 correlation times, {floor_events:.3g} events) is too "
           f"long at N = {n}: no half_width helps; use fewer stations")
    need = (f"about {k * events_chain:.3g} events ({events_chain:.3g} per chain, "
            f"t_end = {t_end:.3g})" if math.isfinite(events_chain) else
            "more events than double precision counts")
    raise ValueError(
        f"half_width = {h:g} needs {need}: more than the "
        f"{_engine.MAX_EVENTS:.0e} per chain that simulate accepts; {why}")
