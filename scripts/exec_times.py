"""Execution times of the book's chapters, from the jupyter-cache records of a build.

Run after ``bash scripts/book.sh`` (it reads ``_build/.jupyter_cache``):

    .venv/bin/python scripts/exec_times.py            # the table and the budgets
    .venv/bin/python scripts/exec_times.py --check    # exit status 1 if over budget
    .venv/bin/python scripts/exec_times.py --cache other/_build/.jupyter_cache
    .venv/bin/python scripts/exec_times.py --run book/design.md   # per-cell times

With ``--run`` it instead executes the named chapters itself, one after the other, each in
a fresh kernel from its own folder (as tests/test_chapters.py and the book build do, but
through nbclient with ``record_timing=True``), and prints the wall time of every code cell
with its first line, the chapter's total and the load average before and after.  Nothing
is cached or written.

For every executed chapter it prints the execution time jupyter-cache recorded (the
"Run Time" of the book's execution-status page, ``book/status.md``), its slowest cell
(from the cell timings nbclient stores in the cached notebook when it runs with
``record_timing=True``; jupyter-cache's executor, used by the book build and by
tests/test_chapters.py, does not, and then the column shows "-": time a cell by running
the chapter with nbclient's default ``record_timing=True``) and whether it is
within the budgets of CONTRIBUTING.md: at most 120 s per chapter, no cell over 60 s, at
most 300 s for all chapters together.  Times depend on the machine and its load (the
load average is printed); tests never assert them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from pathlib import Path

CHAPTER_BUDGET = 120.0
CELL_BUDGET = 60.0
TOTAL_BUDGET = 300.0


def _cell_seconds(cell):
    meta = cell.get("metadata", {}).get("execution", {})
    start = meta.get("iopub.execute_input") or meta.get("shell.execute_request")
    end = meta.get("shell.execute_reply")
    if not start or not end:
        return None
    parse = lambda s: dt.datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def records(cache_path):
    """(chapter, seconds, slowest cell seconds or None, its index) per cached record."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    rows = []
    for rec in cache.list_cache_records():
        secs = (rec.data or {}).get("execution_seconds")
        slow, where = None, None
        try:
            nb = cache.get_cache_bundle(rec.pk).nb
            code = [c for c in nb.cells if c.get("cell_type") == "code"]
            times = [_cell_seconds(c) for c in code]
            known = [(t, i) for i, t in enumerate(times) if t is not None]
            if known:
                slow, where = max(known)
        except KeyError:  # pragma: no cover - a record without its notebook
            pass
        rows.append((Path(rec.uri).stem, secs, slow, where))
    return rows


def _read_chapter(path):
    import yaml
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    root = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((root / "_config.yml").read_text())
    exts = cfg.get("parse", {}).get("myst_enable_extensions", [])
    return read_myst_markdown_notebook(path.read_text(), MdParserConfig(
        enable_extensions=set(exts)), path=str(path))


def run_cells(path, timeout=600):
    """Execute one chapter in a fresh kernel; (total seconds, [(seconds, first line)])."""
    import time

    from nbclient import NotebookClient

    ext = Path(__file__).resolve().parents[1] / "book" / "_ext"
    sys.path.insert(0, str(ext))
    try:  # the build's guard against nbclient's lost wake-ups
        import nbclient_poll
    finally:
        sys.path.pop(0)
    nbclient_poll.install()
    nb = _read_chapter(path)
    client = NotebookClient(nb, timeout=timeout, record_timing=True,
                            resources={"metadata": {"path": str(path.parent)}})
    t0 = time.perf_counter()
    client.execute()
    total = time.perf_counter() - t0
    cells = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        lines = [ln for ln in cell.source.splitlines()
                 if ln.strip() and not ln.startswith(("#", ":", "---", "mystnb", "  ",
                                                      "tags"))]
        cells.append((_cell_seconds(cell), lines[0][:60] if lines else ""))
    return total, cells


def print_cells(paths):
    """Per-cell wall times of each chapter (``--run``); returns an exit status."""
    status = 0
    for arg in paths:
        path = Path(arg).resolve()
        load0 = os.getloadavg()[0]
        total, cells = run_cells(path)
        print(f"{path.name}: {total:.1f} s (load average {load0:.2f} before, "
              f"{os.getloadavg()[0]:.2f} after)")
        for i, (secs, head) in enumerate(cells):
            s = "-" if secs is None else f"{secs:7.2f}"
            flag = "  > cell budget" if secs is not None and secs > CELL_BUDGET else ""
            print(f"  cell {i:3d} {s:>7} s  {head}{flag}")
            status |= bool(flag)
        status |= total > CHAPTER_BUDGET
    return int(status)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default="_build/.jupyter_cache")
    ap.add_argument("--check", action="store_true",
                    help="exit with status 1 when a budget is exceeded")
    ap.add_argument("--run", nargs="+", metavar="CHAPTER",
                    help="execute these chapters (book/<name>.md) and print per-cell times")
    args = ap.parse_args(argv)
    if args.run:
        status = print_cells(args.run)
        return status if args.check else 0
    path = Path(args.cache)
    if not path.exists():
        print(f"no execution cache at {path}: build the book first (scripts/book.sh)")
        return 2
    rows = sorted(records(path), key=lambda r: -(r[1] or 0.0))
    total = sum(r[1] or 0.0 for r in rows)
    over = False
    print(f"{'chapter':<16} {'seconds':>8} {'slowest cell':>13} {'(code cell #)':>13}  "
          f"budget")
    for name, secs, slow, where in rows:
        flags = []
        if secs is not None and secs > CHAPTER_BUDGET:
            flags.append(f"chapter > {CHAPTER_BUDGET:.0f} s")
        if slow is not None and slow > CELL_BUDGET:
            flags.append(f"cell > {CELL_BUDGET:.0f} s")
        over |= bool(flags)
        s = "-" if secs is None else f"{secs:8.1f}"
        c = "-" if slow is None else f"{slow:13.1f}"
        w = "" if where is None else f"{where:13d}"
        print(f"{name:<16} {s:>8} {c:>13} {w:>13}  {', '.join(flags) or 'ok'}")
    over |= total > TOTAL_BUDGET
    print(f"{'all chapters':<16} {total:8.1f}{'':>28}  "
          f"{'ok' if total <= TOTAL_BUDGET else f'> {TOTAL_BUDGET:.0f} s'}")
    print(f"load average now {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs); budgets: "
          f"{CHAPTER_BUDGET:.0f} s per chapter, {CELL_BUDGET:.0f} s per cell, "
          f"{TOTAL_BUDGET:.0f} s in all")
    return 1 if (over and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
