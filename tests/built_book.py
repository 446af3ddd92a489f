"""Helpers for the tests that read the built book (_build/html).

Those tests run only when a build exists and is newer than every source it is built from;
otherwise they are skipped with a message saying why. With the environment variable
``QTHEORY_REQUIRE_BROWSER=1`` (set by .ci/run after the book build) a missing or stale
build, a missing Chromium or a missing Playwright is a failure instead of a skip.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
EXECUTED = ROOT / "_build" / "jupyter_execute"
REQUIRED = os.environ.get("QTHEORY_REQUIRE_BROWSER", "") not in ("", "0")


def skip_or_fail(reason: str) -> None:
    """Skip the test (and say why), or fail it when the build is required (CI)."""
    if REQUIRED:
        pytest.fail(f"{reason} (QTHEORY_REQUIRE_BROWSER is set, so this is a failure)")
    pytest.skip(reason)


def _toc_files(node):
    if isinstance(node, dict):
        if "file" in node:
            yield node["file"]
        for value in node.values():
            yield from _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from _toc_files(item)


def toc_docnames() -> list[str]:
    """Docnames (e.g. ``book/model``) of every page in _toc.yml, root first."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"], *_toc_files(toc.get("parts", toc.get("chapters", [])))]


def is_chapter(docname: str) -> bool:
    """A chapter is a page whose source is a MyST Markdown notebook (kernelspec header)."""
    path = ROOT / f"{docname}.md"
    if not path.exists():
        return False
    head = path.read_text(encoding="utf-8").split("\n---", 1)[0]
    return path.read_text(encoding="utf-8").startswith("---") and "kernelspec:" in head


def chapters() -> list[str]:
    return [d for d in toc_docnames() if is_chapter(d)]


def _sources() -> list[Path]:
    files = [ROOT / "_config.yml", ROOT / "_toc.yml", *sorted((ROOT / "book").rglob("*"))]
    files += sorted((ROOT / "qtheory").rglob("*.py"))
    return [f for f in files if f.is_file() and "__pycache__" not in f.parts]


def require_build() -> Path:
    """The built HTML folder, or skip/fail when it is missing or older than its sources."""
    stamp = HTML / "searchindex.js"
    if not stamp.is_file():
        skip_or_fail("no built book in _build/html: run `bash scripts/book.sh` first")
    built = stamp.stat().st_mtime
    stale = [f.relative_to(ROOT) for f in _sources() if f.stat().st_mtime > built]
    if stale:
        skip_or_fail(f"the built book in _build/html is older than {stale[0]} "
                     f"(and {len(stale) - 1} more): run `bash scripts/book.sh`")
    missing = [d for d in toc_docnames() if not (HTML / f"{d}.html").is_file()]
    if missing:
        pytest.fail(f"pages of _toc.yml missing from the build: {missing}")
    return HTML


def built_pages() -> list[Path]:
    """Every HTML page of the build (toc pages, bibliography, index, search, ...)."""
    skip = {"_static", "_sources", "_images", "_downloads", "reports"}
    return sorted(p for p in HTML.rglob("*.html")
                  if not skip.intersection(p.relative_to(HTML).parts))


class PageParser(HTMLParser):
    """Collects ids, links and image sources of one HTML page.

    ``link_context`` pairs every link with the ids of the ``<figure>`` elements that
    enclose it, so that a figure's caption linking to the figure itself (the headerlink
    Sphinx puts in every caption) can be told apart from a reference in the text.
    """

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.link_context: list[tuple[str, frozenset[str]]] = []
        self.images: list[str] = []
        self.refresh: str | None = None
        self._figures: list[str | None] = []  # stack of open <figure> ids

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "figure":
            self._figures.append(a.get("id"))
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag == "a" and a.get("href") is not None:
            self.links.append(a["href"])
            self.link_context.append(
                (a["href"], frozenset(f for f in self._figures if f)))
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "refresh":
            m = re.search(r"url=(.*)", a.get("content") or "", re.I)
            self.refresh = m.group(1).strip() if m else None

    def handle_endtag(self, tag):
        if tag == "figure" and self._figures:
            self._figures.pop()


def parse(page: Path) -> PageParser:
    return parse_html(page.read_text(encoding="utf-8"))


def parse_html(html: str) -> PageParser:
    parser = PageParser()
    parser.feed(html)
    parser.close()
    return parser
