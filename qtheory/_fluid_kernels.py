r"""Compiled kernels of the fluid solver (see :mod:`qtheory.fluid` for the method).

The state is ``x[0..K]`` with ``x[0] = 1`` and ``x[i] = s_i`` for the levels
``1..K`` below and at the *active top level* ``K``.  On a fixed active top level the
fluid model is linear with constant coefficients,

.. math:: \dot x = A_K x + b_K,

    (A_K x)_i = \lambda x_{i-1} - (\lambda + 1 - p) x_i + (1-p) x_{i+1},  i < K,
    (A_K x)_K = \lambda x_{K-1} - (1-p) x_K,    b_K = -p e_K      (sliding top),

with ``x_0 = 1`` contributing ``lambda`` to the first row.  (With ``p = 0`` the top row
is instead that of an interior level with ``x_{K+1} = 0``: arrivals beyond the
truncation level ``K`` are blocked.)  Each step propagates this system exactly by a
Taylor series of the matrix exponential with ``||A_K||_inf h <= theta``, so the
truncation error is far below rounding; the only other approximations are the times
of the regime switches, which are located by bisection on the top component's Taylor
polynomial to machine precision.
"""

from __future__ import annotations

import numpy as np

from ._numba import jit

_EPS = 2.220446049250313e-16


@jit
def _regime_fix(lam, p, x, K, cap):
    """Apply the opening and closing rules of the top level at the current state.

    Closing: the top level ``K`` is (numerically) empty and the level below cannot
    feed it faster than the central server empties it (``lam x[K-1] < p``).
    Opening: arrivals to the top level outrun the central server (``lam x[K] > p``),
    or they are equal and about to outrun it.  The two tests exclude each other, so
    the loop ends.  Returns (K, number of changes, capacity exceeded).
    """
    b1 = 1.0 - p
    eps_s = 4.0 * _EPS
    changes = 0
    while True:
        if K >= 1:
            xK = x[K]
            if xK <= eps_s:
                xm = x[K - 1]
                g_below = lam * xm - p
                band = 4.0 * _EPS * (lam * xm + p)
                if xK < -eps_s or g_below < -band:
                    x[K] = 0.0
                    K -= 1
                    changes += 1
                    continue
                if xK < 0.0:
                    x[K] = 0.0
        xK = x[K]
        g = lam * xK - p
        band = 4.0 * _EPS * (lam * abs(xK) + p)
        opening = g > band
        if (not opening) and g >= -band and K >= 1:
            xm = x[K - 1]
            dg = lam * (lam * xm - b1 * xK - p)
            opening = dg > 4.0 * _EPS * lam * (lam * xm + b1 * abs(xK) + p)
        if opening:
            if K + 1 > cap:
                return K, changes, True
            K += 1
            x[K] = 0.0
            changes += 1
            continue
        return K, changes, False


@jit
def _taylor(lam, p, x, K, blocked, h, C, tiny):
    """Scaled Taylor coefficients C[n, i] = x_i^{(n)} h^0 / n! of the regime-K flow.

    Returns the number of the last coefficient kept.  Terms are added until the
    l1 norm of a term times h^n, times e^theta (a bound for the neglected tail), is
    below ``tiny``.
    """
    nmax = C.shape[0] - 1
    a = lam + 1.0 - p
    b1 = 1.0 - p
    for i in range(1, K + 1):
        C[0, i] = x[i]
    # first derivative (with the inhomogeneous terms)
    for i in range(1, K):
        C[1, i] = lam * x[i - 1] - a * x[i] + b1 * x[i + 1]
    if blocked:
        C[1, K] = lam * x[K - 1] - a * x[K]
    else:
        C[1, K] = lam * x[K - 1] - b1 * x[K] - p
    n = 1
    hn = h
    while n < nmax:
        norm = 0.0
        for i in range(1, K + 1):
            norm += abs(C[n, i])
        if norm * hn * 8.0 <= tiny:
            break
        inv = 1.0 / (n + 1)
        # homogeneous part: lower levels feed with lam, upper with 1 - p
        for i in range(1, K + 1):
            v = 0.0
            if i > 1:
                v += lam * C[n, i - 1]
            if i < K:
                v += b1 * C[n, i + 1] - a * C[n, i]
            elif blocked:
                v -= a * C[n, i]
            else:
                v -= b1 * C[n, i]
            C[n + 1, i] = v * inv
        n += 1
        hn *= h
    return n


@jit
def _poly(C, n, i, tau):
    """Horner evaluation of sum_k C[k, i] tau^k."""
    v = C[n, i]
    for k in range(n - 1, -1, -1):
        v = v * tau + C[k, i]
    return v


@jit
def _phi(C, n, K, tau, sign, alpha, beta):
    return sign * (alpha * _poly(C, n, K, tau) - beta)


@jit
def _first_event(C, n, K, h, sign, alpha, beta, thr, nsub, stack):
    """First time in (0, h] at which phi = sign (alpha x_K - beta) exceeds ``thr``.

    phi is sampled at ``nsub`` equal sub-steps; a sub-interval whose end values stay
    below ``thr`` is split further while a bound on phi'' (from the Taylor
    coefficients) leaves room for an excursion above ``thr`` in between (down to
    h / 2**14).  On a crossing, the zero of phi before it is found by bisection and
    the point just after the zero is returned; -1.0 if there is no crossing.
    """
    b2 = 0.0
    hk = 1.0
    for k in range(2, n + 1):
        b2 += k * (k - 1) * abs(C[k, K]) * hk
        hk *= h
    b2 *= abs(alpha)
    # stack of intervals (a, b, phi(a)), processed left to right
    top = 0
    for i in range(nsub, 0, -1):
        stack[top, 0] = (i - 1) * h / nsub
        stack[top, 1] = i * h / nsub
        top += 1
    stack[top - 1, 2] = _phi(C, n, K, 0.0, sign, alpha, beta)
    min_width = h / 16384.0
    lo = -1.0
    hi = -1.0
    phi_lo = 0.0
    while top > 0:
        top -= 1
        a = stack[top, 0]
        b = stack[top, 1]
        fa = stack[top, 2]
        fb = _phi(C, n, K, b, sign, alpha, beta)
        if fb > thr:
            lo = a
            hi = b
            phi_lo = fa
            break
        if top > 0:
            stack[top - 1, 2] = fb  # left end of the next interval
        w = b - a
        if max(fa, fb) + b2 * w * w / 8.0 > thr and w > min_width and \
                top + 2 < stack.shape[0]:
            m = 0.5 * (a + b)
            fm = _phi(C, n, K, m, sign, alpha, beta)
            # right half first, so the left half is processed next
            stack[top, 0] = m
            stack[top, 1] = b
            stack[top, 2] = fm
            top += 1
            stack[top, 0] = a
            stack[top, 1] = m
            stack[top, 2] = fa
            top += 1
            if top > 1:
                stack[top - 2, 2] = fm
    if lo < 0.0:
        return -1.0
    if phi_lo > 0.0:
        return lo
    # bisection for phi = 0 on [lo, hi]: phi(lo) <= 0 < phi(hi)
    for _ in range(200):
        m = 0.5 * (lo + hi)
        if m <= lo or m >= hi:
            break
        if _phi(C, n, K, m, sign, alpha, beta) > 0.0:
            hi = m
        else:
            lo = m
    return hi


@jit
def fluid_run(lam, p, x, K, t, times, j, out, blocked, theta, nsub, tiny,
               max_events, events, C, stack, leak):
    """Advance the fluid solution through the output times ``times[j:]``.

    Returns (status, K, t, j, events, kmax, leak): status 0 = done, 1 = the state
    array is too short for a new level, 2 = too many regime switches, 3 = a
    non-finite value appeared.
    """
    m = times.shape[0]
    cap = x.shape[0] - 1
    a_norm = 2.0 * (lam + 1.0 - p)
    hmax = theta / max(a_norm, 1.0)
    eps_s = 4.0 * _EPS
    kmax = 0
    while True:
        while j < m and times[j] <= t:
            for i in range(K + 1):
                out[j, i] = x[i]
            if K > kmax:
                kmax = K
            j += 1
        if j >= m:
            return 0, K, t, j, events, kmax, leak
        if not blocked:
            K, ch, need = _regime_fix(lam, p, x, K, cap)
            events += ch
            if need:
                return 1, K, t, j, events, kmax, leak
            if events > max_events:
                return 2, K, t, j, events, kmax, leak
        if K == 0:
            # empty system that stays empty (lam <= p): nothing moves
            t = times[j]
            continue
        target = times[j]
        h = min(hmax, target - t)
        n = _taylor(lam, p, x, K, blocked, h, C, tiny)
        tau = -1.0
        kind = 0
        if not blocked:
            tc = _first_event(C, n, K, h, -1.0, 1.0, 0.0, eps_s, nsub, stack)
            thr_o = 8.0 * _EPS * (lam * abs(x[K]) + p)
            to = _first_event(C, n, K, h, 1.0, lam, p, thr_o, nsub, stack)
            if tc >= 0.0 and (to < 0.0 or tc <= to):
                tau = tc
                kind = -1
            elif to >= 0.0:
                tau = to
                kind = 1
        step = h if kind == 0 else tau
        if blocked:
            acc = 0.0
            hk = step
            for k in range(n + 1):
                acc += C[k, K] * hk / (k + 1)
                hk *= step
            leak += acc
        finite = True
        for i in range(1, K + 1):
            v = _poly(C, n, i, step)
            x[i] = v
            if not np.isfinite(v):
                finite = False
        if not finite:
            return 3, K, t, j, events, kmax, leak
        if kind == 0 and step == target - t:
            t = target
        else:
            t = t + step
        if kind == -1:
            x[K] = 0.0
            K -= 1
            events += 1
        elif kind == 1:
            if K + 1 > cap:
                return 1, K, t, j, events, kmax, leak
            K += 1
            x[K] = 0.0
            events += 1
        if events > max_events:
            return 2, K, t, j, events, kmax, leak
