"""Sphinx extension: the book's explorers run in the static HTML, offline.

An explorer is the HTML output of a chapter cell ``qtheory.book.explorer(name)``:
labelled range sliders, a readout and qtheory's data computed at build time on a grid
(see ``qtheory/book/explorers.py``). This extension

1. fetches Plotly (``plotly.js-dist-min`` from the npm registry, pinned; ``npm pack``
   checks the tarball's integrity; cached under ``_build/.offline_assets`` like the
   widget manager, see ``qtheory_book.py``), and copies ``plotly.min.js`` with
   ``explorers/explorers.js`` and ``explorers.css`` (beside this file) into
   ``_static/explorers/`` of the HTML output at the end of the build: once per site;
2. adds those three files only to pages that contain an explorer (a page without one
   loads nothing more);
3. writes the exponents and subscripts of an explorer's title and grid note (qtheory
   writes them as plain text, ``\u03bb^i``, ``10^(k/10)``, ``log_{1/(1-p)}``) as
   ``<sup>``/``<sub>``, in every output format (the page's script does the same for the
   readout and the legends).

Why Plotly: a maintained charting library from a registry (axes, log scales, legends,
hover readouts) instead of hand-written drawing code; its 4.7 MB are served once and
cached by the browser, and ``Plotly.react`` redraws these small figures in a few ms.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx

#: (npm package, version, file inside the package)
PLOTLY = ("plotly.js-dist-min", "3.7.0", "plotly.min.js")
HERE = Path(__file__).with_name("explorers")
#: Folder of the HTML output (under _static) that holds the explorers' files.
STATIC = "explorers"
MARKER = 'class="qt-explorer"'


#: ^x, ^(..), ^{..}, _{..}, _x in plain text (the same rule as ``rich`` in explorers.js)
SCRIPT = re.compile(r"([\^_])(?:\{([^{}]*)\}|\(([^()]*)\)|([\w*\u2217]+))")
#: the explorer's paragraphs written from plain text: its title and its grid note
CAPTIONS = re.compile(r'(<p class="qt-explorer-(?:title|grid)">)(.*?)(</p>)', re.S)


def rich_text(text: str) -> str:
    """Plain text with ``^``/``_`` exponents and subscripts as ``<sup>``/``<sub>``."""
    def repl(m):
        tag = "sup" if m.group(1) == "^" else "sub"
        body = next(g for g in m.groups()[1:] if g is not None)
        return f"<{tag}>{body}</{tag}>"
    return SCRIPT.sub(repl, text)


def typeset_captions(app: Sphinx, doctree, docname: str) -> None:
    """doctree-resolved: exponents and subscripts of explorer captions as sup/sub."""
    for raw in doctree.findall(nodes.raw):
        text = raw.astext()
        if MARKER not in text:
            continue
        fixed = CAPTIONS.sub(lambda m: m.group(1) + rich_text(m.group(2)) + m.group(3), text)
        if fixed != text:
            raw.children = [nodes.Text(fixed)]
            raw.rawsource = fixed


def fetch_plotly(app: Sphinx) -> None:
    """builder-inited: make sure the pinned Plotly package is in the local cache."""
    from qtheory_book import _asset_dir, _fetch_npm  # beside this file

    if app.builder.format == "html" and app.builder.name != "epub":
        _fetch_npm(PLOTLY[0], PLOTLY[1], _asset_dir(app))


def copy_files(app: Sphinx, exc: Exception | None) -> None:
    """build-finished: Plotly and the explorers' script and style into _static."""
    from qtheory_book import _asset_dir, _fetch_npm

    if exc is not None or app.builder.format != "html" or app.builder.name == "epub":
        return
    out = Path(app.outdir) / "_static" / STATIC
    out.mkdir(parents=True, exist_ok=True)
    src = _fetch_npm(PLOTLY[0], PLOTLY[1], _asset_dir(app))
    shutil.copy2(src / PLOTLY[2], out / PLOTLY[2])
    for name in ("explorers.js", "explorers.css"):
        shutil.copy2(HERE / name, out / name)


def add_to_page(app, pagename, templatename, context, doctree) -> None:
    """html-page-context: a page with an explorer loads Plotly and explorers.js."""
    if MARKER not in context.get("body", "") or app.builder.name == "epub":
        return
    app.add_css_file(f"{STATIC}/explorers.css")
    app.add_js_file(f"{STATIC}/{PLOTLY[2]}", loading_method="defer")  # runs in order
    app.add_js_file(f"{STATIC}/explorers.js", loading_method="defer")


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", fetch_plotly)
    app.connect("html-page-context", add_to_page)
    app.connect("doctree-resolved", typeset_captions)
    app.connect("build-finished", copy_files)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
