"""sweep: grids, seeding, tidy results, failures, and a real Dask cluster.

What theory fixes here: the values a sweep returns are those of direct calls; point k
receives SeedSequence(seed).spawn(n)[k] (as an integer), so results do not depend on the
executor or on the number of workers; rows come back in grid order; no point is lost.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

import qtheory as qt
from qtheory.sweep import SweepError, expand_grid, point_seeds


# Module-level functions, so that process pools and Dask workers can import them.
def noisy(a, b, seed):
    """A small seeded pure function: a*b plus standard normal noise from `seed`."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(3)
    return {"x": a * b + x[0], "y": float(x[1:].sum())}


def fails_on_negative(a):
    if a < 0:
        raise ArithmeticError(f"negative a={a}")
    return a**2


def slow_first(i, n):
    time.sleep(0.03 * (n - i))  # earlier points finish last
    return i * 10


Pair = collections.namedtuple("Pair", "lo hi")


@dataclasses.dataclass
class Estimate:
    mean: float
    ci: tuple


def returns_kinds(kind):
    return {"dict": {"u": 1.5}, "named": Pair(1.0, 2.0),
            "dc": Estimate(mean=2.5, ci=(2.0, 3.0)), "scalar": 7}[kind]


def returns_lam(lam):
    return {"lam": 2 * lam}


# ------------------------------------------------------------ grids
def test_expand_grid_cartesian_order_last_fastest():
    points, names = expand_grid({"lam": [0.5, 0.9], "p": (0.0, 0.1, 0.2)})
    assert names == ("lam", "p")
    assert [(q["lam"], q["p"]) for q in points] == [
        (0.5, 0.0), (0.5, 0.1), (0.5, 0.2), (0.9, 0.0), (0.9, 0.1), (0.9, 0.2)]


def test_expand_grid_list_of_dicts_and_arrays():
    points, names = expand_grid([{"lam": 0.5, "p": 0.1}, {"p": 0.2, "lam": 0.9}])
    assert names == ("lam", "p") and points[1] == {"lam": 0.9, "p": 0.2}
    points, _ = expand_grid({"lam": np.array([0.5, 0.9]), "n": range(2)})
    assert points == [{"lam": 0.5, "n": 0}, {"lam": 0.5, "n": 1},
                      {"lam": 0.9, "n": 0}, {"lam": 0.9, "n": 1}]
    assert type(points[0]["lam"]) is float


@pytest.mark.parametrize("grid, match", [
    ({}, "empty"),
    ([], "empty"),
    ({"lam": 0.5}, "list"),
    ({"lam": []}, "empty"),
    ({"lam": "0.5"}, "list"),
    ({"lam": {0.5, 0.9}}, "list"),
    ({"lam": np.zeros((2, 2))}, "1-D"),
    ([{"lam": 0.5}, {"p": 0.1}], "same parameters"),
    ([{"lam": 0.5}, 0.3], "dict"),
    ([{}], "empty"),
    ("lam", "dict"),
    (5, "dict"),
    (None, "dict"),
    ({"1x": [1]}, "identifiers"),
    ({"lambda": [1]}, "identifiers"),
    ({3: [1]}, "identifiers"),
    ({"error": [1]}, "reserved"),
])
def test_malformed_grid_raises_value_error(grid, match):
    with pytest.raises(ValueError, match=match):
        qt.sweep(qt.mean_queue_length, grid, executor=ThreadPoolExecutor(1),
                 progress=False)


def test_bad_arguments_raise_value_error():
    ex = ThreadPoolExecutor(1)
    with pytest.raises(ValueError, match="callable"):
        qt.sweep(3, {"lam": [0.5]}, executor=ex)
    with pytest.raises(ValueError, match="Executor"):
        qt.sweep(qt.mean_queue_length, {"lam": [0.5], "p": [0.1]}, executor="dask")
    with pytest.raises(ValueError, match="cannot be called"):
        qt.sweep(qt.mean_queue_length, {"lam": [0.5], "q": [0.1]}, executor=ex)
    with pytest.raises(ValueError, match="cannot be called"):  # p missing
        qt.sweep(qt.mean_queue_length, {"lam": [0.5]}, executor=ex)
    with pytest.raises(ValueError, match="seed"):
        qt.sweep(noisy, {"a": [1], "b": [2], "seed": [1]}, seed=3, executor=ex)
    with pytest.raises(ValueError, match="seed"):
        qt.sweep(noisy, {"a": [1], "b": [2]}, seed=-1, executor=ex)
    with pytest.raises(ValueError, match="pass_seed"):
        qt.sweep(noisy, {"a": [1], "b": [2]}, pass_seed="yes", executor=ex)
    ex.shutdown()


# ------------------------------------------------------------ values and tidy rows
GRID = {"lam": [0.5, 0.9, 0.99], "p": [0.0, 0.05, 0.1]}


def test_invariant_functions_on_default_process_pool():
    res = qt.sweep(qt.mean_queue_length, GRID, progress=False)
    assert res.ok and res.executor == "ProcessPoolExecutor"
    assert res.parameters == ("lam", "p") and res.outputs == ("value",)
    assert res.columns == ("lam", "p", "value", "error")  # no seed: func takes none
    expected = [qt.mean_queue_length(lam, p) for lam in GRID["lam"] for p in GRID["p"]]
    np.testing.assert_array_equal(res.column("value"), expected)
    assert res.column("value")[7] == pytest.approx(24.0298, abs=5e-5)  # (0.99, 0.05)
    np.testing.assert_array_equal(res.column("lam"), np.repeat(GRID["lam"], 3))


def test_min_centralization_over_grid_matches_direct_calls():
    grid = [{"lam": lam, "target_mean_queue": t} for lam in (0.9, 0.99) for t in (1, 5)]
    with ThreadPoolExecutor(2) as ex:
        res = qt.sweep(qt.min_centralization, grid, executor=ex, progress=False)
    assert list(res.column("value")) == [qt.min_centralization(**g) for g in grid]


def test_output_kinds_become_columns():
    with ThreadPoolExecutor(2) as ex:
        res = qt.sweep(returns_kinds, {"kind": ["dict", "named", "dc", "scalar"]},
                       executor=ex, progress=False)
    assert res.outputs == ("u", "lo", "hi", "mean", "ci", "value")
    np.testing.assert_array_equal(res.column("u"), [1.5, np.nan, np.nan, np.nan])
    assert res.column("ci") == [None, None, (2.0, 3.0), None]
    assert res[3]["value"] == 7 and res[1]["hi"] == 2.0
    recs = res.to_records()
    recs[0]["u"] = -1
    assert res[0]["u"] == 1.5  # to_records gives copies
    with pytest.raises(ValueError, match="no column"):
        res.column("nope")


def test_rows_in_grid_order_whatever_the_completion_order():
    n = 6
    with ThreadPoolExecutor(n) as ex:
        res = qt.sweep(slow_first, {"i": list(range(n)), "n": [n]}, executor=ex,
                       progress=False)
    assert list(res.column("i")) == list(range(n))
    assert list(res.column("value")) == [10 * i for i in range(n)]


# ------------------------------------------------------------ seeds
NOISY_GRID = {"a": [1.0, 2.0, 3.0], "b": [0.5, -1.0]}


def _numbers(res):
    return [(r["a"], r["b"], r["seed"], r["x"], r["y"]) for r in res.rows]


def test_seeds_are_spawned_in_grid_order_and_passed():
    with ThreadPoolExecutor(2) as ex:
        res = qt.sweep(noisy, NOISY_GRID, seed=2024, executor=ex, progress=False)
    children = np.random.SeedSequence(2024).spawn(6)
    expected = [int(c.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
                for c in children]
    assert list(res.column("seed")) == expected == point_seeds(2024, 6)
    assert len(set(expected)) == 6
    assert res.seed_entropy == 2024
    # any row can be re-run alone from its own seed
    for r in res.rows:
        assert noisy(r["a"], r["b"], seed=r["seed"]) == {"x": r["x"], "y": r["y"]}


def test_results_identical_across_executors_and_worker_counts():
    runs = []
    for make in (lambda: ThreadPoolExecutor(1), lambda: ThreadPoolExecutor(4),
                 lambda: ProcessPoolExecutor(2)):
        with make() as ex:
            runs.append(_numbers(qt.sweep(noisy, NOISY_GRID, seed=7, executor=ex,
                                          progress=False)))
    runs.append(_numbers(qt.sweep(noisy, NOISY_GRID, seed=7, progress=False)))
    assert runs[0] == runs[1] == runs[2] == runs[3]
    other = _numbers(qt.sweep(noisy, NOISY_GRID, seed=8, executor=ThreadPoolExecutor(2),
                              progress=False))
    assert [o[3] for o in other] != [r[3] for r in runs[0]]


def test_same_seedsequence_object_twice_gives_same_seeds():
    ss = np.random.SeedSequence(11)
    assert point_seeds(ss, 4) == point_seeds(ss, 4) == point_seeds(11, 4)


def test_seed_none_records_entropy_that_reproduces():
    with ThreadPoolExecutor(2) as ex:
        first = qt.sweep(noisy, NOISY_GRID, executor=ex, progress=False)
        again = qt.sweep(noisy, NOISY_GRID, seed=first.seed_entropy, executor=ex,
                         progress=False)
    assert first.seed_entropy is not None and _numbers(first) == _numbers(again)


def test_grid_seed_column_is_passed_as_is_and_pass_seed_false():
    with ThreadPoolExecutor(2) as ex:
        res = qt.sweep(noisy, {"a": [1.0], "b": [1.0], "seed": [5, 6]}, executor=ex,
                       progress=False)
        assert list(res.column("seed")) == [5, 6]
        assert res[0]["x"] == noisy(1.0, 1.0, 5)["x"] and res.seed_entropy is None
        res = qt.sweep(qt.mean_queue_length, {"lam": [0.5], "p": [0.0]}, executor=ex,
                       seed=3, progress=False)
        assert "seed" not in res.columns  # func takes no seed


# ------------------------------------------------------------ failures
def test_failures_are_reported_with_parameters_never_lost():
    grid = {"a": [1, -2, 3, -4]}
    with ThreadPoolExecutor(2) as ex:
        with pytest.warns(RuntimeWarning, match=r"2 of 4 points failed.*'a': -2"):
            res = qt.sweep(fails_on_negative, grid, executor=ex, progress=False)
    assert len(res) == 4 and not res.ok
    np.testing.assert_array_equal(res.column("value"), [1, np.nan, 9, np.nan])
    assert res.column("error") == [None, "ArithmeticError: negative a=-2", None,
                                   "ArithmeticError: negative a=-4"]
    assert [f.index for f in res.failures] == [1, 3]
    assert res.failures[0].params == {"a": -2}
    assert "fails_on_negative" in res.failures[0].traceback
    assert "error" in res.table()


def test_raise_on_error_carries_the_full_result():
    with ThreadPoolExecutor(2) as ex:
        with pytest.raises(SweepError, match="1 of 3 points failed") as info:
            qt.sweep(fails_on_negative, {"a": [2, -1, 5]}, executor=ex, progress=False,
                     raise_on_error=True)
    assert list(info.value.result.column("value")[[0, 2]]) == [4, 25]


def test_qtheory_validation_errors_become_rows():
    # top_level raises ValueError at p = 0 (every level occupied): reported per point
    with ThreadPoolExecutor(2) as ex, pytest.warns(RuntimeWarning):
        res = qt.sweep(qt.top_level, {"lam": [0.9], "p": [0.0, 0.1]}, executor=ex,
                       progress=False)
    assert res[0]["error"].startswith("ValueError: top_level is undefined for p = 0")
    assert res[1]["value"] == 8  # MODEL.md: i* = 8 at (0.9, 0.1)


def test_output_name_colliding_with_parameter_is_a_point_failure():
    with ThreadPoolExecutor(1) as ex, pytest.warns(RuntimeWarning, match="rename"):
        res = qt.sweep(returns_lam, {"lam": [0.5]}, executor=ex, progress=False)
    assert res[0]["lam"] == 0.5 and "rename" in res[0]["error"]


def echoes(lam, p):
    return {"lam": lam, "p": p, "mean": qt.mean_queue_length(lam, p)}


def test_echoed_inputs_dropped_and_keep_selects():
    with ThreadPoolExecutor(1) as ex:
        res = qt.sweep(echoes, {"lam": [0.9], "p": [0.1]}, executor=ex, progress=False)
        assert res.outputs == ("mean",) and res[0]["mean"] == pytest.approx(4.0)
        res = qt.sweep(returns_kinds, {"kind": ["dc"]}, executor=ex, progress=False,
                       keep=["ci"])
        assert res.columns == ("kind", "ci", "error") and res[0]["ci"] == (2.0, 3.0)
        with pytest.warns(RuntimeWarning, match="keep"):
            res = qt.sweep(returns_kinds, {"kind": ["dc"]}, executor=ex, progress=False,
                           keep=["nope"])
        assert "nope" in res[0]["error"]
        with pytest.raises(ValueError, match="keep"):
            qt.sweep(returns_kinds, {"kind": ["dc"]}, executor=ex, keep="ci")


def test_simulate_through_sweep_reproducible_across_executors():
    # the simulator's result object echoes n_stations, lam, p, t_end, warmup: dropped
    grid = [{"n_stations": 20, "lam": 0.7, "p": p, "t_end": 8000.0, "warmup": 200.0}
            for p in (0.0, 0.2)]
    keep = ("mean_queue_length", "ci", "n_events", "warnings")
    with ThreadPoolExecutor(2) as ex:
        a = qt.sweep(qt.simulate, grid, seed=5, executor=ex, keep=keep, progress=False)
    with ProcessPoolExecutor(2) as ex:
        b = qt.sweep(qt.simulate, grid, seed=5, executor=ex, keep=keep, progress=False)
    assert a.ok and a.rows == b.rows
    assert a.column("warnings") == [[], []]
    # p = 0: M/M/1 mean lam/(1 - lam) = 7/3 inside a generous band around the interval
    lo, hi = a[0]["ci"]
    half = (hi - lo) / 2
    assert lo - 2 * half < 7 / 3 < hi + 2 * half
    direct = qt.simulate(**grid[1], seed=a[1]["seed"])
    assert a[1]["mean_queue_length"] == direct.mean_queue_length
    assert a[1]["ci"] == direct.ci


def test_executor_level_failure_is_recorded_per_point():
    # an argument that cannot be pickled for a process pool: each point says so (a
    # function that cannot be pickled is sent by value or refused at once instead: see
    # tests/test_hardening.py)
    import threading

    locks = [threading.Lock() for _ in range(3)]
    with ProcessPoolExecutor(1) as ex, pytest.warns(RuntimeWarning, match="3 of 3"):
        res = qt.sweep(fails_on_negative, {"a": locks}, executor=ex, progress=False)
    assert all(("pickle" in e.lower() or "Pickling" in e) for e in res.column("error"))


def test_progress_bar_reports_every_point(capsys):
    with ThreadPoolExecutor(2) as ex:
        qt.sweep(qt.mean_queue_length, GRID, executor=ex, progress=True)
    err = capsys.readouterr().err
    assert "sweep" in err and "9/9" in err


# ------------------------------------------------------------ a real Dask cluster
@pytest.mark.timeout(120)
def test_dask_local_cluster_gives_the_same_numbers():
    distributed = pytest.importorskip("distributed")
    local_noisy = qt.sweep(noisy, NOISY_GRID, seed=99, progress=False)
    local_inv = qt.sweep(qt.mean_queue_length, GRID, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        ex = client.get_executor()
        dask_noisy = qt.sweep(noisy, NOISY_GRID, seed=99, executor=ex, progress=False)
        dask_inv = qt.sweep(qt.mean_queue_length, GRID, executor=ex, progress=False)
        with pytest.warns(RuntimeWarning, match="1 of 2"):
            dask_fail = qt.sweep(fails_on_negative, {"a": [3, -1]}, executor=ex,
                                 progress=False)
        # the points really ran in the worker processes
        pids = client.run(os.getpid)
    assert os.getpid() not in pids.values() and len(pids) == 2
    assert dask_noisy.executor == "ClientExecutor"
    assert _numbers(dask_noisy) == _numbers(local_noisy)
    assert dask_inv.rows == local_inv.rows
    assert dask_fail[0]["value"] == 9
    assert dask_fail[1]["error"] == "ArithmeticError: negative a=-1"


def test_table_columns_and_formatting():
    with ThreadPoolExecutor(1) as ex:
        res = qt.sweep(returns_kinds, {"kind": ["dc", "dict"]}, executor=ex,
                       progress=False)
    text = res.table(columns=["kind", "mean", "ci"], digits=3)
    lines = text.splitlines()
    assert lines[0].split() == ["kind", "mean", "ci"]
    assert "(2, 3)" in lines[1] and "2.5" in lines[1] and "-" in lines[2]
    assert "error" not in res.table()  # shown only when a point failed
    with pytest.raises(ValueError, match="no column"):
        res.table(columns=["nope"])
