"""Cost model of the exact solver (private; see :mod:`qtheory.exact`).

Before :func:`qtheory.exact_stationary` builds anything it estimates the wall time and
the peak memory of the chosen method from the size of the chain alone:

* states :math:`S = \\binom{K+N}{N}` and stored generator entries
  :math:`E \\le S (1 + 2 \\min(N, K+1))`;
* ``"gmres"``: iterations :math:`\\min(\\text{maxiter}, 30 + 6K)` (measured counts of the
  ILU(0)-preconditioned GMRES(60) on these chains grow about linearly in K and stay
  below this line for ``lam <= 0.99``), each costing about
  ``1.2 ns * (3 E / S + 2 (restart + 2))`` per state (one product with the generator,
  two triangular solves and classical Gram-Schmidt twice over half a restart on
  average), plus the build at about 0.3 microseconds per state;
* ``"aggregation"``: multilevel aggregation W-cycles, about :math:`30 + K/2` of them
  (measured 28 to 43 for N = 4..6, K = 15..60), each about 0.14 microseconds per state,
  plus the build at about 0.7 microseconds per state; memory: the generator stored
  twice (row- and column-wise values, one index array) and a few vectors;
* ``"direct"``: SuperLU with the COLAMD ordering.  In the colexicographic order of the
  states, a change of one queue length moves the rank by at most one block of states
  with the same longest queue, :math:`w = \\binom{K+N-1}{N-1}`; the measured fill of the
  factors is about :math:`0.4\\, S w` entries (the model takes 0.45) and the time about :math:`6 \\cdot
  10^{-11} S w^2` seconds (fitted on N = 2..6, 900 to 40,000 states, one core).

These are estimates within a factor of about three on an idle core, enough to refuse a
solve of hours before it starts; a loaded machine is slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# seconds per unit of (3 E/S + 2 (restart + 2)) per state per GMRES iteration
_SEC_PER_ITER_UNIT = 1.2e-9
_SEC_BUILD_PER_STATE = 3e-7
_SEC_DIRECT = 6e-11
_FILL_FACTOR = 0.45
_BASE_BYTES = 250e6
# method="aggregation": seconds per state per W-cycle (two symmetric Gauss-Seidel sweeps,
# the coarse generator, the disaggregation and the residual; 1.25 s per cycle measured on
# 9.4e6 states, N = 6, K = 40, one idle core) and of the build and the level hierarchy
_SEC_AGG_CYCLE = 1.4e-7
_SEC_AGG_BUILD = 7e-7


@dataclass(frozen=True)
class ExactCost:
    """Estimated cost of one exact solve (see :func:`qtheory.exact.exact_cost_estimate`).

    Attributes
    ----------
    method : str
        ``"direct"``, ``"gmres"`` or ``"aggregation"``.
    n_states : float
        States of the truncated chain (a float: it may be ``inf``).
    nonzeros : float
        Stored entries of the generator.
    fill : float
        Entries of the LU factors (``"direct"``) or of the ILU(0) factor (``"gmres"``).
    iterations : float
        Estimated GMRES iterations (0 for ``"direct"``).
    seconds : float
        Estimated wall time on one idle core, seconds.
    bytes : float
        Estimated peak memory, bytes.
    """

    method: str
    n_states: float
    nonzeros: float
    fill: float
    iterations: float
    seconds: float
    bytes: float

    def text(self):
        """One line for messages: states, time and memory."""
        def num(x, unit):
            return f"more than 1e300{unit}" if not math.isfinite(x) else f"about {x:.3g}{unit}"
        return (f"{num(self.n_states, '')} states, {num(self.seconds, ' s')} and "
                f"{num(self.bytes / 1e9, ' GB')} ({self.method})")


def log_comb(n, k):
    """log C(n, k) for integers 0 <= k <= n of any size (float)."""
    if n < 2**1000:
        return math.lgamma(n + 1.0) - math.lgamma(k + 1.0) - math.lgamma(n - k + 1.0)
    m = min(k, n - k)
    if m > 10_000:
        return math.inf
    return sum(math.log(n - i) - math.log(i + 1) for i in range(m))


def _comb_float(n, k):
    lc = log_comb(n, k)
    return math.inf if lc > 700 else math.exp(lc)


def gmres_memory(S, n, K, restart):
    """The documented GMRES memory formula (bytes, float; inf beyond double range)."""
    if not math.isfinite(S):
        return math.inf
    E = S * (1 + 2 * min(n, K + 1))
    ib = 4 if E < 2**31 else 8
    states = S * 2 * n
    build = states + S * 16 + 2 * E * (8 + ib) + S * 8
    solve = states + E * (8 + ib) + E * 8 + S * 8 + (restart + 8) * S * 8
    return 1.1 * max(build, solve) + _BASE_BYTES


def estimate(n, K, method, maxiter, restart=60):
    """:class:`ExactCost` of solving the chain (n, K) by ``method``."""
    S = _comb_float(K + n, n)
    # beyond 1e6 stations or levels S is infinite anyway; keep every factor a float
    per_row = 1 + 2 * min(n, K + 1, 10**6)
    nf = float(min(n, 10**6))
    E = S * per_row
    build = _SEC_BUILD_PER_STATE * S
    if method == "aggregation":
        # W-cycles measured: 28 (N=4, K=15), 38 (K=30), 42 (K=60), 43 (N=6, K=40)
        its = float(min(maxiter, 30 + min(K, 10**6) / 2))
        seconds = _SEC_AGG_BUILD * S + its * _SEC_AGG_CYCLE * S
        ib = 4 if E < 2**31 else 8
        fill = E
        nbytes = 1.1 * (E * (16 + ib) + S * (2 * nf + 40)) + _BASE_BYTES
    elif method == "direct":
        w = _comb_float(K + n - 1, n - 1)
        fill = max(3.0 * S, min(_FILL_FACTOR * S * w, S * S))
        seconds = build + _SEC_DIRECT * S * w * w
        ib = 4 if fill < 2**31 else 8
        nbytes = 1.1 * (fill * (8 + ib) + E * 2 * (8 + ib) + S * (2 * nf + 40)) \
            + _BASE_BYTES
        its = 0.0
    else:
        fill = E
        its = float(min(maxiter, 30 + 6 * min(K, 10**6)))
        seconds = build + its * S * _SEC_PER_ITER_UNIT * (3 * per_row + 2 * (restart + 2))
        nbytes = gmres_memory(S, n, K, restart)
    fin = (lambda x: x if math.isfinite(x) else math.inf)
    return ExactCost(method=method, n_states=S, nonzeros=fin(E), fill=fin(fill),
                     iterations=its, seconds=fin(seconds), bytes=fin(nbytes))
