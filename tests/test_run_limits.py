"""Sizes, overflows and raw errors of simulate, replicate, sample_path and plan_run
(issue 23): each call below hung, ate all memory or raised a raw error before."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import qtheory as qt
from qtheory import _engine


def fast_value_error(fn, match):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=match) as err:
        fn()
    assert time.perf_counter() - t0 < 2.0, "the refusal must come within a second or two"
    return str(err.value)


def test_replicate_caps_replications_by_memory_before_spawning(monkeypatch):
    def no_seed(*a, **k):  # pragma: no cover - must not be reached
        raise AssertionError("the seed was prepared (and spawned) before the check")

    monkeypatch.setattr(qt.simulation, "check_seed", no_seed)
    msg = fast_value_error(lambda: qt.replicate(10**9, 10, 0.5, 0.1, t_end=100,
                                                warmup=10, seed=1), "n_replications")
    assert "at most" in msg and "GiB" in msg
    fast_value_error(lambda: qt.replicate(10**9, 1, 0.5, 0.1, t_end=1e-6, warmup=0),
                     "n_replications")
    # an integer beyond double precision was an OverflowError
    fast_value_error(lambda: qt.replicate(10**400, 1, 0.5, 0.1, t_end=1.0, warmup=0),
                     "n_replications")


def test_memory_check_names_the_largest_value_that_fits(monkeypatch):
    monkeypatch.setattr(_engine, "memory_budget", lambda: 50 * 2**20)  # 50 MiB
    msg = fast_value_error(lambda: qt.replicate(10_000, 10, 0.5, 0.1, t_end=1.0,
                                                warmup=0.0), "n_replications")
    top = int(msg.split("must be at most ")[1].split(" here")[0].replace(",", ""))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", qt.simulation.SimulationWarning)
        assert len(qt.replicate(min(top, 50), 10, 0.5, 0.1, t_end=1.0, warmup=0.0,
                                seed=1)) == min(top, 50)
    fast_value_error(lambda: qt.simulate(10, 0.5, 0.1, t_end=1.0, warmup=0.0,
                                         s0=200_000), "s0")
    fast_value_error(lambda: qt.simulate(10**8, 0.5, 0.1, t_end=1e-4, warmup=0.0,
                                         n_chains=2, workers=2), "workers")
    fast_value_error(lambda: qt.sample_path(10, 0.5, 0.1, np.arange(10**6.0),
                                            s0=1000), "times|s0")


def test_start_level_has_a_range_checked_before_allocating():
    msg = fast_value_error(lambda: qt.simulate(10, 0.5, 0.1, t_end=1.0, warmup=0.0,
                                               s0=10**7), "s0")
    assert "[0, 1,000,000]" in msg
    fast_value_error(lambda: qt.simulate(10, 0.5, 0.1, t_end=1.0, warmup=0.0,
                                         s0=10**6, n_batches=10**5), "s0")
    fast_value_error(lambda: qt.sample_path(10, 0.5, 0.1, [1.0], s0=2**40), "s0")
    long_s0 = np.ones(1_000_003)
    fast_value_error(lambda: qt.simulate(10, 0.5, 0.1, t_end=1.0, warmup=0.0,
                                         s0=long_s0), "s0")


def test_plan_run_checks_the_budget_before_building_the_start(monkeypatch):
    # p = 0 close to 1: the rounded geometric start has about 7.6e9 levels
    fast_value_error(lambda: qt.plan_run(1000, 1 - 1e-9, 0.0, half_width=1e3,
                                         start="invariant"), "half_width")
    # a start the budget allows but the memory does not: named, before allocation
    monkeypatch.setattr(_engine, "memory_budget", lambda: 2**20)
    fast_value_error(lambda: qt.plan_run(10, 0.999, 0.0, half_width=50.0,
                                         start="invariant", calibrate=False), "start")


@pytest.mark.parametrize("h", [1e-160, 5e-324, 1e-300])
def test_absurdly_small_half_width_is_a_clear_value_error(h):
    msg = fast_value_error(lambda: qt.plan_run(1000, 0.9, 0.1, half_width=h,
                                               calibrate=False), "half_width")
    assert "Overflow" not in msg and "division" not in msg


def test_few_batches_warn_and_negative_interval_is_flagged():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", qt.simulation.SimulationWarning)
        r = qt.simulate(100, 0.5, 0.1, t_end=200.0, warmup=50.0, n_batches=2, seed=1)
    msgs = [str(w.message) for w in caught]
    assert any("only 2 batches" in m and "12.7" in m for m in msgs), msgs
    assert r.warnings == msgs
    # ten batches in all (two chains of five): no such warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", qt.simulation.SimulationWarning)
        qt.simulate(100, 0.5, 0.1, t_end=200.0, warmup=50.0, n_batches=5, n_chains=2,
                    seed=1)
    assert not any("batches in all" in str(w.message) for w in caught)
    # the case: an interval reaching below 0 for a mean queue length
    found = False
    for seed in range(1, 40):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", qt.simulation.SimulationWarning)
            r = qt.simulate(20, 0.5, 0.1, t_end=3.0, warmup=1.0, n_batches=2, seed=seed)
        if r.ci[0] < 0:
            assert any("reaches below 0" in str(w.message) for w in caught)
            found = True
            break
    assert found


def test_sample_path_caps_the_number_of_times():
    fast_value_error(lambda: qt.sample_path(10, 0.5, 0.1, np.arange(2_000_001.0)),
                     "times")


@pytest.mark.parametrize("kw, name", [
    (dict(start=np.array(["empty"])), "start"), (dict(start=["empty"]), "start"),
    (dict(estimator=b"auto"), "estimator"), (dict(n_chains=0), "n_chains"),
    (dict(n_chains=True), "n_chains"), (dict(n_chains=2.0), "n_chains"),
    (dict(calibrate="no"), "calibrate"), (dict(half_width="0.1"), "half_width"),
    (dict(half_width=1j), "half_width"), (dict(n_batches=10**7), "n_batches"),
])
def test_plan_run_parameter_audit(kw, name):
    args = dict(half_width=0.1, calibrate=False)
    args.update(kw)
    fast_value_error(lambda: qt.plan_run(100, 0.9, 0.1, **args), name)
