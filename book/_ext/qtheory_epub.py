"""Sphinx extension: the EPUB edition of the book (``bash scripts/epub.sh``).

Sphinx's ``epub`` builder (through Jupyter Book's custom builder) writes the same pages
as XHTML in an EPUB 3 container. What a reader on an e-reader would otherwise miss:

1. **Math.** The HTML book typesets math in the browser with MathJax; most e-readers
   run no JavaScript, so the pages would show raw LaTeX. Here every inline and display
   formula of the EPUB is drawn at build time as an SVG picture by MathJax 3 itself (the
   npm package ``mathjax-full``, pinned, fetched once with ``npm pack`` like the widget
   manager, see ``qtheory_book.py``; run by Node with ``epub/tex2svg.js``), the same TeX
   input as the HTML, so what renders there renders here. Each picture is an ``<img>``
   (SVG is a core media type of EPUB 3; an inline ``<svg>`` would need manifest
   properties that Sphinx does not write), sized in ``ex`` as MathJax measures it, set on
   the text's baseline, with the formula as readable text for its ``alt``
   (``qtheory_a11y.latex_to_text``). Equation numbers stay text beside the display.
   A formula MathJax cannot typeset (an undefined command) is a build warning, so the
   ``-W`` build fails. Pictures are cached by their TeX under
   ``_build/.offline_assets/math-svg``.
2. **What needs a browser.** The explorers, embedded widgets and animations are HTML
   with JavaScript (and not XHTML): ``_config.yml`` tells MyST-NB not to render
   ``text/html``, widget and JavaScript outputs for the ``epub`` builder, and
   ``qtheory_edition`` drops their text stand-ins as it does for the PDF; each of them
   has a static, captioned figure next to it, which stays.
3. No JavaScript: ``qtheory_book`` and ``qtheory_explorers`` copy none into the EPUB,
   and the pages load none of the scripts that the theme's extensions add to every HTML
   page (Sphinx would reference files that the EPUB's package document does not list).
4. **Valid XHTML** (epubcheck is strict where browsers forgive): no inline scripts; the
   "Show code cell source" toggles of MyST-NB without their paragraphs inside
   ``<summary>``; a field body that docutils writes as a paragraph holding a paragraph or
   a list (autodoc's *Returns*) as a ``<div>``; ids repeated on a page (sphinx-proof and
   sphinx-exercise write ``id="proof"``, ``id="exercise-content"`` on every block) made
   unique; style sheets that extensions copy only after the EPUB is packed (MyST-NB's,
   sphinx-proof's, sphinx-exercise's) left out, the boxes styled here instead.
5. **The reading order.** Sphinx 7.4's epub builder, with its default
   ``epub_tocscope``, writes the navigation document and the NCX from a table of contents
   resolved against the root document, which Jupyter Book puts in ``book/``, without the
   folder: they would point at ``intro.xhtml`` instead of ``book/intro.xhtml``.
   ``_config.yml`` sets ``epub_tocscope: includehidden``, under which both use the
   builder's own, corrected list (the one the spine is made from).

The EPUB is offered in the HTML's download menu beside the PDF (``qtheory_edition``),
and checked by ``tests/test_epub.py`` (epubcheck when installed; container, package
document, navigation, every chapter, figures and math).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shutil
import subprocess
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number
from sphinx.util.osutil import relative_uri

LOGGER = logging.getLogger(__name__)

#: (npm package, version): MathJax 3, the major version the HTML book uses
MATHJAX = ("mathjax-full", "3.2.2")
RENDERER = "qtheory_svg"
#: folder of the EPUB that holds the formulas' pictures
MATH_DIR = "_math"
SCRIPT = Path(__file__).with_name("epub") / "tex2svg.js"
_SIZE = re.compile(r'^<svg\b[^>]*?style="vertical-align: ?(-?[\d.]+)ex;?"[^>]*?'
                   r'width="([\d.]+)ex" height="([\d.]+)ex"')


def is_epub(app: Sphinx) -> bool:
    return getattr(app.builder, "name", "") == "epub"


def block_tex(node: nodes.math_block) -> str:
    """The TeX of a display, as Sphinx's MathJax writer assembles it (parts separated by
    blank lines aligned, a part with line breaks in ``split``)."""
    if node["nowrap"]:
        return node.astext()
    parts = [prt for prt in node.astext().split("\n\n") if prt.strip()]
    body = []
    for i, part in enumerate(parts):
        body.append(r"\begin{split}" + part + r"\end{split}" if r"\\" in part else part)
        if i < len(parts) - 1:
            body.append(r"\\")
    text = "".join(body)
    return r"\begin{align}\begin{aligned}" + text + r"\end{aligned}\end{align}" \
        if len(parts) > 1 else text


def _key(tex: str, display: bool) -> str:
    return hashlib.sha256(f"{int(display)}\n{tex}".encode()).hexdigest()[:24]


def _cache(app: Sphinx) -> Path:
    return Path(app.outdir).parent / ".offline_assets" / "math-svg"


def _mathjax(app: Sphinx) -> Path:
    from qtheory_book import _asset_dir, _fetch_npm  # beside this file

    return _fetch_npm(*MATHJAX, _asset_dir(app)) / "es5"


def render(app: Sphinx, items: list[tuple[str, bool]]) -> dict[str, str | None]:
    """Draw the formulas not yet in the cache; return {key: MathJax's error or None}."""
    cache = _cache(app)
    cache.mkdir(parents=True, exist_ok=True)
    errors: dict[str, str | None] = {}
    todo = []
    for tex, display in items:
        key = _key(tex, display)
        if (cache / f"{key}.svg").is_file():
            errors[key] = None
        elif key not in errors:
            errors[key] = None
            todo.append((key, tex, display))
    if not todo:
        return errors
    if shutil.which("node") is None:
        raise ExtensionError("qtheory_epub: Node.js (`node`) is needed to draw the EPUB's "
                             "math (apt-get install nodejs npm)")
    data = json.dumps([{"tex": t, "display": d} for _, t, d in todo])
    out = subprocess.run(["node", str(SCRIPT), str(_mathjax(app))], input=data,
                         capture_output=True, text=True, check=False, timeout=600)
    if out.returncode != 0:
        raise ExtensionError(f"qtheory_epub: MathJax in Node failed:\n{out.stderr[-2000:]}")
    for (key, tex, _), result in zip(todo, json.loads(out.stdout)):
        errors[key] = result["error"]
        if result["error"] is None:  # a failed formula is not cached: it is retried
            (cache / f"{key}.svg").write_text(result["svg"], encoding="utf-8")
    return errors


def draw_math(app: Sphinx, doctree, docname: str) -> None:
    """doctree-resolved (EPUB only): every formula of the page drawn and copied."""
    if not is_epub(app):
        return
    items = [(n.astext(), False) for n in doctree.findall(nodes.math)]
    items += [(block_tex(n), True) for n in doctree.findall(nodes.math_block)]
    if not items:
        return
    errors = render(app, items)
    out = Path(app.outdir) / MATH_DIR
    out.mkdir(parents=True, exist_ok=True)
    for tex, display in items:
        key = _key(tex, display)
        if errors.get(key):
            LOGGER.warning(f"qtheory_epub: MathJax cannot typeset {tex[:120]!r}: "
                           f"{errors[key]}", location=docname)
            continue
        target = out / f"{key}.svg"
        if not target.is_file():
            shutil.copy2(_cache(app) / f"{key}.svg", target)


def _img(self, tex: str, display: bool) -> str:
    from qtheory_a11y import latex_to_text  # beside this file

    key = _key(tex, display)
    svg = Path(self.builder.outdir) / MATH_DIR / f"{key}.svg"
    style = ""
    if svg.is_file():
        m = _SIZE.match(svg.read_text(encoding="utf-8"))
        if m:
            style = (f' style="vertical-align: {m[1]}ex; width: {m[2]}ex; '
                     f'height: {m[3]}ex"')
    src = relative_uri(self.builder.get_target_uri(self.builder.current_docname),
                       f"{MATH_DIR}/{key}.svg")
    alt = self.attval(latex_to_text(tex) or tex)
    cls = "math-display" if display else "math-inline"
    return f'<img class="{cls}" src="{src}" alt="{alt}"{style} />'


def visit_math(self, node: nodes.math) -> None:
    self.body.append(_img(self, node.astext(), False))
    raise nodes.SkipNode


def visit_math_block(self, node: nodes.math_block) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math"))
    if node["number"] and not node["nowrap"]:
        number = get_node_equation_number(self, node)
        self.body.append(f'<span class="eqno">({number})</span>')
    self.body.append(_img(self, block_tex(node), True))
    self.body.append("</div>\n")
    raise nodes.SkipNode


EPUB_CSS = """/* qtheory: the EPUB's math pictures (book/_ext/qtheory_epub.py) */
img.math-inline { display: inline; margin: 0; }
div.math { text-align: center; margin: 0.8em 0; overflow-x: auto; }
div.math img.math-display { max-width: 100%; }
div.math span.eqno { float: right; margin-left: 0.5em; }
/* theorem, proof, exercise and solution boxes (their own style sheets are HTML-only) */
div.proof, div.exercise, div.solution, div.admonition {
  border-left: 3px solid #888; padding: 0.2em 0.8em; margin: 1em 0; }
p.admonition-title { font-weight: bold; }
details.hide summary { font-style: italic; }
"""


#: sphinx-book-theme's buttons (launch, repository, download, full screen): they belong to
#: the HTML theme, and its page handlers fail for the epub builder, whose pages have no
#: repository context
_THEME_BUTTONS = ("use_repository_button", "use_edit_page_button", "use_source_button",
                  "use_issues_button", "use_download_button", "use_fullscreen_button")


def add_css(app: Sphinx) -> None:
    """builder-inited (EPUB only): the math pictures' style sheet; no theme buttons."""
    if not is_epub(app):
        return
    options = dict(app.config.html_theme_options or {})
    options.pop("launch_buttons", None)
    options.update({key: False for key in _THEME_BUTTONS})
    app.config.html_theme_options = options
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / "qtheory-epub.css").write_text(EPUB_CSS, encoding="utf-8")
    app.add_css_file("qtheory-epub.css")


_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>\s*", re.S)
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
_DD_BLOCK = re.compile(r"(<dd\b[^>]*>)<p>(<(?:p|ul|ol|dl|div)\b.*?)</p>(\s*</dd>)", re.S)
_ID = re.compile(r'\bid="([^"]+)"')


def xhtml_repairs(body: str) -> str:
    """A page body as valid XHTML for an EPUB (see the module docstring, 4)."""
    body = _SCRIPT.sub("", body)

    def summary(m):
        inner = re.sub(r'<p class="expanded[^"]*">.*?</p>\s*', "", m.group(1), flags=re.S)
        inner = re.sub(r"<p\b", "<span", inner).replace("</p>", "</span>")
        return f"<summary>{inner}</summary>"

    body = _SUMMARY.sub(summary, body)
    body = _DD_BLOCK.sub(r"\1<div>\2</div>\3", body)
    seen: dict[str, int] = {}

    def unique(m):
        n = seen.get(m.group(1), 0)
        seen[m.group(1)] = n + 1
        return m.group(0) if n == 0 else f'id="{m.group(1)}-{n + 1}"'

    return _ID.sub(unique, body)


#: style sheets an EPUB page keeps: the epub theme's, Pygments', and those of
#: html_static_path (copied before the EPUB is packed); the rest are copied too late
_KEEP_CSS = {"epub.css", "pygments.css", "qtheory-epub.css"}


def epub_page(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """html-page-context (EPUB only, after every other handler): no script, only style
    sheets that are in the EPUB, valid XHTML."""
    if not is_epub(app):
        return
    context["script_files"] = []
    static = set()
    for folder in app.config.html_static_path:
        path = Path(app.confdir) / folder
        if path.is_dir():
            static |= {f.name for f in path.iterdir()}
    context["css_files"] = [c for c in context.get("css_files", [])
                            if Path(getattr(c, "filename", str(c))).name in _KEEP_CSS | static]
    if context.get("body"):
        context["body"] = xhtml_repairs(context["body"])


def setup(app: Sphinx) -> dict:
    # the HTML keeps MathJax; the epub builder reads `epub_math_renderer`
    app.add_config_value("epub_math_renderer", RENDERER, "env")
    app.add_html_math_renderer(RENDERER, inline_renderers=(visit_math, None),
                               block_renderers=(visit_math_block, None))
    app.connect("builder-inited", add_css)
    app.connect("doctree-resolved", draw_math)
    app.connect("html-page-context", epub_page, priority=999)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
