"""Guards against inputs that used to give a silent number, a foreign exception or a hang.

Each case was found by trying to break the library as a new user would.
"""

from __future__ import annotations

import warnings

import pytest

import qtheory as qt


def test_integer_too_large_for_a_float_is_a_value_error():
    for f in (qt.mean_queue_length, qt.invariant_state):
        with pytest.raises(ValueError, match="lam"):
            f(10**400, 0.1)
        with pytest.raises(ValueError, match=r"\bp\b"):
            f(0.5, 10**400)


@pytest.mark.parametrize("n", [10**10, 2**63])
def test_simulate_refuses_more_stations_than_memory_allows(n):
    with pytest.raises(ValueError, match="n_stations"):
        qt.simulate(n, 0.9, 0.1, t_end=1.0, warmup=0.0)
    with pytest.raises(ValueError, match="n_stations"):
        qt.sample_path(n, 0.9, 0.1, [1.0])


@pytest.mark.parametrize("t_end", [1e15, 1e300])
def test_simulate_refuses_runs_it_cannot_finish(t_end):
    with pytest.raises(ValueError, match="t_end"):
        qt.simulate(100, 0.9, 0.1, t_end=t_end, warmup=0.0)
    with pytest.raises(ValueError, match="times"):
        qt.sample_path(100, 0.9, 0.1, [0.0, t_end])


def test_simulate_warns_when_batches_hold_almost_no_events():
    # A run of 1e-3 time units at N = 100 has about 0.19 events: the result describes the
    # initial state (mean 0.5 here), not the steady state (about 4); it must say so.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = qt.simulate(100, 0.9, 0.1, t_end=1e-3, warmup=0.0, s0=[1.0, 0.5], seed=1)
    assert any("fewer than 100 events" in str(w.message) for w in caught)
    assert any("fewer than 100 events" in m for m in res.warnings)


def test_simulate_normal_run_has_no_few_events_warning():
    res = qt.simulate(100, 0.9, 0.1, t_end=200.0, warmup=20.0, seed=1)
    assert not any("fewer than 100 events" in m for m in res.warnings)


def test_fluid_trajectory_refuses_unbounded_horizons():
    with pytest.raises(ValueError, match="times"):
        qt.fluid_trajectory(0.9, 0.1, [0.0, 1e8])
    # the largest accepted horizon still converges to the invariant state
    s = qt.fluid_trajectory(0.9, 0.1, [1e6], check=False)[-1]
    inv = qt.invariant_state(0.9, 0.1)
    assert abs(s[: len(inv)] - inv).sum() + s[len(inv):].sum() < 1e-9


@pytest.mark.parametrize("budget", [1, 5, 14])
@pytest.mark.parametrize("method", ["RK45", "Radau", "BDF"])
def test_naive_solve_budget_exhausted_during_setup_is_reported(method, budget):
    res = qt.naive_fluid_solve(0.9, 0.1, 10.0, method=method, max_evaluations=budget)
    assert not res.success


@pytest.mark.parametrize("n_points", [-1, None, "a", 2.5, True])
def test_point_seeds_rejects_bad_counts(n_points):
    with pytest.raises(ValueError, match="n_points"):
        qt.point_seeds(1, n_points)


def test_point_seeds_zero_points_is_empty():
    assert qt.point_seeds(1, 0) == []
