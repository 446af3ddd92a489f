"""Guards against inputs that used to give a silent number, a foreign exception or a hang.

Each case was found by trying to break the library as a new user would.
"""

from __future__ import annotations

import warnings

import pytest

import qtheory as qt
from qtheory import book as qb
from qtheory.sweep import point_seeds


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
    res = qb.naive_fluid_solve(0.9, 0.1, 10.0, method=method, max_evaluations=budget)
    assert not res.success


@pytest.mark.parametrize("n_points", [-1, None, "a", 2.5, True])
def test_point_seeds_rejects_bad_counts(n_points):
    with pytest.raises(ValueError, match="n_points"):
        point_seeds(1, n_points)


def test_point_seeds_zero_points_is_empty():
    assert point_seeds(1, 0) == []


@pytest.mark.parametrize("call, name", [
    (lambda v: qt.simulate(10, 0.9, 0.1, t_end=10.0, warmup=1.0, s0=v), "s0"),
    (lambda v: qt.sample_path(10, 0.9, 0.1, v), "times"),
    (lambda v: qt.fluid_trajectory(0.9, 0.1, [1.0], v), "s0"),
    (lambda v: qt.fluid.l1_distance(v, [1.0, 0.5]), "a"),
    (lambda v: qt.fluid_drift(v, 0.9, 0.1), "s"),
])
@pytest.mark.parametrize("bad", [["1", "0.5"], [1.0, "0.5"], [True, False],
                                 [1.0, 0.5j], [1.0, None], [[1.0, 0.5], [1.0]]])
def test_arrays_of_strings_bools_complex_or_ragged_are_value_errors(call, name, bad):
    # "0.5" used to be read as the number 0.5 and a ragged list raised numpy's error
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call(bad)


def test_real_arrays_of_python_and_numpy_numbers_are_accepted():
    from fractions import Fraction

    s = qt.fluid_trajectory(0.9, 0.1, [1.0], [1, Fraction(1, 2)])
    assert s.shape[0] == 1 and s[0, 0] == 1.0
    assert qt.fluid.l1_distance([1, 0.5], [1.0, 0.25]) == 0.25


@pytest.mark.parametrize("call, name", [
    (lambda v: qt.simulate(10, 0.9, 0.1, t_end=10.0, warmup=1.0, progress=v), "progress"),
    (lambda v: qt.sample_path(10, 0.9, 0.1, [1.0], progress=v), "progress"),
    (lambda v: qt.sample_path(10, 0.9, 0.1, [1.0], per_station=v), "per_station"),
    (lambda v: qt.fluid_trajectory(0.9, 0.1, [1.0], check=v), "check"),
    (lambda v: qt.sweep(abs, {"x": [1]}, progress=v), "progress"),
])
@pytest.mark.parametrize("bad", ["no", "False", 0, 1, [True]])
def test_switches_accept_only_bools(call, name, bad):
    # every non-empty string is truthy: "no" used to switch the option on
    with pytest.raises(ValueError, match=name):
        call(bad)


def test_supermarket_random_assignment_never_truncates_silently():
    lam = 1 - 1e-6  # lam**i stays above 1e-300 for 6.9e8 levels
    with pytest.raises(ValueError, match="max_levels"):
        qt.supermarket.supermarket_fixed_point(lam, 1)
    s = qt.supermarket.supermarket_fixed_point(0.999, 1)
    assert s[-1] >= 1e-300 and s[-1] * 0.999 < 1e-300  # every level above 1e-300
    assert abs(s[1:].sum() - 999.0) < 1e-9 * 999  # the whole M/M/1 mean
    assert qt.supermarket.supermarket_mean_queue_length(lam, 1) == lam / (1 - lam)


def test_fluid_limit_study_without_any_distance_is_an_error():
    # lam = 0 from the empty state: every path equals the fluid trajectory (distance
    # 0), so log(distance) has no slope to fit; it used to return NaN exponents
    with pytest.raises(ValueError, match="distance 0"):
        qb.fluid_limit_study(0.0, 0.1, 1.0, [10, 20], [0, 1])


def test_supermarket_max_levels_refuses_instead_of_truncating():
    # 0.99 ** (2**i - 1) >= 1e-300 for i <= 16 only
    assert len(qt.supermarket.supermarket_fixed_point(0.99, 2)) == 17
    assert len(qt.supermarket.supermarket_fixed_point(0.99, 2, max_levels=16)) == 17
    with pytest.raises(ValueError, match="max_levels"):
        qt.supermarket.supermarket_fixed_point(0.99, 2, max_levels=15)


# ------------------------------------------------------------------ issue 14, item 5

import math  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from qtheory import fluid as fluidmod  # noqa: E402


@pytest.mark.parametrize("n_rep", [10**9, 2**70])
def test_replicate_caps_total_work_before_spawning_seeds(n_rep, monkeypatch):
    from qtheory import simulation as simmod

    def boom(*a, **k):  # no seed may be made (nor spawned) for a refused request
        raise AssertionError("seed work before checking the total work")

    monkeypatch.setattr(simmod, "check_seed", boom)
    with pytest.raises(ValueError, match="n_replications"):
        qt.replicate(n_rep, 100, 0.9, 0.1, t_end=1000.0, warmup=0.0, seed=1)


def test_simulate_caps_total_work_over_chains():
    with pytest.raises(ValueError, match="n_chains"):
        qt.simulate(10**6, 0.9, 0.1, t_end=4e5, warmup=0.0, n_chains=100)


def test_invariant_state_p0_near_one_refuses_instead_of_truncating():
    with pytest.raises(ValueError, match="max_levels"):
        qt.invariant_state(1 - 1e-16, 0.0)
    with pytest.raises(ValueError, match="max_levels"):
        qt.invariant_state(0.999, 0.0, max_levels=1000)
    s = qt.invariant_state(0.999, 0.0)  # fits: every level down to 1e-300 is there
    assert s[-1] < 1e-299 and s[1:].sum() == pytest.approx(999.0, rel=1e-12)
    # consistent with p > 0, which also refuses beyond max_levels
    with pytest.raises(ValueError, match="max_levels"):
        qt.invariant_state(0.99, 0.05, max_levels=10)


@pytest.mark.parametrize("lam", [0.999999, 1 - 1e-16])
def test_fluid_p0_near_one_short_horizon_is_cheap_and_right(lam):
    t = np.linspace(0.0, 5.0, 401)
    s = qt.fluid_trajectory(lam, 0.0, t)
    assert s.shape[1] < 200  # levels follow the horizon, not the invariant tail
    # mass balance dv_1/dt = lam - s_1 (p = 0): v_1(t) = lam t - int_0^t s_1
    v1 = s[:, 1:].sum(axis=1)
    integral = np.concatenate([[0.0], np.cumsum((s[1:, 1] + s[:-1, 1]) / 2 * np.diff(t))])
    assert np.max(np.abs(v1 - (lam * t - integral))) < 2e-5  # trapezoid error


def test_fluid_p0_refuses_hopeless_horizons_with_a_value_error():
    with pytest.raises(ValueError, match="lam"):
        qt.fluid_trajectory(0.999, 0.0, [0.0, 1e6])
    with pytest.raises(ValueError, match="levels"):
        qt.fluid_trajectory(1 - 1e-12, 0.0, [0.0, 1e6])


def test_fluid_p0_sliced_solve_matches_one_piece(monkeypatch):
    t = [0.0, 3.0, 40.0, 41.0, 120.0]
    whole = qt.fluid_trajectory(0.95, 0.0, t, s0=[1.0, 1.0, 1.0, 0.5])
    monkeypatch.setattr(fluidmod, "_P0_SLICE", 1000.0)  # forces many slices
    sliced = qt.fluid_trajectory(0.95, 0.0, t, s0=[1.0, 1.0, 1.0, 0.5])
    w = max(whole.shape[1], sliced.shape[1])
    pad = lambda a: np.pad(a, ((0, 0), (0, w - a.shape[1])))  # noqa: E731
    assert np.abs(pad(whole) - pad(sliced)).sum(axis=1).max() < 1e-9


def test_simulate_huge_initial_level_costs_events_not_levels():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.simulation.SimulationWarning)
        r = qt.simulate(10, 0.5, 0.1, t_end=100.0, warmup=10.0, seed=1, s0=10**6)
    # 10 stations drain at most ~1.1 jobs per unit time each: the mean stays near 1e6
    assert 10**6 - 200 < r.mean_queue_length < 10**6
    assert r.n_events < 5000
    assert r.s[1] == 1.0 and r.s.size > 999_000


def test_zero_d_integer_arrays_are_integers_everywhere():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.simulation.SimulationWarning)
        a = qt.simulate(10, 0.8, 0.1, t_end=200.0, warmup=20.0, seed=3, n_batches=10,
                        s0=2)
        b = qt.simulate(np.array(10), np.array(0.8), np.array(0.1), t_end=np.array(200.0),
                        warmup=np.array(20.0), seed=np.array(3),
                        n_batches=np.array(10), s0=np.array(2))
    assert np.array_equal(a.batch_s, b.batch_s) and a.ci == b.ci
    assert qt.exact_stationary(np.int64(2), 0.5, 0.2, max_queue=np.array(12),
                               truncation_tol=1.0).max_queue == 12


@pytest.mark.parametrize("bad", [3.5, 3.0, np.float64(2.0), np.array(3.5), True, -1,
                                 np.array(-2)])
def test_s0_scalar_must_be_a_non_negative_integer_level(bad):
    with pytest.raises(ValueError, match=r"s0 must be an integer >= 0 \(a level"):
        qt.simulate(10, 0.8, 0.1, t_end=10.0, warmup=1.0, s0=bad)


@pytest.mark.parametrize("bad", [2.0, np.array(2.5), np.array([2])])
def test_integer_parameters_refuse_floats_and_arrays(bad):
    with pytest.raises(ValueError, match="n_batches"):
        qt.simulate(10, 0.8, 0.1, t_end=10.0, warmup=1.0, n_batches=bad)


def test_exact_truncation_too_coarse_warns_with_mass_and_tolerance():
    with pytest.warns(qt.exact.TruncationWarning) as rec:
        r = qt.exact_stationary(3, 0.9, 0.1, max_queue=12)
    msg = str(rec[0].message)
    assert f"{r.boundary_mass:.3g}" in msg and "truncation_tol = 1e-06" in msg
    assert r.boundary_mass > 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("error", qt.exact.TruncationWarning)
        fine = qt.exact_stationary(2, 0.5, 0.2, max_queue=40)
        assert fine.boundary_mass < 1e-6
        qt.exact_stationary(3, 0.9, 0.1, max_queue=12, truncation_tol=1.0)
    with pytest.raises(ValueError, match="truncation_tol"):
        qt.exact_stationary(2, 0.5, 0.2, max_queue=10, truncation_tol=-1.0)


def test_exact_progress_goes_to_stderr_when_asked(capsys):
    qt.exact_stationary(3, 0.9, 0.1, max_queue=60, method="gmres", progress=True,
                        truncation_tol=1.0)
    assert "GMRES" in capsys.readouterr().err
    qt.exact_stationary(3, 0.9, 0.1, max_queue=60, method="gmres", truncation_tol=1.0)
    assert capsys.readouterr().err == ""  # small solve: no bar by default
    with pytest.raises(ValueError, match="progress"):
        qt.exact_stationary(2, 0.5, 0.2, max_queue=10, progress="yes")


def test_license_is_mit():
    text = (Path(__file__).resolve().parents[1] / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 The qtheory authors" in text
