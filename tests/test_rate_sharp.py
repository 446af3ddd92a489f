"""The proved lower bounds (qtheory.rate.rate_lower_bound; theorem rate-thm-lower).

Values fixed by theory: the generator of W^2 (W the mass above the fluid top) and of
v_i^2 (levels i <= i*) in every state of small systems, computed from the transitions of
the queue vector, equals the formula of the proof; under the exact stationary law of the
truncated chain the top identity holds to solver accuracy once the blocked arrivals are
accounted for, and within the truncation tolerance without them; the lower bounds hold on
exact laws for N = 1..4; the constants have their closed forms at the critical point
(0.9, 0.1) and in light traffic.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import qtheory as qt
from qtheory.rate import rate_lower_bound

POINTS = [(0.7, 0.2), (0.9, 0.1), (0.95, 0.3), (0.5, 0.2), (0.3, 0.5), (0.5, 0.5)]


def _s(Q, L):
    """s_0..s_L of a queue vector Q."""
    Q = np.asarray(Q)
    return np.array([(Q >= i).mean() for i in range(L + 1)])


def _generator(f, Q, lam, p):
    """(L f)(Q) from the transitions of the queue vector (ties: any longest queue)."""
    N, Q = len(Q), list(Q)
    f0, out = f(Q), 0.0
    for n in range(N):
        up = Q.copy()
        up[n] += 1
        out += lam * (f(up) - f0)
        if Q[n] > 0:
            dn = Q.copy()
            dn[n] -= 1
            out += (1 - p) * (f(dn) - f0)
    if max(Q) > 0:
        dn = Q.copy()
        dn[int(np.argmax(Q))] -= 1
        out += p * N * (f(dn) - f0)
    return out


def _W(Q, K):
    return float(np.clip(np.asarray(Q) - K, 0, None).mean())


@pytest.mark.parametrize("lam,p", POINTS)
@pytest.mark.parametrize("N", [1, 2, 3])
def test_generator_of_W2_in_every_state(lam, p, N):
    K = qt.invariant_state(lam, p).size - 1
    for Q in itertools.product(range(K + 4), repeat=N):
        s = _s(Q, K + 2)
        W = _W(Q, K)
        ind = float(max(Q) >= K + 1)
        formula = (-2 * W * (p - lam * s[K] + (1 - p) * s[K + 1])
                   + (lam * s[K] + (1 - p) * s[K + 1] + p * ind) / N)
        got = _generator(lambda q: _W(q, K) ** 2, Q, lam, p)
        assert abs(got - formula) < 1e-12, (Q, got, formula)
        # W > 0 exactly when M >= i* + 1 (used in the proof: W 1{M >= i*+1} = W)
        assert (W > 0) == bool(ind)


@pytest.mark.parametrize("lam,p", [(0.7, 0.2), (0.9, 0.1), (0.95, 0.3)])
@pytest.mark.parametrize("N", [1, 2, 3])
def test_generator_of_vi2_below_the_top(lam, p, N):
    """The level identities of the remark: v_i 1{M < i} = 0 for every state."""
    K = qt.invariant_state(lam, p).size - 1
    for Q in itertools.product(range(K + 3), repeat=N):
        s = _s(Q, K + 2)
        for i in range(1, K + 1):
            v = float(np.clip(np.asarray(Q) - (i - 1), 0, None).mean())
            ind = float(max(Q) >= i)
            formula = (2 * v * (lam * s[i - 1] - (1 - p) * s[i] - p * ind)
                       + (lam * s[i - 1] + (1 - p) * s[i] + p * ind) / N)
            got = _generator(
                lambda q, i=i: float(np.clip(np.asarray(q) - (i - 1), 0, None).mean()) ** 2,
                Q, lam, p)
            assert abs(got - formula) < 1e-12
            assert v * (1 - ind) == 0.0


def _exact(N, lam, p, K):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return qt.exact_stationary(N, lam, p, max_queue=K)


EXACT = [(1, 0.7, 0.2, 80), (2, 0.7, 0.2, 60), (3, 0.7, 0.2, 30), (1, 0.9, 0.1, 200),
         (2, 0.9, 0.1, 120), (3, 0.9, 0.1, 45), (2, 0.3, 0.5, 40), (3, 0.95, 0.3, 40)]


def _moments(res):
    lam, p, N = res.lam, res.p, res.n_stations
    sI = qt.invariant_state(lam, p)
    K = sI.size - 1
    Q = res.states.astype(np.int64)
    pi = res.probabilities
    Kmax = res.max_queue
    s = np.stack([(Q >= i).mean(axis=1) for i in range(max(K + 2, Kmax) + 1)], axis=1)
    W = np.clip(Q - K, 0, None).mean(axis=1)
    D = np.abs(s[:, 1:K + 1] - sI[1:]).sum(axis=1) + W
    return dict(lam=lam, p=p, N=N, K=K, Kmax=Kmax, pi=pi, s=s, W=W, D=D, sI=sI,
                M=Q.max(axis=1))


@pytest.mark.parametrize("N,lam,p,Kmax", EXACT)
def test_top_identity_exact(N, lam, p, Kmax):
    m = _moments(_exact(N, lam, p, Kmax))
    pi, s, W, K = m["pi"], m["s"], m["W"], m["K"]
    lhs = pi @ (W * (p - lam * s[:, K] + (1 - p) * s[:, K + 1]))
    rhs = lam * (pi @ s[:, K]) / N
    # the truncated chain blocks arrivals at stations holding Kmax jobs; with them the
    # stationary mean of L(W^2) is lam E[s_Kmax (2W + 1/N)] exactly
    sK = s[:, Kmax]
    second = pi @ (lam * s[:, K] + (1 - p) * s[:, K + 1] + p * (W > 0)) / N
    blocked = lam * (pi @ (sK * (2 * W + 1 / N)))
    assert abs(-2 * lhs + second - blocked) < 1e-9
    # without the correction, to the truncation tolerance
    tol = lam * (pi @ (sK * (2 * W + 2 / N))) + 1e-9
    assert abs(lhs - rhs) <= tol, (lhs, rhs, tol)


@pytest.mark.parametrize("N,lam,p,Kmax", EXACT + [(4, 0.7, 0.2, 22), (4, 0.9, 0.1, 25)])
def test_lower_bounds_hold_exact(N, lam, p, Kmax):
    m = _moments(_exact(N, lam, p, Kmax))
    lb = rate_lower_bound(lam, p)
    pi, W, D = m["pi"], m["W"], m["D"]
    EW, ED, ED2 = pi @ W, pi @ D, pi @ D ** 2
    assert EW >= lb.top_mass_lower(N) * (1 - 1e-6)
    assert ED >= EW - 1e-12
    if lb.critical:
        assert ED2 >= lb.rms_lower(N) ** 2 * (1 - 1e-6)
    rc = qt.rate_constants(lam, p)
    if rc.delta > 0:
        assert EW <= rc.top_mass_bound(N) + 1e-9


def test_closed_forms():
    lb = rate_lower_bound(0.9, 0.1)              # lam s^I_8 = p = 0.1
    assert lb.critical and lb.top_level == 8
    assert lb.top_mass_c == pytest.approx(0.1, rel=1e-12)
    assert lb.rms_c == pytest.approx(0.1 / 1.8, rel=1e-12)
    assert math.isinf(lb.top_mass_limit)
    assert lb.rms_lower(100) == pytest.approx(math.sqrt(0.1 / 180), rel=1e-12)
    lt = rate_lower_bound(0.3, 0.5)              # i* = 0, s^I_0 = 1, delta = 0.2
    assert lt.top_level == 0 and lt.top_mass_c == 0.3
    assert lt.top_mass_limit == pytest.approx(1.5) and math.isnan(lt.rms_c)
    # light traffic: N E v_1 -> lam/(p - lam) = rho/(1 - rho) with rho = lam/p
    assert lt.top_mass_limit == pytest.approx(0.3 / (0.5 - 0.3))
    nc = rate_lower_bound(0.7, 0.2)
    sI = qt.invariant_state(0.7, 0.2)
    rho = 0.7 * sI[-1] / 0.2
    assert nc.top_mass_limit == pytest.approx(rho / (1 - rho), rel=1e-12)
    np.testing.assert_allclose(nc.top_mass_lower(np.array([1, 10])),
                               [nc.top_mass_c, nc.top_mass_c / 10])


@pytest.mark.parametrize("lam,p,name", [(0.0, 0.2, "lam"), (1.0, 0.2, "lam"),
                                        (0.5, 0.0, "p"), (0.5, 1.5, "p")])
def test_bad_input_raises(lam, p, name):
    with pytest.raises(ValueError, match=name):
        rate_lower_bound(lam, p)


# ---- the covariance limit (proposition rate-prop-covariance) ----

COV_POINTS = [(0.7, 0.2), (0.95, 0.3), (0.5, 0.2), (0.9, 0.2), (0.8, 0.3)]


@pytest.mark.parametrize("lam,p", COV_POINTS)
def test_covariance_limit_is_the_linear_noise_covariance(lam, p):
    cl = qt.rate.covariance_limit(lam, p)
    np.testing.assert_allclose(cl.sigma, qt.fluctuation_covariance(lam, p), atol=1e-12)
    B = cl.B
    np.testing.assert_allclose(B @ cl.sigma_u + cl.sigma_u @ B.T + cl.D, 0, atol=1e-12)
    assert cl.kappa > 0 and cl.error_bound(10, 0.0, 0.0) == 0.0


@pytest.mark.parametrize("lam,p", [(0.7, 0.2), (0.95, 0.3)])
@pytest.mark.parametrize("N", [1, 2, 3])
def test_generator_of_products_in_every_state(lam, p, N):
    """L(u_i u_j) = u_i D_j + u_j D_i + (1/N) sum_{k >= max(i,j)} a_k in every state."""
    sI = qt.invariant_state(lam, p)
    K = sI.size - 1
    vI = np.concatenate([np.cumsum(sI[::-1])[::-1], [0.0]])

    def u(q, i):
        return float(np.clip(np.asarray(q) - (i - 1), 0, None).mean()) - vI[i]

    for Q in itertools.product(range(K + 3), repeat=N):
        s = _s(Q, K + 2)
        M = max(Q)
        for i in range(1, K + 1):
            for j in range(i, K + 1):
                Dv = {k: lam * s[k - 1] - (1 - p) * s[k] - p * (M >= k) for k in (i, j)}
                m = max(i, j)
                second = (lam * s[m - 1] + (1 - p) * s[m] + p * (M >= m)) / N
                formula = u(Q, i) * Dv[j] + u(Q, j) * Dv[i] + second
                got = _generator(lambda q: u(q, i) * u(q, j), Q, lam, p)
                assert abs(got - formula) < 1e-12


def _cov_terms(res):
    lam, p, N = res.lam, res.p, res.n_stations
    sI = qt.invariant_state(lam, p)
    K = sI.size - 1
    vI = np.cumsum(sI[::-1])[::-1]
    Q = res.states.astype(np.int64)
    pi = res.probabilities
    u = np.stack([np.clip(Q - (i - 1), 0, None).mean(axis=1) - vI[i]
                  for i in range(1, K + 1)], axis=1)
    W = np.clip(Q - K, 0, None).mean(axis=1)
    M = Q.max(axis=1)
    s = np.stack([(Q >= i).mean(axis=1) for i in range(K + 1)], axis=1)
    x = s[:, 1:] - sI[1:]
    Su = N * (u.T * pi) @ u
    Sx = N * (x.T * pi) @ x
    idx = np.maximum.outer(np.arange(1, K + 1), np.arange(1, K + 1)) - 1
    DN = 2 * lam * (pi @ s)[idx]
    g = np.stack([p * (M < j) + (1 - p) * W * (j == K) for j in range(1, K + 1)], axis=1)
    G = N * (u.T * pi) @ g                        # G_ij = N E[u_i g_j]
    RN = G + G.T
    sK = (Q >= res.max_queue).mean(axis=1)
    m = N * (pi @ (M < K))
    w = N * (pi @ W ** 2)
    tol = 2 * N * lam * (pi @ ((np.abs(u).sum(axis=1) + 1) * sK)) + 1e-8
    return dict(Su=Su, Sx=Sx, DN=DN, RN=RN, m=m, w=w, tol=tol, K=K)


@pytest.mark.parametrize("N,lam,p,Kmax", [(1, 0.7, 0.2, 80), (2, 0.7, 0.2, 60),
                                          (3, 0.7, 0.2, 30), (2, 0.95, 0.3, 60),
                                          (3, 0.5, 0.2, 30)])
def test_lyapunov_identity_exact(N, lam, p, Kmax):
    t = _cov_terms(_exact(N, lam, p, Kmax))
    cl = qt.rate.covariance_limit(lam, p)
    B = cl.B
    resid = B @ t["Su"] + t["Su"] @ B.T + t["DN"] + t["RN"]
    assert np.abs(resid).max() <= t["tol"], (resid, t["tol"])
    # the remainder bound and the error bound hold with m, w taken from the exact law
    assert np.all(np.abs(t["RN"]) <= cl.remainder_bound(t["m"], t["w"]) + 1e-9)
    err = np.linalg.norm(t["Sx"] - cl.sigma)
    assert err <= cl.error_bound(N, t["m"], t["w"]) + 1e-9


def test_covariance_limit_bad_input():
    with pytest.raises(ValueError, match="p"):
        qt.rate.covariance_limit(0.9, 0.1)       # critical top
    with pytest.raises(ValueError, match="p"):
        qt.rate.covariance_limit(0.3, 0.5)       # no populated level
    cl = qt.rate.covariance_limit(0.7, 0.2)
    with pytest.raises(ValueError, match="top_sq"):
        cl.error_bound(10, 0.1, -1.0)


# ---- moments of order three and four (theorem rate-thm-quartic, corollary rate-cor-sharp) ----

# (lam, p, level n): non-critical tops with n = i*+1 and n = i*+2, critical tops with n = i*+2
QUARTIC_CASES = [(0.7, 0.2, 4), (0.95, 0.3, 6), (0.5, 0.2, 2), (0.7, 0.2, 5), (0.9, 0.1, 10),
                 (0.5, 0.5, 2)]


def _sumsq(f, Q, lam, p):
    """sum over the jumps of rate * (change of f)^2 (the second part of L(f^2))."""
    N, Q = len(Q), list(Q)
    f0, out = f(Q), 0.0
    for n in range(N):
        up = Q.copy()
        up[n] += 1
        out += lam * (f(up) - f0) ** 2
        if Q[n] > 0:
            dn = Q.copy()
            dn[n] -= 1
            out += (1 - p) * (f(dn) - f0) ** 2
    if max(Q) > 0:
        dn = Q.copy()
        dn[int(np.argmax(Q))] -= 1
        out += p * N * (f(dn) - f0) ** 2
    return out


def _quartic_setup(lam, p, n):
    sI = qt.invariant_state(lam, p)
    K = sI.size - 1
    r = lam / (1 - p)
    sIx = np.concatenate([sI, np.zeros(n + 2)])            # s^I_i, 0 above the top
    vI = np.cumsum(sIx[::-1])[::-1]
    w = r ** -np.arange(0.0, n + 1)

    def v(q, i):
        return float(np.clip(np.asarray(q) - (i - 1), 0, None).mean())

    def F(q):
        return sum(w[i] * (v(q, i) - vI[i]) ** 2 for i in range(1, n + 1))

    return sIx, K, r, vI, w, v, F


@pytest.mark.parametrize("lam,p,n", QUARTIC_CASES)
@pytest.mark.parametrize("N", [1, 2, 3])
def test_generator_of_F2_and_W3_in_every_state(lam, p, n, N):
    """L(F^2) = 2F LF + sum rate (dF)^2, LF = -2 Phi + (1/N) sum a_k R_k, the jump bound,
    the comparisons of F with X and v_n, X >= xi_i on {M < i}, and L(W^3)."""
    qb = qt.rate.quartic_bounds(lam, p, level=n)
    sI, K, r, vI, w, v, F = _quartic_setup(lam, p, n)
    T, delta = qb.T, max(p - lam * sI[K], 0.0) if K else p - lam
    delta = 0.0 if qb.critical else delta
    top = range(K + 3) if n > 8 and N == 3 else range(K + 4)
    for Q in itertools.product(top, repeat=N):
        s, M = _s(Q, n + 6), max(Q)
        vn, W = v(Q, n), v(Q, K + 1)
        x = s[1:n] - sI[1:n]                                # x_1 .. x_{n-1}
        X = float((w[1:n] * x ** 2).sum())
        Phi = ((1 - p) * X + (1 - p) * w[n] * vn * s[n] + delta * w[K + 1] * W
               + p * sum(w[i] * v(Q, i) for i in range(K + 2, n + 1))
               + p * sum(w[i] * vI[i] * (M < i) for i in range(1, K + 1)))
        aR = sum((lam * (s[k - 1] - s[k]) + (1 - p) * (s[k] - s[k + 1]) + p * (M == k))
                 * w[1:min(k, n) + 1].sum() for k in range(1, n + 6))
        F0, LF = F(Q), _generator(F, Q, lam, p)
        assert abs(LF - (-2 * Phi + aR / N)) < 1e-12
        assert Phi >= (1 - p) * X + qb.theta * w[n] * vn - 1e-12
        LF2, SS = _generator(lambda q: F(q) ** 2, Q, lam, p), _sumsq(F, Q, lam, p)
        assert abs(LF2 - (2 * F0 * LF + SS)) < 1e-11 * max(1.0, abs(LF2))
        assert SS <= (1 + lam) * (2 * math.sqrt(T * F0) + T / N) ** 2 / N + 1e-12
        assert X <= 2 * (1 + r) * F0 + 1e-12 and w[n] * vn ** 2 <= F0 + 1e-12
        assert F0 <= qb.c_F * (X + w[n] * vn ** 2) + 1e-12
        for i in range(1, K + 1):
            if M < i:
                assert X >= qb.xi[i - 1] - 1e-12
        if n == K + 1 and K:                                 # the cubic identity of the top
            b = lam * s[K] + (1 - p) * s[n] + p * (M >= n)
            Dn = lam * s[K] - (1 - p) * s[n] - p * (M >= n)
            LW3 = _generator(lambda q: v(q, n) ** 3, Q, lam, p)
            assert abs(LW3 - (3 * W ** 2 * Dn + 3 * W * b / N + Dn / N ** 2)) < 1e-12
            assert abs(W ** 2 * Dn - W ** 2 * (-delta + lam * x[K - 1] - (1 - p) * s[n])) \
                < 1e-12


@pytest.mark.parametrize("lam,p", [(0.7, 0.2), (0.9, 0.1), (0.3, 0.5)])
@pytest.mark.parametrize("k", [3, 4])
def test_higher_moment_drift_in_every_state(lam, p, k):
    """L V_{k+1} <= sum_n (lam h(Q_n + 1) - h(Q_n)), h(q) = q^{k+1} - (q-1)^{k+1}, h(0) = 0."""
    def h(q):
        return q ** (k + 1) - (q - 1) ** (k + 1) if q > 0 else 0

    for N in (1, 2, 3):
        for Q in itertools.product(range(7), repeat=N):
            got = _generator(lambda q: float(sum(z ** (k + 1) for z in q)), Q, lam, p)
            assert got <= sum(lam * h(z + 1) - h(z) for z in Q) + 1e-9


def _quartic_exact(res, n):
    lam, p = res.lam, res.p
    sI, K, r, vI, w, v, F = _quartic_setup(lam, p, n)
    Q = res.states.astype(np.int64)
    s = np.stack([(Q >= i).mean(axis=1) for i in range(n + 1)], axis=1)
    x = s[:, 1:n] - sI[1:n]
    return dict(sI=sI, K=K, r=r, w=w, vI=vI, v=v, F=F, Q=Q, pi=res.probabilities, s=s,
                x=x, X=(w[1:n] * x ** 2).sum(axis=1), W=np.clip(Q - K, 0, None).mean(axis=1),
                vn=np.clip(Q - (n - 1), 0, None).mean(axis=1), M=Q.max(axis=1))


QUARTIC_EXACT = [(1, 0.7, 0.2, 80, 4), (2, 0.7, 0.2, 50, 4), (3, 0.7, 0.2, 24, 4),
                 (2, 0.95, 0.3, 50, 6), (3, 0.5, 0.2, 24, 2), (2, 0.7, 0.2, 50, 5),
                 (2, 0.9, 0.1, 80, 10), (3, 0.9, 0.1, 30, 10), (2, 0.5, 0.5, 40, 2)]


@pytest.mark.parametrize("N,lam,p,Kmax,n", QUARTIC_EXACT)
def test_quartic_and_cubic_identities_exact(N, lam, p, Kmax, n):
    """Under the exact law of the truncated chain, E[L(F^2)] and E[L(W^3)] equal the
    blocked-arrival corrections (they vanish for the untruncated chain); the cubic
    identity holds to the truncation tolerance."""
    e = _quartic_exact(_exact(N, lam, p, Kmax), n)
    pi, Q, F, K = e["pi"], e["Q"], e["F"], e["K"]
    ELF2 = blocked = 0.0
    for q, pr in zip(Q, pi):
        q = list(q)
        ELF2 += pr * _generator(lambda z: F(z) ** 2, q, lam, p)
        for m in range(N):
            if q[m] == Kmax:
                up = q.copy()
                up[m] += 1
                blocked += pr * lam * (F(up) ** 2 - F(q) ** 2)
    assert abs(ELF2 - blocked) < 1e-9 * max(1.0, abs(blocked))
    if n != K + 1 or not K:
        return
    W, s, x, M, delta = e["W"], e["s"], e["x"], e["M"], qt.rate.quartic_bounds(lam, p).delta
    b = lam * s[:, K] + (1 - p) * s[:, n] + p * (M >= n)
    lhs = delta * (pi @ W ** 2) + (1 - p) * (pi @ (W ** 2 * s[:, n]))
    rhs = lam * (pi @ (W ** 2 * x[:, K - 1])) + (pi @ (W * b)) / N
    Dn = lam * s[:, K] - (1 - p) * s[:, n] - p * (M >= n)
    sK = (Q >= Kmax).mean(axis=1)
    blockedW = lam * N * (pi @ (sK * ((W + 1 / N) ** 3 - W ** 3)))
    assert abs(3 * (rhs - lhs) + (pi @ Dn) / N ** 2 - blockedW) < 1e-10
    assert abs(rhs - lhs) <= blockedW + abs(pi @ Dn) / N ** 2 + 1e-10


@pytest.mark.parametrize("N,lam,p,Kmax,n", QUARTIC_EXACT)
def test_quartic_bounds_hold_exact(N, lam, p, Kmax, n):
    e = _quartic_exact(_exact(N, lam, p, Kmax), n)
    qb = qt.rate.quartic_bounds(lam, p, level=n)
    pi, X, W, vn, M, x, K, r = (e[k] for k in ("pi", "X", "W", "vn", "M", "x", "K", "r"))
    # the middle of the proof: the lower and upper bounds on E[F Phi]
    F = np.array([e["F"](list(q)) for q in e["Q"]])
    Phi = ((1 - p) * X + (1 - p) * r ** -n * vn * e["s"][:, n]
           + (qb.delta * r ** -(K + 1) * W if not qb.critical else 0.0)
           + p * sum(r ** -i * np.clip(e["Q"] - (i - 1), 0, None).mean(axis=1)
                     for i in range(K + 2, n + 1))
           + p * sum(r ** -i * e["vI"][i] * (M < i) for i in range(1, K + 1)))
    EFPhi = pi @ (F * Phi)
    assert (1 - p) * (pi @ X ** 2) / (2 * (1 + r)) + qb.theta * r ** (-2 * n) * (pi @ vn ** 3) \
        <= EFPhi + 1e-12
    assert EFPhi <= (qb.kappa / N * (pi @ X + r ** -n * (pi @ vn ** 2))
                     + (1 + lam) * qb.T ** 2 / (2 * N ** 3))
    # the theorem
    assert pi @ X ** 2 <= qb.fourth_moment_bound(N)
    for i in range(1, n):
        assert pi @ x[:, i - 1] ** 4 <= r ** (2 * i) * qb.fourth_moment_bound(N)
    assert pi @ vn ** 3 <= qb.tail_cube_bound(N)
    if K:
        assert np.all(np.array([pi @ (M < i) for i in range(1, K + 1)])
                      <= qb.longest_bound(N) + 1e-12)
    D = np.abs(e["s"][:, 1:K + 1] - e["sI"][1:K + 1]).sum(axis=1) + W   # ||s - s^I||_1
    if qb.critical:
        assert pi @ D >= qb.l1_lower(N)
    if qb.critical or n != K + 1:
        return
    assert pi @ D >= qb.l1_lower(N)
    # non-critical top, n = i* + 1: (C1), the corollary and the covariance error
    assert N * (pi @ W ** 2) <= qb.top_sq_bound(N)
    assert pi @ (x ** 2).sum(axis=1) >= qb.l2_lower(N)
    rho = lam * e["sI"][K] / p
    assert abs(N * (pi @ W) - rho / (1 - rho)) <= qb.top_mass_limit_error(N)
    cl = qt.rate.covariance_limit(lam, p)
    Sx = N * (x.T * pi) @ x
    assert np.linalg.norm(Sx - cl.sigma) <= cl.proved_error_bound(N)


def test_quartic_bounds_rates_and_bad_input():
    qb = qt.rate.quartic_bounds(0.7, 0.2)
    assert qb.level == 4 and not qb.critical and qb.theta == qb.delta
    # the bounds have the orders the theorem states: 1/N^2, 1/N^2, 1/N, 1/N
    Ns = np.array([10 ** 12, 10 ** 13])
    for f in (qb.fourth_moment_bound, qb.tail_cube_bound):
        got = f(Ns) * Ns.astype(float) ** 2
        assert got[1] == pytest.approx(got[0], rel=1e-3)
    assert qb.top_sq_bound(10 ** 12) == pytest.approx(qb.top_sq_bound(10 ** 11) / 10, rel=1e-3)
    assert qb.below_top_bound(10 ** 13) == pytest.approx(qb.below_top_bound(10 ** 12) / 10,
                                                         rel=1e-3)
    # the N^{-1/2} lower bound becomes positive, and sqrt(N) times it settles
    l1 = [qb.l1_lower(int(n)) * math.sqrt(n) for n in (1e14, 1e16)]
    assert 0 < l1[0] <= l1[1] and l1[1] == pytest.approx(l1[0], rel=0.05)
    assert qb.l2_lower(10 ** 16) * 1e16 == pytest.approx(min(qb.r, qb.r ** 3), rel=1e-3)
    cl = qt.rate.covariance_limit(0.7, 0.2)
    errs = [cl.proved_error_bound(10 ** k) for k in (12, 14, 16, 18)]
    assert all(a > 9 * b > 0 for a, b in zip(errs, errs[1:]))      # O(1/N) then O(N^{-1/2})
    # critical top: level i* + 2, theta = p, and sqrt(N) times the l1 bound increases
    qc = qt.rate.quartic_bounds(0.9, 0.1)
    assert qc.critical and qc.level == 10 and qc.theta == 0.1
    lc = [qc.l1_lower(10 ** k) * 10 ** (k / 2) for k in (12, 18, 24, 30)]
    assert all(0 < a < b for a, b in zip(lc, lc[1:]))
    # sqrt(N) times the l1 bound increases to l1_lower_limit (both cases)
    for q in (qb, qc):
        lim = q.l1_lower_limit()
        assert q.l1_lower(10 ** 30) * 1e15 == pytest.approx(lim, rel=1e-2)
        assert all(q.l1_lower(10 ** k) * 10 ** (k / 2) <= lim for k in (10, 20, 30))
    with pytest.raises(ValueError, match="p"):
        qc.top_sq_bound(10)
    with pytest.raises(ValueError, match="level"):
        qt.rate.quartic_bounds(0.9, 0.1, level=9)
    with pytest.raises(ValueError, match="level"):
        qt.rate.quartic_bounds(0.7, 0.2, level=3)
    with pytest.raises(ValueError, match="p"):
        qt.rate.quartic_bounds(0.5, 1.0)
    with pytest.raises(ValueError, match="lam"):
        qt.rate.quartic_bounds(0.0, 0.2)
