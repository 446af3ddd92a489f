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

__all__ = [
    "BatchMeansSummary",
    "batch_means",
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
    """
    b = float(n_batches)
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
    x = np.asarray(batch_values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError("batch_values must be a 1-D array with at least 2 batches")
    if not isinstance(skew_adjusted, (bool, np.bool_)):
        raise ValueError(f"skew_adjusted must be True or False, got {skew_adjusted!r}")
    if skew_adjusted and x.size < 3:
        raise ValueError("batch_values must hold at least 3 batches for the "
                         "skewness-adjusted interval (skew_adjusted=True)")
    if not np.all(np.isfinite(x)):
        raise ValueError("batch_values must be finite")
    if not (0.0 < level < 1.0):
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    b = x.size
    m = float(x.mean())
    sd = float(x.std(ddof=1))
    tq = float(stats.t.ppf(0.5 + level / 2.0, b - 1))
    se = sd / math.sqrt(b)
    if skew_adjusted and sd > 0.0:
        mu3 = b * float(np.sum((x - m) ** 3)) / ((b - 1) * (b - 2))
        a = mu3 / (6.0 * math.sqrt(b) * sd ** 3)
        lo, hi = m - _willink_g(tq, a) * se, m - _willink_g(-tq, a) * se
        return BatchMeansSummary(m, (lo, hi), (hi - lo) / 2.0, level, b,
                                 lag1_autocorrelation(x))
    h = tq * se
    return BatchMeansSummary(m, (m - h, m + h), h, level, b, lag1_autocorrelation(x))


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

    References
    ----------
    Asmussen (2003), *Applied Probability and Queues*, III.9; Whitt (1989).
    """
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

    References
    ----------
    Whitt (1989), "Planning queueing simulations", Management Science 35(11), Table 1.
    """
    return 2.0 * rho * (1.0 + rho) / (1.0 - rho) ** 4
