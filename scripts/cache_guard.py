"""Wipe the execution cache of the book when qtheory or the environment changed.

jupyter-cache keys an executed chapter on its code cells only, so a change to qtheory
would otherwise publish stale outputs.  This script fingerprints qtheory's source files,
requirements.txt and pyproject.toml; when the fingerprint differs from the one stored
next to the cache, it deletes the cache.  Used by scripts/_env.sh and by the test suite.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"
STAMP = ROOT / "_build" / ".jupyter_cache.fingerprint"


def fingerprint() -> str:
    """SHA-256 over qtheory's *.py files and the environment files, in sorted order."""
    h = hashlib.sha256()
    files = sorted((ROOT / "qtheory").rglob("*.py"))
    files += [ROOT / "requirements.txt", ROOT / "pyproject.toml",
              ROOT / "book" / "matplotlibrc"]  # figure colours
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def ensure_fresh() -> bool:
    """Delete the cache if it was made with other sources; return True if wiped."""
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
        print("[qtheory] qtheory changed since the last execution: chapter cache cleared",
              file=sys.stderr)
