r"""The identity estimator of the mean queue length, for validated arguments.

For every N the stationary law satisfies, level by level below the fluid top level
:math:`i^*` (book/steady-state.md, ``steady-state-eq-lower-gap``, a consequence of the
exact identity ``steady-state-thm-identity``),

.. math:: (1-p)\,d_i = \lambda\, d_{i-1} + p\,P(M < i), \qquad d_0 = 0,\ 1 \le i \le i^*,

with :math:`d_i = E[s^N_i] - s^I_i` and :math:`M` the longest queue.  Solving the
recursion, :math:`\sum_{i \le i^*} d_i = \sum_{j=1}^{i^*} c_j P(M < j)` with fixed
weights :math:`c_j = \frac{p}{1-p}\sum_{i=j}^{i^*} r^{i-j}`, :math:`r = \lambda/(1-p)`,
so that

.. math:: E[v^N_1] = v^I_1 + \sum_{j=1}^{i^*} c_j\, P(M < j) + \sum_{i > i^*} E[s^N_i].

The *identity estimator* replaces the probabilities and expectations on the right by the
time fractions and time averages of one run.  It is a fixed linear combination of time
averages whose stationary expectations satisfy this identity, so a stationary run
estimates :math:`E[v^N_1]` without bias (the proof is in book/simulation.md); it leaves
out the :math:`O(N^{-1/2})` fluctuations of the well-populated levels below the top that
the plain time average carries, and it is never below :math:`v^I_1`.  Since
:math:`\{M < j\} \subset \{M < j + 1\}`, the middle sum is the time average of
:math:`C(M) = \sum_{j > M} c_j` (0 when :math:`M \ge i^*`): the estimator depends on the
run only through the longest queue and the jobs above the fluid top level.

Shared by :func:`qtheory.simulate` (which reports it beside the plain average) and its
users; nothing here validates its arguments.  Valid for :math:`0 < p < 1`; for
:math:`\lambda \le p` (:math:`i^* = 0`) it is the plain average itself.

References
----------
J. N. Tsitsiklis and K. Xu, "On the power of (even a little) resource pooling",
Stochastic Systems 2(1), 2012 (the fluid model and its invariant state).  The estimator
is a control variate of the kind of S. G. Henderson and P. W. Glynn, "Approximating
martingales for variance reduction in Markov process simulation", Mathematics of
Operations Research 27(2), 2002: it subtracts from the plain average time averages of
the generator applied to bounded functions (the :math:`s_i`), which have mean zero in
stationarity.
"""

from __future__ import annotations

import numpy as np

from . import _invariant as _inv

__all__ = ["identity_valid", "identity_top_level", "identity_weights",
           "identity_batches"]


def identity_valid(lam, p):
    """True when the identity estimator is defined (0 < p < 1) for validated lam, p."""
    return 0.0 < p < 1.0


def identity_top_level(lam, p):
    """The fluid top level i* the estimator uses (0 when lam <= p)."""
    return int(_inv.invariant_state(lam, p).size - 1) if lam > p else 0


def identity_weights(lam, p):
    """Weights c_1..c_{i*} (float64, shape (i*,)) of the time fractions of {M < j}."""
    top = identity_top_level(lam, p)
    c = np.zeros(top)
    # c_j = p/(1-p) * sum_{i=j}^{i*} r^(i-j): accumulate from the top down
    r = lam / (1.0 - p)
    acc = 0.0
    for j in range(top, 0, -1):
        acc = 1.0 + r * acc
        c[j - 1] = p / (1.0 - p) * acc
    return c


def identity_batches(lam, p, batch_s, batch_tail):
    """Per-batch values of the identity estimator and of its two parts.

    Parameters
    ----------
    lam, p : float
        Validated, ``0 < p < 1``.
    batch_s : ndarray, shape (B, levels)
        Per-batch time averages of the tail fractions ``s``.
    batch_tail : ndarray, shape (B, levels)
        Per-batch time averages of the indicators {M >= i}.

    Returns
    -------
    values, below, above : ndarray, shape (B,)
        ``values = v^I_1 + below + above``: ``below`` the deficits
        :math:`\\sum_{i \\le i^*} \\hat d_i` from the recursion, ``above`` the jobs per
        station above :math:`i^*`.
    """
    bs = np.asarray(batch_s, dtype=np.float64)
    bt = np.asarray(batch_tail, dtype=np.float64)
    B = bs.shape[0]
    top = identity_top_level(lam, p)
    above = bs[:, top + 1:].sum(axis=1)
    delta = np.zeros(B)
    below = np.zeros(B)
    for i in range(1, top + 1):  # the recursion of the identity, batch by batch
        q = 1.0 - (bt[:, i] if i < bt.shape[1] else 0.0)
        delta = (lam * delta + p * q) / (1.0 - p)
        below += delta
    v = float(_inv.mean_queue_length(lam, p)) if top > 0 else 0.0
    return v + below + above, below, above
