"""Every student notebook and every downloaded notebook runs outside the repository, in
an environment with only qtheory and its requirements (issue 33, item 1).

A reader opens a notebook wherever it landed: a student notebook from
``scripts/student_notebooks.py``, or the executed notebook the book offers for download
(``_build/notebooks/book/<name>.ipynb`` after a build, with its setup cell first, its
outputs cleared; without a build, the chapter itself as a notebook, which has the same
cells).  Each is executed here

* from a temporary folder outside the repository (stored results must reach a chapter
  through :func:`qtheory.book.stored`, never through a relative path),
* in a kernel that can import only qtheory, the distributions qtheory requires (with its
  ``widgets`` extra, which the student notebook's first cell installs), the kernel's own
  (ipykernel and what it requires) and the standard library: a finder put first on the
  kernel's ``sys.meta_path`` refuses every other installed distribution (MyST-NB,
  Jupyter Book, Sphinx, jupytext, pytest ...), as in a fresh environment where only the
  README's or the first cell's ``pip install`` ran.  The repository's folders are not on
  the kernel's path either: qtheory comes from a folder holding only a link to it.

The student notebook's first cell (the install, skipped when this qtheory version is
installed) is dropped, as are its empty answer cells.  Exercise cells that raise on
purpose carry the tag ``raises-exception``.

The notebooks run two at a time (``QTHEORY_OUTSIDE_JOBS``, default 2); the whole set is
marked ``slow``: the README's quick test command deselects it and ``.ci/run`` runs it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import student_notebooks as sn  # noqa: E402

pytestmark = pytest.mark.slow

CHAPTERS = [p.stem for p in sn.toc_chapters()]
KINDS = ("student", "downloaded")
JOBS = int(os.environ.get("QTHEORY_OUTSIDE_JOBS", "2"))
TIMEOUT = 900  # seconds per cell


def _qtheory_requirements(extras):
    """qtheory's requirements with ``extras``, from this checkout's pyproject.toml (the
    installed metadata may be another checkout's)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return reqs


def _closure(roots):
    """Names (normalized) of the distributions ``roots`` need, recursively, with extras:
    ``roots`` is a list of (distribution name, set of extras)."""
    from packaging.requirements import Requirement

    seen, todo = set(), list(roots)
    while todo:
        name, extras = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if (key, frozenset(extras)) in seen:
            continue
        seen.add((key, frozenset(extras)))
        try:
            reqs = (_qtheory_requirements(extras) if key == "qtheory"
                    else metadata.requires(name) or [])
        except metadata.PackageNotFoundError:
            continue
        for text in reqs:
            req = Requirement(text)
            envs = [{"extra": e} for e in (extras or {""})]
            if req.marker is None or any(req.marker.evaluate(e) for e in envs):
                todo.append((req.name, set(req.extras)))
    return {k for k, _ in seen}


def blocked_modules():
    """Top-level module names of installed distributions a fresh environment with only
    qtheory[widgets] and a kernel would not have."""
    allowed = _closure([("qtheory", {"widgets"}), ("ipykernel", set())])
    allowed |= {"qtheory", "pip", "setuptools"}
    blocked = set()
    for module, dists in metadata.packages_distributions().items():
        keys = {re.sub(r"[-_.]+", "-", d).lower() for d in dists}
        if not keys & allowed and module.isidentifier():
            blocked.add(module)
    return sorted(blocked - set(sys.stdlib_module_names))


FENCE = '''\
# (test only) a fresh environment: refuse the distributions qtheory does not require
import importlib.abc as _abc, sys as _sys
_BLOCKED = frozenset({blocked!r})

class _Fresh(_abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not installed here)")
        return None

_sys.meta_path.insert(0, _Fresh())
# the repository's folders, but not the environment when it lives inside the repository
# (a clone's .venv): its site-packages are what a fresh environment would have
_sys.path[:] = [p for p in _sys.path
                if not p.startswith({root!r}) or p.startswith(_sys.prefix)]
del _abc, _Fresh
'''


@pytest.fixture(scope="module")
def blocked():
    names = blocked_modules()
    assert "myst_nb" in names and "jupytext" in names, "the fence would not fence"
    assert "numpy" not in names and "scipy" not in names
    return names


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student-notebooks")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "student_notebooks.py"),
                           "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return out


def notebook(kind, name, student_dir):
    if kind == "student":
        nb = nbformat.read(student_dir / f"{name}.ipynb", as_version=4)
        assert "install" in nb.cells[0].metadata.get("tags", [])
        nb.cells = [c for c in nb.cells[1:] if "answer" not in c.metadata.get("tags", [])]
        return nb
    built = ROOT / "_build" / "notebooks" / "book" / f"{name}.ipynb"
    if built.is_file():
        nb = nbformat.read(built, as_version=4)
    else:
        import jupytext
        nb = jupytext.read(ROOT / "book" / f"{name}.md")
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def execute(nb, run_dir, blocked, link_dir):
    """Run ``nb`` from ``run_dir`` in a fenced kernel; return (seconds, error text)."""
    from nbclient import NotebookClient

    fence = nbformat.v4.new_code_cell(FENCE.format(blocked=tuple(blocked),
                                                   root=str(ROOT)))
    nb.cells.insert(0, fence)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",
                                                           "PYTHONSTARTUP")}
    env["PYTHONPATH"] = str(link_dir)  # qtheory only, not the repository's folders
    env["MPLBACKEND"] = "Agg"
    t0 = time.monotonic()
    try:
        client = NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3",
                                resources={"metadata": {"path": str(run_dir)}})
        client.execute(env=env)
    except Exception as exc:  # noqa: BLE001 - reported with the notebook's name
        return time.monotonic() - t0, str(exc)[-3000:]
    errors = [o for c in nb.cells if c.cell_type == "code"
              for o in c.get("outputs", []) if o.get("output_type") == "error"
              and "raises-exception" not in c.metadata.get("tags", [])]
    return time.monotonic() - t0, "\n".join(f"{e['ename']}: {e['evalue']}" for e in errors)


@pytest.fixture(scope="module")
def results(request, blocked, student_dir, tmp_path_factory):
    """Execute the notebooks this session selected, JOBS at a time."""
    sn.install_nbclient_poll()
    wanted = sorted({tuple(item.callspec.params[k] for k in ("kind", "name"))
                     for item in request.session.items
                     if item.module is request.module and hasattr(item, "callspec")
                     and "kind" in item.callspec.params})
    link_dir = tmp_path_factory.mktemp("site")
    (link_dir / "qtheory").symlink_to(ROOT / "qtheory")

    def run(key):
        kind, name = key
        run_dir = tmp_path_factory.mktemp(f"outside-{kind}-{name}")
        assert ROOT not in run_dir.parents
        return key, execute(notebook(kind, name, student_dir), run_dir, blocked, link_dir)

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(JOBS, 1)) as pool:
        out = dict(pool.map(run, wanted))
    times = {f"{k}/{n}": round(s) for (k, n), (s, _) in out.items()}
    print(f"\nnotebooks outside: {len(out)} in {time.monotonic() - t0:.0f} s with {JOBS} "
          f"jobs; each (s): {json.dumps(times)}")
    return out


def test_the_fence_refuses_the_book_toolchain(blocked, tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import numpy, qtheory\nfrom qtheory.book import glue, stored\n"
        "glue('x', 1.0, display=False)\nassert stored('reproduce_large')\n"
        "import myst_nb")])
    link_dir = tmp_path / "site"
    link_dir.mkdir()
    (link_dir / "qtheory").symlink_to(ROOT / "qtheory")
    _, error = execute(nb, tmp_path, blocked, link_dir)
    assert "ModuleNotFoundError" in error and "myst_nb" in error, error


@pytest.mark.timeout(7200)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", CHAPTERS)
def test_notebook_runs_outside_the_repository(kind, name, results):
    seconds, error = results[(kind, name)]
    assert not error, f"{kind} notebook {name} failed outside the repository:\n{error}"
