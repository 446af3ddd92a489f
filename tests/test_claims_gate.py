"""The claims gate works: a false sentence backed by a hidden assert fails the chapter.

CONTRIBUTING.md asks that every quantitative sentence of a chapter that depends on a
computation be backed by a glued value, a printed line, or an ``assert`` in a hidden cell
(``tags: [remove-cell]``) next to it, so that the chapter test and the book build fail,
naming the chapter, when the sentence stops being true. This test proves that mechanism
on a temporary copy of the book: it appends to a small chapter a sentence with its
hidden assert, once false and once true, and runs the copy through the very function
that tests/test_chapters.py runs for every chapter (``test_chapter_executes``: MyST-NB's
reader, a fresh kernel started in the chapter's folder, the same timeouts). The false
version must fail with a message naming the chapter and quoting the assert; the true
version must pass. So the test fails if the gate stops catching false claims, and also if
it starts rejecting true ones.
"""

from __future__ import annotations

import shutil

import pytest

import test_chapters
from built_book import ROOT

CHAPTER = "book/intro.md"  # a small chapter: it executes in seconds

# The sentence and its hidden check, in the form CONTRIBUTING.md prescribes. The ratio of
# the M/M/1 mean (99) to the fluid mean (24.03) at (0.99, 0.05) is 4.12.
CLAIM = """

## A checked claim

At $\\lambda = 0.99$, five per cent of pooled capacity makes the mean queue about
{words} times shorter than without pooling.

```{{code-cell}} ipython3
:tags: [remove-cell]
import qtheory as _qt
_ratio = _qt.mm1_mean_queue_length(0.99) / _qt.mean_queue_length(0.99, 0.05)
assert {low} < _ratio < {high}, f"prose says 'about {words} times': ratio = {{_ratio:.3f}}"
```
"""
TRUE_CLAIM = CLAIM.format(words="four", low=3.5, high=4.5)
FALSE_CLAIM = CLAIM.format(words="ten", low=9, high=11)


class _NoCache:
    """Stands in for the jupyter-cache of the book: never a hit, records what is stored."""

    def __init__(self):
        self.stored = []

    def match_cache_notebook(self, nb):
        raise KeyError("the claims gate always executes")

    def cache_notebook_bundle(self, bundle, **kwargs):
        self.stored.append(bundle)


@pytest.fixture
def book_copy(tmp_path, monkeypatch):
    """A copy of the book's configuration and chapters in a temporary folder, with
    tests/test_chapters.py pointed at it."""
    test_chapters._install_nbclient_poll()  # from the repository, before ROOT moves
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "book", tmp_path / "book",
                    ignore=shutil.ignore_patterns("_build", "*.ipynb", "__pycache__"))
    monkeypatch.setattr(test_chapters, "ROOT", tmp_path)
    return tmp_path


def _run_chapter(path):
    cache = _NoCache()
    test_chapters.test_chapter_executes(path, cache)
    return cache


@pytest.mark.timeout(2 * test_chapters.CHAPTER_TIMEOUT)
def test_false_claim_fails_with_the_chapter_name_and_true_claim_passes(book_copy):
    chapter = book_copy / CHAPTER
    original = chapter.read_text(encoding="utf-8")

    chapter.write_text(original + FALSE_CLAIM, encoding="utf-8")
    with pytest.raises(pytest.fail.Exception) as failed:
        _run_chapter(chapter)
    message = str(failed.value)
    assert CHAPTER in message, message  # the chapter is named ...
    assert "prose says 'about ten times'" in message, message  # ... and the claim quoted
    assert "AssertionError" in message or "CellExecutionError" in message, message

    chapter.write_text(original + TRUE_CLAIM, encoding="utf-8")
    cache = _run_chapter(chapter)  # must not raise
    assert len(cache.stored) == 1, "the true version was not executed to the end"
    executed = cache.stored[0].nb
    hidden = [c for c in executed.cells if c.cell_type == "code"
              and "remove-cell" in c.metadata.get("tags", [])]
    assert any("_ratio" in c.source and c.get("execution_count") for c in hidden), \
        "the hidden check did not run"
