r"""Run any qtheory computation over a parameter grid, on any executor.

:func:`sweep` evaluates ``func(**point)`` at every point of a grid, on a local process
pool by default or on any :class:`concurrent.futures.Executor` (a thread pool, or a Dask
cluster through ``distributed.Client.get_executor()``).  Randomness is reproducible
whatever runs it: one independent seed per grid point is derived from a single ``seed``
with :meth:`numpy.random.SeedSequence.spawn`, in grid order, so the numbers do not depend
on the executor, the number of workers or the order in which points finish.  Results come
back tidy, one row per grid point with its inputs and outputs, in grid order; a point
that fails becomes a row that says so, with its parameters and the error.

Reference for the seeding scheme: NumPy documentation, *Parallel random number
generation* (``SeedSequence.spawn``); P. L'Ecuyer et al., "Random numbers for parallel
computers: requirements and methods", Math. Comput. Simul. 135 (2017) 3-17.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import inspect
import itertools
import keyword
import math
import multiprocessing
import numbers
import pickle
import sys
import time
import traceback
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from ._validation import check_flag, check_seed, check_size

__all__ = ["sweep", "SweepResult", "SweepFailure", "SweepError", "expand_grid",
           "point_seeds"]

_RESERVED = ("error",)
# Largest grid (and number of point seeds): a million points already hold a million
# futures, rows and seeds in memory, and spawning their seeds takes seconds.
_MAX_POINTS = 10**6


# --------------------------------------------------------------------------- results
@dataclasses.dataclass(frozen=True)
class SweepFailure:
    """One grid point whose computation raised.

    Attributes
    ----------
    index : int
        Position of the point in grid order.
    params : dict
        The point's parameters (and its ``seed`` when one was passed).
    error : str
        ``"ExceptionType: message"``.
    traceback : str
        The formatted traceback, as seen where the point ran.
    """

    index: int
    params: dict
    error: str
    traceback: str


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """Tidy results of :func:`sweep`: one row per grid point, in grid order.

    Attributes
    ----------
    rows : list of dict
        Row ``k`` holds the parameters of grid point ``k``, then ``seed`` (the integer
        passed to ``func``, when one was passed), then the outputs, then ``error``
        (``None``, or ``"ExceptionType: message"`` for a failed point, whose outputs are
        ``None``).  Every row has the same keys, in that order.
    parameters : tuple of str
        Names of the grid's parameters.
    outputs : tuple of str
        Names of the output columns (``("value",)`` when ``func`` returns a scalar or
        any object that is not a mapping, a dataclass or a named tuple).
    failures : tuple of SweepFailure
        The failed points, with their tracebacks.
    seed_entropy : int or None
        Entropy of the root :class:`numpy.random.SeedSequence`: ``sweep(...,
        seed=seed_entropy)`` reproduces the run.  ``None`` when no seeds were passed.
    executor : str
        Name of the executor's class.
    wall_time : float
        Seconds from the first submission to the last result.
    """

    rows: list
    parameters: tuple
    outputs: tuple
    failures: tuple
    seed_entropy: int | None
    executor: str
    wall_time: float

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, k):
        return self.rows[k]

    @property
    def columns(self):
        """All column names, in row order (tuple of str)."""
        return tuple(self.rows[0]) if self.rows else ()

    @property
    def ok(self):
        """True when no point failed."""
        return not self.failures

    def to_records(self):
        """The rows as a list of new dicts (safe to modify; feed to ``pandas.DataFrame``).

        Returns
        -------
        list of dict, length ``len(self)``
        """
        return [dict(r) for r in self.rows]

    def column(self, name):
        """All values of one column, in grid order.

        Parameters
        ----------
        name : str
            A parameter, ``"seed"``, an output or ``"error"``.

        Returns
        -------
        ndarray of shape (len(self),) or list
            A float array (``NaN`` where a failed point has no value) when every value
            is a real scalar or ``None``; an integer array when every value is an
            integer; otherwise a list of the values as they are.

        Raises
        ------
        ValueError
            If there is no such column.
        """
        if name not in self.columns:
            raise ValueError(f"no column {name!r}; columns are {list(self.columns)}")
        values = [r[name] for r in self.rows]
        real = [v for v in values if v is not None]
        if real and all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
                        for v in real):
            if len(real) == len(values) and all(isinstance(v, numbers.Integral)
                                                for v in values):
                return np.array(values, dtype=np.int64 if all(
                    -2**63 <= int(v) < 2**63 for v in values) else object)
            return np.array([np.nan if v is None else float(v) for v in values])
        return values

    def table(self, max_rows=30, digits=6, columns=None):
        """A plain-text table of the rows (for printing in a notebook or terminal).

        Parameters
        ----------
        max_rows : int
            Rows shown, >= 0; the rest are summarized in one line.
        digits : int
            Significant digits of floats (also inside tuples and lists), 1 to 17.
        columns : sequence of str, optional
            Columns to show, in this order (default: all; ``error`` only if a point
            failed).

        Returns
        -------
        str

        Raises
        ------
        ValueError
            If ``columns`` names a column that does not exist, or ``max_rows`` or
            ``digits`` is out of range.
        """
        max_rows = check_size(max_rows, "max_rows", minimum=0, maximum=10**7)
        digits = check_size(digits, "digits", minimum=1, maximum=17)
        if not self.rows:
            return "(empty sweep)"
        if columns is None:
            cols = list(self.columns)
            if all(r["error"] is None for r in self.rows):
                cols.remove("error")
        else:
            cols = list(columns)
            for c in cols:
                if c not in self.columns:
                    raise ValueError(f"no column {c!r}; columns are {list(self.columns)}")

        def fmt(v):
            if v is None:
                return "-"
            if isinstance(v, (float, np.floating)):
                return f"{float(v):.{digits}g}"
            if isinstance(v, (tuple, list)) and len(v) <= 4 and all(
                    isinstance(x, (numbers.Real, np.floating)) for x in v):
                inner = ", ".join(fmt(x) for x in v)
                return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
            return str(v)

        def cell(c, v):
            text = fmt(v)
            if c == "error" and len(text) > 60:
                text = text[:57] + "..."
            return text

        body = [[cell(c, r[c]) for c in cols] for r in self.rows[:max_rows]]
        widths = [max([len(c)] + [len(b[j]) for b in body]) for j, c in enumerate(cols)]

        def just(c, x, w):
            return x.ljust(w) if c == "error" else x.rjust(w)

        lines = ["  ".join(just(c, c, w) for c, w in zip(cols, widths)).rstrip()]
        lines += ["  ".join(just(c, x, w) for c, x, w in zip(cols, b, widths)).rstrip()
                  for b in body]
        if len(self.rows) > max_rows:
            lines.append(f"... {len(self.rows) - max_rows} more rows")
        return "\n".join(lines)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return (f"SweepResult({len(self.rows)} points, parameters={self.parameters}, "
                f"outputs={self.outputs}, failures={len(self.failures)}, "
                f"executor={self.executor!r}, wall_time={self.wall_time:.3g} s)")


class SweepError(RuntimeError):
    """Raised by ``sweep(..., raise_on_error=True)`` after every point has run.

    Attributes
    ----------
    result : SweepResult
        The complete results, failed points included.
    """

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


# --------------------------------------------------------------------------- grids
def _values_length(name, values):
    """Number of values of one grid parameter, checked without copying them."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"grid[{name!r}] must be a 1-D sequence of values, got an "
                             f"array of shape {values.shape}")
        n = values.size
    elif isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, range)):
        raise ValueError(
            f"grid[{name!r}] must be a list (or tuple, range, 1-D array) of values, got "
            f"{type(values).__name__} {values!r}; wrap a single value in a list")
    else:
        n = len(values)
    if not n:
        raise ValueError(f"grid[{name!r}] is empty: every parameter needs at least one "
                         "value")
    return n


def _as_values(name, values):
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"grid[{name!r}] must be a 1-D sequence of values, got an "
                             f"array of shape {values.shape}")
        values = values.tolist()
    elif isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, range)):
        raise ValueError(
            f"grid[{name!r}] must be a list (or tuple, range, 1-D array) of values, got "
            f"{type(values).__name__} {values!r}; wrap a single value in a list")
    values = list(values)
    if not values:
        raise ValueError(f"grid[{name!r}] is empty: every parameter needs at least one "
                         "value")
    return values


def _check_name(name):
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"grid parameter names must be valid Python identifiers (they "
                         f"are passed as keyword arguments), got {name!r}")
    if name in _RESERVED:
        raise ValueError(f"{name!r} is reserved for sweep's output columns; rename the "
                         "parameter")
    return name


def expand_grid(grid):
    """Turn a grid into its list of points, in the order :func:`sweep` runs them.

    Parameters
    ----------
    grid : dict of sequences, or sequence of dicts
        A dict ``{name: values}`` is the cartesian product of the values, the last name
        varying fastest (as nested loops in the dict's order).  A list of dicts is taken
        as the points themselves; every dict must have the same names.

    Returns
    -------
    points : list of dict
        One dict of keyword arguments per grid point.
    names : tuple of str
        The parameter names, in order.

    Raises
    ------
    ValueError
        If the grid is empty, is of another type, has a parameter with no values or
        given as a scalar or string, has names that are not identifiers (or the
        reserved ``"error"``), is a list of dicts with differing names, or has more than
        1e6 points (the product of the numbers of values is checked before any point is
        made).

    Examples
    --------
    >>> expand_grid({"lam": [0.5, 0.9], "p": [0.0, 0.1]})[0]
    [{'lam': 0.5, 'p': 0.0}, {'lam': 0.5, 'p': 0.1}, {'lam': 0.9, 'p': 0.0}, {'lam': 0.9, 'p': 0.1}]
    """
    if isinstance(grid, Mapping):
        if not grid:
            raise ValueError("grid is empty: give at least one parameter with values")
        names = tuple(_check_name(k) for k in grid)
        sizes = [_values_length(k, grid[k]) for k in names]
        total = math.prod(sizes)
        if total > _MAX_POINTS:
            raise ValueError(
                f"grid has {' x '.join(f'{n:,}' for n in sizes)} = {total:,} points, more "
                f"than {_MAX_POINTS:,}; split the grid, or sample it")
        values = [_as_values(k, grid[k]) for k in names]
        points = [dict(zip(names, combo)) for combo in itertools.product(*values)]
        return points, names
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence):
        raise ValueError("grid must be a dict {name: list of values} or a list of dicts "
                         f"{{name: value}}, got {type(grid).__name__}")
    if len(grid) == 0:
        raise ValueError("grid is empty: give at least one point")
    if len(grid) > _MAX_POINTS:
        raise ValueError(f"grid has {len(grid):,} points, more than {_MAX_POINTS:,}; split "
                         "it")
    points = []
    names = None
    for k, point in enumerate(grid):
        if not isinstance(point, Mapping):
            raise ValueError(f"grid[{k}] must be a dict {{name: value}}, got "
                             f"{type(point).__name__}")
        if not point:
            raise ValueError(f"grid[{k}] is an empty dict")
        these = tuple(_check_name(n) for n in point)
        if names is None:
            names = these
        elif set(these) != set(names):
            raise ValueError(f"every point of a list grid must have the same parameters: "
                             f"grid[0] has {sorted(names)}, grid[{k}] has {sorted(these)}")
        points.append({n: point[n] for n in names})
    return points, names


def point_seeds(seed, n_points):
    """The integer seed that :func:`sweep` passes to each of ``n_points`` grid points.

    Parameters
    ----------
    seed : int >= 0 or numpy.random.SeedSequence
        The sweep's root seed.
    n_points : int
        Number of grid points, in ``[0, 1e6]``.

    Returns
    -------
    list of int, length ``n_points``
        ``SeedSequence(seed).spawn(n_points)[k]`` turned into a 63-bit integer: the
        children are independent streams, and an integer is accepted by every seeded
        function (qtheory's, :func:`numpy.random.default_rng`, :class:`random.Random`).

    Raises
    ------
    ValueError
        If ``seed`` is invalid or ``n_points`` is not an integer in ``[0, 1e6]``.
    """
    root = check_seed(seed)
    n_points = check_size(n_points, "n_points", minimum=0, maximum=_MAX_POINTS,
                          what="spawning a seed takes about 10 microseconds and its memory")
    return _point_seeds(root, n_points)


def _point_seeds(root, n_points):
    """point_seeds for a SeedSequence ``root`` and a checked ``n_points``."""
    # A fresh copy, so that the same root gives the same children every time (spawn
    # advances a SeedSequence's child counter).
    root = np.random.SeedSequence(root.entropy, spawn_key=root.spawn_key,
                                  pool_size=root.pool_size)
    children = root.spawn(int(n_points))
    return [int(c.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)) for c in children]


# --------------------------------------------------------------------------- running
def _same(a, b):
    if isinstance(a, numbers.Real) and isinstance(b, numbers.Real) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        try:  # a result's float echo of a grid value given as a Fraction or an int
            if float(a) == float(b):
                return True
        except (OverflowError, ValueError):
            pass
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and odd types are simply "not equal"
        return False


def _normalize_output(out, inputs, keep):
    if isinstance(out, Mapping):
        items = dict(out)
    elif dataclasses.is_dataclass(out) and not isinstance(out, type):
        items = {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
    elif isinstance(out, tuple) and hasattr(out, "_asdict"):
        items = dict(out._asdict())
    else:
        items = {"value": out}
    clean = {}
    for key, value in items.items():
        if not isinstance(key, str):
            raise ValueError(f"output names must be strings, got {key!r}")
        if key in inputs:
            if _same(value, inputs[key]):
                continue  # the result echoes an input (e.g. a result object's lam)
            raise ValueError(f"output {key!r} has the name of a grid parameter (or seed) "
                             f"but a different value ({value!r} != {inputs[key]!r}); "
                             "rename it")
        if key == "error":
            raise ValueError("output 'error' collides with sweep's reserved column; "
                             "rename it")
        clean[key] = value
    if keep is not None:
        # a name of the grid (or seed) is a column of the result already: keep it
        missing = [k for k in keep if k not in clean and k not in inputs]
        if missing:
            raise ValueError(f"outputs {missing} requested in keep= are not among the "
                             f"outputs {sorted(clean)}")
        clean = {k: clean[k] for k in keep if k in clean}
    return clean


def _run_point(func, kwargs, keep):
    """Worker side: call func, never raise (a failure comes back as data)."""
    try:
        return True, _normalize_output(func(**kwargs), kwargs, keep), None
    except Exception as exc:  # noqa: BLE001 - reported with the point, never lost
        return False, f"{type(exc).__name__}: {exc}", traceback.format_exc()


def _accepts(func, name):
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return False
    for prm in sig.parameters.values():
        if prm.kind is inspect.Parameter.VAR_KEYWORD:
            return True
        if prm.name == name and prm.kind is not inspect.Parameter.POSITIONAL_ONLY:
            return True
    return False


def _check_binds(func, kwargs):
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(**kwargs)
    except TypeError as exc:
        raise ValueError(f"func {getattr(func, '__name__', func)!r} cannot be called with "
                         f"the grid's parameters {sorted(kwargs)}: {exc}") from None


def _default_context():
    """The multiprocessing context of sweep's own process pool: the platform's default
    start method (fork on Linux up to Python 3.13, forkserver from 3.14; spawn on macOS
    and Windows)."""
    return multiprocessing.get_context()


def _cloudpickle():
    """The cloudpickle module if it is installed (it comes with dask), else None."""
    try:
        import cloudpickle
    except ImportError:
        return None
    return cloudpickle


def _start_method(executor, owned):
    """How the executor's workers start, or None when it sends no work to processes that
    sweep can inspect (threads; Dask, which serializes with cloudpickle itself)."""
    if owned:
        return _default_context().get_start_method()
    if isinstance(executor, cf.ProcessPoolExecutor):
        ctx = getattr(executor, "_mp_context", None)
        return ctx.get_start_method() if ctx is not None else \
            multiprocessing.get_start_method()
    return None


def _why_not_by_reference(func, method):
    """None if a worker started with ``method`` can receive ``func`` by reference (pickle
    stores a module and a name, and the worker imports them); else the reason."""
    module = getattr(func, "__module__", None)
    main = sys.modules.get("__main__")
    if method != "fork" and module == "__main__" and not getattr(main, "__file__", None):
        return (f"it is defined in __main__ (a notebook or an interactive session), which "
                f"a worker started with {method!r} cannot import: it runs a fresh "
                f"interpreter, not this one")
    try:
        pickle.dumps(func)
    except Exception:  # noqa: BLE001 - any pickling failure means: not by reference
        where = " in __main__" if module == "__main__" else ""
        return (f"it cannot be pickled by reference (a lambda, a closure or a function "
                f"defined inside another one{where})")
    return None


class _ByValue:
    """``func`` serialized by value with cloudpickle, for workers that cannot import it."""

    def __init__(self, func, cloudpickle):
        self.payload = cloudpickle.dumps(func)
        self.func = func

    def __getstate__(self):
        return {"payload": self.payload}

    def __setstate__(self, state):
        self.payload = state["payload"]
        self.func = None

    def __call__(self, **kwargs):
        if self.func is None:
            self.func = pickle.loads(self.payload)
        return self.func(**kwargs)


def _sendable(func, executor, owned):
    """What to submit for ``func``: itself, or a by-value copy; a ValueError at once (before
    any worker starts) when neither can reach the workers."""
    method = _start_method(executor, owned)
    if method is None:
        return func
    why = _why_not_by_reference(func, method)
    if why is None:
        return func
    name = getattr(func, "__qualname__", None) or repr(func)
    advice = ("Define func in a module (a .py file next to the notebook) and import it "
              "from there, or pass an executor that needs no pickling, e.g. "
              "executor=concurrent.futures.ThreadPoolExecutor() (light work), or install "
              "cloudpickle (it comes with dask), with which sweep sends func by value")
    cp = _cloudpickle()
    if cp is None:
        raise ValueError(f"sweep: func {name!r} cannot be sent to the process pool's "
                         f"workers (start method {method!r}): {why}. {advice}.")
    try:
        return _ByValue(func, cp)
    except Exception as exc:  # noqa: BLE001 - reported with what to do
        raise ValueError(f"sweep: func {name!r} cannot be sent to the process pool's "
                         f"workers (start method {method!r}): {why}, and cloudpickle "
                         f"cannot serialize it either ({type(exc).__name__}: {exc}). "
                         f"{advice.split(', or install')[0]}.") from None


def sweep(func, grid, *, executor=None, seed=None, progress=True, pass_seed=None,
          keep=None, raise_on_error=False):
    r"""Evaluate ``func`` at every point of a parameter grid, in parallel.

    Parameters
    ----------
    func : callable
        Called as ``func(**point)`` or ``func(**point, seed=k)``.  It runs where the
        executor runs it.  A process pool receives it by reference (module and name) when
        its workers can import it: a function defined at module level (qtheory's public
        functions are) works under every start method (fork, spawn, forkserver).  A
        function they cannot import (defined in a notebook, whose ``__main__`` a spawn or
        forkserver worker does not have, as with Python 3.14's default forkserver on
        Linux; or a lambda or closure, under any start method) is sent by value with
        cloudpickle when it is installed (it comes with dask); without cloudpickle sweep
        raises a ``ValueError`` at once, before any worker starts, saying what to do.  Its return
        value becomes the row's outputs: a mapping or a dataclass gives one column per
        key or field, a named tuple one per field, anything else one column ``value``.
        An output with the name of an input and an equal value (a result object that
        echoes its inputs, like :class:`qtheory.SimulationResult`) is dropped; with a
        different value it is an error of that point.
    grid : dict of sequences, or sequence of dicts
        A dict ``{name: values}`` means the cartesian product, last name varying
        fastest; a list of dicts lists the points themselves (see :func:`expand_grid`).
        Names must be keyword arguments of ``func``.
    executor : concurrent.futures.Executor, optional
        Where to run.  ``None`` (default) creates a
        :class:`concurrent.futures.ProcessPoolExecutor` with one worker per CPU (at most
        one per point), started with the platform's default start method
        (``multiprocessing.get_context()``), and shuts it down afterwards.  Any other executor is used as
        given and left running: a :class:`~concurrent.futures.ThreadPoolExecutor`
        (numba kernels release no GIL unless compiled with ``nogil``; use it for light
        work), or a Dask cluster's ``client.get_executor()``.
    seed : None, int >= 0 or numpy.random.SeedSequence
        Root seed.  Point ``k`` (grid order) receives
        ``point_seeds(seed, len(points))[k]``, an integer from
        ``SeedSequence(seed).spawn(...)``: results are identical for every executor and
        worker count.  ``None`` draws fresh entropy, recorded as
        ``result.seed_entropy``, which reproduces the run when passed back as ``seed``.
    progress : bool
        Show a tqdm progress bar on standard error, advanced as points finish.
    pass_seed : bool or None
        Whether to pass ``seed=`` to ``func``.  ``None`` (default): exactly when
        ``func``'s signature has a ``seed`` parameter or ``**kwargs``.  Functions whose
        signature cannot be inspected get no seed unless ``pass_seed=True``.  If the
        grid itself has a ``seed`` parameter, it is passed as it is and no seeds are
        derived.
    keep : sequence of str, optional
        Output names to keep, in this order; the others are dropped where the point
        runs (so that, e.g., the per-batch arrays of a simulation never travel back).
        A point whose outputs lack one of them fails with a message naming it.
    raise_on_error : bool
        If True, raise :class:`SweepError` (carrying the full result) after all points
        have run when any of them failed.  If False (default) a ``RuntimeWarning``
        summarizes the failures and the result holds them.  Only True or False: a string
        such as ``"no"`` is refused.

    Returns
    -------
    SweepResult
        ``result.rows[k]`` is grid point ``k``: its parameters, its ``seed`` (when
        passed), its outputs, and ``error`` (``None`` unless the point failed).

    Raises
    ------
    ValueError
        If ``func`` is not callable or cannot accept the grid's parameter names, ``keep``
        is not a non-empty list of names, the
        grid is malformed (see :func:`expand_grid`), ``executor`` is not a
        :class:`concurrent.futures.Executor`, ``seed`` is invalid, ``seed`` is given
        while the grid has its own ``seed`` parameter, a switch is not True or False, or
        ``func`` cannot reach a process pool's workers (see ``func``).
    SweepError
        With ``raise_on_error=True``, if any point failed.

    Notes
    -----
    A failure inside ``func`` (any ``Exception``) is caught where the point runs and
    comes back as that point's row, with ``error`` set and the traceback in
    ``result.failures``; a failure of the executor itself for one point (a worker that
    died, an argument that cannot be pickled) is recorded the same way.  No point is
    ever dropped.  Warnings that ``func`` issues are shown where it runs (in a worker
    process they do not reach the caller); keep a result's own record of them, e.g.
    ``keep=[..., "warnings"]`` for :func:`qtheory.simulate`.

    References
    ----------
    NumPy documentation, *Parallel random number generation* (``SeedSequence``); Python
    documentation, :mod:`concurrent.futures`; Dask documentation,
    ``distributed.Client.get_executor``.

    Examples
    --------
    >>> import qtheory as qt
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(2) as ex:
    ...     res = qt.sweep(qt.mean_queue_length, {"lam": [0.9], "p": [0.0, 0.1]},
    ...                    executor=ex, progress=False)
    >>> res.column("value")
    array([9., 4.])
    """
    if not callable(func):
        raise ValueError(f"func must be callable, got {type(func).__name__}")
    points, names = expand_grid(grid)
    if executor is not None and not isinstance(executor, cf.Executor):
        raise ValueError("executor must be a concurrent.futures.Executor (e.g. "
                         "ProcessPoolExecutor, ThreadPoolExecutor, or a Dask client's "
                         f"get_executor()), got {type(executor).__name__}")
    pass_seed = check_flag(pass_seed, "pass_seed", allow_none=True)
    progress = check_flag(progress, "progress")
    raise_on_error = check_flag(raise_on_error, "raise_on_error")
    # 1. one call per point, with its own seed where func takes one
    calls, pass_seed, seed_entropy = _calls(func, points, names, seed, pass_seed)
    _check_binds(func, calls[0])
    keep = _check_keep(keep)
    # 2. run them on the executor (a process pool of our own when none is given)
    owned = executor is None
    send = _sendable(func, executor, owned)
    if owned:
        import os

        executor = cf.ProcessPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1,
                                                                 len(calls))),
                                          mp_context=_default_context())
    t0 = time.perf_counter()
    outcomes = _run_calls(executor, send, calls, keep, progress, owned)
    wall = time.perf_counter() - t0
    # 3. tidy rows: parameters, seed, outputs (union in first-seen order), error
    rows, failures, out_names = _tidy(calls, outcomes, names, pass_seed)
    result = SweepResult(rows=rows, parameters=names, outputs=tuple(out_names),
                         failures=tuple(failures), seed_entropy=seed_entropy,
                         executor=type(executor).__name__, wall_time=wall)
    if failures:
        shown = "; ".join(f"point {f.index} {f.params} -> {f.error}" for f in failures[:3])
        more = f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""
        message = (f"sweep: {len(failures)} of {len(rows)} points failed: {shown}{more}; "
                   "see result.failures")
        if raise_on_error:
            raise SweepError(message, result)
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    return result


def _calls(func, points, names, seed, pass_seed):
    """The keyword arguments of each call, whether each gets a seed, and the root seed's
    entropy (None without seeds)."""
    grid_has_seed = "seed" in names
    if grid_has_seed and seed is not None:
        raise ValueError("the grid has a 'seed' parameter and seed= was also given; "
                         "use one of them")
    if pass_seed is None:
        pass_seed = (not grid_has_seed) and _accepts(func, "seed")
    pass_seed = bool(pass_seed) and not grid_has_seed
    if pass_seed:
        root = check_seed(seed)
        seeds = _point_seeds(root, len(points))
        return [dict(pt, seed=s) for pt, s in zip(points, seeds)], True, root.entropy
    if seed is not None:
        check_seed(seed)
    return [dict(pt) for pt in points], False, None


def _check_keep(keep):
    if keep is None:
        return None
    if isinstance(keep, str) or not isinstance(keep, Sequence) or not keep or \
            not all(isinstance(k, str) for k in keep):
        raise ValueError(f"keep must be a non-empty list of output names, got {keep!r}")
    return tuple(keep)


def _run_calls(executor, send, calls, keep, progress, owned):
    """Submit every call, collect (ok, payload, traceback) per call in order; an
    executor-level failure of a point is that point's failure.  Shuts down an executor
    of our own."""
    outcomes = [None] * len(calls)
    bar = None
    futures = {}
    try:
        futures = {executor.submit(_run_point, send, kw, keep): k
                   for k, kw in enumerate(calls)}
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(calls), desc="sweep", file=sys.stderr, leave=True)
        for fut in cf.as_completed(futures):
            k = futures[fut]
            try:
                outcomes[k] = fut.result()
            except BaseException as exc:  # executor-level failure of this point
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                outcomes[k] = (False, f"{type(exc).__name__}: {exc}",
                               "".join(traceback.format_exception(exc)))
            if bar is not None:
                bar.update(1)
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
    finally:
        if bar is not None:
            bar.close()
        if owned:
            executor.shutdown(wait=True, cancel_futures=True)
    return outcomes


def _tidy(calls, outcomes, names, pass_seed):
    """Rows (parameters, seed, outputs in first-seen order, error), the failures and the
    output names."""
    out_names = []
    for ok, payload, _ in outcomes:
        if ok:
            for key in payload:
                if key not in out_names:
                    out_names.append(key)
    rows, failures = [], []
    for k, (kw, (ok, payload, tb)) in enumerate(zip(calls, outcomes)):
        row = {n: kw[n] for n in names}
        if pass_seed:
            row["seed"] = kw["seed"]
        for key in out_names:
            row[key] = payload.get(key) if ok else None
        row["error"] = None if ok else payload
        if not ok:
            failures.append(SweepFailure(index=k, params=dict(kw), error=payload,
                                         traceback=tb))
        rows.append(row)
    return rows, failures, out_names
