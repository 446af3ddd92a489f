"""Multilevel iterative aggregation-disaggregation for the exact solver (private).

See :func:`qtheory.exact.exact_stationary` (``method="aggregation"``).  The chain of
sorted queue vectors truncated at ``K`` is aggregated by halving every queue length,
``a -> floor(a / 2)``: the image of a sorted vector is sorted, so the aggregates are the
states of the same kind of chain truncated at ``K // 2``, ranked by the same
colexicographic rule.  Halving is repeated until a chain of at most a few thousand
states remains.  One V-cycle on level ``l`` (Horton and Leutenegger 1994; Stewart 1994,
Section 6.3, for the two-level iterative aggregation-disaggregation of Koury,
McAllister and Stewart 1984):

1. ``nu`` Gauss-Seidel sweeps on :math:`\\pi Q_l = 0`;
2. the coarse generator :math:`C_{IJ} = \\sum_{i \\in I} x_i \\sum_{j \\in J} (Q_l)_{ij}
   / \\sum_{i \\in I} x_i` (exact at the stationary law: its stationary law is then
   the aggregated law), solved by one V-cycle on level ``l + 1`` (directly on the
   coarsest level) from the aggregated iterate;
3. disaggregation: each :math:`x_i` is scaled by the coarse solution over the current
   mass of its aggregate;
4. ``nu`` Gauss-Seidel sweeps.

Every matrix is stored column-wise (the rates *into* each state), with the diagonal
first in each column: the neighbour relation of these chains is symmetric (an arrival
and a service undo each other), so the pattern of the generator built row-wise serves
column-wise as well.
"""

from __future__ import annotations

import math

import numpy as np

from . import _exact_kernels as _k
from ._numba import jit

# Halving stops at a chain of at most this many states, solved directly on each cycle.
COARSEST_STATES = 600


@jit
def diagonal_first(indptr, indices, data):
    """Copies of (data, indices) of a CSR matrix with each row's diagonal moved first."""
    d = data.copy()
    ind = indices.copy()
    for r in range(indptr.shape[0] - 1):
        a = indptr[r]
        for q in range(a, indptr[r + 1]):
            if ind[q] == r:
                d[a], d[q] = d[q], d[a]
                ind[a], ind[q] = ind[q], ind[a]
                break
    return d, ind


@jit
def gauss_seidel(indptr, indices, data, x, sweeps):
    """Forward then backward Gauss-Seidel sweeps on x Q = 0 (column form, in place)."""
    n = indptr.shape[0] - 1
    for _ in range(sweeps):
        for j in range(n):
            acc = 0.0
            for q in range(indptr[j] + 1, indptr[j + 1]):
                acc += data[q] * x[indices[q]]
            x[j] = acc / -data[indptr[j]]
        for j in range(n - 1, -1, -1):
            acc = 0.0
            for q in range(indptr[j] + 1, indptr[j + 1]):
                acc += data[q] * x[indices[q]]
            x[j] = acc / -data[indptr[j]]


@jit
def coarsen(indptr, indices, data, x, agg, cptr, cind, nc):
    """Aggregated iterate and coarse generator (column form on the coarse pattern).

    Returns ``(X, cdata)``: ``X[I]`` the mass of aggregate I and ``cdata`` the rates
    :math:`C_{IJ}` in the pattern ``(cptr, cind)``, diagonal first in each column.
    """
    X = np.zeros(nc)
    n = indptr.shape[0] - 1
    for i in range(n):
        X[agg[i]] += x[i]
    cdata = np.zeros(cind.shape[0])
    out = np.zeros(nc)
    for j in range(n):
        J = agg[j]
        for q in range(indptr[j] + 1, indptr[j + 1]):
            i = indices[q]
            I = agg[i]
            if I == J:
                continue
            f = x[i] * data[q]
            out[I] += f
            for q2 in range(cptr[J] + 1, cptr[J + 1]):
                if cind[q2] == I:
                    cdata[q2] += f
                    break
    for J in range(nc):
        for q2 in range(cptr[J] + 1, cptr[J + 1]):
            I = cind[q2]
            cdata[q2] = cdata[q2] / X[I] if X[I] > 0.0 else 0.0
        cdata[cptr[J]] = -out[J] / X[J] if X[J] > 0.0 else -1.0
    return X, cdata


@jit
def disaggregate(x, agg, X, Xnew):
    """x_i <- x_i * Xnew[I] / X[I] for I the aggregate of i (in place)."""
    for i in range(x.shape[0]):
        I = agg[i]
        if X[I] > 0.0:
            x[i] *= Xnew[I] / X[I]
        else:
            x[i] = 0.0


@jit
def residual_max(indptr, indices, data, x):
    """max_j |(x Q)_j| in column form."""
    out = 0.0
    for j in range(indptr.shape[0] - 1):
        acc = 0.0
        for q in range(indptr[j], indptr[j + 1]):
            acc += data[q] * x[indices[q]]
        if abs(acc) > out:
            out = abs(acc)
    return out


@jit
def positive_floor(x, floor):
    """x_i <- max(x_i, floor) (keeps every aggregate's mass positive)."""
    for i in range(x.shape[0]):
        if not x[i] > floor:
            x[i] = floor


def _pattern(n, K):
    """Row pattern (diagonal first) and states of the chain (n, K)."""
    S = math.comb(K + n, n)
    binom = _k.binomial_table(K + n, n)
    counts = _k.count_entries(n, K, S)
    indptr = np.zeros(S + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    nnz = int(indptr[-1])
    itype = np.int32 if max(S, nnz) < 2**31 else np.int64
    indices = np.empty(nnz, dtype=itype)
    data = np.empty(nnz)
    states = np.empty((S, n), dtype=np.int16)
    _k.fill_generator(n, K, 0.5, 0.5, binom, indptr, indices, data, states)
    return indptr, indices, states


def hierarchy(n, K, states):
    """Levels below (n, K): list of (K_l, indptr, indices, agg from the level above)."""
    levels = []
    Kl = K
    while Kl > 1 and math.comb(Kl + n, n) > COARSEST_STATES:
        Kc = Kl // 2
        binom = _k.binomial_table(Kc + n, n)
        agg = _k.rank_states((states // 2).astype(np.int16), binom)
        cptr, cind, cstates = _pattern(n, Kc)
        levels.append((Kc, cptr, cind, agg))
        states, Kl = cstates, Kc
    return levels


@jit
def _dense(indptr, indices, data):
    """Dense array of a column-form generator: row j holds the rates into j."""
    S = indptr.shape[0] - 1
    A = np.zeros((S, S))
    for j in range(S):
        for q in range(indptr[j], indptr[j + 1]):
            A[j, indices[q]] += data[q]
    return A


def _direct(indptr, indices, data):
    """Stationary law of a small column-form generator by a dense solve."""
    A = _dense(indptr, indices, data)
    S = A.shape[0]
    A[0, :] = 1.0
    b = np.zeros(S)
    b[0] = 1.0
    x = np.linalg.solve(A, b)
    return np.maximum(x, 0.0)


def vcycle(level, mats, levels, x, nu, gamma=1):
    """One V-cycle on ``level`` (0 = finest) from x, in place."""
    indptr, indices, data = mats
    if level == len(levels):
        x[:] = _direct(indptr, indices, data) * x.sum()
        return
    gauss_seidel(indptr, indices, data, x, nu)
    positive_floor(x, 1e-300)
    Kc, cptr, cind, agg = levels[level]
    nc = cptr.shape[0] - 1
    X, cdata = coarsen(indptr, indices, data, x, agg, cptr, cind, nc)
    Xnew = X.copy()
    for _ in range(gamma if level + 1 < len(levels) else 1):
        vcycle(level + 1, (cptr, cind, cdata), levels, Xnew, nu, gamma)
    disaggregate(x, agg, X, Xnew)
    gauss_seidel(indptr, indices, data, x, nu)
