"""The README's notebook route: a chapter opened in JupyterLab through jupytext shows the
book (theorem boxes, exercises, admonitions, numbered equations), not its MyST markup.

The test starts JupyterLab (``requirements-lab.txt``: JupyterLab with jupyterlab-myst;
jupytext's own JupyterLab extension comes with jupytext) on 127.0.0.1, on a free port,
with a token, in a temporary folder holding a copy of one chapter and temporary Jupyter
settings/runtime folders, so nothing of the user's Jupyter set-up is read or written.
Headless Chromium (the one of ``tests/test_browser.py``, every request to another host
aborted) opens JupyterLab and opens the chapter with the factory "Jupytext Notebook", as
the README's *Open With -> Jupytext Notebook* does. Then:

* every markdown cell is rendered by jupyterlab-myst;
* each ``prf:`` block (theorem, definition, proof) of the chapter is a rendered proof box,
  the theorem titled "Theorem <n> (<its title>)"; each ``{exercise}`` a rendered exercise;
  the admonition a rendered box;
* no raw MyST is left in the rendered text: no directive fence, no ``{prf:...}``,
  ``{exercise}``, ``{eq}``, ``{numref}``, ``{cite}``, ``{glue:text}`` role syntax and no
  ``:label:`` option. (Constructs that need the whole book degrade to a short readable
  form: a citation shows its key, a reference to a figure of a code cell its label, a glued
  value its name; the README says so.)

The executed notebooks the book offers for download and for Colab (written by the book
build, ``_build/notebooks/book/*.ipynb``) are opened too (after a build): there every value
glued into the text must be written out (``book/_ext/qtheory_book.py``,
``fill_glued_values``), since jupyterlab-myst knows no glue and would show the glue's name
and format specification (``beyond-mean:.3f``) instead of the number.

The server gets a start-up deadline and is terminated in a ``finally``. A picture of the
rendered theorem is written to ``_build/notebook-route-theorem.png``.

Needs JupyterLab and jupyterlab-myst (``pip install -r requirements-lab.txt``),
Playwright and Chromium; without them the test is skipped with the reason, and with
``QTHEORY_REQUIRE_LAB=1`` (set by .ci/run, which installs requirements-lab.txt) it fails.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from built_book import ROOT
from test_browser import CHROMIUM_ARGS, _chromium, check_browser_pair

REQUIRED = os.environ.get("QTHEORY_REQUIRE_LAB", "") not in ("", "0")
#: A chapter with a definition, a theorem, a proof, exercises with gated solutions, an
#: admonition, numbered equations, citations and glued values.
CHAPTER = ROOT / "book" / "beyond.md"
#: the same chapter as the build offers it (executed, glued values written out)
EXECUTED_NB = ROOT / "_build" / "notebooks" / "book" / "beyond.ipynb"
SCREENSHOT = ROOT / "_build" / "notebook-route-theorem.png"
START_TIMEOUT = 120  # seconds for JupyterLab to answer
RENDER_TIMEOUT = 90_000  # milliseconds for the chapter to render in the browser

#: Raw MyST that must not be left in the rendered text.
RAW_MYST = {
    "directive fence": re.compile(r"```\s*\{|:::\s*\{"),
    "prf role or directive": re.compile(r"\{prf:[a-z]+\}"),
    "exercise/solution directive": re.compile(r"\{(exercise|solution|solution-start|"
                                              r"solution-end)\}"),
    "role syntax": re.compile(r"\{(eq|numref|ref|cite|cite:[pt]|glue:text|glue|doc|"
                              r"math)\}`"),
    "directive option": re.compile(r"^\s*:(label|class|name|nonumber):", re.M),
}


def skip_or_fail(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (QTHEORY_REQUIRE_LAB is set, so this is a failure)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(folder: Path, scratch: Path):
    """Run JupyterLab on 127.0.0.1 over ``folder``; yield (base url, token)."""
    port, token = _free_port(), "qtheory-test-" + os.urandom(8).hex()
    settings = scratch / "settings"
    # what .binder/postBuild sets for Binder: MyST Markdown opens as a Jupytext Notebook;
    # every cell rendered at once (no windowing), so that the whole chapter can be read
    for plugin, value in {
        "docmanager-extension/plugin": {"defaultViewers": {"markdown": "Jupytext Notebook",
                                                            "myst": "Jupytext Notebook"}},
        "notebook-extension/tracker": {"windowingMode": "none"},
    }.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = dict(os.environ,
               JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(scratch / "workspaces"),
               JUPYTER_CONFIG_DIR=str(scratch / "config"),
               JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
               JUPYTER_DATA_DIR=str(scratch / "data"))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", f"--ServerApp.token={token}",
           f"--ServerApp.root_dir={folder}", "--ServerApp.port_retries=0",
           "--LabApp.expose_app_in_browser=True",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(scratch / "jupyterlab.log", "wb")
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {proc.returncode}:\n"
                            + (scratch / "jupyterlab.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer within {START_TIMEOUT} s:\n"
                                + (scratch / "jupyterlab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


# Runs in JupyterLab once the chapter is open: what the reader sees in its markdown cells.
READ_NOTEBOOK_JS = """
() => {
  const cells = Array.from(document.querySelectorAll('.jp-Notebook .jp-MarkdownCell'));
  const rendered = cells.map(c => c.querySelector('.lm-Widget.myst'));
  const title = el => (el.querySelector('[class*="-title"]') || el).innerText.trim();
  return {
    markdown_cells: cells.length,
    myst_rendered: rendered.filter(r => r).length,
    text: rendered.filter(r => r).map(r => r.innerText).join('\\n'),
    proofs: Array.from(document.querySelectorAll('.jp-MarkdownCell .myst-proof'))
        .map(title),
    exercises: Array.from(document.querySelectorAll('.jp-MarkdownCell .myst-exercise'))
        .map(title),
    admonitions: Array.from(document.querySelectorAll('.jp-MarkdownCell .myst-admonition'))
        .map(title),
  };
}
"""


def expected_blocks(source: str) -> dict:
    """What the chapter's source asks for: prf blocks (with the theorem titles),
    exercises, admonitions and markdown cells."""
    import jupytext

    nb = jupytext.reads(source, fmt="md:myst")
    directives = re.findall(r"^(?:```+|:::+)\{([\w:-]+)\}(.*)$", source, re.M)
    return {
        "markdown_cells": sum(c.cell_type == "markdown" for c in nb.cells),
        "proofs": sum(d.startswith("prf:") for d, _ in directives),
        "theorems": [t.strip() for d, t in directives if d == "prf:theorem"],
        "exercises": sum(d == "exercise" for d, _ in directives),
        "admonitions": sum(d in ("admonition", "note", "tip", "warning", "important")
                           for d, _ in directives),
    }


def route_problems(report: dict, expected: dict) -> list[str]:
    """What a reader of the notebook route would see wrong (empty: the book renders)."""
    problems = []
    if report["myst_rendered"] < expected["markdown_cells"]:
        problems.append(f"only {report['myst_rendered']} of {expected['markdown_cells']} "
                        "markdown cells rendered by jupyterlab-myst")
    if len(report["proofs"]) != expected["proofs"]:
        problems.append(f"{len(report['proofs'])} rendered prf boxes, the chapter has "
                        f"{expected['proofs']}: {report['proofs']}")
    for title in expected["theorems"]:
        if not any(re.match(rf"Theorem \d+ \({re.escape(title)}\)", p)
                   for p in report["proofs"]):
            problems.append(f"no rendered box 'Theorem <n> ({title})': {report['proofs']}")
    if len(report["exercises"]) < expected["exercises"]:
        problems.append(f"{len(report['exercises'])} rendered exercises, the chapter has "
                        f"{expected['exercises']}")
    if len(report["admonitions"]) < expected["admonitions"]:
        problems.append(f"{len(report['admonitions'])} rendered admonitions, the chapter "
                        f"has {expected['admonitions']}")
    for name, pattern in RAW_MYST.items():
        m = pattern.search(report["text"])
        if m:
            around = report["text"][max(0, m.start() - 60):m.end() + 60].replace("\n", " ")
            problems.append(f"raw MyST ({name}) in the rendered text: ...{around}...")
    return problems


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("Playwright is not installed (pip install -r requirements.txt)")
    exe = _chromium()
    if exe is None:
        skip_or_fail("Chromium not found: `apt-get install chromium` "
                     "(or set QTHEORY_CHROMIUM to a Chromium binary)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        check_browser_pair(b, REQUIRED)
        yield b
        b.close()


def _require_lab() -> None:
    missing = [m for m in ("jupyterlab", "jupyterlab_myst", "jupytext")
               if importlib.util.find_spec(m) is None]
    if missing:
        skip_or_fail(f"{', '.join(missing)} not installed: "
                     "`.venv/bin/pip install -r requirements-lab.txt`")


def open_chapter(browser, url: str, token: str, name: str, factory: str,
                 screenshot: Path | None = None) -> dict:
    """Open ``name`` in JupyterLab with the given document factory; read what it shows."""
    context = browser.new_context(viewport={"width": 1300, "height": 1000})

    def route(r):
        if r.request.url.startswith(("data:", "blob:")) \
                or urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    try:
        page.goto(f"{url}/lab?reset&token={token}", timeout=RENDER_TIMEOUT)
        page.wait_for_function("() => window.jupyterapp", timeout=RENDER_TIMEOUT)
        page.evaluate("async () => { await jupyterapp.started; await jupyterapp.restored; }")
        page.evaluate("([path, factory]) => jupyterapp.commands.execute("
                      "'docmanager:open', {path, factory})", [name, factory])
        if factory in ("Jupytext Notebook", "Notebook"):
            page.wait_for_selector(".jp-MarkdownCell .myst-proof-title",
                                   timeout=RENDER_TIMEOUT)
            page.wait_for_function(  # every markdown cell rendered
                "() => Array.from(document.querySelectorAll('.jp-Notebook .jp-MarkdownCell'))"
                ".every(c => c.querySelector('.lm-Widget.myst'))", timeout=RENDER_TIMEOUT)
        else:
            page.wait_for_selector(".jp-FileEditor .cm-content", timeout=RENDER_TIMEOUT)
        report = page.evaluate(READ_NOTEBOOK_JS)
        if factory == "Editor":  # a text editor: its text is the raw markdown
            report["text"] = page.evaluate(
                "() => document.querySelector('.jp-FileEditor .cm-content').innerText")
        if screenshot is not None:  # the first theorem box at the top of the view
            box = page.locator(".jp-MarkdownCell .myst-proof", has_text="Theorem").first
            box.scroll_into_view_if_needed()
            box.evaluate("el => el.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(500)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot))
        return report
    finally:
        context.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    _require_lab()
    folder = tmp_path_factory.mktemp("notebook-route")
    shutil.copy2(CHAPTER, folder / CHAPTER.name)
    if EXECUTED_NB.is_file():
        shutil.copy2(EXECUTED_NB, folder / EXECUTED_NB.name)
    with jupyterlab(folder, tmp_path_factory.mktemp("jupyter")) as (url, token):
        yield url, token


@pytest.mark.timeout(400)
def test_chapter_renders_in_jupyterlab(lab, browser):
    """The chapter opened as a Jupytext Notebook shows rendered theorems and exercises."""
    url, token = lab
    report = open_chapter(browser, url, token, CHAPTER.name, "Jupytext Notebook",
                          screenshot=SCREENSHOT)
    expected = expected_blocks(CHAPTER.read_text(encoding="utf-8"))
    assert expected["theorems"] and expected["exercises"], "the chapter lost its theorem"
    problems = route_problems(report, expected)
    assert not problems, f"{CHAPTER.name} in JupyterLab:\n  " + "\n  ".join(problems)


@pytest.mark.timeout(400)
def test_planted_raw_markup_is_caught(lab, browser):
    """The gate fails where the markup is not rendered: the same chapter opened in the
    text editor (what a reader saw before, MyST as literal text)."""
    url, token = lab
    report = open_chapter(browser, url, token, CHAPTER.name, "Editor")
    expected = expected_blocks(CHAPTER.read_text(encoding="utf-8"))
    problems = route_problems(report, expected)
    assert any("rendered prf boxes" in p for p in problems), problems
    assert any("raw MyST (directive fence)" in p for p in problems), problems
    assert any("raw MyST (role syntax)" in p for p in problems), problems


def glue_problems(text: str, names: list[str]) -> list[str]:
    """Glue names (with or without a format specification) left in rendered text."""
    found = sorted({n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)})
    return [f"glued values shown by name: {found[:8]}"] if found else []


def _glue_names(source: str) -> list[str]:
    return [m.rsplit(":", 1)[0] if ":" in m else m
            for m in re.findall(r"\{glue:text\}`([^`]+)`", source)]


@pytest.mark.timeout(400)
def test_executed_notebook_shows_glued_values(lab, browser):
    """The executed notebook the book offers shows the glued numbers, not their names,
    and renders like the chapter (theorem boxes, exercises)."""
    from built_book import require_build

    require_build()
    if not EXECUTED_NB.is_file():
        pytest.fail(f"the build did not write {EXECUTED_NB.relative_to(ROOT)}")
    url, token = lab
    report = open_chapter(browser, url, token, EXECUTED_NB.name, "Notebook")
    source = CHAPTER.read_text(encoding="utf-8")
    names = _glue_names(source)
    assert names, "the chapter glues no value: pick another chapter for this test"
    expected = expected_blocks(source)
    problems = glue_problems(report["text"], names) + [
        p for p in route_problems(report, expected) if "markdown cells rendered" not in p]
    assert not problems, f"{EXECUTED_NB.name} in JupyterLab:\n  " + "\n  ".join(problems)


def test_fill_glued_values():
    """The build's glue filling: values formatted as MyST-NB formats them, names of
    missing values returned and their roles left alone."""
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from qtheory_book import fill_glued_values
    finally:
        sys.path.pop(0)
    out = {"output_type": "display_data", "metadata": {"scrapbook": {
        "name": "x-mean", "mime_prefix": "application/papermill.record/"}},
        "data": {"application/papermill.record/text/plain": "24.02981"}}
    out_n = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "x-n"}},
             "data": {"text/plain": "7"}}
    nb = {"cells": [
        {"cell_type": "markdown", "source": "mean {glue:text}`x-mean:.3f`, n = "
         "{glue:text}`x-n`, {glue:text}`x-n:d` and {glue:text}`x-gone:.2f`."},
        {"cell_type": "code", "source": "", "outputs": [out, out_n]}]}
    assert fill_glued_values(nb) == ["x-gone"]
    assert nb["cells"][0]["source"] == \
        "mean 24.030, n = 7, 7 and {glue:text}`x-gone:.2f`."
    assert glue_problems("mean x-mean:.3f here", ["x-mean"])
    assert not glue_problems("mean 24.030 here", ["x-mean"])
