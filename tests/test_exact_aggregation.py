"""Tests of method="aggregation" of the exact solver (multilevel aggregation cycles)."""

import math

import numpy as np
import pytest

from qtheory.exact import exact_cost_estimate, exact_memory_estimate, exact_stationary


@pytest.mark.parametrize("n, K", [(2, 30), (3, 20), (4, 12)])
def test_agrees_with_the_direct_solver(n, K):
    a = exact_stationary(n, 0.9, 0.1, max_queue=K, method="aggregation", tol=1e-15,
                         truncation_tol=1.0)
    d = exact_stationary(n, 0.9, 0.1, max_queue=K, method="direct", truncation_tol=1.0)
    assert a.method == "aggregation" and a.iterations >= 1
    assert 0.5 * np.abs(a.probabilities - d.probabilities).sum() < 1e-10


@pytest.mark.parametrize("n, K", [(2, 20), (4, 9)])
def test_p0_is_a_product_of_truncated_geometric_laws(n, K):
    lam = 0.7
    r = exact_stationary(n, lam, 0.0, max_queue=K, method="aggregation", tol=1e-15,
                         truncation_tol=1.0)
    g = lam ** np.arange(K + 1) * (1 - lam) / (1 - lam ** (K + 1))
    expect = np.array([np.prod(g[s]) * math.factorial(n)
                       / np.prod([math.factorial(c) for c in np.bincount(s)])
                       for s in r.states.astype(int)])
    np.testing.assert_allclose(r.probabilities, expect, rtol=1e-9, atol=1e-14)


def test_flow_balance_identity():
    r = exact_stationary(4, 0.8, 0.3, max_queue=14, method="aggregation",
                         truncation_tol=1.0)
    np.testing.assert_allclose(r.balance_defect(), r.blocked_rate, atol=1e-10)
    assert abs(r.probabilities.sum() - 1) < 1e-12 and r.probabilities.min() >= 0


def test_auto_chooses_aggregation_for_large_chains_and_budget_works():
    assert exact_cost_estimate(6, 40, "aggregation").seconds \
        < exact_cost_estimate(6, 40, "gmres").seconds / 3
    assert exact_memory_estimate(6, 40, "aggregation") < 16e9
    with pytest.raises(ValueError, match=r"aggregation"):
        exact_stationary(6, 0.9, 0.1, max_queue=40, max_seconds=10)
    # below 10 s of estimated GMRES time auto keeps GMRES (the tighter residual)
    assert exact_cost_estimate(4, 22, "gmres").seconds < 10
    r = exact_stationary(4, 0.9, 0.1, max_queue=22, truncation_tol=1.0)
    assert r.method == "gmres"


def test_bad_method_and_cycle_cap():
    with pytest.raises(ValueError, match="method"):
        exact_cost_estimate(3, 10, "multigrid")
    with pytest.raises(RuntimeError, match="maxiter"):
        exact_stationary(4, 0.9, 0.1, max_queue=20, method="aggregation", maxiter=2,
                         truncation_tol=1.0)
