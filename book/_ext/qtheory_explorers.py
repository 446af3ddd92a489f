"""Sphinx extension: the book's explorers run in the static HTML, offline.

An explorer is the HTML output of a chapter cell ``qtheory.explorers.explorer(name)``:
labelled range sliders, a readout and qtheory's data computed at build time on a grid
(see ``qtheory/explorers.py``). This extension

1. fetches Plotly (``plotly.js-dist-min`` from the npm registry, pinned; ``npm pack``
   checks the tarball's integrity; cached under ``_build/.offline_assets`` like the
   widget manager, see ``qtheory_book.py``), and copies ``plotly.min.js`` with
   ``explorers/explorers.js`` and ``explorers.css`` (beside this file) into
   ``_static/explorers/`` of the HTML output at the end of the build: once per site;
2. adds those three files only to pages that contain an explorer (a page without one
   loads nothing more).

Why Plotly: a maintained charting library from a registry (axes, log scales, legends,
hover readouts) instead of hand-written drawing code; its 4.7 MB are served once and
cached by the browser, and ``Plotly.react`` redraws these small figures in a few ms.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx

#: (npm package, version, file inside the package)
PLOTLY = ("plotly.js-dist-min", "3.7.0", "plotly.min.js")
HERE = Path(__file__).with_name("explorers")
#: Folder of the HTML output (under _static) that holds the explorers' files.
STATIC = "explorers"
MARKER = 'class="qt-explorer"'


def fetch_plotly(app: Sphinx) -> None:
    """builder-inited: make sure the pinned Plotly package is in the local cache."""
    from qtheory_book import _asset_dir, _fetch_npm  # beside this file

    if app.builder.format == "html":
        _fetch_npm(PLOTLY[0], PLOTLY[1], _asset_dir(app))


def copy_files(app: Sphinx, exc: Exception | None) -> None:
    """build-finished: Plotly and the explorers' script and style into _static."""
    from qtheory_book import _asset_dir, _fetch_npm

    if exc is not None or app.builder.format != "html":
        return
    out = Path(app.outdir) / "_static" / STATIC
    out.mkdir(parents=True, exist_ok=True)
    src = _fetch_npm(PLOTLY[0], PLOTLY[1], _asset_dir(app))
    shutil.copy2(src / PLOTLY[2], out / PLOTLY[2])
    for name in ("explorers.js", "explorers.css"):
        shutil.copy2(HERE / name, out / name)


def add_to_page(app, pagename, templatename, context, doctree) -> None:
    """html-page-context: a page with an explorer loads Plotly and explorers.js."""
    if MARKER not in context.get("body", ""):
        return
    app.add_css_file(f"{STATIC}/explorers.css")
    app.add_js_file(f"{STATIC}/{PLOTLY[2]}", loading_method="defer")  # runs in order
    app.add_js_file(f"{STATIC}/explorers.js", loading_method="defer")


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", fetch_plotly)
    app.connect("html-page-context", add_to_page)
    app.connect("build-finished", copy_files)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
