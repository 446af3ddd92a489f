"""Every chapter of the book executes in a fresh kernel from its own folder.

Each chapter listed in _toc.yml that is a MyST Markdown notebook is read exactly as the
book build reads it (MyST-NB's reader), executed with a per-cell and a per-chapter timeout,
and fails the test on any exception (cells tagged ``raises-exception`` excepted).  A
successful execution is stored in the book's execution cache (_build/.jupyter_cache),
which scripts/cache_guard.py wipes whenever qtheory changes: the book build that follows
in CI then reuses these executions instead of running every chapter a second time.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import yaml
from built_book import ROOT, chapters

CHAPTER_TIMEOUT = 600  # seconds for a whole chapter; cold numba compiles included
CELL_TIMEOUT = 300  # seconds for one cell, as in _config.yml


def _md_config():
    from myst_parser.config.main import MdParserConfig

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    exts = cfg.get("parse", {}).get("myst_enable_extensions", [])
    return MdParserConfig(enable_extensions=set(exts))


def _load_guard():
    spec = importlib.util.spec_from_file_location("cache_guard",
                                                  ROOT / "scripts" / "cache_guard.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CHAPTERS = [ROOT / f"{d}.md" for d in chapters()]


def _install_nbclient_poll():
    """The build's guard against nbclient's lost wake-ups (book/_ext/nbclient_poll.py)."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import nbclient_poll
    finally:
        sys.path.pop(0)
    nbclient_poll.install()


@pytest.fixture(scope="module")
def cache():
    from jupyter_cache import get_cache

    guard = _load_guard()
    guard.ensure_fresh()
    _install_nbclient_poll()
    return get_cache(str(guard.CACHE))


def test_toc_lists_notebook_chapters():
    names = {p.stem for p in CHAPTERS}
    assert {"intro", "invariant"} <= names, names


@pytest.mark.chapters
@pytest.mark.timeout(CHAPTER_TIMEOUT)
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_executes(path, cache):
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.executors.utils import single_nb_execution
    from myst_nb.core.read import read_myst_markdown_notebook

    nb = read_myst_markdown_notebook(path.read_text(), _md_config(), path=str(path))
    assert nb.metadata["kernelspec"]["name"] == "python3"
    if os.environ.get("QTHEORY_FORCE_EXECUTE") != "1":
        try:
            cache.match_cache_notebook(nb)
            pytest.skip(f"{path.name}: executed successfully with the same code and the "
                        "same qtheory sources (QTHEORY_FORCE_EXECUTE=1 to re-run)")
        except KeyError:
            pass
    result = single_nb_execution(nb, cwd=str(path.parent), timeout=CELL_TIMEOUT,
                                 allow_errors=False)
    if result.err is not None:
        pytest.fail(f"chapter {path.relative_to(ROOT)} raised "
                    f"{type(result.err).__name__}:\n{result.exc_string}", pytrace=False)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors or "raises-exception" in tags, (path.name, cell.source[:80])
    cache.cache_notebook_bundle(
        CacheBundleIn(nb, str(path), data={"execution_seconds": result.time}),
        check_validity=False, overwrite=True)
    print(f"{path.name}: executed in {result.time:.1f} s")


def test_nbclient_poll_recovers_a_lost_wakeup_and_keeps_timeouts():
    import asyncio
    from queue import Empty

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import nbclient_poll
    finally:
        sys.path.pop(0)

    calls = []

    async def lost_wakeup(timeout=None):
        # the reply is already there, but the first wait never wakes up
        calls.append(timeout)
        if len(calls) == 1:
            await asyncio.sleep(timeout)
            raise Empty
        return {"msg_type": "execute_reply"}

    get = nbclient_poll._sliced(lost_wakeup)
    assert asyncio.run(get(timeout=300))["msg_type"] == "execute_reply"
    assert len(calls) == 2 and calls[0] <= nbclient_poll.SLICE

    waits = []

    async def silent(timeout=None):
        waits.append(timeout)
        await asyncio.sleep(timeout)
        raise Empty

    import time

    t0 = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(nbclient_poll._sliced(silent)(timeout=1.2))
    assert time.monotonic() - t0 >= 1.2  # no earlier give-up than asked ...
    assert sum(waits) <= 1.2 + 1e-9  # ... and no later one
    assert waits[0] == nbclient_poll.SLICE and max(waits) <= nbclient_poll.SLICE

    from nbclient.client import NotebookClient

    nbclient_poll.install()
    assert NotebookClient._sliced_polling and not nbclient_poll.install()


# ------------------------------------------------------------ issue 23, item 4(a)
def _chapter_relative_reads():
    """Relative paths that chapter code opens: Path("...") and open("...") literals."""
    import re

    found = set()
    for path in CHAPTERS:
        for m in re.finditer(r"""(?:Path|open)\(\s*["']([^"'/][^"']*)["']""",
                             path.read_text()):
            found.add((path.parent / m.group(1)).resolve())
    return found


def _chapter_stored_reads():
    """Names of the stored results that chapter code reads (``qb.stored("name")``)."""
    import re

    return {m.group(1) for path in CHAPTERS
            for m in re.finditer(r"""\bstored\(\s*["'](\w+)(?:\.json)?["']""",
                                 path.read_text())}


def test_cache_guard_fingerprints_every_file_a_chapter_reads():
    guard = _load_guard()
    inputs = {p.resolve() for p in guard.inputs()}
    stored = ROOT / "qtheory" / "book" / "data"
    data = [p.resolve() for p in stored.rglob("*") if p.is_file()]
    assert data and set(data) <= inputs, sorted(set(data) - inputs)
    # every stored result a chapter reads is one of them (K20)
    names = _chapter_stored_reads()
    assert names, "no chapter reads a stored result through qtheory.book.stored"
    for name in names:
        assert (stored / f"{name}.json").resolve() in inputs, name
    assert (ROOT / "book" / "matplotlibrc").resolve() in inputs  # figure style
    for target in _chapter_relative_reads():
        files = [p for p in target.rglob("*") if p.is_file()] if target.is_dir() \
            else [target]
        assert set(files) <= inputs, f"a chapter reads {target}, not fingerprinted"


def test_cache_guard_data_only_change_invalidates_the_cache(tmp_path, monkeypatch):
    guard = _load_guard()
    for rel in ["qtheory/__init__.py", "requirements.txt", "pyproject.toml",
                "book/matplotlibrc", "qtheory/book/data/finite_n_validation.json"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((ROOT / rel).read_bytes())
    monkeypatch.setattr(guard, "ROOT", tmp_path)
    monkeypatch.setattr(guard, "CACHE", tmp_path / "_build" / ".jupyter_cache")
    monkeypatch.setattr(guard, "STAMP", tmp_path / "_build" / ".jupyter_cache.fingerprint")

    def cached():
        guard.CACHE.mkdir(parents=True, exist_ok=True)
        (guard.CACHE / "executed.db").write_text("old outputs")

    guard.ensure_fresh()
    cached()
    assert guard.ensure_fresh() is False and guard.CACHE.exists()  # nothing changed
    # numba's compiled cache inside the package is not a source
    (tmp_path / "qtheory" / "__pycache__").mkdir()
    (tmp_path / "qtheory" / "__pycache__" / "k.nbi").write_bytes(b"compiled")
    assert guard.ensure_fresh() is False and guard.CACHE.exists()

    data = tmp_path / "qtheory" / "book" / "data" / "finite_n_validation.json"
    for change in (lambda: data.write_text(data.read_text().replace("0", "1", 1)),
                   lambda: (data.parent / "new_run.json").write_text("{}"),
                   lambda: (data.parent / "new_run.json").unlink(),
                   lambda: (tmp_path / "book" / "matplotlibrc").write_text("lines.linewidth: 3\n"),
                   lambda: (tmp_path / "qtheory" / "table.json").write_text("[]"),
                   lambda: (tmp_path / "qtheory" / "__init__.py").write_text("# K15\n")):
        change()
        assert guard.ensure_fresh() is True, "a chapter input changed: cache must go"
        assert not guard.CACHE.exists()
        cached()
