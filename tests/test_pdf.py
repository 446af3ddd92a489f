"""The PDF edition (_build/pdf/qtheory-book.pdf, written by ``bash scripts/pdf.sh``).

Checked from the PDF's text (``pdftotext``) and structure (``pdfinfo``, ``pdfimages``):
every chapter title of ``_toc.yml`` is there; no unresolved reference ("??"); no raw LaTeX
or MyST markup; theorems and proofs are theorem environments with the HTML's numbers (not
generic boxes); exercises come with their solutions; the bibliography is there; the number
of figures equals the HTML's; the page count lies in ``PAGES``; the version is the
package's; internal links exist (clickable cross-references).

Without a PDF (or without poppler-utils) the tests are skipped with a message; with
``QTHEORY_REQUIRE_PDF=1`` (set by ``.ci/run`` after ``scripts/pdf.sh``) that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from built_book import HTML, chapters, parse, toc_docnames  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PDF = ROOT / "_build" / "pdf" / "qtheory-book.pdf"
REQUIRED = os.environ.get("QTHEORY_REQUIRE_PDF", "") not in ("", "0")
#: the stated range of the page count (the build of 5 December 2026 has 530 A4 pages,
#: after the evidence and internals pages of the two-layer book and the rate chapter's
#: lower bounds); a PDF outside it lost chapters or outputs, or gained a runaway output
PAGES = range(400, 651)

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from qtheory_edition import qtheory_version  # noqa: E402

#: markup that must never reach the reader of the PDF (code cells may contain LaTeX in
#: strings such as r"$\\frac{1}{2}$", so bare commands are looked for with RAW_MATH)
RAW_MARKUP = ["{prf:", "{eq}`", "{numref}`", "{cite}`", "{ref}`", "{doc}`", "{glue",
              "{exercise", "{solution", "```", ":::", "\\begin{", "\\end{", "\\label{",
              "\\ref{", "\\cite{", "<IPython.core.display", "(children=",
              "sphinxadmonition", "{math}`", "{code-cell}", "{figure}", "{margin}",
              "<Explorer '"]
#: math that was not parsed: "$\\cmd" not inside a string literal of a code cell
RAW_MATH = re.compile(r"(?<![\"'\w])\$+\\[A-Za-z]+")


def skip_or_fail(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (QTHEORY_REQUIRE_PDF is set, so this is a failure)")
    pytest.skip(reason)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        skip_or_fail(f"{name} is missing (poppler-utils; bash scripts/pdf.sh installs it)")
    return path


@pytest.fixture(scope="module")
def pdf() -> Path:
    if not PDF.is_file():
        skip_or_fail(f"no PDF at {PDF.relative_to(ROOT)}: run bash scripts/pdf.sh")
    return PDF


@pytest.fixture(scope="module")
def text(pdf) -> str:
    out = subprocess.run([_tool("pdftotext"), "-enc", "UTF-8", str(pdf), "-"],
                         capture_output=True, text=True, check=True)
    return out.stdout


def _flat(s: str) -> str:
    """Whitespace collapsed, hyphenation at line ends undone, typographic quotes plain."""
    s = s.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"')
    s = s.replace("\u201d", '"').replace("\ufb01", "fi").replace("\ufb02", "fl")
    s = re.sub(r"-\n(?=[a-z])", "", s)
    return re.sub(r"\s+", " ", s)


def chapter_titles() -> dict[str, str]:
    titles = {}
    for doc in toc_docnames():
        for line in (ROOT / f"{doc}.md").read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                titles[doc] = line[2:].strip()
                break
    return titles


def test_every_chapter_title(text):
    flat = _flat(text)
    missing = [f"{doc}: {title!r}" for doc, title in chapter_titles().items()
               if doc != "book/index" and _flat(title) not in flat]
    assert not missing, "chapter titles missing from the PDF: " + "; ".join(missing)


def test_no_unresolved_reference(text):
    lines = [line for line in text.splitlines() if "??" in line]
    assert not lines, f"unresolved references ('??'): {lines[:10]}"


def test_no_raw_markup(text):
    found = {m: [line.strip() for line in text.splitlines() if m in line][:3]
             for m in RAW_MARKUP if m in text}
    # lines of code (matplotlib labels in raw strings) are not prose
    prose = [line for line in text.splitlines() if not re.search(r"""\br["']|\(["']""", line)]
    unparsed = [line.strip() for line in prose if RAW_MATH.search(line)]
    if unparsed:
        found["unparsed math"] = unparsed[:5]
    assert not found, f"raw LaTeX/MyST markup in the PDF: {found}"


def test_no_doubled_reference_words(text):
    # "Exercise {ref}`label`" prints "Exercise Exercise 28": the reference brings its word
    doubled = re.findall(r"\b(Exercise|Theorem|Lemma|Proposition|Corollary|Definition|"
                         r"Fig\.|Figure|Equation|Section|Chapter) \1 \d", _flat(text))
    assert not doubled, f"doubled words before references: {doubled}"


def test_raw_markup_check_can_fail():
    planted = "A sentence with {prf:ref}`x` and, for every $c$, $\\sup_{n} x$ unparsed."
    assert any(m in planted for m in RAW_MARKUP) and RAW_MATH.search(planted)
    code = 'ax.set_ylabel(r"$v^I_1 \\,/\\, \\frac{1}{1-\\lambda}$")'
    assert not RAW_MATH.search(code) and not any(m in code for m in RAW_MARKUP)


def test_theorem_environments_with_html_numbers(text):
    flat = _flat(text)
    # the HTML's numbered theorems/lemmas/propositions/definitions, e.g. "Theorem 7.2"
    kinds = r"(Theorem|Lemma|Proposition|Corollary|Definition|Assumption)"
    html_heads = set()
    for doc in chapters():
        page = HTML / f"{doc}.html"
        if page.is_file():
            html_heads |= set(re.findall(kinds + r"\s+((?:[A-Z]+|\d+)(?:\.\d+)*)\s*</span>",
                                         page.read_text(encoding="utf-8")))
    if not html_heads:
        skip_or_fail("no HTML build to compare theorem numbers with: bash scripts/book.sh")
    # in the PDF, a theorem environment starts with its bold heading "Theorem 7.2." or
    # "Theorem 7.2 (title)."; a note box would start "Theorem 7.2" on a line of its own
    missing = [f"{k} {n}" for k, n in sorted(html_heads)
               if not re.search(rf"{k} {re.escape(n)}(\.| \()", flat)]
    assert not missing, f"theorem environments missing or unnumbered in the PDF: {missing}"
    assert "Proof." in flat and "\u220e" not in flat  # amsthm's proof head; QED is a box


def test_exercises_with_solutions(text):
    flat = _flat(text)
    exercises = set(re.findall(r"Exercise ((?:[A-Z]+|\d+)(?:\.\d+)*)", flat))
    solutions = set(re.findall(r"Solution to Exercise ((?:[A-Z]+|\d+)(?:\.\d+)*)", flat))
    assert len(exercises) >= 20, f"only {len(exercises)} exercises in the PDF"
    assert solutions and solutions <= exercises
    assert len(solutions) >= 0.8 * len(exercises), (len(solutions), len(exercises))


def test_bibliography(text):
    flat = _flat(text)
    assert "On the power of (even a little) resource pooling".lower() in flat.lower()
    assert "Tsitsiklis" in flat and "Stochastic Systems" in flat


def test_version_and_licences(text):
    flat = _flat(text)
    assert f"Release {qtheory_version()}" in flat
    assert f"version {qtheory_version()}" in flat and "CC BY 4.0" in flat
    assert "MIT License" in flat


def _pdf_figures(pdf: Path) -> int:
    """Images placed in the PDF (pdfimages -list: rows of type 'image', not masks)."""
    out = subprocess.run([_tool("pdfimages"), "-list", str(pdf)], capture_output=True,
                         text=True, check=True).stdout.splitlines()[2:]
    return sum(1 for row in out if row.split()[2:3] == ["image"])


def _html_figures() -> int:
    """Images of the HTML pages' content (outputs and figures), animations excepted."""
    total = 0
    for doc in toc_docnames():
        page = HTML / f"{doc}.html"
        if not page.is_file():
            skip_or_fail(f"no HTML page {page.relative_to(ROOT)}: bash scripts/book.sh")
        html = page.read_text(encoding="utf-8")
        main = html.split('<main', 1)[-1].split('</main>', 1)[0]
        for tag in re.findall(r"<img\b[^>]*>", main):
            if "_anim_img" in tag or "logo" in tag:
                continue
            total += 1
    return total


def test_figure_count_equals_html(pdf):
    if not (HTML / "index.html").is_file():
        skip_or_fail("no HTML build to compare the figure count with: bash scripts/book.sh")
    assert _pdf_figures(pdf) == _html_figures()


def test_page_count_in_range(pdf):
    info = subprocess.run([_tool("pdfinfo"), str(pdf)], capture_output=True, text=True,
                          check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M)[1])
    assert pages in PAGES, f"{pages} pages, expected {PAGES.start}-{PAGES.stop - 1}"


def test_cross_references_are_links(pdf):
    # internal links (clickable references) and named destinations (their anchors)
    xml = subprocess.run([_tool("pdftohtml"), "-xml", "-i", "-stdout", str(pdf)],
                         capture_output=True, text=True, check=True).stdout
    internal = len(re.findall(r'<a href="[^"#]*\.html#\d+"', xml))
    dests = subprocess.run([_tool("pdfinfo"), "-dests", str(pdf)], capture_output=True,
                           text=True, check=True).stdout.count("\n")
    assert internal > 500 and dests > 500, (internal, dests)


def test_figure_and_equation_numbers_equal_html(text):
    # the HTML numbers figures and equations through the whole book ("Fig. 3", "(15)");
    # the PDF must print the same numbers (book/_ext/qtheory_edition.py: _global_numbers)
    html_figs, html_eqs = [], set()
    for doc in toc_docnames():
        page = HTML / f"{doc}.html"
        if not page.is_file():
            skip_or_fail(f"no HTML page {page.relative_to(ROOT)}: bash scripts/book.sh")
        html = page.read_text(encoding="utf-8")
        html_figs += re.findall(r'caption-number">Fig\. ((?:[A-Z]+|\d+)(?:\.\d+)*)', html)
        html_eqs |= set(re.findall(r'<span class="eqno">\(((?:[A-Z]+|\d+)(?:\.\d+)*)\)', html))
    pdf_figs = re.findall(r"^Fig\. ((?:[A-Z]+|\d+)(?:\.\d+)*): ", text, re.M)
    assert html_figs and pdf_figs == html_figs
    pdf_eqs = set(re.findall(r"\(((?:[A-Z]+|\d+)(?:\.\d+)*)\)\s*$", text, re.M))
    missing = sorted(html_eqs - pdf_eqs)
    assert html_eqs and not missing, f"equation numbers of the HTML not in the PDF: {missing}"


def test_proof_map_with_html_numbers(text):
    # the proof map (book/proof-map.md) is in the PDF: its table names every result with
    # the number the HTML's map (and the chapters) print
    page = HTML / "book" / "proof-map.html"
    if not page.is_file():
        skip_or_fail("no HTML proof map to compare with: bash scripts/book.sh")
    names = re.findall(r'<td><p><a class="reference internal" href="[^"]*#[^"]+">'
                       r'<span class="xref prf">([^<]+)</span></a>',
                       page.read_text(encoding="utf-8"))
    assert len(names) >= 25, names
    flat = _flat(text)
    start = flat.find("This page is drawn from the book's own sources")
    assert start >= 0, "the proof map page (and its summary) is missing from the PDF"
    section = flat[start:start + 40000]
    missing = [n for n in names if n not in section]
    assert not missing, f"results of the HTML proof map missing from the PDF's: {missing}"
