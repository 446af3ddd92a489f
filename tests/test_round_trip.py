"""Opening a chapter in JupyterLab and saving it, with no edit, changes no byte (issue 33).

JupyterLab opens a chapter (``book/<name>.md``) with the *Jupytext Notebook* viewer
through jupytext's contents manager: ``get`` reads the text as a notebook, ``save``
writes the notebook back as text.  This test runs that very code,
``jupytext.sync_contentsmanager.build_sync_jupytext_contents_manager_class``, over a
minimal disk contents manager (the JupyterLab server itself is not needed to run it), on
a copy of every page of ``_toc.yml`` placed as in the repository (with ``pyproject.toml``,
where jupytext looks for a ``[tool.jupytext]`` configuration), and asserts that the saved
file is the opened one, byte for byte.

What makes the round trip the identity is the chapter header of CONTRIBUTING.md: it pins
``notebook_metadata_filter: -jupytext.text_representation.jupytext_version`` (otherwise
jupytext writes its own version into every saved header) and states the
``format_version`` jupytext writes; and the cells are in the layout jupytext writes (a
blank line after the cell options, metadata strings such as captions on one logical
line, which jupytext folds at 80 columns).  A planted chapter with the old header and a
``caption: |`` block shows that the check can fail.
"""

from __future__ import annotations

import copy
import datetime
import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from built_book import ROOT, toc_docnames

#: what a page's header must say for the round trip to be stable (CONTRIBUTING.md)
CANONICAL_HEADER = """---
jupytext:
  notebook_metadata_filter: -jupytext.text_representation.jupytext_version
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


def _contents_manager_class():
    """jupytext's TextFileContentsManager over a minimal disk contents manager."""
    from traitlets import Bool
    from traitlets.config import LoggingConfigurable

    try:
        import jupyter_server  # noqa: F401
    except ImportError:
        # jupytext builds its default class from jupyter_server at import: give it a base
        for name in ("jupyter_server", "jupyter_server.services",
                     "jupyter_server.services.contents",
                     "jupyter_server.services.contents.largefilemanager"):
            sys.modules.setdefault(name, types.ModuleType(name))
        mod = sys.modules["jupyter_server.services.contents.largefilemanager"]
        if not hasattr(mod, "LargeFileManager"):
            mod.LargeFileManager = type("LargeFileManager", (LoggingConfigurable,),
                                        {"get": lambda self, path, content=True: None})
    from jupytext.sync_contentsmanager import build_sync_jupytext_contents_manager_class

    class Disk(LoggingConfigurable):
        """Files as the Jupyter server's FileContentsManager serves them (text, UTF-8)."""

        allow_hidden = Bool(False)

        def __init__(self, root_dir, **kw):
            super().__init__(**kw)
            self.root_dir = str(root_dir)

        def _get_os_path(self, path):
            return os.path.join(self.root_dir, path.strip("/"))

        def file_exists(self, path):
            return os.path.isfile(self._get_os_path(path))

        def dir_exists(self, path):
            return os.path.isdir(self._get_os_path(path))

        def exists(self, path):
            return os.path.exists(self._get_os_path(path))

        def get(self, path, content=True, type=None, format=None, require_hash=False):
            p = self._get_os_path(path)
            ts = datetime.datetime.fromtimestamp(os.path.getmtime(p), datetime.timezone.utc)
            model = dict(name=os.path.basename(path), path=path, type="file",
                         last_modified=ts, created=ts, writable=True, format=None,
                         mimetype="text/plain", content=None)
            if content:
                with open(p, encoding="utf-8", newline="") as f:
                    model["content"] = f.read()
                model["format"] = "text"
            return model

        def save(self, model, path):
            assert model["type"] == "file" and model["format"] == "text", model["type"]
            with open(self._get_os_path(path), "w", encoding="utf-8", newline="") as f:
                f.write(model["content"])
            return self.get(path, content=False)

    return build_sync_jupytext_contents_manager_class(Disk)


def jupyterlab_round_trip(text: str, rel: str, root: Path) -> str:
    """Open ``text`` as the file ``rel`` under ``root`` with jupytext's contents manager,
    save the notebook it gives with no edit, and return the saved text."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    cm = _contents_manager_class()(root_dir=root)
    model = cm.get(rel)
    assert model["type"] == "notebook", f"{rel} was not opened as a notebook"
    cm.save(copy.deepcopy(model), rel)
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def round_trip_problem(text: str, rel: str, root: Path) -> str | None:
    """None if the round trip leaves ``text`` unchanged, else the first difference."""
    back = jupyterlab_round_trip(text, rel, root)
    if back == text:
        return None
    import difflib

    diff = list(difflib.unified_diff(text.splitlines(), back.splitlines(), "opened",
                                     "saved", lineterm="", n=1))
    return f"{rel}: saving it unchanged rewrites it:\n" + "\n".join(diff[:30])


@pytest.fixture
def lab_root(tmp_path, monkeypatch):
    """A folder laid out like the repository, with no user-wide jupytext configuration."""
    _contents_manager_class()  # imports jupytext's contents manager
    import jupytext.sync_contentsmanager as scm

    monkeypatch.setattr(scm, "find_global_jupytext_configuration_file", lambda: None)
    for name in ("pyproject.toml", "jupytext.toml", ".jupytext.toml", "jupytext.yml",
                 "book/jupytext.toml"):
        if (ROOT / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


PAGES = [d for d in toc_docnames() if (ROOT / f"{d}.md").is_file()]


@pytest.mark.parametrize("docname", PAGES)
def test_opening_and_saving_a_page_changes_nothing(docname, lab_root):
    rel = f"{docname}.md"
    with open(ROOT / rel, encoding="utf-8", newline="") as f:
        text = f.read()
    problem = round_trip_problem(text, rel, lab_root)
    assert problem is None, problem


def test_the_chapters_carry_the_canonical_header():
    notebooks = [d for d in PAGES
                 if (ROOT / f"{d}.md").read_text(encoding="utf-8").startswith("---\njupytext:")]
    assert len(notebooks) >= 10
    for d in notebooks:
        text = (ROOT / f"{d}.md").read_text(encoding="utf-8")
        assert text.startswith(CANONICAL_HEADER), f"{d}.md: the header is not the canonical one"


# the header the chapters had before issue 33, and a figure caption in block style
OLD_HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""
BODY = """
# A page

Some text.

```{code-cell} ipython3
x = 1
```
"""
CAPTION = """
```{code-cell} ipython3
---
mystnb:
  figure:
    caption: |
      A caption written over
      two lines.
    name: fig-planted
---
x = 2
```
"""
OPTIONS = """
```{code-cell} ipython3
:tags: [remove-cell]
assert x == 1
```
"""


def test_planted_defects_change_on_save(lab_root):
    rel = "book/planted.md"
    assert round_trip_problem(CANONICAL_HEADER + BODY, rel, lab_root) is None
    # the old header: jupytext adds format_version and its own version
    problem = round_trip_problem(OLD_HEADER + BODY, rel, lab_root)
    assert problem and "+    jupytext_version:" in problem, problem
    # a caption in block style: rewritten as a quoted, folded string
    problem = round_trip_problem(CANONICAL_HEADER + BODY + CAPTION, rel, lab_root)
    assert problem and "caption: '" in problem, problem
    # cell options followed directly by code: jupytext adds a blank line
    assert round_trip_problem(CANONICAL_HEADER + BODY + OPTIONS, rel, lab_root)
    fixed = OPTIONS.replace(":tags: [remove-cell]\n", ":tags: [remove-cell]\n\n")
    assert round_trip_problem(CANONICAL_HEADER + BODY + fixed, rel, lab_root) is None
