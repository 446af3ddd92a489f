"""Compiled kernels of the exact solver (private; see :mod:`qtheory.exact`).

A state of the N-station system truncated at ``max_queue = K`` is a multiset of N queue
lengths in ``{0, ..., K}``, stored sorted non-decreasingly as ``a[0] <= ... <= a[N-1]``.
The map ``b[j] = a[j] + j`` turns it into a strictly increasing sequence in
``{0, ..., K + N - 1}``, i.e. an N-subset, and the combinatorial number system ranks
N-subsets in colexicographic order:

    rank(a) = sum_j C(b[j], j + 1),   0 <= rank < C(K + N, N).

Changing one queue length by one moves a single ``b[j]`` by one, so the rank of every
neighbour follows from the current rank in O(1):

    a[j] + 1 (j the last index holding its value):   rank + C(b[j], j)
    a[j] - 1 (j the first index holding its value):  rank - C(b[j] - 1, j)

States are enumerated in rank order by the colex successor rule, so the whole generator
is built in two linear passes without any dictionary.
"""

from __future__ import annotations

import numpy as np

from ._numba import jit


@jit
def binomial_table(nmax, kmax):
    """C(n, k) for 0 <= n <= nmax, 0 <= k <= kmax, as int64 (Pascal's triangle)."""
    c = np.zeros((nmax + 1, kmax + 1), dtype=np.int64)
    for n in range(nmax + 1):
        c[n, 0] = 1
        for k in range(1, min(n, kmax) + 1):
            c[n, k] = c[n - 1, k - 1] + (c[n - 1, k] if k <= n - 1 else 0)
    return c


@jit
def rank_states(states, binom):
    """Colex rank of each sorted state (rows of ``states``, shape (m, N))."""
    m, n = states.shape
    out = np.empty(m, dtype=np.int64)
    for r in range(m):
        acc = 0
        for j in range(n):
            acc += binom[states[r, j] + j, j + 1]
        out[r] = acc
    return out


@jit
def _next_state(b, top):
    """Colex successor of the increasing sequence b (values < top); False at the end."""
    n = b.shape[0]
    for j in range(n):
        limit = b[j + 1] if j + 1 < n else top
        if b[j] + 1 < limit:
            b[j] += 1
            for i in range(j):
                b[i] = i
            return True
    return False


@jit
def count_entries(n, K, n_states):
    """Number of stored entries (off-diagonal plus diagonal) of each row of Q."""
    b = np.arange(n).astype(np.int64)
    counts = np.empty(n_states, dtype=np.int64)
    top = K + n
    for r in range(n_states):
        c = 1  # diagonal
        for j in range(n):
            a = b[j] - j
            last = j == n - 1 or b[j + 1] - (j + 1) > a
            first = j == 0 or b[j - 1] - (j - 1) < a
            if last and a < K:
                c += 1  # arrival to a station holding a jobs
            if first and a >= 1:
                c += 1  # service at a station holding a jobs (local, or central at top)
        counts[r] = c
        _next_state(b, top)
    return counts


@jit
def fill_generator(n, K, lam, p, binom, indptr, indices, data, states):
    """Fill the CSR arrays of the generator Q (rows = source states) and the states.

    Rates: an arrival at each station at rate ``lam`` (blocked at a station holding K
    jobs), a local service at rate ``1 - p`` at each non-empty station, and a central
    service at rate ``n * p`` at one longest queue.  Stations holding the same number
    of jobs are interchangeable, so their rates add up.
    """
    b = np.arange(n).astype(np.int64)
    top = K + n
    n_states = indptr.shape[0] - 1
    local = 1.0 - p
    central = n * p
    for r in range(n_states):
        pos = indptr[r]
        indices[pos] = r
        diag_pos = pos
        pos += 1
        out = 0.0
        amax = b[n - 1] - (n - 1)
        # Walk over runs of equal queue lengths a with multiplicity m.
        j = 0
        while j < n:
            a = b[j] - j
            k = j
            while k + 1 < n and b[k + 1] - (k + 1) == a:
                k += 1
            m = k - j + 1
            states[r, j:k + 1] = a
            if a < K:
                rate = lam * m
                indices[pos] = r + binom[b[k], k]
                data[pos] = rate
                out += rate
                pos += 1
            if a >= 1:
                rate = local * m
                if a == amax:
                    rate += central
                indices[pos] = r - binom[b[j] - 1, j]
                data[pos] = rate
                out += rate
                pos += 1
            j = k + 1
        data[diag_pos] = -out
        _next_state(b, top)


@jit
def state_statistics(states, pi, K):
    """Stationary E[s_i] and P(M >= i), i = 0..K, from states (m, N) and weights pi."""
    m, n = states.shape
    s = np.zeros(K + 1)
    longest = np.zeros(K + 1)
    for r in range(m):
        w = pi[r]
        # states are sorted: the number of stations with >= i jobs is n - (first index
        # with a >= i); accumulate per station instead, it is cheaper for small n.
        for j in range(n):
            a = states[r, j]
            for i in range(1, a + 1):
                s[i] += w
        amax = states[r, n - 1]
        longest[amax] += w
    s /= n
    s[0] = 1.0
    # tail sums of the law of M
    tail = np.zeros(K + 1)
    acc = 0.0
    for i in range(K, -1, -1):
        acc += longest[i]
        tail[i] = acc
    return s, tail


# --------------------------------------------------------------------------------------
# Linear algebra: ILU(0) preconditioned restarted GMRES, all single-threaded and compiled
# (BLAS threads spin badly on a loaded machine; these loops do not need BLAS).


@jit
def csr_matvec(indptr, indices, data, x):
    """y = A x for a CSR matrix."""
    n = indptr.shape[0] - 1
    y = np.empty(n)
    for i in range(n):
        acc = 0.0
        for q in range(indptr[i], indptr[i + 1]):
            acc += data[q] * x[indices[q]]
        y[i] = acc
    return y


@jit
def ilu0(indptr, indices, data):
    """Incomplete LU factorisation with zero fill of a CSR matrix with sorted indices.

    Returns the factor values (same pattern as ``data``; strict lower part is L with unit
    diagonal, the rest is U) and the position of each diagonal entry.
    """
    n = indptr.shape[0] - 1
    a = data.copy()
    diag = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        for q in range(indptr[i], indptr[i + 1]):
            if indices[q] == i:
                diag[i] = q
    iw = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        for q in range(indptr[i], indptr[i + 1]):
            iw[indices[q]] = q
        for q in range(indptr[i], indptr[i + 1]):
            k = indices[q]
            if k >= i:
                break
            a[q] /= a[diag[k]]
            f = a[q]
            for q2 in range(diag[k] + 1, indptr[k + 1]):
                w = iw[indices[q2]]
                if w >= 0:
                    a[w] -= f * a[q2]
        for q in range(indptr[i], indptr[i + 1]):
            iw[indices[q]] = -1
    return a, diag


@jit
def ilu0_solve(indptr, indices, a, diag, r):
    """Solve L U z = r with the factors of :func:`ilu0`."""
    n = r.shape[0]
    y = r.copy()
    for i in range(n):
        acc = y[i]
        for q in range(indptr[i], diag[i]):
            acc -= a[q] * y[indices[q]]
        y[i] = acc
    for i in range(n - 1, -1, -1):
        acc = y[i]
        for q in range(diag[i] + 1, indptr[i + 1]):
            acc -= a[q] * y[indices[q]]
        y[i] = acc / a[diag[i]]
    return y


@jit
def _dot(x, y):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i] * y[i]
    return acc


@jit
def gmres_cycle(indptr, indices, data, lu, diag, b, x, bnorm, rtol, restart, V):
    """One restart cycle of right-preconditioned GMRES(restart) on A x = b, in place.

    Returns (number of inner iterations, estimated relative residual).  ``V`` is scratch
    of shape (restart + 1, n); the preconditioned directions are rebuilt at the end
    instead of being stored, so memory is (restart + 1) n floats.
    """
    n = b.shape[0]
    ax = csr_matvec(indptr, indices, data, x)
    r = b - ax
    beta = np.sqrt(_dot(r, r))
    if beta <= rtol * bnorm:
        return 0, beta / bnorm
    for i in range(n):
        V[0, i] = r[i] / beta
    H = np.zeros((restart + 1, restart))
    cs = np.zeros(restart)
    sn = np.zeros(restart)
    g = np.zeros(restart + 1)
    g[0] = beta
    k = 0
    for j in range(restart):
        z = ilu0_solve(indptr, indices, lu, diag, V[j])
        w = csr_matvec(indptr, indices, data, z)
        for _ in range(2):  # classical Gram-Schmidt, twice
            for i in range(j + 1):
                h = _dot(V[i], w)
                H[i, j] += h
                for t in range(n):
                    w[t] -= h * V[i, t]
        hn = np.sqrt(_dot(w, w))
        H[j + 1, j] = hn
        if hn > 0.0:
            for t in range(n):
                V[j + 1, t] = w[t] / hn
        for i in range(j):
            tmp = cs[i] * H[i, j] + sn[i] * H[i + 1, j]
            H[i + 1, j] = -sn[i] * H[i, j] + cs[i] * H[i + 1, j]
            H[i, j] = tmp
        d = np.hypot(H[j, j], H[j + 1, j])
        cs[j] = H[j, j] / d
        sn[j] = H[j + 1, j] / d
        H[j, j] = d
        H[j + 1, j] = 0.0
        g[j + 1] = -sn[j] * g[j]
        g[j] = cs[j] * g[j]
        k = j + 1
        if abs(g[j + 1]) <= rtol * bnorm or hn == 0.0:
            break
    y = np.zeros(k)
    for i in range(k - 1, -1, -1):
        acc = g[i]
        for t in range(i + 1, k):
            acc -= H[i, t] * y[t]
        y[i] = acc / H[i, i]
    # x += M^{-1} V_k y
    comb = np.zeros(n)
    for i in range(k):
        for t in range(n):
            comb[t] += y[i] * V[i, t]
    z = ilu0_solve(indptr, indices, lu, diag, comb)
    for t in range(n):
        x[t] += z[t]
    return k, abs(g[k]) / bnorm


@jit
def max_abs_residual(indptr, indices, data, x, first):
    """max |(A x)_i| over rows i >= first of a CSR matrix A.

    With ``first = 1`` and A = Q^T whose row 0 was replaced, row 0's residual of the
    original Q^T is recovered as minus the sum of the others (the rows of a generator sum
    to zero) and included in the maximum.
    """
    n = indptr.shape[0] - 1
    out = 0.0
    total = 0.0
    for i in range(first, n):
        acc = 0.0
        for q in range(indptr[i], indptr[i + 1]):
            acc += data[q] * x[indices[q]]
        total += acc
        if abs(acc) > out:
            out = abs(acc)
    if first == 1 and abs(total) > out:
        out = abs(total)
    return out


@jit
def expected_l1_distance(states, pi, target):
    """E sum_{i>=1} |s_i(X) - target[i]| over the law pi of the sorted states X.

    ``target`` has shape (L + 1,) with L at least the largest queue length in ``states``;
    s_i(X) is the fraction of the N stations of state X holding at least i jobs.
    """
    m, n = states.shape
    L = target.shape[0] - 1
    total_target = 0.0
    for i in range(1, L + 1):
        total_target += target[i]
    out = 0.0
    for r in range(m):
        w = pi[r]
        if w == 0.0:
            continue
        # levels where s_i(X) > 0 are 1..max; above, the term is target[i] itself
        amax = states[r, n - 1]
        d = 0.0
        rest = total_target
        j = 0  # first index with states[r, j] >= i
        for i in range(1, amax + 1):
            while states[r, j] < i:
                j += 1
            si = (n - j) / n
            d += abs(si - target[i])
            rest -= target[i]
        out += w * (d + rest)
    return out


# One Arnoldi step and the final update of GMRES, so that the restart cycle is driven
# from Python one iteration at a time (Ctrl-C is honoured between two iterations; a
# compiled cycle of 60 iterations can take half a minute on the largest chains).


@jit
def gmres_step(indptr, indices, data, lu, diag, V, H, j):
    """Arnoldi step j of right-preconditioned GMRES: fills H[:j+2, j] and V[j+1].

    Returns the norm H[j+1, j] (0 on a lucky breakdown).
    """
    n = V.shape[1]
    z = ilu0_solve(indptr, indices, lu, diag, V[j])
    w = csr_matvec(indptr, indices, data, z)
    for _ in range(2):  # classical Gram-Schmidt, twice
        for i in range(j + 1):
            h = _dot(V[i], w)
            H[i, j] += h
            for t in range(n):
                w[t] -= h * V[i, t]
    hn = np.sqrt(_dot(w, w))
    H[j + 1, j] = hn
    if hn > 0.0:
        for t in range(n):
            V[j + 1, t] = w[t] / hn
    return hn


@jit
def gmres_update(indptr, indices, lu, diag, V, y, x):
    """x += M^{-1} V[:k]^T y with k = len(y), in place."""
    n = x.shape[0]
    comb = np.zeros(n)
    for i in range(y.shape[0]):
        for t in range(n):
            comb[t] += y[i] * V[i, t]
    z = ilu0_solve(indptr, indices, lu, diag, comb)
    for t in range(n):
        x[t] += z[t]
