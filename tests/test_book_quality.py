"""Book-wide quality gates, and proof that each of them can fail.

From the sources (always run): every chapter in _toc.yml is a MyST Markdown notebook with
the jupytext header and the ``python3`` kernel; the API reference page documents every
public name of qtheory; a widget cell sits next to a captioned static figure.

From the built book (run when ``_build/html`` is present and fresh; mandatory in CI,
where .ci/run sets ``QTHEORY_REQUIRE_BROWSER=1`` after the build):

* every code cell was executed and every output it produced is on the page;
* no cell output shows a traceback or an error (cells tagged ``raises-exception`` aside);
* no page shows a Python traceback at all, deliberate errors included (a deliberate error
  is shown as a clean message), and no page shows an absolute path of the build machine;
* every internal link and cross-reference resolves, anchors included;
* every chapter page offers its executed notebook for download and Binder and Colab
  launch buttons;
* every figure has a number and a caption, and is referenced from the text (a link in
  the figure's own caption does not count).

Each gate is a function over parsed sources or HTML that returns a list of problems; the
tests against the build call it on every page, and the ``test_planted_*`` tests call it on
a small synthetic page with one planted defect (the gate must report it) and on the same
page without the defect (the gate must pass), so that no gate passes whatever it reads.
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
from html import unescape
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import yaml

from built_book import (EXECUTED, HTML, ROOT, built_pages, chapters, parse, parse_html,
                        require_build, toc_docnames)

# Pages of the book that are not notebooks: the landing page and the appendices made of
# directives or prose only (API reference, execution table, bibliography, course,
# notation, proof map, the analytic tools and the finite-N lemmas).
PLAIN_PAGES = {"book/index", "book/api", "book/status", "book/bibliography", "book/course",
               "book/notation", "book/proof-map", "book/tools", "book/internals",
               "book/lemmas-finite-n"}


# ======================================================================================
# The gates: functions over sources or HTML that return a list of problems
# ======================================================================================

def header_problems(text: str) -> list[str]:
    """A chapter's MyST notebook header: jupytext text representation and python3."""
    if not text.startswith("---\n"):
        return ["no front matter"]
    fm = yaml.safe_load(text.split("\n---", 1)[0][4:]) or {}
    problems = []
    rep = fm.get("jupytext", {}).get("text_representation", {})
    if rep.get("extension") != ".md" or rep.get("format_name") != "myst":
        problems.append(f"jupytext text_representation is not myst/.md: {rep}")
    ks = fm.get("kernelspec", {})
    if ks.get("name") != "python3" or ks.get("language") != "python":
        problems.append(f"kernelspec is not python3: {ks}")
    return problems


def api_documented(api_text: str) -> list[str]:
    """Full names of what book/api.md documents (``.. autofunction::`` and
    ``.. autoclass::``), read under the ``.. currentmodule::`` in force."""
    current, out = None, []
    for line in api_text.splitlines():
        m = re.match(r"^\.\. (?:py:)?currentmodule:: ([\w.]+)\s*$", line)
        if m:
            current = m.group(1)
            continue
        m = re.match(r"^\.\. auto(?:function|class):: ([\w.]+)", line)
        if m:
            name = m.group(1)
            full = name if current is None or "." in name else f"{current}.{name}"
            out.append(full)
    return out


def public_api() -> set[str]:
    """Every public name of qtheory under the name the API page documents it by: the
    top-level name (``qtheory.simulate``) for what ``qtheory.__all__`` holds, the
    ``qtheory.book`` name for what ``qtheory.book.__all__`` holds, and the module's name
    (``qtheory.fluid.l1_distance``) for the rest of every public module's ``__all__``."""
    import importlib
    import pkgutil

    import qtheory
    from qtheory import book

    top, bk = set(qtheory.__all__) - {"__version__"}, set(book.__all__)
    names = {f"qtheory.{n}" for n in top} | {f"qtheory.book.{n}" for n in bk}
    for info in pkgutil.walk_packages(qtheory.__path__, prefix="qtheory."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        mod = importlib.import_module(info.name)
        inside_book = info.name == "qtheory.book" or info.name.startswith("qtheory.book.")
        for n in getattr(mod, "__all__", []):
            if n in top or (inside_book and n in bk):
                continue
            names.add(f"{info.name}.{n}")
    return names


def api_problems(api_text: str, public) -> list[str]:
    """book/api.md documents every public name exactly once (under the name of
    :func:`public_api`), and nothing else."""
    documented = api_documented(api_text)
    problems = []
    twice = sorted({d for d in documented if documented.count(d) > 1})
    if twice:
        problems.append(f"documented twice: {twice}")
    missing = sorted(set(public) - set(documented))
    if missing:
        problems.append(f"public but not documented: {missing}")
    extra = sorted(set(documented) - set(public))
    if extra:
        problems.append(f"documented but not public: {extra}")
    return problems


def widget_problems(cells) -> list[str]:
    """A cell that builds a widget (interact) sits next to a captioned static figure of
    its default state, for readers of the HTML, who have no kernel. ``cells`` are the
    code cells of a jupytext notebook."""
    problems = []
    for i, cell in enumerate(cells):
        if re.search(r"\binteract(ive)?\(", cell.source):
            near = cells[max(i - 1, 0):i] + cells[i + 1:i + 2]
            if not any(c.metadata.get("mystnb", {}).get("figure") for c in near):
                problems.append(f"widget cell {i} has no captioned static figure next to "
                                f"it: {cell.source[:120]!r}")
    return problems


def code_cells_html(html: str) -> list[str]:
    """The HTML of each MyST-NB code cell container, in page order."""
    starts = [m.start() for m in re.finditer(r'<div class="cell( [^"]*)?"', html)]
    return [html[s:(starts[i + 1] if i + 1 < len(starts) else len(html))]
            for i, s in enumerate(starts)]


def _shown_outputs(cell: dict) -> list[dict]:
    """Outputs of an executed cell that the page is meant to show."""
    tags = set(cell.get("metadata", {}).get("tags", []))
    if tags & {"remove-output", "remove-cell"}:
        return []
    return [o for o in cell.get("outputs", [])
            if not (o.get("output_type") == "stream" and not "".join(o.get("text", "")).strip())]


def cell_output_problems(docname: str, status: list[str] | None, nb: dict,
                         html: str) -> list[str]:
    """The chapter executed successfully (its row of the execution table), no cell has an
    unexpected error output, and every output a cell produced is on the page."""
    if status is None:
        return [f"{docname}: not in the execution table of book/status"]
    if status[-1] != "\u2705":
        return [f"{docname}: execution status {status}"]
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"
             and "remove-cell" not in c.get("metadata", {}).get("tags", [])]
    problems = []
    if not any(c.get("outputs") for c in cells):
        problems.append(f"{docname}: no cell has any output")
    errors = [i for i, c in enumerate(cells)
              if any(o.get("output_type") == "error" for o in c.get("outputs", []))
              and "raises-exception" not in c.get("metadata", {}).get("tags", [])]
    if errors:
        problems.append(f"{docname}: cells with an error output: {errors}")
    html_cells = code_cells_html(html)
    if len(html_cells) != len(cells):
        return problems + [f"{docname}: {len(cells)} code cells in the notebook, "
                           f"{len(html_cells)} on the page"]
    for i, (cell, chunk) in enumerate(zip(cells, html_cells)):
        if _shown_outputs(cell) and 'class="cell_output' not in chunk:
            problems.append(f"{docname}: cell {i} produced output that the page does not "
                            "show: " + "".join(cell["source"])[:200])
    return problems


def error_output_problems(html: str) -> list[str]:
    """No cell output shows a traceback, an error or a warning, unless the cell carries
    the raises-exception tag."""
    bad = []
    for i, cell in enumerate(code_cells_html(html)):
        if "tag_raises-exception" in cell[:200]:
            continue
        out = cell.split('class="cell_output', 1)[1] if 'class="cell_output' in cell else ""
        text = re.sub(r"<[^>]+>", "", out)
        if ("traceback" in out and 'class="output traceback' in out) \
                or re.search(r"Traceback \(most recent call last\)|\b\w*(Error|Warning):",
                             text) or "Error displaying widget" in text:
            bad.append(f"cell {i}: {text.strip()[:200]}")
    return bad


# A Python or IPython traceback as MyST-NB renders it: the classic header, IPython 8's
# "Cell In[n], line m" frames, the ipythontb output block, frames of files, or raw ANSI
# colour codes that leaked into the page as text.
TRACEBACK_PATTERNS = [
    (re.compile(r"Traceback \(most recent call last\)"), "a Python traceback"),
    (re.compile(r'class="[^"]*\b(?:traceback|highlight-ipythontb)\b'),
     "an IPython traceback block"),
    (re.compile(r"\bCell In\[\d+\], line \d+"), "an IPython traceback frame"),
    (re.compile(r'\bFile "[^"]+", line \d+'), "a traceback frame"),
    (re.compile(r"\x1b\[[0-9;]*m|\\x1b\[|\\u001b\[|&#27;\[|&#x1b;\[|\[(?:0|1);3\dm"),
     "ANSI colour codes"),
]


def _context(html: str, m: re.Match, width: int = 90) -> str:
    text = html[max(m.start() - width, 0):m.end() + width]
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())


def traceback_problems(html: str) -> list[str]:
    """The page shows no Python traceback anywhere (deliberate errors included)."""
    # Pygments splits a traceback into many <span>s: search the text as well.
    text = unescape(re.sub(r"<[^>]+>", "", html))
    problems = []
    for pattern, what in TRACEBACK_PATTERNS:
        for where in (html, text):
            m = pattern.search(where)
            if m:
                problems.append(f"{what}: ...{_context(where, m)}...")
                break
    return problems


def machine_path_patterns(root: Path = ROOT) -> list[re.Pattern]:
    """Absolute paths of the build machine: the checkout, home folders, the virtual
    environment's and the system's Python library folders, temporary folders."""
    pats = [re.escape(str(root)), r"(?<![\w.])/root/", r"(?<![\w.])/home/[\w.-]+/",
            r"site-packages", r"dist-packages", r"(?<![\w.])/usr/(?:local/)?lib/python",
            r"(?<![\w./])/tmp/", r"\.venv/"]
    home = str(Path.home())
    if home not in ("/", ""):
        pats.append(re.escape(home) + "/")
    return [re.compile(p) for p in pats]


def machine_path_problems(html: str, root: Path = ROOT) -> list[str]:
    """The page shows no absolute path of the machine that built it."""
    problems = []
    for pattern in machine_path_patterns(root):
        m = pattern.search(html)
        if m:
            problems.append(f"{pattern.pattern!r}: ...{_context(html, m)}...")
    return problems


def link_problems(html_root: Path, pages: list[Path]) -> list[str]:
    """Every link of these pages to a file under html_root exists, anchor included."""
    parsed = {p: parse(p) for p in pages}
    broken = []
    for page, info in parsed.items():
        for href in info.links:
            url = urlparse(href)
            if url.scheme or href.startswith(("mailto:", "javascript:", "//")):
                continue
            target = page if url.path == "" else (page.parent / unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(html_root)}: {href} (no such file)")
                continue
            if url.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else parse(target).ids
                if unquote(url.fragment) not in ids:
                    broken.append(f"{page.relative_to(html_root)}: {href} (no such anchor)")
    return broken


def launch_problems(docname: str, links: list[str], offered: dict | None,
                    executed: dict) -> list[str]:
    """The page links its executed notebook (the same outputs as the executed one) and
    has Binder and Colab buttons for this chapter."""
    problems = []
    if offered is None:
        problems.append(f"{docname}: no download link to the executed notebook")
    else:
        if [c.get("outputs") for c in offered["cells"]] != \
                [c.get("outputs") for c in executed["cells"]]:
            problems.append(f"{docname}: the downloadable notebook is not the executed one")
        if not any(c.get("outputs") for c in offered["cells"]):
            problems.append(f"{docname}: the downloadable notebook has no outputs")
    binder = [h for h in links if h.startswith("https://mybinder.org/v2/gh/")]
    colab = [h for h in links if h.startswith("https://colab.research.google.com/github/")]
    if not (binder and binder[0].endswith(f"urlpath=lab/tree/{docname}.md")):
        problems.append(f"{docname}: no Binder button for the chapter: {binder}")
    if not (colab and colab[0].endswith(f"/blob/notebooks/{docname}.ipynb")):
        problems.append(f"{docname}: no Colab button for the chapter: {colab}")
    return problems


FIGURE_RE = re.compile(r'<figure[^>]*\bid="([^"]+)"[^>]*>(.*?)</figure>', flags=re.S)


def _resolve(page_rel: str, href: str) -> tuple[str, str] | None:
    """(page, fragment) a link of page_rel points at, both relative to the HTML root."""
    url = urlparse(href)
    if url.scheme or href.startswith(("mailto:", "javascript:", "//")):
        return None
    path = page_rel if url.path == "" else posixpath.normpath(
        posixpath.join(posixpath.dirname(page_rel), unquote(url.path)))
    return path, unquote(url.fragment)


def referenced_anchors(pages: dict[str, str]) -> set[tuple[str, str]]:
    """(page, id) pairs that some link of the book points at, except links that sit inside
    the very figure they point at (the headerlink Sphinx puts in every caption). ``pages``
    maps every page, relative to the HTML root (posix), to its HTML."""
    referenced = set()
    for rel, text in pages.items():
        for href, enclosing in parse_html(text).link_context:
            target = _resolve(rel, href)
            if target is None or not target[1]:
                continue
            if target[0] == rel and target[1] in enclosing:
                continue  # the figure's own caption links to it
            referenced.add(target)
    return referenced


def figure_problems(page_rel: str, html: str, referenced: set[tuple[str, str]]) -> list[str]:
    """Each figure of the page has 'Fig. n' and a caption, and is referenced from outside
    itself (``referenced`` as computed by :func:`referenced_anchors`)."""
    problems = []
    for fid, body in FIGURE_RE.findall(html):
        if not re.search(r'class="caption-number">Fig\. (?:[A-Z]+|\d+)', body):
            problems.append(f"{fid}: no figure number")
        caption = re.search(r'class="caption-text">(.*?)</span>', body, flags=re.S)
        if not caption or not re.sub(r"<[^>]+>", "", caption.group(1)).strip():
            problems.append(f"{fid}: no caption")
        if (page_rel, fid) not in referenced:
            problems.append(f"{fid}: not referenced anywhere (its own caption aside)")
    return problems


# ======================================================================================
# The gates applied to the sources
# ======================================================================================

@pytest.mark.parametrize("docname", [d for d in toc_docnames() if d not in PLAIN_PAGES])
def test_chapter_header(docname):
    """Every chapter carries the MyST notebook header with the python3 kernel."""
    path = ROOT / f"{docname}.md"
    if not path.exists():
        pytest.skip(f"{docname}.md is listed in _toc.yml but not in this checkout yet")
    problems = header_problems(path.read_text(encoding="utf-8"))
    assert not problems, f"{docname}: {problems}"


def test_api_reference_lists_every_public_name():
    """book/api.md documents each name of qtheory.__all__, of qtheory.book.__all__ and of
    every public module's __all__ exactly once."""
    import qtheory
    from qtheory import book

    public = public_api()
    assert {f"qtheory.{n}" for n in qtheory.__all__ if n != "__version__"} <= public
    assert {f"qtheory.book.{n}" for n in book.__all__} <= public
    assert "qtheory.fluid.l1_distance" in public and "qtheory.book.coupled_run" in public
    problems = api_problems((ROOT / "book" / "api.md").read_text(encoding="utf-8"), public)
    assert not problems, problems


def test_api_reference_is_organised_by_task_with_runnable_examples():
    """Each section of book/api.md that documents top-level names opens with a runnable
    example; the examples run clean and print what their comments say (the README's
    checker, tests/test_readme.py)."""
    import qtheory
    from test_readme import check_block, checked_lines, python_blocks

    text = (ROOT / "book" / "api.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    top = {n for n in qtheory.__all__ if n != "__version__"}
    tasks = [sec for sec in sections
             if set(re.findall(r"^\.\. auto(?:function|class):: (\w+)\s*$", sec,
                               flags=re.M)) & top]
    assert len(tasks) >= 6, "the API page is organised by task"
    for sec in tasks + [sections[-1]]:
        assert "```python" in sec, f"no example in the section {sec.splitlines()[0]!r}"
    blocks = python_blocks(text)
    assert sum(len(checked_lines(b)) for b in blocks) >= 15
    for block in blocks:
        wrong = check_block(block)
        assert not wrong, wrong


@pytest.mark.parametrize("docname", [d for d in toc_docnames() if d not in PLAIN_PAGES])
def test_widget_cells_have_static_figure(docname):
    """A widget cell sits next to a captioned static figure of its default state."""
    import jupytext

    path = ROOT / f"{docname}.md"
    if not path.exists():
        pytest.skip(f"{docname}.md is listed in _toc.yml but not in this checkout yet")
    cells = [c for c in jupytext.read(path).cells if c.cell_type == "code"]
    problems = widget_problems(cells)
    assert not problems, f"{docname}:\n" + "\n".join(problems)


# ======================================================================================
# The gates applied to the built book
# ======================================================================================

def _chapter_ids():
    return [d for d in chapters() if d not in PLAIN_PAGES]


def _status_rows() -> dict[str, list[str]]:
    """The execution table of book/status: docname -> [modified, method, seconds, status]."""
    html = (HTML / "book" / "status.html").read_text(encoding="utf-8")
    rows = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", html, flags=re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip()
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
        if cells:
            rows[cells[0]] = cells[1:]
    return rows


@functools.lru_cache(maxsize=1)
def _all_pages() -> dict[str, str]:
    return {p.relative_to(HTML).as_posix(): p.read_text(encoding="utf-8")
            for p in built_pages()}


@functools.lru_cache(maxsize=1)
def _referenced() -> set[tuple[str, str]]:
    return referenced_anchors(_all_pages())


def _page_ids() -> list[str]:
    if not HTML.is_dir():
        return ["<no build>"]
    return [p.relative_to(HTML).as_posix() for p in built_pages()] or ["<no build>"]


@pytest.mark.parametrize("docname", _chapter_ids())
def test_every_code_cell_has_its_output(docname):
    """The chapter executed successfully (execution table), and every output its cells
    produced is on the page. Cells without output (imports, definitions) stay empty;
    cells tagged remove-output hide theirs on purpose."""
    require_build()
    nb_path = EXECUTED / f"{docname}.ipynb"
    assert nb_path.is_file(), f"no executed notebook {nb_path.relative_to(ROOT)}"
    problems = cell_output_problems(
        docname, _status_rows().get(docname),
        json.loads(nb_path.read_text(encoding="utf-8")),
        (HTML / f"{docname}.html").read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("docname", _chapter_ids())
def test_no_error_in_outputs(docname):
    """No output shows a traceback, an error or a warning, unless the cell is meant to."""
    require_build()
    bad = error_output_problems((HTML / f"{docname}.html").read_text(encoding="utf-8"))
    assert not bad, f"{docname}:\n" + "\n".join(bad)


@pytest.mark.parametrize("rel", _page_ids())
def test_no_traceback_on_any_page(rel):
    """No page shows a Python traceback: a deliberate error is shown as a clean message."""
    require_build()
    problems = traceback_problems(_all_pages()[rel])
    assert not problems, f"{rel}:\n" + "\n".join(problems)


@pytest.mark.parametrize("rel", _page_ids())
def test_no_build_machine_path_on_any_page(rel):
    """No page shows an absolute path of the machine that built it."""
    require_build()
    problems = machine_path_problems(_all_pages()[rel])
    assert not problems, f"{rel}:\n" + "\n".join(problems)


def test_internal_links_resolve():
    """Every link inside the book points at an existing file and, if any, anchor."""
    require_build()
    broken = link_problems(HTML, built_pages())
    assert not broken, f"{len(broken)} broken links:\n" + "\n".join(broken[:30])


@pytest.mark.parametrize("docname", _chapter_ids())
def test_chapter_offers_notebook_and_launch_buttons(docname):
    """Download of the executed .ipynb, and Binder and Colab buttons, on every chapter."""
    require_build()
    page = HTML / f"{docname}.html"
    links = parse(page).links
    ipynb = [h for h in links if h.endswith(f"_sources/{docname}.ipynb")]
    offered = json.loads((page.parent / ipynb[0]).resolve().read_text(encoding="utf-8")) \
        if ipynb else None
    executed = json.loads((EXECUTED / f"{docname}.ipynb").read_text(encoding="utf-8"))
    problems = launch_problems(docname, links, offered, executed)
    colab_nb = ROOT / "_build" / "notebooks" / f"{docname}.ipynb"
    if not colab_nb.is_file():
        problems.append(f"{colab_nb.relative_to(ROOT)} missing (for the notebooks branch)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("docname", _chapter_ids())
def test_figures_numbered_captioned_referenced(docname):
    """Each figure of a chapter has 'Fig. n' and a caption, and some page links to it
    from outside the figure (the caption's link to itself does not count)."""
    require_build()
    problems = figure_problems(f"{docname}.html", _all_pages()[f"{docname}.html"],
                               _referenced())
    assert not problems, f"{docname}:\n" + "\n".join(problems)


# ======================================================================================
# Planted defects: every gate fails on a defect and passes without it
# ======================================================================================

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A chapter
"""


def test_planted_header():
    assert header_problems(HEADER) == []
    assert header_problems(HEADER.replace("name: python3", "name: julia"))
    assert header_problems(HEADER.replace("format_name: myst", "format_name: markdown"))
    assert header_problems("# no front matter\n") == ["no front matter"]


def test_planted_api_reference():
    api = (".. currentmodule:: m\n.. autofunction:: a\n.. autoclass:: B\n"
           ".. currentmodule:: m.sub\n.. autofunction:: c\n.. autofunction:: m.x.d\n")
    public = ["m.a", "m.B", "m.sub.c", "m.x.d"]
    assert api_problems(api, public) == []
    assert "public but not documented: ['m.e']" in api_problems(api, public + ["m.e"])
    assert "documented but not public: ['m.B']" in api_problems(
        api, ["m.a", "m.sub.c", "m.x.d"])
    assert "documented twice: ['m.sub.c']" in api_problems(
        api + ".. autofunction:: c\n", public)
    # the same name under another module is another name
    assert "documented but not public: ['m.sub.a']" in api_problems(
        api + ".. autofunction:: a\n", public)


def test_planted_widget_without_static_figure():
    import jupytext

    widget = "```{code-cell} ipython3\nwidgets.interact(f, x=1);\n```\n\n"
    figure = ("```{code-cell} ipython3\n---\nmystnb:\n  figure:\n    caption: |\n"
              "      Default state.\n    name: fig-x\n---\nf(1)\n```\n")
    other = "```{code-cell} ipython3\nprint(1)\n```\n\n"

    def cells(text):
        return [c for c in jupytext.reads(HEADER + text, fmt="md:myst").cells
                if c.cell_type == "code"]

    assert widget_problems(cells(widget + figure)) == []
    assert widget_problems(cells(other + widget + other))


EXECUTED_NB = {"cells": [
    {"cell_type": "code", "metadata": {}, "source": "import x", "outputs": []},
    {"cell_type": "code", "metadata": {}, "source": "print(1)",
     "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}]},
]}
CELLS_HTML = ('<div class="cell docutils container"><div class="cell_input">import x'
              '</div></div>'
              '<div class="cell docutils container"><div class="cell_input">print(1)</div>'
              '<div class="cell_output docutils container"><pre>1</pre></div></div>')


def test_planted_cell_output_missing():
    ok = ["", "cache", "1.0", "\u2705"]
    assert cell_output_problems("book/x", ok, EXECUTED_NB, CELLS_HTML) == []
    # the output of the second cell is not on the page
    dropped = CELLS_HTML.replace('<div class="cell_output docutils container"><pre>1</pre>'
                                 '</div>', "")
    assert any("does not show" in m
               for m in cell_output_problems("book/x", ok, EXECUTED_NB, dropped))
    # the chapter failed to execute, or is not in the table
    assert cell_output_problems("book/x", ["", "cache", "1.0", "\u274c"], EXECUTED_NB,
                                CELLS_HTML)
    assert cell_output_problems("book/x", None, EXECUTED_NB, CELLS_HTML)
    # an error output in an untagged cell; a cell missing from the page
    err = json.loads(json.dumps(EXECUTED_NB))
    err["cells"][1]["outputs"] = [{"output_type": "error", "ename": "E", "evalue": "",
                                   "traceback": []}]
    assert any("error output" in m
               for m in cell_output_problems("book/x", ok, err, CELLS_HTML))
    assert any("code cells in the notebook" in m for m in cell_output_problems(
        "book/x", ok, EXECUTED_NB, CELLS_HTML.split("</div></div>", 1)[1]))


IPYTHON_TRACEBACK = (
    '<div class="cell_output docutils container">'
    '<div class="output traceback highlight-ipythontb notranslate"><div class="highlight">'
    '<pre><span></span><span class="gt">---------------------------------------------'
    '</span>\n<span class="ne">ValueError</span>                                '
    'Traceback (most recent call last)\n<span class="n">Cell</span> '
    '<span class="n">In</span><span class="p">[</span><span class="mi">3</span>'
    '<span class="p">],</span> line 1\n----&gt; 1 qtheory.mean_queue_length(1.0, 0.5)\n'
    '\n<span class="ne">ValueError</span>: lam must satisfy 0 &lt;= lam &lt; 1</pre>'
    '</div></div></div>')
CLEAN_MESSAGE = ('<div class="cell_output docutils container"><div class="output stream '
                 'highlight-myst-ansi notranslate"><pre>ValueError raised as expected: '
                 'lam must satisfy 0 &lt;= lam &lt; 1</pre></div></div>')


def _cell(tags: str, output: str) -> str:
    return (f'<div class="cell docutils container {tags}"><div class="cell_input">x</div>'
            f'{output}</div>')


def test_planted_error_in_output():
    assert error_output_problems(_cell("", '<div class="cell_output"><pre>4.0</pre></div>')) \
        == []
    assert error_output_problems(_cell("", IPYTHON_TRACEBACK))
    assert error_output_problems(_cell("", '<div class="cell_output"><pre>/x.py:3: '
                                           'RuntimeWarning: overflow</pre></div>'))
    # a cell meant to raise is exempt from this gate (not from the traceback gate)
    assert error_output_problems(_cell("tag_raises-exception", IPYTHON_TRACEBACK)) == []


def test_planted_traceback_on_a_page():
    page = "<html><body><p>Text.</p>{}</body></html>"
    assert traceback_problems(page.format(_cell("tag_raises-exception", CLEAN_MESSAGE))) \
        == []
    found = traceback_problems(page.format(_cell("tag_raises-exception",
                                                 IPYTHON_TRACEBACK)))
    assert {"a Python traceback", "an IPython traceback block",
            "an IPython traceback frame"} <= {m.split(":")[0] for m in found}
    plain = 'Traceback (most recent call last):\n  File "x.py", line 3, in f\n'
    assert any(m.startswith("a traceback frame") for m in traceback_problems(plain))
    ansi = "<pre>\x1b[0;31mValueError\x1b[0m: bad</pre>"
    assert any(m.startswith("ANSI") for m in traceback_problems(ansi))
    assert any(m.startswith("ANSI") for m in traceback_problems("<pre>[0;31mValueError"))


def test_planted_build_machine_path():
    root = Path("/srv/build/qtheory")
    clean = ("<p>See <a href='../_sources/book/model.ipynb'>the notebook</a> and "
             "https://example.org/tmp/x; the tail sums v_i.</p>")
    assert machine_path_problems(clean, root) == []
    for leak in [f"{root}/qtheory/fluid.py:120: RuntimeWarning: overflow",
                 "/root/.cache/numba/x.nbi",
                 "/opt/venv/lib/python3.11/site-packages/scipy/optimize/_root.py",
                 "/usr/lib/python3/dist-packages/numpy/core.py",
                 "/home/builder/qtheory/book/model.md",
                 "saved to /tmp/tmpab12cd/figure.png"]:
        assert machine_path_problems(f"<pre>{leak}</pre>", root), leak


def test_planted_broken_links(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.html").write_text('<a href="sub/b.html#here">b</a><a href="#top">t</a>'
                                     '<span id="top"></span>')
    (tmp_path / "sub" / "b.html").write_text('<p id="here">b</p><a href="../a.html">a</a>')
    pages = sorted(tmp_path.rglob("*.html"))
    assert link_problems(tmp_path, pages) == []
    (tmp_path / "a.html").write_text('<a href="sub/b.html#gone">b</a>'
                                     '<a href="missing.html">m</a>')
    broken = link_problems(tmp_path, pages)
    assert any("no such anchor" in m for m in broken)
    assert any("no such file" in m for m in broken)


def test_planted_missing_launch_buttons():
    nb = {"cells": [{"outputs": [{"output_type": "stream", "text": "1"}]}]}
    links = ["https://mybinder.org/v2/gh/q/q/main?urlpath=lab/tree/book/x.md",
             "https://colab.research.google.com/github/q/q/blob/notebooks/book/x.ipynb"]
    assert launch_problems("book/x", links, nb, nb) == []
    assert launch_problems("book/x", links[:1], nb, nb)  # no Colab
    assert launch_problems("book/x", links[1:], nb, nb)  # no Binder
    assert launch_problems("book/x", links, None, nb)  # no download
    stale = {"cells": [{"outputs": []}]}
    assert launch_problems("book/x", links, stale, nb)  # not the executed notebook


def _figure(fid: str, caption: str = "What it shows.") -> str:
    return (f'<figure class="align-default" id="{fid}"><img src="x.png"/>'
            f'<figcaption><p><span class="caption-number">Fig. 1 </span>'
            f'<span class="caption-text">{caption}</span><a class="headerlink" '
            f'href="#{fid}" title="Link to this image">#</a></p></figcaption></figure>')


def _figures_check(page_rel: str, pages: dict[str, str]) -> list[str]:
    return figure_problems(page_rel, pages[page_rel], referenced_anchors(pages))


def test_planted_unreferenced_figure():
    chapter = "<p>Text.</p>" + _figure("fig-a")
    # the caption's self-link alone is not a reference: the old gate, which searched every
    # page for href="...#fig-a", found this very link and passed the page
    assert re.search(r'href="[^"]*#fig-a"', chapter)
    assert _figures_check("book/ch.html", {"book/ch.html": chapter}) == [
        "fig-a: not referenced anywhere (its own caption aside)"]
    # a link in the text of the same page counts ...
    ref = '<p>See <a class="reference internal" href="#fig-a">Fig. 1</a>.</p>'
    assert _figures_check("book/ch.html", {"book/ch.html": ref + chapter}) == []
    # ... and so does a link from another page, resolved relative to that page
    assert _figures_check("book/ch.html", {"book/ch.html": chapter,
                                           "book/other.html": '<a href="ch.html#fig-a">'
                                                              'Fig. 1</a>'}) == []
    assert _figures_check("book/ch.html", {"book/ch.html": chapter,
                                           "index.html": '<a href="book/ch.html#fig-a">'
                                                         'Fig. 1</a>'}) == []
    # a link to a figure of the same name on another page is not a reference to this one
    assert _figures_check("book/ch.html", {"book/ch.html": chapter,
                                           "book/other.html": '<a href="#fig-a">x</a>'})
    # a figure whose caption links to another figure references that one, not itself
    pair = _figure("fig-a", 'As <a href="#fig-b">Fig. 2</a>.') + _figure("fig-b")
    assert _figures_check("book/ch.html", {"book/ch.html": pair}) == [
        "fig-a: not referenced anywhere (its own caption aside)"]
    # number and caption
    bare = chapter.replace('<span class="caption-number">Fig. 1 </span>', "")
    assert "fig-a: no figure number" in _figures_check("book/ch.html",
                                                        {"book/ch.html": ref + bare})
    empty = ref + _figure("fig-a", caption=" ")
    assert "fig-a: no caption" in _figures_check("book/ch.html", {"book/ch.html": empty})


# ======================================================================================
# Numbering within chapters (issue 31): "Theorem 7.3", "(5.2)", "Fig. 4.1", "Exercise 4.2"
# ======================================================================================

def chapter_numbers() -> dict[str, int]:
    """{docname: chapter number} from _toc.yml: every part is ``numbered: true`` and the
    numbers run on across the parts (``use_multitoc_numbering``); a nested page has its
    chapter's number."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    out, n = {}, 0

    def nested(node, number):
        for sub in node.get("sections", []) or []:
            out[sub["file"]] = number
            nested(sub, number)

    for part in toc["parts"]:
        for chapter in part["chapters"]:
            if part.get("numbered"):
                n += 1
                out[chapter["file"]] = n
                nested(chapter, n)
    return out


NUMBERED_THING = re.compile(
    r'class="caption-number">(?P<fig>Fig\.) (?P<fn>[\d.]+)'
    r'|<span class="eqno">\((?P<en>[\d.]+)\)'
    r'|class="admonition-title">\s*(?:<span class="caption-number">)?'
    r'(?P<kind>Theorem|Lemma|Proposition|Corollary|Definition|Conjecture|Exercise)'
    r' (?P<tn>[\d.]+)')


def numbering_problems(html: str, number: int) -> tuple[list[str], dict[str, int]]:
    """Figures, equations, results and exercises of a page of chapter ``number`` whose
    number is not "number.k"; and how many of each kind were seen."""
    problems, seen = [], {}
    if not re.search(rf'<h1>\s*<span class="section-number">{number}\.\s*</span>', html):
        problems.append(f"the title does not carry the chapter number {number}")
    for m in NUMBERED_THING.finditer(html):
        kind = "figure" if m["fig"] else "equation" if m["en"] else m["kind"]
        value = m["fn"] or m["en"] or m["tn"]
        seen[kind] = seen.get(kind, 0) + 1
        if not re.fullmatch(rf"{number}\.\d+", value.rstrip(".")):
            problems.append(f"{kind} numbered {value}, not {number}.k")
    return problems, seen


@pytest.mark.parametrize("docname", ["book/stability", "book/rate", "book/fluid"])
def test_chapter_numbers_results_equations_figures(docname):
    """A main chapter's title, theorems, lemmas, equations, figures and exercises carry its
    chapter's number ("Theorem 9.1", "(9.2)", "Fig. 9.3", "Exercise 9.4"), not the
    book-wide counts ("Lemma 16") that confused readers."""
    require_build()
    number = chapter_numbers()[docname]
    html = (HTML / f"{docname}.html").read_text(encoding="utf-8")
    problems, seen = numbering_problems(html, number)
    assert not problems, f"{docname} (chapter {number}):\n" + "\n".join(problems[:10])
    assert seen.get("Theorem") and seen.get("figure") and seen.get("equation"), seen
    assert seen.get("Exercise"), seen


def test_planted_chapter_numbering():
    page = ('<h1><span class="section-number">7. </span>Stability</h1>'
            '<p class="admonition-title"><span class="caption-number">Theorem 7.1 </span>'
            '<span class="caption-number">Fig. 7.2 </span><span class="eqno">(7.3)')
    assert numbering_problems(page, 7) == ([], {"Theorem": 1, "figure": 1, "equation": 1})
    assert numbering_problems(page.replace("Theorem 7.1", "Theorem 16"), 7)[0] == [
        "Theorem numbered 16, not 7.k"]
    assert numbering_problems(page, 8)[0][0].startswith("the title")
