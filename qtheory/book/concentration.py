r"""How the stationary laws of N-station systems concentrate on the invariant state.

Theorem 3.7 of Tsitsiklis and Xu (2012) (the interchange of limits) says that the
stationary occupancy vector :math:`s^N` of the N-station system converges in
distribution to the invariant state :math:`s^I` of the fluid model as
:math:`N \to \infty`.  It gives no rate.  :func:`concentration_study` measures one: for a
list of N it computes, exactly (by :func:`qtheory.exact_stationary`) while the state
space is small and by simulation (:func:`qtheory.simulate`, :func:`qtheory.sample_path`)
beyond,

- the mean queue length per station and its excess over the fluid value
  :math:`v^I_1`;
- the expected distance :math:`E\|s^N - s^I\|_1 = E\sum_{i\ge1}|s^N_i - s^I_i|`;
- the bias :math:`\|E s^N - s^I\|_1`;
- the spill-over :math:`E s^N_{i^*+1}` above the fluid top level :math:`i^*`;

and :func:`fit_power_law` fits :math:`c N^{-\alpha}` to any of them.

Finite-N effects (see the steady-state chapter): at a critical top level
(:math:`\lambda s^I_{i^*} = p`, e.g. :math:`\lambda = 0.9, p = 0.1`) the spill-over and
the mean excess shrink like :math:`N^{-1/2}`; when :math:`\lambda < p` the fluid state
is empty but an :math:`O(1/N)` remnant of about :math:`(\lambda/(p-\lambda))/N` jobs per
station stays.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from .. import _invariant as _inv
from .._validation import check_flag, check_lam, check_p, check_positive_int, check_real, \
    check_seed, check_size, count_text, real_array
from ..exact import exact_state_space_size, exact_stationary
from ..simulation import sample_path, simulate
from ..statistics import batch_means, correlation_threshold

__all__ = ["ConcentrationResult", "concentration_study", "fit_power_law",
           "auto_max_queue"]


def fit_power_law(n, y):
    r"""Least-squares fit of :math:`y \approx c N^{-\alpha}` on a log-log scale.

    Parameters
    ----------
    n : array_like of float, shape (m,)
        Numbers of stations, positive, at least two distinct values.
    y : array_like of float, shape (m,)
        Positive values.

    Returns
    -------
    alpha : float
        Decay exponent (positive when y decreases with N).
    c : float
        Prefactor.

    Raises
    ------
    ValueError
        If the arrays differ in shape, hold anything but real numbers (strings, bools,
        complex), fewer than two distinct N, or non-positive or non-finite values.
    """
    n = real_array(n, "n")
    y = real_array(y, "y")
    if n.shape != y.shape or n.ndim != 1:
        raise ValueError("n and y must be 1-D arrays of the same shape")
    if np.unique(n).size < 2:
        raise ValueError("fit_power_law needs at least two distinct values of n")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(y)) and np.all(n > 0)
            and np.all(y > 0)):
        raise ValueError("n and y must be finite and positive")
    slope, intercept = np.polyfit(np.log(n), np.log(y), 1)
    return float(-slope), float(math.exp(intercept))


def auto_max_queue(n_stations, lam, p, *, boundary_target=1e-8, start=30,
                   max_states=200_000, memory_limit=4 * 10**9):
    r"""Smallest truncation level (found by extrapolation) with negligible boundary mass.

    Solves at ``start``, extrapolates the geometric tail of the law of the longest queue
    to the level where :math:`P(M = K)` falls below ``boundary_target``, and re-solves
    (up to four times, each time raising K by at least 20%) until the boundary mass is
    below the target.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam, p : float
        As for :func:`qtheory.exact_stationary`.
    boundary_target : float
        Target for ``boundary_mass``, in (0, 1).
    start : int
        First truncation level tried, >= 2.
    max_states : int
        Largest state space allowed.
    memory_limit : float
        As for :func:`qtheory.exact_stationary`.

    Returns
    -------
    ExactResult
        The solution at the level found (``result.max_queue``).

    Raises
    ------
    ValueError
        If the inputs are out of range, or the level needed exceeds ``max_states``
        states (the message gives both).
    """
    n = check_positive_int(n_stations, "n_stations")
    target = check_real(boundary_target, "boundary_target", low=0.0, high=1.0,
                        low_open=True, high_open=True)
    K = check_positive_int(start, "start", minimum=2)
    max_states = check_positive_int(max_states, "max_states")
    # A long queue gets lam and is served at about 1 + (N - 1) p, so P(M = K) decays no
    # faster than about (lam / (1 + (N - 1) p))**K: refuse at once when even 80% of the
    # level this predicts exceeds the budget.
    lam_ = check_lam(lam)
    rho_h = lam_ / (1.0 + (n - 1) * check_p(p))
    if 0.0 < rho_h < 1.0:
        k_low = max(2, int(0.8 * math.log(target) / math.log(rho_h)))
        if exact_state_space_size(n, k_low) > max_states:
            raise ValueError(
                f"n_stations={n} needs max_queue of at least about {k_low} for boundary "
                f"mass below {target:g}: "
                f"{count_text(exact_state_space_size(n, k_low))} states > "
                f"max_states={max_states}")
        K = max(K, k_low)  # below k_low the law of M is not yet geometric
    # start no higher than the state budget allows: the largest K <= start within it
    # (the size grows with K; bisection, so that a huge start costs no long loop)
    if K > 2 and exact_state_space_size(n, K) > max_states:
        lo, hi = 2, K
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if exact_state_space_size(n, mid) > max_states:
                hi = mid
            else:
                lo = mid
        K = lo
    for _ in range(5):
        if exact_state_space_size(n, K) > max_states:
            raise ValueError(
                f"n_stations={n} needs max_queue >= {K} for boundary mass below "
                f"{target:g}: {count_text(exact_state_space_size(n, K))} states > "
                f"max_states={max_states}")
        # the boundary mass is checked against `target` here, so no TruncationWarning
        r = exact_stationary(n, lam, p, max_queue=K, memory_limit=memory_limit,
                             truncation_tol=1.0)
        if r.boundary_mass <= target:
            return r
        law = r.longest_queue_law
        # geometric fit of the law of M on the upper half of the levels, stopping a few
        # levels short of the boundary where blocking distorts it
        lv = np.arange(max(1, K // 2), max(2, K - 2))
        lv = lv[law[lv] > 0]
        if lv.size >= 2:
            slope, icpt = np.polyfit(lv, np.log(law[lv]), 1)
            rho = min(max(math.exp(slope), 1e-3), 0.999)
            need = (math.log(target) - icpt) / math.log(rho) + 1
        else:
            need = 2 * K
        K = int(max(math.ceil(need), K + max(2, K // 10)))
    raise ValueError(f"no truncation level found for n_stations={n} with boundary mass "
                     f"below {target:g}")


@dataclass(frozen=True)
class ConcentrationResult:
    r"""Stationary summaries of N-station systems against N (one row per N).

    Attributes
    ----------
    lam, p : float
        The inputs.
    invariant_state : ndarray of float64, shape (i* + 1,)
        :math:`s^I`.
    fluid_mean : float
        :math:`v^I_1`, the fluid mean queue length per station.
    top_level : int
        :math:`i^*` (the last level with :math:`s^I_i > 0`; 0 if the state is empty).
    n_stations : ndarray of int64, shape (m,)
    method : ndarray of str, shape (m,)
        ``"exact"`` or ``"simulation"``.
    mean_queue_length, mean_half_width : ndarray of float64, shape (m,)
        Stationary mean queue per station and the 95% half-width (0 when exact).
    distance, distance_half_width : ndarray of float64, shape (m,)
        :math:`E\|s^N - s^I\|_1` and its 95% half-width (0 when exact).
    bias : ndarray of float64, shape (m,)
        :math:`\|E s^N - s^I\|_1`.
    spill, spill_half_width : ndarray of float64, shape (m,)
        :math:`E s^N_{i^*+1}` and its half-width.
    boundary_mass : ndarray of float64, shape (m,)
        Truncation boundary mass (exact rows; NaN for simulated rows).
    t_end, warmup : ndarray of float64, shape (m,)
        Run lengths of simulated rows (NaN for exact rows).
    lag1 : ndarray of float64, shape (m,)
        Lag-1 autocorrelation of the batch means of the mean queue length (simulated
        rows; NaN for exact rows).  Above
        :func:`qtheory.statistics.correlation_threshold` the batches are too short and
        the intervals too narrow.
    """

    lam: float
    p: float
    invariant_state: np.ndarray = field(repr=False)
    fluid_mean: float
    top_level: int
    n_stations: np.ndarray
    method: np.ndarray
    mean_queue_length: np.ndarray
    mean_half_width: np.ndarray
    distance: np.ndarray
    distance_half_width: np.ndarray
    bias: np.ndarray
    spill: np.ndarray
    spill_half_width: np.ndarray
    boundary_mass: np.ndarray
    t_end: np.ndarray
    warmup: np.ndarray
    lag1: np.ndarray

    @property
    def mean_excess(self):
        """``mean_queue_length - fluid_mean``, shape (m,)."""
        return self.mean_queue_length - self.fluid_mean

    def fit(self, quantity, *, n_min=1, n_max=math.inf):
        r"""Fit :math:`c N^{-\alpha}` to a column over ``n_min <= N <= n_max``.

        Parameters
        ----------
        quantity : {"distance", "bias", "spill", "mean_excess", "mean_queue_length"}
        n_min, n_max : float
            Range of N used.

        Returns
        -------
        alpha, c : float
            See :func:`fit_power_law`.

        Raises
        ------
        ValueError
            For an unknown quantity, or fewer than two usable rows (positive values).
        """
        names = ("distance", "bias", "spill", "mean_excess", "mean_queue_length")
        n_min = check_real(n_min, "n_min", low=0.0)
        n_max = check_real(n_max, "n_max", low=0.0)
        if not isinstance(quantity, str) or quantity not in names:
            raise ValueError(f"quantity must be one of {names}, got {quantity!r}")
        y = np.asarray(getattr(self, quantity), dtype=np.float64)
        n = self.n_stations.astype(np.float64)
        keep = (n >= n_min) & (n <= n_max) & (y > 0)
        return fit_power_law(n[keep], y[keep])

    def plot(self, ax=None, *, quantities=("distance", "spill", "mean_excess")):
        """Log-log plot of the chosen columns against N, exact and simulated rows marked.

        Parameters
        ----------
        ax : matplotlib Axes, optional
        quantities : sequence of str
            Columns to plot (as for :meth:`fit`); non-positive values are left out.

        Returns
        -------
        matplotlib Axes
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6.4, 4.2))
        labels = {"distance": r"$E\|s^N - s^I\|_1$",
                  "bias": r"$\|E s^N - s^I\|_1$",
                  "spill": r"$E\, s^N_{i^*+1}$",
                  "mean_excess": r"$E[\mathrm{mean\ queue}] - v^I_1$",
                  "mean_queue_length": "mean queue per station"}
        hw = {"distance": self.distance_half_width, "spill": self.spill_half_width,
              "mean_excess": self.mean_half_width,
              "mean_queue_length": self.mean_half_width,
              "bias": np.zeros_like(self.bias)}
        n = self.n_stations.astype(float)
        exact = self.method == "exact"
        for k, qn in enumerate(quantities):
            y = np.asarray(getattr(self, qn), dtype=float)
            color = f"C{k}"
            ok = y > 0
            ax.plot(n[exact & ok], y[exact & ok], "o", color=color, mfc="none",
                    label=labels[qn] + " (exact)")
            sim = ~exact & ok
            if sim.any():
                ax.errorbar(n[sim], y[sim], yerr=hw[qn][sim], fmt="s", color=color,
                            ms=4, capsize=2, label=labels[qn] + " (simulation)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("number of stations $N$")
        ax.set_title(rf"$\lambda = {self.lam:g},\ p = {self.p:g}$")
        ax.legend(fontsize=8)
        return ax


def concentration_study(lam, p, n_values, *, exact_max_states=200_000,
                        boundary_target=1e-8, events_per_run=5e7, warmup_fraction=0.2,
                        n_batches=10, n_snapshots=400, seed=None, progress=False):
    r"""Stationary mean, distance to the invariant state and spill-over against N.

    Rows with a state space of at most ``exact_max_states`` states (at a truncation
    level whose boundary mass is below ``boundary_target``) are solved exactly; the
    others are simulated, starting at the invariant state (rounded to multiples of 1/N).

    Each simulated row makes two runs of about ``events_per_run`` uniformized events
    each: :func:`qtheory.simulate` for the time averages of ``s`` (the mean queue length,
    the spill-over and the bias) and :func:`qtheory.sample_path` for ``n_snapshots``
    equally spaced snapshots of :math:`\|s^N(t) - s^I\|_1` (the expected distance).  A
    run therefore covers :math:`T = E/(N(1+\lambda))` time units, with :math:`E` =
    ``events_per_run``, of which the first ``warmup_fraction`` is discarded; intervals
    are 95% batch means over ``n_batches`` batches.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    n_values : array_like of int, shape (m,)
        Numbers of stations, each >= 1.
    exact_max_states : int
        Largest state space solved exactly.
    boundary_target : float
        Truncation boundary mass required of exact rows, in (0, 1).
    events_per_run : float
        Uniformized events per simulation run, in ``[1e4, 1e12]`` (the simulator's limit
        for one call); about 1.5e8 events take one second on the reference machine.
    warmup_fraction : float
        Fraction of each run discarded, in [0, 1).
    n_batches : int
        Batches for the intervals, in ``[2, 1e4]``.
    n_snapshots : int
        Snapshots per run for the distance, a multiple of ``n_batches``, at most 1e5.
    seed : None, int or numpy.random.SeedSequence
        Row k uses the k-th child of the seed sequence; the same seed gives the same
        result.
    progress : bool
        Show a tqdm bar over the rows.

    Returns
    -------
    ConcentrationResult

    Raises
    ------
    ValueError
        For parameters out of range (named in the message).

    Warns
    -----
    RuntimeWarning
        When the batch means of a simulated row are correlated (lag-1 autocorrelation
        above :func:`qtheory.statistics.correlation_threshold`): that row's intervals are
        too narrow.  The simulator's own per-run warnings are collected into this one.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3.7 (concentration of the stationary laws on the
    invariant state) and Section 3.3; the book's steady-state chapter (the finite-N effects).
    """
    progress = check_flag(progress, "progress")
    lam = check_lam(lam)
    p = check_p(p)
    # the entries as given (np.asarray would turn [True, 2] into [1, 2])
    if isinstance(n_values, np.ndarray):
        if n_values.ndim > 1:
            raise ValueError("n_values must be a non-empty 1-D sequence of integers >= 1")
        entries = list(np.atleast_1d(n_values))
    elif isinstance(n_values, (list, tuple, range)):
        entries = list(n_values)
    else:
        entries = [n_values]
    if not entries:
        raise ValueError("n_values must be a non-empty 1-D sequence of integers >= 1")
    n_list = np.array([check_positive_int(v, "n_values") for v in entries], dtype=np.int64)
    exact_max_states = check_positive_int(exact_max_states, "exact_max_states")
    events = check_real(events_per_run, "events_per_run", low=1e4, high=1e12)
    boundary_target = check_real(boundary_target, "boundary_target", low=0.0, high=1.0,
                                 low_open=True, high_open=True)
    wf = check_real(warmup_fraction, "warmup_fraction", low=0.0, high=1.0,
                    high_open=True)
    n_batches = check_size(n_batches, "n_batches", minimum=2, maximum=10_000,
                           what="each batch is a row of every simulated result")
    n_snapshots = check_size(n_snapshots, "n_snapshots", minimum=2, maximum=100_000,
                             what="each snapshot is a row of a sample path")
    if n_snapshots % n_batches:
        raise ValueError(f"n_snapshots must be a multiple of n_batches={n_batches}, got "
                         f"{n_snapshots}")
    ss = check_seed(seed)
    children = ss.spawn(n_list.size)

    sI = _inv.invariant_state(lam, p)
    istar = sI.size - 1
    v1 = _inv.mean_queue_length(lam, p)
    rows = []
    it = range(n_list.size)
    if progress:
        from tqdm.auto import tqdm
        it = tqdm(it, desc="N values")
    for k in it:
        n = int(n_list[k])
        row = None
        if exact_state_space_size(n, 2) <= exact_max_states:
            try:
                r = auto_max_queue(n, lam, p, boundary_target=boundary_target,
                                   max_states=exact_max_states)
            except ValueError:
                r = None
            if r is not None:
                L = max(r.max_queue, istar) + 1
                es = np.zeros(L + 1)
                es[: r.s.size] = r.s
                tI = np.zeros(L + 1)
                tI[: sI.size] = sI
                row = dict(method="exact", mean=r.mean_queue_length, mean_hw=0.0,
                           dist=r.expected_distance(sI), dist_hw=0.0,
                           bias=float(np.abs(es - tI)[1:].sum()),
                           spill=float(es[istar + 1]), spill_hw=0.0,
                           boundary=r.boundary_mass, t_end=math.nan, warmup=math.nan,
                           lag1=math.nan)
        if row is None:
            t_end = events / (n * (1.0 + lam))
            warm = wf * t_end
            s0 = sI if istar > 0 else None
            a, b = children[k].spawn(2)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sim = simulate(n, lam, p, t_end=t_end, warmup=warm, seed=a,
                               n_batches=n_batches, s0=s0)
                times = np.linspace(warm, t_end, n_snapshots + 1)[1:]
                path = sample_path(n, lam, p, times, s0=s0, seed=b)
            L = max(sim.s.size, path.shape[1], istar + 2)
            tI = np.zeros(L)
            tI[: sI.size] = sI
            es = np.zeros(L)
            es[: sim.s.size] = sim.s
            bs = np.zeros((n_batches, L))
            bs[:, : sim.batch_s.shape[1]] = sim.batch_s
            sp = np.zeros((n_snapshots, L))
            sp[:, : path.shape[1]] = path
            d = np.abs(sp - tI)[:, 1:].sum(axis=1)
            dsum = batch_means(d.reshape(n_batches, -1).mean(axis=1))
            spill = batch_means(bs[:, istar + 1])
            row = dict(method="simulation", mean=sim.mean_queue_length,
                       mean_hw=0.5 * (sim.ci[1] - sim.ci[0]),
                       dist=dsum.mean, dist_hw=dsum.half_width,
                       bias=float(np.abs(es - tI)[1:].sum()),
                       spill=spill.mean, spill_hw=spill.half_width,
                       boundary=math.nan, t_end=t_end, warmup=warm,
                       lag1=sim.lag1)
        rows.append(row)

    lag = np.array([r["lag1"] for r in rows])
    bad = n_list[np.isfinite(lag) & (lag > correlation_threshold(n_batches))]
    if bad.size:
        warnings.warn(
            f"concentration_study: the batch means are correlated for N = "
            f"{', '.join(str(int(v)) for v in bad)} (see .lag1): their intervals are too "
            "narrow; raise events_per_run", RuntimeWarning, stacklevel=2)

    def col(key, dtype=np.float64):
        return np.array([r[key] for r in rows], dtype=dtype)

    return ConcentrationResult(
        lam=lam, p=p, invariant_state=sI, fluid_mean=v1, top_level=istar,
        n_stations=n_list, method=col("method", object).astype(str),
        mean_queue_length=col("mean"), mean_half_width=col("mean_hw"),
        distance=col("dist"), distance_half_width=col("dist_hw"), bias=col("bias"),
        spill=col("spill"), spill_half_width=col("spill_hw"),
        boundary_mass=col("boundary"), t_end=col("t_end"), warmup=col("warmup"),
        lag1=col("lag1"))
