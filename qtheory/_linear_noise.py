r"""The fluid model linearized at the invariant state, with its noise (linear noise).

Near the invariant state :math:`s^I` (top level :math:`i^*`) the fluid drift is linear,
:math:`\dot x = A x`, with :math:`A = A_{i^*}` tridiagonal (sub-diagonal :math:`\lambda`,
diagonal :math:`-(\lambda + 1 - p)` and :math:`-(1-p)` on the sliding top level,
super-diagonal :math:`1-p`).  The linear-noise (Ornstein-Uhlenbeck) approximation adds
the jump covariance :math:`D` (diagonal, the total jump rate of each level):
:math:`\sqrt N (s^N - s^I) \approx X`, :math:`dX = A X\,dt + D^{1/2} dW`, with
stationary covariance :math:`\Sigma` solving :math:`A\Sigma + \Sigma A^\top + D = 0`.

One model, used by :func:`qtheory.relaxation_rate` (the spectral gap of :math:`A`),
:func:`qtheory.fluctuation_covariance` and :func:`qtheory.finite_n_mean`
(:math:`\Sigma`, the reflected diffusion), and the run planner
(:func:`qtheory.planning.variance_model`: the variance and correlation time of the mean
queue length).  Every function here takes validated arguments and checks nothing.

References
----------
N. G. van Kampen, *Stochastic Processes in Physics and Chemistry*, 3rd ed., 2007, Ch. X;
T. G. Kurtz, "Strong approximation theorems for density dependent Markov chains", Stoch.
Proc. Appl. 6, 1978; J. N. Tsitsiklis and K. Xu, "On the power of (even a little)
resource pooling", Stochastic Systems 2(1), 2012 (the fluid model and its invariant
state).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import schur, solve_banded, solve_continuous_lyapunov
from scipy.linalg.lapack import dtrsyl
from scipy.optimize import brentq

from . import _invariant as _inv

__all__ = ["drift_jacobian_and_noise", "dense_jacobian", "lyapunov",
           "regime_matrix_eigmax", "relaxation_rate", "mean_queue_noise"]


def drift_jacobian_and_noise(lam, p, s, *, sliding_top=True):
    r"""Jacobian A (K x K) and diagonal jump covariance D (K,) of the linear-noise model.

    ``s`` holds :math:`s_0 = 1, s_1, \dots, s_K` (the levels 1..K are the coordinates;
    :math:`s_{K+1} = 0`).  Below the top, row i of the drift
    :math:`\lambda(s_{i-1}-s_i) - (1-p)(s_i - s_{i+1})` gives sub-diagonal
    :math:`\lambda`, diagonal :math:`-(\lambda + 1 - p)`, super-diagonal :math:`1-p`, and
    D_ii is the total jump rate of level i.  With ``sliding_top`` (p > 0) level K is the
    top level of the invariant state: its drift
    :math:`\lambda s_{K-1} - (1-p) s_K - p` has diagonal :math:`-(1-p)`, and its noise
    gets the central tokens (rate p) and the arrivals to top stations (rate
    :math:`\lambda s_K`) that lift a station above K and are served at once: the tokens
    that hit level K are the difference of these two independent Poisson streams.
    Returns the three diagonals of A and D.
    """
    K = s.size - 1
    sp_ = np.append(s, 0.0)
    D = lam * (sp_[:-2] - sp_[1:-1]) + (1.0 - p) * (sp_[1:-1] - sp_[2:])
    diag = np.full(K, -(lam + 1.0 - p))
    if sliding_top:
        D[-1] += p + lam * s[-1]
        diag[-1] = -(1.0 - p)
    return diag, D


def dense_jacobian(lam, p, diag):
    """The tridiagonal Jacobian A as a dense K x K array, from its diagonal."""
    K = diag.size
    return (np.diag(diag) + np.diag(np.full(K - 1, lam), -1)
            + np.diag(np.full(K - 1, 1.0 - p), 1))


# relative accuracy asked of every variance Sigma_ii, and the refinement steps allowed
_LYAP_RTOL = 1e-6
_LYAP_STEPS = 3


def lyapunov(lam, p, s, *, sliding_top=True):
    r"""Stationary covariance Sigma of the OU model: A Sigma + Sigma A^T + D = 0.

    Solved by Bartels-Stewart (``scipy.linalg.solve_continuous_lyapunov``) and then
    improved by iterative refinement: the residual
    :math:`R = A\Sigma + \Sigma A^\top + D` is formed in extended precision
    (``np.longdouble``) and the correction solves :math:`AX + XA^\top = -R`
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002, Ch. 12, for
    refinement of linear systems; the Lyapunov operator is linear in :math:`\Sigma`).  As
    :math:`\lambda \to 1` the variances span many orders of magnitude (those of the
    nearly full levels are of order :math:`1-\lambda`, the largest of order
    :math:`(1-\lambda)^{-2}`), and one solve in double precision leaves the small ones
    with absolute errors of order :math:`10^{-16}` times the largest: negative variances
    from about :math:`1 - \lambda = 10^{-10}`.  After the refinement the last correction
    estimates the remaining error; if any variance is not positive or its estimated
    relative error exceeds ``_LYAP_RTOL``, ValueError (naming ``lam``) is raised instead
    of returning a wrong covariance.  Returns a symmetric (K, K) array.
    """
    diag, D = drift_jacobian_and_noise(lam, p, s, sliding_top=sliding_top)
    A = dense_jacobian(lam, p, diag)
    solve = _lyapunov_solver(A)
    S = solve(-np.diag(D))
    lo, hi = np.longdouble(lam), np.longdouble(1.0 - p)
    dg = diag.astype(np.longdouble)[:, None]
    D_ext = np.diag(D.astype(np.longdouble))
    rel = math.inf
    for _ in range(_LYAP_STEPS):
        S_ext = S.astype(np.longdouble)
        # A S for the tridiagonal A (sub-diagonal lam, super-diagonal 1 - p), in O(K^2)
        AS = dg * S_ext
        AS[1:] += lo * S_ext[:-1]
        AS[:-1] += hi * S_ext[1:]
        R = AS + AS.T + D_ext
        X = solve(-R.astype(np.float64))
        d = np.diag(S)
        rel = float(np.max(np.abs(np.diag(X)) / np.abs(d))) if np.all(d > 0) else math.inf
        if not np.all(np.isfinite(X)):
            break
        S = S + X
        if rel <= 1e-3 * _LYAP_RTOL:
            break
    d = np.diag(S)
    if not (np.all(np.isfinite(S)) and np.all(d > 0) and rel <= _LYAP_RTOL):
        worst = "a negative or zero variance" if not np.all(d > 0) else (
            f"an estimated relative error of {rel:.2g} in a variance")
        raise ValueError(
            f"lam = {lam!r} is too close to 1 for an accurate Lyapunov solve at p = {p!r} "
            f"(1 - lam = {1.0 - lam:.3g}; the variances span {_span(d)} orders of "
            f"magnitude and the refined solution still has {worst}); use lam with "
            f"1 - lam >= 1e-9 or so")
    return S


def _lyapunov_solver(A):
    """A function C -> X solving A X + X A^T = C (symmetric C), by Bartels-Stewart.

    The real Schur form :math:`A = U T U^\top` is computed once and each solve is the
    triangular Sylvester equation :math:`T Y + Y T^\top = U^\top C U` (LAPACK dtrsyl),
    :math:`X = U Y U^\top` (what ``scipy.linalg.solve_continuous_lyapunov`` does, without
    repeating the Schur form for each right-hand side).  Returns symmetric arrays.
    """
    T, U = schur(A, output="real")

    def solve(C):
        Y, scale, info = dtrsyl(T, T, U.T @ C @ U, trana="N", tranb="T", isgn=1)
        if info < 0:
            raise RuntimeError(f"dtrsyl: illegal argument {-info}")
        X = U @ (Y / scale) @ U.T
        return 0.5 * (X + X.T)

    return solve


def _span(d):
    """Orders of magnitude spanned by the positive entries of d (for an error message)."""
    pos = np.abs(d[np.abs(d) > 0])
    return f"{math.log10(pos.max() / pos.min()):.0f}" if pos.size else "?"


def regime_matrix_eigmax(lam, p, K):
    """Largest eigenvalue of the regime-K matrix A_K (tridiagonal, similar to symmetric).

    From its secular equation (:func:`_regime_eigmax_secular`): O(1) memory for any K,
    and accurate to a few rounding units also when the eigenvalue is tiny, where an
    eigensolver on the matrix has an absolute error of a rounding unit of ||A|| (at
    ``lam = 1 - 1e-12, p = 0.5`` LAPACK's value is off by 2e-5 relative).
    """
    if K == 1:
        return -(1.0 - p)
    return _regime_eigmax_secular(lam, p, K)


def _regime_eigmax_secular(lam, p, K):
    r"""The same eigenvalue from the secular equation of the matrix, for any K.

    The symmetrized :math:`A_K` has diagonal :math:`-a = -(\lambda + 1 - p)` except the
    last entry :math:`-(1-p) = -a + \lambda`, and off-diagonal :math:`c =
    \sqrt{\lambda(1-p)}`.  With :math:`\rho = \lambda/c = \sqrt{r}`, the vectors
    :math:`x_j = \sin(j\theta)` satisfy every row but the last for
    :math:`\mu = -a + 2c\cos\theta`, and the last row holds iff
    :math:`\rho \sin(K\theta) = \sin((K+1)\theta)`.  If :math:`\rho K \le K + 1` the
    largest eigenvalue has the smallest root :math:`\theta \in (0, \pi/(K+1))`, and
    :math:`-\mu = (\sqrt\lambda - \sqrt{1-p})^2 + 4c\sin^2(\theta/2)` (a sum of
    positive terms).  Otherwise it is an outlier :math:`\theta = i\varphi` with
    :math:`\rho = \cosh\varphi + \coth(K\varphi)\sinh\varphi`,
    :math:`\varphi \in (0, \log\rho)`, and :math:`-\mu = c(\rho - e^\varphi)
    (1 - e^{-\varphi}/\rho)` with :math:`\rho - e^\varphi = 2\sinh\varphi /
    (e^{2K\varphi} - 1)`, again free of cancellation.  (Smith, *Numerical Solution of
    Partial Differential Equations*, on tridiagonal Toeplitz spectra; the boundary row
    is the book's.)
    """
    b1 = 1.0 - p
    c = math.sqrt(lam * b1)
    log_rho = 0.5 * math.log(lam / b1)
    rho = math.exp(log_rho)
    if rho * K <= K + 1:
        def f(th):
            return math.sin((K + 1) * th) - rho * math.sin(K * th)

        hi = math.pi / (K + 1)
        lo = hi * 1e-12
        if f(lo) <= 0.0:
            th = lo
        else:
            th = brentq(f, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps,
                        maxiter=500)
        gap = ((lam - b1) / (math.sqrt(lam) + math.sqrt(b1))) ** 2
        return -(gap + 4.0 * c * math.sin(0.5 * th) ** 2)

    def g(ph):
        kp = K * ph
        coth = 1.0 / math.tanh(kp) if kp < 20.0 else 1.0 + 2.0 * math.exp(-2.0 * kp)
        return math.cosh(ph) + coth * math.sinh(ph) - rho

    lo = log_rho * 1e-12
    if g(lo) >= 0.0:  # the outlier has just left the band: phi ~ 0, mu ~ -gap
        return -((lam - b1) / (math.sqrt(lam) + math.sqrt(b1))) ** 2
    ph = brentq(g, lo, log_rho, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
    excess = 2.0 * math.sinh(ph) / math.expm1(min(2.0 * K * ph, 700.0))
    return -(c * excess * -math.expm1(-(ph + log_rho)))


def top_is_critical(lam, p, K, top):
    r"""Whether :math:`\lambda s^I_K = p` to rounding, K the top level and ``top`` = s^I_K.

    :math:`s^I_K = r^K - \frac{p}{1-p}\sum_{j<K} r^j` (:math:`r = \lambda/(1-p)`) is a
    difference of terms of size :math:`r^K`, so its rounding error is a few eps times
    :math:`r^K`, not times :math:`s^I_K`: the tolerance is
    :math:`64\,\varepsilon \max(p, \lambda r^K)`.  On the line ``lam + p = 1`` (r = 1)
    this is :math:`64\,\varepsilon\lambda`: at (0.99, 0.01) the computed
    :math:`p - \lambda s^I_{98}` is 4.9e-16, above :math:`64\,\varepsilon p`; for tiny p
    it stays a relative tolerance on p (at ``p = 1e-300`` nothing is flagged).
    """
    if K == 0:
        scale = max(p, lam)
    else:
        try:
            scale = max(p, lam * (lam / (1.0 - p)) ** K)
        except OverflowError:
            scale = math.inf
    return abs(lam * top - p) <= 64 * np.finfo(float).eps * scale


def relaxation_rate(lam, p):
    """:func:`qtheory.relaxation_rate` for validated ``lam`` and ``p``.

    Needs no state array: the top level and its occupancy come from the closed form
    (:func:`qtheory._invariant.top_level`, :func:`qtheory._invariant.level`) and the
    eigenvalue from its secular equation, so the cost does not grow with i*.
    """
    if p == 0.0:
        return (1.0 - math.sqrt(lam)) ** 2
    K = _inv.top_level(lam, p)
    top = _inv.level(lam, p, K) if K else 1.0
    critical = top_is_critical(lam, p, K, top)
    if K == 0:
        return (1.0 - p) if critical else math.inf
    rate = -regime_matrix_eigmax(lam, p, K)
    if critical:
        rate = min(rate, -regime_matrix_eigmax(lam, p, K + 1))
    return rate


def mean_queue_noise(lam, p, s, *, dense_levels):
    r"""sigma^2 and tau of the mean queue length in the linear-noise model around s.

    :math:`\sigma^2 = c^\top A^{-1} D A^{-\top} c` (the asymptotic variance constant of
    the time average of :math:`\sum_i s_i`, per :math:`1/N`) and the mean lag
    :math:`\tau = c^\top A^{-2}\Sigma c / (-c^\top A^{-1}\Sigma c)` of its
    autocovariance, with :math:`c = (1, \dots, 1)` (see :mod:`qtheory.planning`).
    ``tau`` is None beyond ``dense_levels`` levels (no dense Lyapunov solve).
    """
    K = s.size - 1
    # Top level: the central tokens (Poisson, rate p) that serve it are the tokens left
    # over by arrivals to top-level stations (rate lam s_K), which open level K + 1 and
    # are served at once: both streams add noise, p + lam s_K (shared with
    # qtheory.fluctuation_covariance).
    diag, D = drift_jacobian_and_noise(lam, p, s)
    # A: sub-diagonal lam, super-diagonal 1 - p; A^T u = c as a banded solve.
    ab = np.zeros((3, K))
    ab[0, 1:] = lam          # super-diagonal of A^T
    ab[1] = diag
    ab[2, :-1] = 1.0 - p     # sub-diagonal of A^T
    c = np.ones(K)
    u = solve_banded((1, 1), ab, c)
    sigma2 = float(u @ (D * u))
    if K > dense_levels:
        return sigma2, None
    S = solve_continuous_lyapunov(dense_jacobian(lam, p, diag), -np.diag(D))
    Sc = S @ c
    int_c = -float(u @ Sc)
    w = solve_banded((1, 1), ab, u)
    int_tc = float(w @ Sc)
    return sigma2, int_tc / int_c
