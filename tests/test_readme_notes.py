"""The README (and the course page) say what happens when a reader follows them.

* The test command: chapters already executed with the same sources are *skipped* (the
  chapter test skips them unless ``QTHEORY_FORCE_EXECUTE=1``); the README must not
  promise every chapter executed and must name the variable that forces it.
* ``jupyter lab`` as root: JupyterLab refuses to start without ``--allow-root``; every
  page that tells a reader to run ``jupyter lab`` says so.
* ``jupyter labextension list`` marks jupyterlab-myst as incompatible: the README says
  so, names the pinned version, and (when JupyterLab is installed) the mark is really
  there, so that the README changes when it goes away.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from built_book import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
COURSE = (ROOT / "book" / "course.md").read_text(encoding="utf-8")


def _paragraph(text: str, needle: str) -> str:
    """The paragraph (blank-line separated block, with the command block after it) that
    contains ``needle``."""
    blocks = re.split(r"\n\s*\n", text)
    for i, block in enumerate(blocks):
        if needle in block or any(l.strip() == needle.strip() for l in block.splitlines()):
            return "\n".join(blocks[max(0, i - 1):i + 3])
    return ""


def test_test_command_says_chapters_may_be_skipped():
    chapter_test = (ROOT / "tests" / "test_chapters.py").read_text(encoding="utf-8")
    assert "QTHEORY_FORCE_EXECUTE" in chapter_test and "pytest.skip" in chapter_test, \
        "the chapter test no longer skips cached chapters: update the README"
    around = _paragraph(README, "bash scripts/test.sh\n")
    assert around, "the README lost its test command"
    assert "skipped" in around and "QTHEORY_FORCE_EXECUTE=1" in around, around
    assert not re.search(r"every chapter executed in a fresh kernel\)", README), \
        "the README promises every chapter executed, but cached chapters are skipped"


@pytest.mark.parametrize("name,text", [("README.md", README), ("book/course.md", COURSE)],
                         ids=["README", "course"])
def test_jupyter_lab_as_root(name, text):
    commands = re.findall(r"^\s*\S*jupyter lab\b.*$", text, re.M)
    assert commands, f"{name}: no `jupyter lab` command (update this test)"
    assert "--allow-root" in text and "root" in text.replace("--allow-root", ""), \
        f"{name}: tells readers to run `jupyter lab` without saying that as root it " \
        "needs --allow-root"


def test_labextension_mark_explained():
    pin = re.search(r"^jupyterlab-myst==(\S+)", (ROOT / "requirements-lab.txt").read_text(),
                    re.M)
    assert pin
    around = _paragraph(README, "labextension list")
    assert around and "incompatible" in around and pin.group(1) in around, \
        "the README does not explain the X that `jupyter labextension list` shows"
    assert "tests/test_notebook_route.py" in around


def test_labextension_mark_is_real():
    """The README's statement holds for the installed JupyterLab (skipped without it)."""
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.skip("JupyterLab not installed (requirements-lab.txt)")
    out = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"],
                         capture_output=True, text=True, timeout=120)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    line = next((l for l in text.splitlines() if "jupyterlab-myst" in l and "enabled" in l),
                "")
    assert line, text[-2000:]
    assert re.search(r"\bX\b", line) and "is not compatible" in text, \
        f"jupyterlab-myst is no longer marked incompatible ({line.strip()!r}): " \
        "update the README and book/course.md"
