"""Book-wide quality gates.

From the sources (always run): every chapter in _toc.yml is a MyST Markdown notebook with
the jupytext header and the ``python3`` kernel; the API reference page documents every
public name of qtheory.

From the built book (run when ``_build/html`` is present and fresh; mandatory in CI,
where .ci/run sets ``QTHEORY_REQUIRE_BROWSER=1`` after the build):

* every code cell was executed and every output it produced is on the page;
* no cell output shows a traceback or an error (cells tagged ``raises-exception`` aside);
* every internal link and cross-reference resolves, anchors included;
* every chapter page offers its executed notebook for download and Binder and Colab
  launch buttons;
* every figure has a number and a caption, and is referenced from the text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import yaml

from built_book import (EXECUTED, HTML, ROOT, built_pages, chapters, parse, require_build,
                        toc_docnames)

# Pages of the book that are not notebooks: the landing page and the appendices made of
# directives only (API reference, execution table, bibliography).
PLAIN_PAGES = {"book/index", "book/api", "book/status", "book/bibliography", "book/course"}


def _front_matter(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), f"{path.name}: no front matter"
    return yaml.safe_load(text.split("\n---", 1)[0][4:])


@pytest.mark.parametrize("docname", [d for d in toc_docnames() if d not in PLAIN_PAGES])
def test_chapter_header(docname):
    """Every chapter carries the MyST notebook header with the python3 kernel."""
    path = ROOT / f"{docname}.md"
    if not path.exists():
        pytest.skip(f"{docname}.md is listed in _toc.yml but not in this checkout yet")
    fm = _front_matter(path)
    rep = fm.get("jupytext", {}).get("text_representation", {})
    assert rep.get("extension") == ".md" and rep.get("format_name") == "myst", fm
    ks = fm.get("kernelspec", {})
    assert ks.get("name") == "python3" and ks.get("language") == "python", ks


def test_api_reference_lists_every_public_name():
    """book/api.md documents each name of qtheory.__all__ exactly once."""
    import qtheory

    text = (ROOT / "book" / "api.md").read_text(encoding="utf-8")
    documented = re.findall(r"^\.\. auto(?:function|class):: (\w+)", text, flags=re.M)
    public = [n for n in qtheory.__all__ if not n.startswith("_")]
    assert sorted(documented) == sorted(set(documented)), "a name is documented twice"
    assert set(documented) == set(public), (
        f"missing: {sorted(set(public) - set(documented))}, "
        f"not public: {sorted(set(documented) - set(public))}")


# --- the built book -------------------------------------------------------------------

def _chapter_ids():
    return [d for d in chapters() if d not in PLAIN_PAGES]


def _code_cells(html: str) -> list[str]:
    """The HTML of each MyST-NB code cell container, in page order."""
    starts = [m.start() for m in re.finditer(r'<div class="cell( [^"]*)?"', html)]
    out = []
    for i, s in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(html)
        out.append(html[s:end])
    return out


def _shown_outputs(cell: dict) -> list[dict]:
    """Outputs of an executed cell that the page is meant to show."""
    tags = set(cell.get("metadata", {}).get("tags", []))
    if tags & {"remove-output", "remove-cell"}:
        return []
    return [o for o in cell.get("outputs", [])
            if not (o.get("output_type") == "stream" and not "".join(o.get("text", "")).strip())]


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


@pytest.mark.parametrize("docname", _chapter_ids())
def test_every_code_cell_has_its_output(docname):
    """The chapter executed successfully (execution table), and every output its cells
    produced is on the page. Cells without output (imports, definitions) stay empty;
    cells tagged remove-output hide theirs on purpose."""
    require_build()
    status = _status_rows().get(docname)
    assert status is not None, f"{docname}: not in the execution table of book/status"
    assert status[-1] == "\u2705", f"{docname}: execution status {status}"
    nb_path = EXECUTED / f"{docname}.ipynb"
    assert nb_path.is_file(), f"no executed notebook {nb_path.relative_to(ROOT)}"
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"
             and "remove-cell" not in c.get("metadata", {}).get("tags", [])]
    assert any(c.get("outputs") for c in cells), f"{docname}: no cell has any output"
    errors = [i for i, c in enumerate(cells)
              if any(o.get("output_type") == "error" for o in c.get("outputs", []))
              and "raises-exception" not in c.get("metadata", {}).get("tags", [])]
    assert not errors, f"{docname}: cells with an error output: {errors}"
    html_cells = _code_cells((HTML / f"{docname}.html").read_text(encoding="utf-8"))
    assert len(html_cells) == len(cells), (
        f"{docname}: {len(cells)} code cells in the notebook, {len(html_cells)} on the page")
    for i, (cell, html) in enumerate(zip(cells, html_cells)):
        if _shown_outputs(cell):
            assert 'class="cell_output' in html, (
                f"{docname}: cell {i} produced output that the page does not show:\n"
                + "".join(cell["source"])[:300])


@pytest.mark.parametrize("docname", _chapter_ids())
def test_no_error_in_outputs(docname):
    """No output shows a traceback, an error or a warning, unless the cell is meant to."""
    require_build()
    html = (HTML / f"{docname}.html").read_text(encoding="utf-8")
    bad = []
    for i, cell in enumerate(_code_cells(html)):
        head = cell[:200]
        if "tag_raises-exception" in head:
            continue
        out = cell.split('class="cell_output', 1)[1] if 'class="cell_output' in cell else ""
        text = re.sub(r"<[^>]+>", "", out)
        if ("traceback" in out and 'class="output traceback' in out) \
                or re.search(r"Traceback \(most recent call last\)|\b\w*(Error|Warning):",
                             text) or "Error displaying widget" in text:
            bad.append(f"cell {i}: {text.strip()[:200]}")
    assert not bad, f"{docname}:\n" + "\n".join(bad)


def test_internal_links_resolve():
    """Every link inside the book points at an existing file and, if any, anchor."""
    require_build()
    pages = built_pages()
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
                broken.append(f"{page.relative_to(HTML)}: {href} (no such file)")
                continue
            if url.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else parse(target).ids
                if unquote(url.fragment) not in ids:
                    broken.append(f"{page.relative_to(HTML)}: {href} (no such anchor)")
    assert not broken, f"{len(broken)} broken links:\n" + "\n".join(broken[:30])


@pytest.mark.parametrize("docname", _chapter_ids())
def test_chapter_offers_notebook_and_launch_buttons(docname):
    """Download of the executed .ipynb, and Binder and Colab buttons, on every chapter."""
    require_build()
    page = HTML / f"{docname}.html"
    links = parse(page).links
    ipynb = [h for h in links if h.endswith(f"_sources/{docname}.ipynb")]
    assert ipynb, f"{docname}: no download link to the executed notebook"
    offered = json.loads((page.parent / ipynb[0]).resolve().read_text(encoding="utf-8"))
    executed = json.loads((EXECUTED / f"{docname}.ipynb").read_text(encoding="utf-8"))
    assert [c.get("outputs") for c in offered["cells"]] == \
        [c.get("outputs") for c in executed["cells"]], \
        f"{docname}: the downloadable notebook is not the executed one"
    assert any(c.get("outputs") for c in offered["cells"]), f"{docname}: no outputs"
    binder = [h for h in links if h.startswith("https://mybinder.org/v2/gh/")]
    colab = [h for h in links if h.startswith("https://colab.research.google.com/github/")]
    assert binder and binder[0].endswith(f"urlpath=lab/tree/{docname}.md"), binder
    assert colab and colab[0].endswith(f"/blob/notebooks/{docname}.ipynb"), colab
    colab_nb = ROOT / "_build" / "notebooks" / f"{docname}.ipynb"
    assert colab_nb.is_file(), f"{colab_nb.relative_to(ROOT)} (for the notebooks branch)"


@pytest.mark.parametrize("docname", _chapter_ids())
def test_figures_numbered_captioned_referenced(docname):
    """Each figure of a chapter has 'Fig. n' and a caption, and some page links to it."""
    require_build()
    html = (HTML / f"{docname}.html").read_text(encoding="utf-8")
    figures = re.findall(r'<figure[^>]*id="([^"]+)"[^>]*>(.*?)</figure>', html, flags=re.S)
    everywhere = "\n".join(p.read_text(encoding="utf-8") for p in built_pages())
    problems = []
    for fid, body in figures:
        if not re.search(r'class="caption-number">Fig\. \d+', body):
            problems.append(f"{fid}: no figure number")
        caption = re.search(r'class="caption-text">(.*?)</span>', body, flags=re.S)
        if not caption or not re.sub(r"<[^>]+>", "", caption.group(1)).strip():
            problems.append(f"{fid}: no caption")
        if not re.search(rf'href="[^"]*#{re.escape(fid)}"', everywhere):
            problems.append(f"{fid}: not referenced anywhere")
    assert not problems, f"{docname}:\n" + "\n".join(problems)


@pytest.mark.parametrize("docname", [d for d in toc_docnames() if d not in PLAIN_PAGES])
def test_widget_cells_have_static_figure(docname):
    """A cell that builds a widget (interact) sits next to a captioned static figure of
    its default state, for readers of the HTML, who have no kernel."""
    import jupytext

    path = ROOT / f"{docname}.md"
    if not path.exists():
        pytest.skip(f"{docname}.md is listed in _toc.yml but not in this checkout yet")
    cells = [c for c in jupytext.read(path).cells if c.cell_type == "code"]
    for i, cell in enumerate(cells):
        if re.search(r"\binteract(ive)?\(", cell.source):
            near = cells[max(i - 1, 0):i] + cells[i + 1:i + 2]
            assert any(c.metadata.get("mystnb", {}).get("figure") for c in near), (
                f"{docname}: widget cell {i} has no captioned static figure next to it:\n"
                + cell.source[:200])
