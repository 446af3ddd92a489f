"""The EPUB edition (``bash scripts/epub.sh`` -> ``_build/epub/qtheory-book.epub``).

What a reader on an e-reader needs, checked on the built file:

* **epubcheck** (the EPUB standard's own validator, Debian's ``epubcheck``, run with
  ``java -jar``) reports no error or fatal error;
* and, also without epubcheck: the container is an EPUB (``mimetype`` first and stored
  uncompressed, ``META-INF/container.xml`` naming the package document), every page is
  well-formed XHTML, every file the package document lists is in the archive and every
  local file a page uses is listed, there is a navigation document;
* every page of ``_toc.yml`` is in the reading order (spine) and in the navigation;
* every figure a chapter's executed notebook shows is in the chapter's page and in the
  archive, with a description (``alt``);
* math is readable without MathJax (which e-readers do not run): no raw LaTeX is left in
  the text (``\\(``, ``$$``, ``\\frac``, ``\\lambda``...), each formula is an SVG picture
  drawn by MathJax at build time with no MathJax error, with a readable ``alt``; and when
  the HTML book is built, each page has as many formulas as its HTML page;
* the HTML book offers the EPUB in its download menu (when both are built).

Each check is a function over the archive that returns a list of problems; the planted
tests build small broken EPUBs and show that each check reports its defect.

Needs the built EPUB (newer than its sources); without it the tests are skipped, and with
``QTHEORY_REQUIRE_EPUB=1`` (set by .ci/run, which also installs epubcheck) they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

import pytest

from built_book import EXECUTED, HTML, ROOT, _sources, toc_docnames

EPUB = ROOT / "_build" / "epub" / "qtheory-book.epub"
REQUIRED = os.environ.get("QTHEORY_REQUIRE_EPUB", "") not in ("", "0")
EPUBCHECK_JAR = Path(os.environ.get("QTHEORY_EPUBCHECK", "/usr/share/java/epubcheck.jar"))
NS = {"opf": "http://www.idpf.org/2007/opf", "c": "urn:oasis:names:tc:opendocument:xmlns:container",
      "x": "http://www.w3.org/1999/xhtml", "ops": "http://www.idpf.org/2007/ops"}

#: LaTeX that must not be left in a page's text (outside code)
RAW_LATEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\(?:frac|lambda|mathbb|sum|le|ge|infty|"
                       r"begin|end|left|right|mathrm|text|operatorname)\b|\^\{|_\{")


def skip_or_fail(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (QTHEORY_REQUIRE_EPUB is set, so this is a failure)")
    pytest.skip(reason)


def require_epub() -> Path:
    if not EPUB.is_file():
        skip_or_fail("no EPUB in _build/epub: run `bash scripts/epub.sh` first")
    built = EPUB.stat().st_mtime
    stale = [f for f in _sources() if f.stat().st_mtime > built]
    if stale:
        skip_or_fail(f"the EPUB is older than {stale[0].relative_to(ROOT)}: "
                     "run `bash scripts/epub.sh`")
    return EPUB


# ======================================================================================
# reading an EPUB
# ======================================================================================
class Book:
    """The parts of an EPUB archive the checks read."""

    def __init__(self, path: Path):
        self.zip = zipfile.ZipFile(path)
        self.names = self.zip.namelist()
        self.problems: list[str] = []
        self.opf_path = None
        self.manifest: dict[str, dict] = {}  # href (archive path) -> attributes
        self.spine: list[str] = []
        self.nav: str | None = None
        try:
            container = ET.fromstring(self.zip.read("META-INF/container.xml"))
            root = container.find(".//c:rootfile", NS)
            self.opf_path = root.get("full-path")
            opf = ET.fromstring(self.zip.read(self.opf_path))
        except (KeyError, ET.ParseError, AttributeError) as exc:
            self.problems.append(f"no readable container/package document: {exc}")
            return
        base = PurePosixPath(self.opf_path).parent
        ids = {}
        for item in opf.findall(".//opf:manifest/opf:item", NS):
            href = str(base / unquote(item.get("href")))
            self.manifest[href] = dict(item.attrib)
            ids[item.get("id")] = href
            if "nav" in (item.get("properties") or "").split():
                self.nav = href
        self.spine = [ids.get(i.get("idref"), "?")
                      for i in opf.findall(".//opf:spine/opf:itemref", NS)]

    def pages(self) -> list[str]:
        return [h for h, a in self.manifest.items()
                if a.get("media-type") == "application/xhtml+xml"]

    def text(self, name: str) -> str:
        return self.zip.read(name).decode("utf-8")


def page_of(docname: str) -> str:
    return f"{docname}.xhtml"


def container_problems(book: Book) -> list[str]:
    """The archive is an EPUB: mimetype first and stored, a package document, a nav."""
    problems = list(book.problems)
    infos = book.zip.infolist()
    if not infos or infos[0].filename != "mimetype":
        problems.append("the first file of the archive is not 'mimetype'")
    elif infos[0].compress_type != zipfile.ZIP_STORED \
            or book.zip.read("mimetype") != b"application/epub+zip":
        problems.append("'mimetype' is compressed or is not application/epub+zip")
    if book.opf_path and book.nav is None:
        problems.append("no navigation document (manifest item with properties='nav')")
    for href in book.manifest:
        if href not in book.names:
            problems.append(f"listed in the package document but not in the archive: {href}")
    return problems


def _xml(book: Book, name: str):
    try:
        return ET.fromstring(book.zip.read(name))
    except ET.ParseError as exc:
        return exc


def page_problems(book: Book) -> list[str]:
    """Every page is well-formed XHTML, and every local file it uses is in the archive
    and listed in the package document."""
    problems = []
    for name in book.pages():
        tree = _xml(book, name)
        if isinstance(tree, Exception):
            problems.append(f"{name}: not well-formed XHTML: {tree}")
            continue
        for el in tree.iter():
            ref = el.get("src") or (el.get("href") if el.tag.endswith("}link") else None)
            if not ref or urlparse(ref).scheme or ref.startswith("#"):
                continue
            target = str(PurePosixPath(name).parent / unquote(ref.split("#")[0]))
            target = os.path.normpath(target)
            if target not in book.names:
                problems.append(f"{name}: uses {ref}, which is not in the archive")
            elif target not in book.manifest:
                problems.append(f"{name}: uses {ref}, which the package document omits")
    return problems


def toc_problems(book: Book, docnames: list[str]) -> list[str]:
    """Every page of the table of contents is in the spine and in the navigation."""
    problems = []
    nav = book.text(book.nav) if book.nav in book.names else ""
    for doc in docnames:
        page = page_of(doc)
        if page not in book.spine:
            problems.append(f"{doc}: not in the reading order (spine)")
        rel = os.path.relpath(page, str(PurePosixPath(book.nav or "").parent) or ".")
        if f'href="{rel}' not in nav and f'href="{page}' not in nav:
            problems.append(f"{doc}: not in the navigation document")
    return problems


def _strip_code(xhtml: str) -> str:
    """A page's text without code blocks, inline code and tags."""
    text = re.sub(r"<(pre|code|script|style)\b.*?</\1>", " ", xhtml, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    import html

    return html.unescape(text)


def images(xhtml: str) -> list[dict]:
    return [dict(re.findall(r'(\w[\w-]*)="([^"]*)"', m.group(0)))
            for m in re.finditer(r"<img\b[^>]*>", xhtml)]


def math_problems(book: Book, name: str) -> list[str]:
    """No raw LaTeX in the page's text; each formula an SVG picture with an alt text,
    drawn without a MathJax error."""
    xhtml = book.text(name)
    problems = []
    m = RAW_LATEX.search(_strip_code(xhtml))
    if m:
        text = _strip_code(xhtml)
        problems.append(f"{name}: raw LaTeX in the text: "
                        f"...{' '.join(text[max(0, m.start() - 60):m.end() + 60].split())}...")
    for img in images(xhtml):
        if "math" not in img.get("class", ""):
            continue
        src = os.path.normpath(str(PurePosixPath(name).parent / img.get("src", "")))
        if not img.get("alt", "").strip():
            problems.append(f"{name}: a formula without an alt text ({src})")
        if src not in book.names:
            problems.append(f"{name}: formula picture missing: {src}")
            continue
        svg = book.text(src)
        if not svg.startswith("<svg") or "viewBox" not in svg or "data-mjx-error" in svg:
            problems.append(f"{name}: formula picture {src} is not a clean MathJax SVG")
    return problems


def expected_figures(nb: dict) -> int:
    """Images a chapter's executed notebook shows (cells not removed, outputs shown)."""
    count = 0
    for cell in nb.get("cells", []):
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.get("cell_type") != "code" or tags & {"remove-cell", "remove-output"}:
            continue
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if any(k.startswith("image/") for k in data) \
                    and "application/vnd.jupyter.widget-view+json" not in data:
                count += 1
    return count


def figure_problems(book: Book, name: str, expected: int) -> list[str]:
    """The page has the chapter's figures (in the archive), each described."""
    figs = [i for i in images(book.text(name)) if "_images/" in i.get("src", "")]
    problems = []
    if len(figs) != expected:
        problems.append(f"{name}: {len(figs)} figure images, the executed chapter shows "
                        f"{expected}")
    for img in figs:
        src = os.path.normpath(str(PurePosixPath(name).parent / img["src"]))
        if src not in book.names:
            problems.append(f"{name}: figure missing from the archive: {src}")
        if len(img.get("alt", "").split()) < 3:
            problems.append(f"{name}: figure without a description: {img['src']}")
    return problems


def epubcheck(path: Path) -> list[str]:
    """epubcheck's errors and fatal errors for one file (empty: valid)."""
    out = path.with_suffix(".epubcheck.json")
    proc = subprocess.run(["java", "-jar", str(EPUBCHECK_JAR), str(path), "--json", str(out)],
                          capture_output=True, text=True, timeout=600, check=False)
    if not out.is_file():
        return [f"epubcheck did not run: {proc.stderr[-1000:]}"]
    report = json.loads(out.read_text())
    return [f"{m['severity']} {m['ID']}: {m['message']} "
            f"({', '.join(l.get('path', '?') for l in m.get('locations', [])[:2])})"
            for m in report.get("messages", []) if m["severity"] in ("ERROR", "FATAL")]


# ======================================================================================
# the built EPUB
# ======================================================================================
@pytest.fixture(scope="module")
def book():
    return Book(require_epub())


def test_epubcheck():
    """The EPUB standard's validator finds no error."""
    path = require_epub()
    if shutil.which("java") is None or not EPUBCHECK_JAR.is_file():
        skip_or_fail("epubcheck is not installed (`bash scripts/epub.sh --check-tools`)")
    problems = epubcheck(path)
    assert not problems, f"{len(problems)} epubcheck errors:\n  " + "\n  ".join(problems[:30])


def test_container_and_pages(book):
    problems = container_problems(book) + page_problems(book)
    assert not problems, "\n  ".join(problems[:30])


def test_every_page_of_the_toc(book):
    problems = toc_problems(book, toc_docnames())
    assert not problems, "\n  ".join(problems)


@pytest.mark.parametrize("docname", toc_docnames())
def test_page_figures_and_math(docname, book):
    name = page_of(docname)
    assert name in book.names, f"{name} missing from the EPUB"
    problems = math_problems(book, name)
    nb_path = EXECUTED / f"{docname}.ipynb"
    if nb_path.is_file():
        problems += figure_problems(book, name, expected_figures(json.loads(
            nb_path.read_text(encoding="utf-8"))))
    html_page = HTML / f"{docname}.html"
    if html_page.is_file() and html_page.stat().st_mtime >= EPUB.stat().st_mtime - 3600 * 24:
        html = html_page.read_text(encoding="utf-8")
        # the article only: the page's table of contents repeats math in headings
        body = html.split('<article', 1)[-1].split('</article>', 1)[0]
        want = len(re.findall(r'<(?:span|div) class="math notranslate nohighlight"', body))
        got = sum("math" in i.get("class", "") for i in images(book.text(name)))
        if got != want:
            problems.append(f"{name}: {got} formula pictures, the HTML page has {want} "
                            "formulas")
    assert not problems, f"{docname}:\n  " + "\n  ".join(problems)


def test_book_has_math_and_figures(book):
    """The EPUB is a book of this kind: many formulas and figures (not an empty shell)."""
    pics = [n for n in book.names if n.startswith("_math/") and n.endswith(".svg")]
    figs = [n for n in book.names if n.startswith("_images/")]
    assert len(pics) >= 500, f"only {len(pics)} formula pictures"
    assert len(figs) >= 20, f"only {len(figs)} figures"
    assert all(n in book.manifest for n in pics + figs)


def test_html_offers_the_epub():
    """The HTML book's download menu links the EPUB on every chapter page, and the
    linked file is this EPUB."""
    require_epub()
    if not (HTML / "searchindex.js").is_file():
        skip_or_fail("no built HTML book: run `bash scripts/book.sh` after the EPUB")
    offered = HTML / EPUB.name
    assert offered.is_file() and offered.read_bytes() == EPUB.read_bytes(), \
        "the HTML build does not hold the current EPUB (build the EPUB before the HTML)"
    missing = [d for d in toc_docnames()
               if f'{EPUB.name}"' not in (HTML / f"{d}.html").read_text(encoding="utf-8")]
    assert not missing, f"pages without the EPUB in the download menu: {missing}"


# ======================================================================================
# planted defects
# ======================================================================================
_OPF = """<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
<manifest>{items}</manifest><spine>{spine}</spine></package>"""
_PAGE = ('<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
         "<head><title>t</title></head><body>{}</body></html>")
_SVG = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"></svg>'


def _planted(tmp_path: Path, body: str, *, mimetype_first=True, files=None,
             in_manifest=True) -> Book:
    files = dict(files or {})
    files.setdefault("_math/a.svg", _SVG)
    files.setdefault("_images/f.png", "png")
    pages = {"book/ch.xhtml": _PAGE.format(body),
             "nav.xhtml": _PAGE.format('<nav><a href="book/ch.xhtml">ch</a></nav>')}
    items = [f'<item id="i{i}" href="{h}" media-type="{t}"{p}/>' for i, (h, t, p) in enumerate(
        [("nav.xhtml", "application/xhtml+xml", ' properties="nav"'),
         ("book/ch.xhtml", "application/xhtml+xml", "")]
        + [(h, "image/svg+xml" if h.endswith(".svg") else "image/png", "")
           for h in files if in_manifest])]
    path = tmp_path / "t.epub"
    with zipfile.ZipFile(path, "w") as z:
        order = ["mimetype", "META-INF/container.xml"] if mimetype_first else \
            ["META-INF/container.xml", "mimetype"]
        for name in order:
            if name == "mimetype":
                z.writestr(name, "application/epub+zip", compress_type=zipfile.ZIP_STORED)
            else:
                z.writestr(name, '<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:'
                           'opendocument:xmlns:container"><rootfiles><rootfile full-path='
                           '"content.opf" media-type="application/oebps-package+xml"/>'
                           '</rootfiles></container>')
        z.writestr("content.opf", _OPF.format(items="".join(items),
                                              spine='<itemref idref="i1"/>'))
        for name, text in {**pages, **files}.items():
            z.writestr(name, text)
    return Book(path)


_FIG = '<img src="../_images/f.png" alt="The mean queue against the load." />'
_MATH = '<img class="math-inline" src="../_math/a.svg" alt="λ" />'


def _all(book: Book, expected_figs: int = 1) -> list[str]:
    return (container_problems(book) + page_problems(book) + toc_problems(book, ["book/ch"])
            + math_problems(book, "book/ch.xhtml")
            + figure_problems(book, "book/ch.xhtml", expected_figs))


def test_planted_epub_defects(tmp_path):
    clean = _planted(tmp_path, f"<p>{_MATH} {_FIG} <code>x = r'\\lambda'</code></p>")
    assert _all(clean) == [], _all(clean)
    cases = {
        "raw LaTeX": (dict(body=f"<p>\\(\\lambda\\) {_FIG}</p>"), 1),
        "first file of the archive": (dict(body=f"<p>{_FIG}</p>", mimetype_first=False), 1),
        "not in the archive": (dict(body=f'<p>{_FIG}<img src="../_images/none.png" '
                                         'alt="a b c d" /></p>'), 2),
        "omits": (dict(body=f"<p>{_FIG}</p>", in_manifest=False), 1),
        "not well-formed": (dict(body=f"<p>{_FIG}<br></p>"), 1),
        "figure images, the executed chapter shows 2": (dict(body=f"<p>{_FIG}</p>"), 2),
        "figure without a description": (dict(body='<p><img src="../_images/f.png" '
                                              'alt="figure" /></p>'), 1),
        "formula without an alt": (dict(body=f'<p><img class="math-inline" '
                                        f'src="../_math/a.svg" alt="" />{_FIG}</p>'), 1),
        "clean MathJax SVG": (dict(body=f"<p>{_MATH}{_FIG}</p>", files={
            "_math/a.svg": '<svg viewBox="0 0 1 1" data-mjx-error="Undefined"></svg>'}), 1),
    }
    for i, (want, (kwargs, figs)) in enumerate(cases.items()):
        sub = tmp_path / str(i)
        sub.mkdir()
        problems = _all(_planted(sub, **kwargs), figs)
        assert any(want in p for p in problems), (want, problems)
    nav_missing = _planted(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path,
                           f"<p>{_FIG}</p>")
    assert any("not in the reading order" in p
               for p in toc_problems(nav_missing, ["book/other"]))
