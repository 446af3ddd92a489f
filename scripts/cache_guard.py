"""Wipe the execution cache of the book when anything a chapter depends on changed.

jupyter-cache keys an executed chapter on its code cells only, so a change to qtheory, to
the environment or to a data file a chapter reads would otherwise publish stale outputs.
This script fingerprints every such input (see :func:`inputs`): every file of the qtheory
package (its sources, and the stored results of the bench scripts, which ship with it in
``qtheory/book/data/`` and reach the chapters through ``qtheory.book.stored``),
requirements.txt and pyproject.toml, and every file a chapter reads from the book's folder
(``book/matplotlibrc``, which matplotlib reads from the chapters' working directory).  When the fingerprint
differs from the one stored next to the cache, it deletes the cache.  Used by
scripts/_env.sh and by the test suite (tests/test_chapters.py checks that every file a
chapter opens is among the inputs).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"
STAMP = ROOT / "_build" / ".jupyter_cache.fingerprint"

#: Folders outside qtheory whose files chapters read (every file, any type): none since
#: the stored results moved into the package (qtheory/book/data/, read by
#: qtheory.book.stored), whose every file is an input already.
DATA_DIRS = ()
#: Single files chapters read (matplotlib's style file, read from the working folder).
DATA_FILES = ("book/matplotlibrc",)
#: Environment files: the versions of everything the chapters import.
ENV_FILES = ("requirements.txt", "pyproject.toml")


def _files(folder: Path) -> list[Path]:
    """Every file below ``folder`` except caches (numba's and Python's __pycache__)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file()
                  and "__pycache__" not in p.relative_to(folder).parts
                  and p.suffix not in (".pyc", ".nbi", ".nbc"))


def inputs(root: Path | None = None) -> list[Path]:
    """The files whose contents key the execution cache, in a fixed order.

    qtheory's package folder (every file, so the stored results in qtheory/book/data and
    any table shipped with the package count as well as its sources), the environment
    files, every file under the folders of ``DATA_DIRS`` and ``book/matplotlibrc``.  Files that do not exist are left out (their absence changes
    the fingerprint, since the list of names is part of it).
    """
    root = ROOT if root is None else root
    files = _files(root / "qtheory")
    files += [root / f for f in ENV_FILES]
    for d in DATA_DIRS:
        files += _files(root / d)
    files += [root / f for f in DATA_FILES]
    return [f for f in files if f.is_file()]


def fingerprint() -> str:
    """SHA-256 over the names and contents of :func:`inputs`, in their order."""
    h = hashlib.sha256()
    for f in inputs():
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def ensure_fresh() -> bool:
    """Delete the cache if it was made with other inputs; return True if wiped."""
    fp = fingerprint()
    old = STAMP.read_text().strip() if STAMP.exists() else None
    if old == fp:
        return False
    if CACHE.exists():
        shutil.rmtree(CACHE)
    STAMP.parent.mkdir(parents=True, exist_ok=True)
    STAMP.write_text(fp + "\n")
    return old is not None


if __name__ == "__main__":
    if ensure_fresh():
        print("[qtheory] qtheory, the environment or the book's data changed since the "
              "last execution: chapter cache cleared", file=sys.stderr)
