r"""Output analysis for steady-state simulation: batch means and their diagnostics.

A long run after warm-up is cut into ``B`` batches of equal length; the batch averages
:math:`\bar X_1, \dots, \bar X_B` are nearly independent and nearly normal when the
batches are much longer than the correlation time of the process, and then

.. math:: \bar X \pm t_{B-1, 0.975}\, \frac{S}{\sqrt{B}}

is an approximate 95% confidence interval for the steady-state mean (:math:`S` the sample
standard deviation of the batch means).  The method's known failure is batches that are
too short: the batch means are then positively correlated and the interval too narrow.
The lag-1 autocorrelation of the batch means is the standard diagnostic.  A second
failure is skewed batch means with few batches: a run whose batch means are low on the
whole then tends to have a small spread among them as well, the Student interval around
it is too narrow, and it misses on one side more often than on the other.
``batch_means(..., skew_adjusted=True)`` gives Willink's skewness-adjusted interval for
that case.

References
----------
Asmussen and Glynn (2007), *Stochastic Simulation*, Ch. IV.5 (batch means);
Whitt (1989), "Planning queueing simulations" (run lengths in heavy traffic);
Willink (2005), "A confidence interval and test for the mean of an asymmetric
distribution", Communications in Statistics: Theory and Methods 34(4), 753-766.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._validation import check_positive_int, check_real, real_array

__all__ = [
    "BatchMeansSummary",
    "BatchCorrelationEffect",
    "batch_means",
    "batch_means_coverage",
    "lag1_autocorrelation",
    "correlation_threshold",
    "mm1_relaxation_time",
    "mm1_asymptotic_variance",
]


@dataclass(frozen=True)
class BatchMeansSummary:
    """Point estimate, confidence interval and diagnostics from batch means.

    Attributes
    ----------
    mean : float
        Average of the batch means (equal batch lengths: the overall average).
    ci : tuple of float
        ``(low, high)``, the Student-t interval at ``level`` (or Willink's
        skewness-adjusted one, which is not centred on ``mean``).
    half_width : float
        ``(high - low) / 2``.
    level : float
        Confidence level, e.g. 0.95.
    n_batches : int
        Number of batches B.
    lag1 : float
        Lag-1 autocorrelation of the batch means (NaN when undefined).
    """

    mean: float
    ci: tuple
    half_width: float
    level: float
    n_batches: int
    lag1: float


def _pow2_scale(x):
    """A power of 2 near max |x| (1.0 for an all-zero array): dividing by it is exact."""
    top = float(np.max(np.abs(x)))
    if top == 0.0:
        return 1.0
    return math.ldexp(1.0, math.frexp(top)[1] - 1)  # top/scale in [1, 2)


def lag1_autocorrelation(x):
    r"""Lag-1 sample autocorrelation :math:`\hat\rho_1` of a sequence.

    Parameters
    ----------
    x : array_like of float, shape (B,)

    Returns
    -------
    float
        :math:`\sum_{b<B} (x_b - \bar x)(x_{b+1} - \bar x) / \sum_b (x_b - \bar x)^2`;
        NaN when ``B < 3`` or the sequence is constant.

    References
    ----------
    Asmussen and Glynn (2007), Ch. IV.5.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"x must be one-dimensional, got shape {x.shape}")
    if x.size < 3:
        return math.nan
    if np.all(np.isfinite(x)):
        x = x / _pow2_scale(x)  # the correlation is scale-free; no overflow near 1e308
    d = x - x.mean()
    den = float(np.dot(d, d))
    if den == 0.0:
        return math.nan
    return float(np.dot(d[:-1], d[1:]) / den)


def correlation_threshold(n_batches, *, base=0.1):
    r"""Level above which a lag-1 autocorrelation of batch means is flagged.

    Under independence :math:`\hat\rho_1` has mean about :math:`-1/B` and standard
    deviation about :math:`1/\sqrt{B}`, so with few batches values far above 0.1 occur
    by chance.  The threshold is ``max(base, -1/B + 1.645/sqrt(B))``: a one-sided 5%
    test when B is small, the conventional 0.1 when B is large (B >= about 200).

    Parameters
    ----------
    n_batches : int
        Number of batches B >= 2.
    base : float
        The conventional threshold.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``n_batches`` is not an integer >= 2 or ``base`` is not a real number.
    """
    b = float(check_positive_int(n_batches, "n_batches", minimum=2))
    base = check_real(base, "base")
    return max(base, -1.0 / b + 1.6448536269514722 / math.sqrt(b))


def batch_means(batch_values, *, level=0.95, skew_adjusted=False):
    r"""Confidence interval for a steady-state mean from equal-length batch means.

    Parameters
    ----------
    batch_values : array_like of float, shape (B,)
        Batch averages, B >= 2 (B >= 3 with ``skew_adjusted``), finite.
    level : float
        Confidence level in (0, 1).
    skew_adjusted : bool, optional
        False (default): the Student interval
        :math:`\bar X \pm t_{B-1}\, S/\sqrt B`.  True: Willink's interval for the mean
        of an asymmetric distribution, which corrects the Student interval for the
        skewness of the batch means: with the unbiased third central moment
        :math:`\hat\mu_3 = \frac{B}{(B-1)(B-2)} \sum_b (\bar X_b - \bar X)^3`,
        :math:`a = \hat\mu_3 / (6 \sqrt B S^3)` and
        :math:`G(r) = ((1 + 6a(r - a))^{1/3} - 1)/(2a)` (real cube root;
        :math:`G(r) = r` at :math:`a = 0`, and :math:`r - a(1 + 2r^2)` to first order in
        :math:`a` for :math:`|a| < 10^{-6}`), the interval is
        :math:`[\bar X - G(t_{B-1}) S/\sqrt B,\ \bar X - G(-t_{B-1}) S/\sqrt B]`.
        For right-skewed batch means it reaches further above the mean than below.

    Returns
    -------
    BatchMeansSummary
        ``half_width`` is half the interval's length in both cases.

    Raises
    ------
    ValueError
        If fewer than two batches (three with ``skew_adjusted``), non-finite values, or
        ``level`` outside (0, 1).

    References
    ----------
    Asmussen and Glynn (2007), Ch. IV.5, eq. (5.2); Willink (2005), Communications in
    Statistics: Theory and Methods 34(4), 753-766 (the skewness-adjusted interval).
    """
    x = real_array(batch_values, "batch_values")
    if x.ndim != 1 or x.size < 2:
        raise ValueError("batch_values must be a 1-D array with at least 2 batches")
    if not isinstance(skew_adjusted, (bool, np.bool_)):
        raise ValueError(f"skew_adjusted must be True or False, got {skew_adjusted!r}")
    if skew_adjusted and x.size < 3:
        raise ValueError("batch_values must hold at least 3 batches for the "
                         "skewness-adjusted interval (skew_adjusted=True)")
    if not np.all(np.isfinite(x)):
        raise ValueError("batch_values must be finite")
    level = check_real(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    b = x.size
    # the batch means divided by a power of 2 near their largest magnitude (exact: the
    # results are those of the unscaled values, bit for bit), so that neither the mean
    # nor the squares overflow for values near the float range (no RuntimeWarning leaks)
    scale = _pow2_scale(x)
    xs = x / scale
    m = float(xs.mean()) * scale
    sd = float(xs.std(ddof=1)) * scale
    tq = float(stats.t.ppf(0.5 + level / 2.0, b - 1))
    se = sd / math.sqrt(b)
    if skew_adjusted and sd > 0.0:
        # a is scale-free: computed from the scaled values
        ms, sds = float(xs.mean()), float(xs.std(ddof=1))
        mu3 = b * float(np.sum((xs - ms) ** 3)) / ((b - 1) * (b - 2))
        a = mu3 / (6.0 * math.sqrt(b) * sds ** 3)
        lo, hi = m - _willink_g(tq, a) * se, m - _willink_g(-tq, a) * se
        return BatchMeansSummary(m, (lo, hi), (hi - lo) / 2.0, level, b,
                                 lag1_autocorrelation(x))
    h = tq * se
    return BatchMeansSummary(m, (m - h, m + h), h, level, b, lag1_autocorrelation(x))


@dataclass(frozen=True)
class BatchCorrelationEffect:
    """What finite batches do to the Student batch-means interval
    (:func:`batch_means_coverage`).

    Attributes
    ----------
    variance_ratio : float
        Expected squared standard error ``E[S^2] / B`` over the variance of the overall
        mean: below 1 when the batches are correlated (the interval is then too narrow
        by about ``sqrt(variance_ratio)``).
    lag1 : float
        Correlation of two adjacent batch means of one chain (about
        ``correlation_time / (2 batch_length)`` for long batches).
    coverage : float
        Approximate probability that the Student interval at ``level`` contains the mean.
    """

    variance_ratio: float
    lag1: float
    coverage: float


def batch_means_coverage(batch_length, correlation_time, *, n_batches=20, n_chains=1,
                         level=0.95):
    r"""Coverage of the Student batch-means interval when the batches are finite.

    For a stationary process with variance :math:`v` and exponential autocorrelation
    :math:`e^{-|u|/\tau}` (an Ornstein-Uhlenbeck process), batches of length :math:`b`
    in ``n_chains`` independent chains of ``n_batches`` batches each, with
    :math:`x = b/\tau` and :math:`q = e^{-x}`, have (by integrating the autocovariance
    over one batch and over two batches)

    .. math::

        \operatorname{Var} \bar X_i = \frac{2v}{x}\Bigl(1 - \frac{1-q}{x}\Bigr),

    .. math::

        \operatorname{Cov}(\bar X_i, \bar X_{i+k}) = v\,\frac{(1-q)^2}{x^2}\,q^{k-1}
        \quad (k \ge 1,\ \text{same chain}).

    With :math:`B` = ``n_chains * n_batches`` batch means in all and :math:`\bar X`
    their average, :math:`E\,S^2 = B(\operatorname{Var}\bar X_i -
    \operatorname{Var}\bar X)/(B-1)` exactly (whatever the correlations), so the
    interval's squared standard error :math:`S^2/B` has expectation
    ``variance_ratio`` times :math:`\operatorname{Var}\bar X`.  The coverage treats
    :math:`S^2/E S^2` as :math:`\chi^2_{B-1}/(B-1)`, independent of :math:`\bar X`
    (an approximation, exact for independent normal batch means):
    :math:`P(|T_{B-1}| \le t_{B-1,(1+\ell)/2}\sqrt{r})` with :math:`r` the variance
    ratio and :math:`\ell` = ``level``.  For batches of ten correlation times, the
    shortest the plans use, 20 batch means in two chains give about 0.939 instead of
    0.95; dividing the half-width by :math:`\sqrt r` would correct it under this model.

    For the queue, take :math:`\tau` to be the mean lag
    :math:`\int_0^\infty u\,C(u)\,du / \int_0^\infty C(u)\,du` of its
    autocovariance :math:`C` (the ``correlation_time`` of :func:`qtheory.plan_run`):
    for any autocovariance with exponential tails, the variance of a batch mean and
    the covariance of adjacent ones agree with this model's to first order in
    :math:`\tau/b`, since both depend on :math:`C` at that order only through
    :math:`\int C` and :math:`\int u\,C`.

    Parameters
    ----------
    batch_length : float
        Batch length b > 0 (time in mean service times, or any unit shared with
        ``correlation_time``).
    correlation_time : float
        The process's correlation time :math:`\tau > 0`, same unit.
    n_batches : int, optional
        Batches per chain, at least 1 (default 20), with at least 2 batch means in all.
    n_chains : int, optional
        Independent chains, at least 1 (default 1), as in :func:`qtheory.simulate`.
    level : float, optional
        Confidence level in (0, 1) (default 0.95).

    Returns
    -------
    BatchCorrelationEffect
        ``variance_ratio`` and ``lag1`` exact under the model (to a relative 1e-7 or
        better for ``batch_length / correlation_time >= 1e-9``); ``coverage``
        approximate, as above.

    Raises
    ------
    ValueError
        If ``batch_length`` or ``correlation_time`` is not a positive finite number, a
        count is not a whole number in its range, fewer than two batch means in all, or
        ``level`` is outside (0, 1).

    References
    ----------
    The formulas are derived here (the autocovariance integrated over the batches).
    Batch means: Asmussen and Glynn (2007), Ch. IV.5; the effect of the batch size on
    coverage: Schmeiser (1982), "Batch size effects in the analysis of simulation
    output", Operations Research 30(3), 556-568.
    """
    b = check_real(batch_length, "batch_length", low=0.0, low_open=True,
                   high=math.inf, high_open=True)
    tau = check_real(correlation_time, "correlation_time", low=0.0, low_open=True,
                     high=math.inf, high_open=True)
    m = check_positive_int(n_batches, "n_batches", minimum=1)
    k = check_positive_int(n_chains, "n_chains", minimum=1)
    if m > 10**6:
        raise ValueError(f"n_batches must be an integer in [1, 1e6], got {m}")
    if k > 10**6:
        raise ValueError(f"n_chains must be an integer in [1, 1e6], got {k}")
    if m * k < 2:
        raise ValueError("n_batches * n_chains must be at least 2 (batch means in all)")
    level = check_real(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    x = b / tau
    if not 0.0 < x < math.inf:  # finite inputs whose ratio overflows or underflows
        raise ValueError("batch_length / correlation_time must be a positive finite "
                         f"ratio, got {b!r} / {tau!r}")
    one_q = -math.expm1(-x)  # 1 - q, without cancellation for short batches
    # Var of a batch mean and the adjacent covariance, in units of v (the formulas
    # above; the series of 2/x (1 - (1 - q)/x) where the closed form cancels)
    var_b = (2.0 / x * (1.0 - one_q / x) if x > 1e-3
             else 1.0 - x / 3.0 + x * x / 12.0 - x ** 3 / 60.0)
    cov1 = (one_q / x) ** 2
    lags = np.arange(1, m, dtype=np.float64)  # sum over lags k of (m - k) q^(k - 1)
    s = float(np.sum((m - lags) * np.exp(-x * (lags - 1.0))))
    var_chain = (m * var_b + 2.0 * cov1 * s) / (m * m)
    var_all = var_chain / k
    total = m * k
    es2 = total * (var_b - var_all) / (total - 1)
    ratio = es2 / total / var_all
    tq = float(stats.t.ppf(0.5 + level / 2.0, total - 1))
    cover = float(2.0 * stats.t.cdf(tq * math.sqrt(ratio), total - 1) - 1.0)
    return BatchCorrelationEffect(float(ratio), float(cov1 / var_b), cover)


def _willink_g(r, a):
    """Willink's (2005) G(r) = ((1 + 6a(r - a))^(1/3) - 1) / (2a), real cube root."""
    if abs(a) < 1e-6:  # the first-order expansion: exact to O(a^2), no cancellation
        return r - a * (1.0 + 2.0 * r * r)
    return (float(np.cbrt(1.0 + 6.0 * a * (r - a))) - 1.0) / (2.0 * a)


def mm1_relaxation_time(rho):
    r"""Relaxation time :math:`1/(1-\sqrt\rho)^2` of an M/M/1 queue (service rate 1).

    The distance of the queue-length law from equilibrium decays like
    :math:`e^{-t/\tau}` with this :math:`\tau`; it grows like :math:`4/(1-\rho)^2` in heavy
    traffic.  Used to judge warm-up periods.

    Parameters
    ----------
    rho : float
        Load, ``0 <= rho < 1``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``rho`` is not a real number in ``[0, 1)``.

    References
    ----------
    Asmussen (2003), *Applied Probability and Queues*, III.9; Whitt (1989).
    """
    rho = check_real(rho, "rho", low=0.0, high=1.0, high_open=True)
    return 1.0 / (1.0 - math.sqrt(rho)) ** 2


def mm1_asymptotic_variance(rho):
    r"""Asymptotic variance constant of the M/M/1 time-average queue length.

    :math:`\sigma^2 = \lim_{T\to\infty} T\, \mathrm{Var}(\frac1T\int_0^T Q)
    = 2\rho(1+\rho)/(1-\rho)^4` (service rate 1): a run of length T estimates the mean to
    within about :math:`1.96\,\sigma/\sqrt{T}`.

    Parameters
    ----------
    rho : float
        Load, ``0 <= rho < 1``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``rho`` is not a real number in ``[0, 1)``.

    References
    ----------
    Whitt (1989), "Planning queueing simulations", Management Science 35(11), Table 1.
    """
    rho = check_real(rho, "rho", low=0.0, high=1.0, high_open=True)
    return 2.0 * rho * (1.0 + rho) / (1.0 - rho) ** 4
