"""The library's architecture: one-way dependencies, private names kept private, and
arguments validated once at the public boundary (CONTRIBUTING.md, "The library").

* ``import_graph`` reads every module of a package with :mod:`ast` and records each
  import of a sibling module, at module level or inside a function (a lazy import is
  a dependency too).  :mod:`graphlib` then looks for a cycle.
* ``private_uses`` lists every ``from .x import _name`` and every ``x._name`` where
  ``x`` is a sibling module: a module may use its own underscore names only.
* The validation counts wrap ``check_lam`` (and ``check_p``, ``check_n_stations``)
  where every module looks it up, and count the calls one public call makes.

Each check has a planted-defect test on a small package written to a temporary folder.
"""

from __future__ import annotations

import ast
import graphlib
import importlib
import pkgutil
import sys
import warnings
from pathlib import Path
from unittest import mock

import pytest

import qtheory
from qtheory import _validation

PACKAGE = Path(qtheory.__file__).parent


# --------------------------------------------------------------------------- the graph


def _modules(root):
    """{module name: parsed tree} for every .py file of the package folder ``root`` and
    of its subpackages: ``simulation``, ``book.coupling``; a subpackage's ``__init__.py``
    is the subpackage (``book``), the package's own is ``__init__``."""
    out = {}
    root = Path(root)
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = ast.parse(path.read_text(encoding="utf-8"),
                                         filename=str(path))
    return out


def _package_of(module, siblings):
    """The package a module's relative imports start from, as a list of names: a
    subpackage (its ``__init__.py``, named like ``book``) is its own package, any other
    module sits in its parent's."""
    if module == "__init__":
        return []
    parts = module.split(".")
    if any(s.startswith(module + ".") for s in siblings):
        return parts
    return parts[:-1]


def _imports(tree, package, siblings, module="__init__"):
    """Yield (line, module imported, names taken from it, {alias: module}) for each
    import of a module of the package by ``module`` (names as in :func:`_modules`)."""
    here = _package_of(module, siblings)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level >= 1:
                if node.level - 1 > len(here):
                    continue
                base = here[:len(here) - (node.level - 1)]
                base = base + (node.module.split(".") if node.module else [])
            elif node.level == 0 and node.module and (
                    node.module == package or node.module.startswith(package + ".")):
                base = node.module.split(".")[1:]
            else:
                continue
            frm = ".".join(base)
            for a in node.names:
                sub = ".".join(base + [a.name])
                if sub in siblings:           # from . import x; from .book import checks
                    yield node.lineno, sub, [], {a.asname or a.name: sub}
                elif frm in siblings:         # from .x import name
                    yield node.lineno, frm, [a.name], {}
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == package and len(parts) > 1:
                    dep = ".".join(parts[1:])
                    if dep not in siblings:
                        continue
                    # ``import pkg.x as y`` binds y to x; ``import pkg.x`` binds pkg
                    alias = {a.asname: dep} if a.asname else {package: None}
                    yield node.lineno, dep, [], alias


def import_graph(root, package):
    """{module: {module of the package it imports, ...}} over the modules of ``root``
    and its subpackages, lazy imports included."""
    mods = _modules(root)
    graph = {m: set() for m in mods}
    for m, tree in mods.items():
        for _, dep, _, _ in _imports(tree, package, mods, m):
            if dep != m and dep != "__init__":
                graph[m].add(dep)
    return graph


def find_cycle(graph):
    """A list of modules forming an import cycle, or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        return list(err.args[1])
    return None


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(root, package):
    """Every use of another module's underscore name: ``(module, line, text)``."""
    mods = _modules(root)
    found = []
    for m, tree in mods.items():
        aliases = {}
        for line, dep, names, alias in _imports(tree, package, mods, m):
            aliases.update(alias)
            if dep == m:
                continue
            for n in names:
                if _private(n):
                    found.append((m, line, f"from .{dep} import {n}"))
        roots = {a for a, dep in aliases.items() if dep is None}

        def module_of(expr):
            """The sibling module an expression names (``x`` or ``package.x``)."""
            if isinstance(expr, ast.Name) and aliases.get(expr.id):
                return aliases[expr.id]
            if (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)
                    and expr.value.id in roots and expr.attr in mods):
                return expr.attr
            return None

        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                dep = module_of(node.value)
                if dep is not None and dep != m:
                    found.append((m, node.lineno, f"{ast.unparse(node)} ({dep})"))
    return sorted(set(found))


def test_qtheory_has_no_import_cycle():
    graph = import_graph(PACKAGE, "qtheory")
    assert "simulation" in graph and graph["simulation"], "the graph was not read"
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle in qtheory: {' -> '.join(cycle)}"


def test_no_private_name_crosses_a_module_border():
    uses = private_uses(PACKAGE, "qtheory")
    assert not uses, "private names used across modules:\n" + "\n".join(
        f"  qtheory/{m.replace('.', '/')}.py:{line}: {text}" for m, line, text in uses)


def test_the_documented_layers_hold():
    """The module map of CONTRIBUTING.md: the engine, the run-length rules and the
    linear-noise model sit below the modules that use them."""
    graph = import_graph(PACKAGE, "qtheory")
    assert "simulation" not in graph["planning"] and "planning" not in graph["simulation"]
    assert "finite_n" not in graph["planning"] and "planning" not in graph["finite_n"]
    assert "finite_n" not in graph["simulation"]
    for m, deps in graph.items():
        if m.split(".")[-1].startswith("_") and m != "__init__":
            public = {d for d in deps if not d.split(".")[-1].startswith("_")}
            assert not public, f"the private module {m} imports public {sorted(public)}"
    # the book's machinery (qtheory.book) sits above the model's modules: none of them,
    # nor the top-level namespace, imports it
    book = {m for m in graph if m == "book" or m.startswith("book.")}
    assert {"book", "book.coupling", "book.checks", "book.witnesses"} <= book, sorted(book)
    for m, deps in graph.items():
        if m not in book:
            assert not deps & book, f"{m} imports the book's machinery {sorted(deps & book)}"
    assert {"simulation", "fluid", "_validation"} <= graph["book.concentration"] | \
        graph["book.fluid_limit"] | graph["book.checks"]
    assert "_runlength" in graph["simulation"] and "_runlength" in graph["planning"]
    assert "_engine" in graph["simulation"] and "_engine" in graph["planning"]
    assert "_linear_noise" in graph["_runlength"] and "_linear_noise" in graph["finite_n"]


# A small package with every defect the checks must see.
_PLANTED = {
    "__init__.py": "from .a import f\n",
    "a.py": "from .b import g\n\ndef f():\n    return g()\n",
    "b.py": "def g():\n    from .c import h\n    return h()\n",
    "c.py": ("from . import a as mod_a\nfrom .d import _secret\nimport pkg.d\n\n"
             "def h():\n    return mod_a._hidden + _secret + pkg.d._x\n"),
    "d.py": "_secret = 1\n_x = 2\n",
    "e.py": "from .d import _secret as s\nfrom . import d\n\ndef k():\n    return d._x\n",
}


@pytest.fixture
def planted(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    for name, text in _PLANTED.items():
        (root / name).write_text(text)
    return root


def test_cycle_check_sees_a_cycle_through_a_lazy_import(planted):
    graph = import_graph(planted, "pkg")
    assert graph["b"] == {"c"}           # the import inside g() counts
    cycle = find_cycle(graph)
    assert cycle is not None and set(cycle) >= {"a", "b", "c"}
    # and without the lazy import the planted package has none
    (planted / "b.py").write_text("def g():\n    return 0\n")
    assert find_cycle(import_graph(planted, "pkg")) is None


def test_private_check_sees_imports_and_attributes(planted):
    uses = private_uses(planted, "pkg")
    texts = {(m, t.split(" (")[0]) for m, _, t in uses}
    assert ("c", "from .d import _secret") in texts
    assert ("c", "mod_a._hidden") in texts
    assert ("e", "from .d import _secret") in texts
    assert ("e", "d._x") in texts
    assert ("c", "pkg.d._x") in texts
    assert len(uses) == 5, uses


_PLANTED_SUB = {
    "__init__.py": "from .a import f\n",
    "a.py": "def f():\n    return 1\n",
    "_p.py": "_y = 1\n",
    "sub/__init__.py": "from .m import k\nfrom . import n\n",
    "sub/m.py": ("from ..a import f\nfrom .. import _p\nfrom .._p import _y\n\n"
                 "def k():\n    return f() + _p._y + _y\n"),
    "sub/n.py": "import pkg.sub.m as mm\n\ndef g():\n    from pkg.a import f\n"
                "    return mm.k() + mm._z\n",
}


def test_a_subpackage_is_read_with_its_relative_imports(tmp_path):
    root = tmp_path / "pkg"
    for name, text in _PLANTED_SUB.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    graph = import_graph(root, "pkg")
    assert set(graph) == {"__init__", "a", "_p", "sub", "sub.m", "sub.n"}
    assert graph["sub"] == {"sub.m", "sub.n"}
    assert graph["sub.m"] == {"a", "_p"}
    assert graph["sub.n"] == {"sub.m", "a"}          # import pkg.sub.m, a lazy pkg.a
    uses = {(m, t.split(" (")[0]) for m, _, t in private_uses(root, "pkg")}
    assert uses == {("sub.m", "from ._p import _y"), ("sub.m", "_p._y"),
                    ("sub.n", "mm._z")}, uses
    # a cycle through the subpackage is seen
    (root / "a.py").write_text("def f():\n    from .sub import n\n    return 1\n")
    assert set(find_cycle(import_graph(root, "pkg")) or ()) >= {"a", "sub.n"}


# --------------------------------------------------------------------------- validation


def _qtheory_modules():
    """Every module of qtheory, the subpackage qtheory.book included."""
    return [importlib.import_module(m.name)
            for m in pkgutil.walk_packages(qtheory.__path__, prefix="qtheory.")]


class _Counter:
    """Count the calls of ``_validation.<name>`` through every module that looks it up."""

    def __init__(self, *names):
        self.names = names
        self.calls = {n: 0 for n in names}

    def __enter__(self):
        self._patches = []
        for n in self.names:
            real = getattr(_validation, n)

            def counted(*args, _n=n, _real=real, **kwargs):
                self.calls[_n] += 1
                return _real(*args, **kwargs)

            for mod in _qtheory_modules() + [_validation]:
                if getattr(mod, n, None) is real:
                    p = mock.patch.object(mod, n, counted)
                    p.start()
                    self._patches.append(p)
        return self

    def __exit__(self, *exc):
        for p in reversed(self._patches):
            p.stop()


def _count(fn, *args, **kwargs):
    with _Counter("check_lam", "check_p", "check_n_stations") as c, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(*args, **kwargs)
    return c.calls


@pytest.mark.parametrize("args", [
    (1000, 0.9, 0.1),         # linear-noise model, p > 0
    (100, 0.9, 0.0),          # M/M/1
    (200, 0.3, 0.5),          # lam <= p: pooled
    (1, 0.5, 0.2),            # one station
])
@pytest.mark.parametrize("start", ["empty", "invariant"])
def test_plan_run_checks_each_argument_once(args, start):
    calls = _count(qtheory.plan_run, *args, half_width=0.05, start=start,
                   calibrate=False)
    assert calls == {"check_lam": 1, "check_p": 1, "check_n_stations": 1}


@pytest.mark.parametrize("args,kwargs", [
    ((300, 0.9, 0.1), dict(t_end=60.0, warmup=10.0)),
    ((300, 0.9, 0.1), dict(t_end=60.0, warmup=10.0, n_chains=2, s0=2)),
    ((50, 0.8, 0.0), dict(t_end=60.0, warmup=10.0)),
    ((50, 0.3, 0.5), dict(t_end=60.0, warmup=10.0)),
])
def test_simulate_checks_each_argument_once(args, kwargs):
    calls = _count(qtheory.simulate, *args, seed=1, **kwargs)
    assert calls == {"check_lam": 1, "check_p": 1, "check_n_stations": 1}


def test_simulate_of_a_plan_checks_once_in_each():
    plan = qtheory.plan_run(400, 0.85, 0.15, half_width=0.2, calibrate=False)
    calls = _count(qtheory.simulate, **plan, seed=2)
    assert calls == {"check_lam": 1, "check_p": 1, "check_n_stations": 1}


@pytest.mark.parametrize("args", [
    (10**5, 0.5, 0.4),        # M/M/1 formula above a well-populated top
    (10**4, 0.3, 0.5),        # lam <= p
    (5, 0.3, 0.5),            # lam <= p, sparse: the closure
    (10, 0.9, 0.0),           # exact
    (400, 0.6, 0.3),          # reflected diffusion (Monte Carlo)
])
def test_finite_n_mean_checks_each_argument_once(args):
    calls = _count(qtheory.finite_n_mean, *args)
    assert calls == {"check_lam": 1, "check_p": 1, "check_n_stations": 1}


@pytest.mark.parametrize("name,args,kwargs", [
    ("replicate", (2, 50, 0.9, 0.1), dict(t_end=50.0, warmup=5.0, seed=1)),
    ("sample_path", (50, 0.9, 0.1, [1.0, 2.0]), dict(seed=1)),
    ("fluctuation_covariance", (0.9, 0.1), {}),
    ("finite_n_min_centralization", (10**5, 0.5, 0.5), {}),
    ("relaxation_rate", (0.9, 0.1), {}),
    ("fluid_trajectory", (0.9, 0.1, [0.0, 1.0, 5.0]), {}),
    ("time_to_invariant", (0.9, 0.1), {}),
    ("naive_fluid_solve", (0.9, 0.1, 5.0), dict(max_evaluations=500)),
    ("invariant_tail_sums", (0.9, 0.1), {}),
    ("min_centralization", (0.9, 2.0), {}),
    ("min_centralization_for_delay", (0.9, 3.0), {}),
    ("design_point", (0.9, 2.0), {}),
    ("design_view", (0.9, 2.0), {}),
    ("invariant_view", (0.9, 0.1), {}),
    ("shifted_invariant_state", (0.9, 0.1, 2), {}),
    ("longest_queue_limit", (0.9, 0.1), {}),
    ("relaxation_rate_bound", (0.9, 0.3), {}),
])
def test_other_public_functions_check_lam_once(name, args, kwargs):
    from qtheory import book as qb

    fn = getattr(qtheory, name, None) or getattr(qb, name, None) or \
        getattr(qtheory.invariant, name)
    assert _count(fn, *args, **kwargs)["check_lam"] == 1


def test_variance_model_checks_each_argument_once():
    calls = _count(qtheory.planning.variance_model, 1000, 0.9, 0.1)
    assert calls == {"check_lam": 1, "check_p": 1, "check_n_stations": 1}


def test_the_counter_sees_every_check():
    """Planted: a function that validates twice is counted twice, through a module's own
    binding and through the _validation module."""
    from qtheory import invariant

    def twice(lam, p):
        invariant.invariant_state(lam, p)
        return _validation.check_lam(lam)

    assert _count(twice, 0.9, 0.1)["check_lam"] == 2
    # and the patches are gone afterwards
    assert invariant.check_lam is _validation.check_lam
    assert sys.modules["qtheory.finite_n"].check_lam is _validation.check_lam


def test_no_control_bytes_in_the_sources():
    # a docstring written without the r prefix turns \f, \b, \t of LaTeX into control
    # bytes (form feed, backspace, tab) that render as garbage
    root = Path(__file__).resolve().parents[1] / "qtheory"
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        assert not any(c in text for c in "\x08\x0c\x09"), path.name
