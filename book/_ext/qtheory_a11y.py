"""Sphinx extension: a book every reader can use (alternative texts, theme repairs).

What it does
------------
1. **Alternative texts for figures.** Without help, Sphinx writes an image's address as
   its ``alt`` (``../_images/<hash>.png``), which a screen reader reads out as noise.
   At ``doctree-resolved`` every image of a page gets a description, from the first of

   a. an explicit ``alt``: the cell's ``mystnb: image: alt: ...`` metadata (MyST-NB puts
      it on the image), or ``:alt:`` of an ``{image}``/``{figure}`` directive;
   b. the caption of the enclosing figure (``mystnb: figure: caption:``), as plain text:
      the glued values in it are already resolved, so the alternative text carries the
      computed numbers the caption shows, and the LaTeX of inline math is turned into
      readable text (``\\lambda`` -> ``λ``, ``\\frac{a}{b}`` -> ``a/b``, ...);
   c. for an output with neither (a plain ``plt.show()`` or an animation), a description
      read from the cell's own plotting code: the kind of chart, the axis labels, the
      title and the legend entries (``"Line plot of relaxation time 1/μ against
      1/(1-λ); series: p = 0.0, ..."``). An author who wants better gives (a).

   The same applies to the ``<img>`` inside raw HTML outputs (matplotlib's
   ``to_jshtml()`` animations), whose frame slider also gets a label.
2. **Theme repairs found by axe-core** (``tests/test_accessibility.py``): the bibliography's
   list items get the ``listitem`` role that their ``role="list"`` parent requires
   (docutils writes the deprecated ``doc-biblioentry``); the search field button of
   pydata-sphinx-theme loses an ``aria-label`` ("Search") that hid its visible text
   ("Search ... Ctrl+K") from assistive technology, and the icons of the colour-mode
   button lose titles that contradicted its name ("Color mode"); MyST-NB's "Show code
   cell source" toggles likewise lose an ``aria-label`` that hid their visible text. On
   pages with embedded ipywidgets a small script names each slider after its widget's
   label and describes the images the widget manager draws. Colours (contrast) are repaired in
   ``book/_static/qtheory-a11y.css``.
3. **One search box.** pydata-sphinx-theme 0.17 puts a search field into a header bar of
   its own unless ``navbar_persistent`` is set, and sphinx-book-theme (1.3, written for
   0.16) has its search field in the sidebar too: the page showed two. The header's is
   switched off (``navbar_persistent = []``, so no header bar is drawn); the sidebar's
   field stays, and the article header's search button where the sidebar is hidden.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

#: LaTeX commands read out as text (the rest lose their backslash).
_SYMBOLS = {
    "lambda": "λ", "mu": "μ", "nu": "ν", "rho": "ρ", "alpha": "α", "beta": "β",
    "gamma": "γ", "delta": "δ", "Delta": "Δ", "epsilon": "ε", "varepsilon": "ε",
    "theta": "θ", "sigma": "σ", "tau": "τ", "pi": "π", "phi": "φ", "varphi": "φ",
    "psi": "ψ", "omega": "ω", "Omega": "Ω", "eta": "η", "kappa": "κ", "xi": "ξ",
    "infty": "∞", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "neq": "≠",
    "to": "→", "rightarrow": "→", "approx": "≈", "sim": "~", "cdot": "·", "times": "×",
    "pm": "±", "ldots": "...", "dots": "...", "cdots": "...", "in": "∈", "sum": "sum",
    "mid": "|", "vert": "|", "star": "*", "ast": "*", "circ": "∘", "ell": "ℓ",
}
_DROP = ("left", "right", "big", "Big", "bigl", "bigr", "displaystyle", "quad", "qquad",
         "mathrm", "mathbf", "mathit", "mathcal", "mathbb", "operatorname", "text",
         "textrm", "boldsymbol", "tfrac", "dfrac", "rm", "bf", "it")


def latex_to_text(tex: str) -> str:
    """Inline LaTeX as readable plain text (``\\frac{1}{1-\\lambda}`` -> ``1/(1-λ)``)."""
    s = tex
    for _ in range(3):  # nested fractions
        s = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}",
                   lambda m: f"{_group(m.group(1))}/{_group(m.group(2))}", s)
    s = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"sqrt(\1)", s)
    s = re.sub(r"\\(?:,|;|!|:| )", " ", s)
    s = re.sub(r"\\([A-Za-z]+)(\s*)",  # a dropped command takes its spaces with it
               lambda m: "" if m.group(1) in _DROP
               else _SYMBOLS.get(m.group(1), m.group(1)) + m.group(2), s)
    s = re.sub(r"\^\{([^{}]*)\}", r"^\1", s)
    s = re.sub(r"_\{([^{}]*)\}", r"_\1", s)
    s = s.replace("{", "").replace("}", "").replace("\\", "")
    return re.sub(r"\s+", " ", s).strip()


def _group(x: str) -> str:
    x = x.strip()
    return x if re.fullmatch(r"[\w.^]+", x) else f"({x})"


def plain_text(node: nodes.Node) -> str:
    """The text of a caption as a reader hears it: math as readable text, one line."""
    parts = []
    for child in node.findall(nodes.Text):
        parent = child.parent
        is_math = isinstance(parent, (nodes.math, nodes.math_block))
        parts.append(latex_to_text(str(child)) if is_math else str(child))
    text = re.sub(r"\s+", " ", "".join(parts)).strip()
    return text.replace(" ,", ",").replace(" .", ".")


#: Plotting calls in a cell's code and the kind of chart they draw.
_KINDS = (("FuncAnimation", "Animation"), (".bar(", "Bar chart"), (".hist(", "Histogram"),
          (".errorbar(", "Plot with error bars"), (".step(", "Step plot"),
          (".scatter(", "Scatter plot"), (".imshow(", "Image plot"),
          (".pcolormesh(", "Colour map"), (".contour", "Contour plot"),
          (".loglog(", "Line plot (logarithmic axes)"),
          (".semilogy(", "Line plot (logarithmic vertical axis)"),
          (".semilogx(", "Line plot (logarithmic horizontal axis)"),
          (".plot(", "Line plot"))
_STRING = r"""([rRfF]{0,2}(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'))"""


def _literal(s: str) -> str:
    """A Python string literal's text with math made readable; "" for an f-string with
    replacement fields (its text is only known when the cell runs)."""
    prefix = s[: len(s) - len(s.lstrip("rRfF"))].lower()
    body = s[len(prefix) + 1:-1]
    if "f" in prefix:
        if re.search(r"(?<!\{)\{(?!\{)", body):
            return ""
        body = body.replace("{{", "{").replace("}}", "}")
    if "r" not in prefix:
        body = body.replace("\\\\", "\\")
    body = re.sub(r"\$([^$]*)\$", lambda m: latex_to_text(m.group(1)), body)
    return re.sub(r"\s+", " ", body).strip(" ,:=")


def describe_from_code(source: str) -> str:
    """A description of the figure a cell draws, read from its plotting code."""
    kind = next((name for call, name in _KINDS if call in source), "Figure")
    if "FuncAnimation" in source:
        more = next((name for call, name in _KINDS[1:] if call in source), None)
        kind = f"Animation ({more.lower()}; the controls below step through its frames)" \
            if more else "Animation (the controls below step through its frames)"
    def found(pattern):
        out = []
        for m in re.finditer(pattern + r"\(\s*" + _STRING, source):
            text = _literal(m.group(1))
            if text and text not in out:
                out.append(text)
        return out
    ylabels, xlabels = found(r"set_ylabel"), found(r"set_xlabel")
    titles = found(r"set_title") + found(r"suptitle")
    legend = []
    for m in re.finditer(r"\blabel\s*=\s*" + _STRING, source):
        text = _literal(m.group(1))
        if text and text not in legend:
            legend.append(text)
    text = kind
    if ylabels and xlabels:
        text += f" of {', '.join(ylabels)} against {', '.join(xlabels)}"
    elif ylabels or xlabels:
        text += f" over {', '.join(ylabels or xlabels)}"
    if titles:
        text += f"; panels: {', '.join(titles)}"
    if legend:
        text += f"; curves: {', '.join(legend)}"
    return text + "."


def _cell_of(node: nodes.Node) -> nodes.Element | None:
    while node is not None:
        if isinstance(node, nodes.container) and node.get("nb_element") == "cell_code":
            return node
        node = node.parent
    return None


_SOURCES: dict[str, list] = {}


def _cell_source(app: Sphinx, docname: str, cell: nodes.Element | None) -> str:
    """The code of the notebook cell that made an output (also when its input is
    removed from the page), read from the chapter's source with jupytext."""
    if cell is None or cell.get("cell_index") is None:
        return ""
    if docname not in _SOURCES:
        import jupytext

        try:
            nb = jupytext.read(app.env.doc2path(docname))
            _SOURCES[docname] = [c.source for c in nb.cells]
        except Exception:  # not a notebook page
            _SOURCES[docname] = []
    cells = _SOURCES[docname]
    index = int(cell["cell_index"])
    return cells[index] if index < len(cells) else ""


def _metadata_alt(cell: nodes.Element | None) -> str | None:
    if cell is None:
        return None
    meta = cell.get("cell_metadata") or {}
    alt = ((meta.get("mystnb") or {}).get("image") or {}).get("alt")
    return str(alt).strip() if alt else None


def _figure_caption(node: nodes.Node) -> str | None:
    while node is not None and not isinstance(node, nodes.figure):
        node = node.parent
    if node is None:
        return None
    for cap in node.findall(nodes.caption):
        return plain_text(cap)
    return None


def is_file_name(alt: str, uri: str = "") -> bool:
    alt = alt.strip()
    return (not alt or alt == uri or bool(re.search(r"\.(png|jpe?g|gif|svg|pdf)$", alt, re.I))
            or "_images/" in alt)


def describe(app: Sphinx, docname: str, node: nodes.Node) -> tuple[str, str]:
    """(alternative text, where it came from) for an image or a raw output."""
    cell = _cell_of(node)
    alt = _metadata_alt(cell)
    if alt:
        return alt, "metadata"
    caption = _figure_caption(node)
    if caption:
        return caption, "caption"
    return describe_from_code(_cell_source(app, docname, cell)), "code"


_IMG = re.compile(r"<img\b(?![^>]*\balt=)([^>]*)>", re.I)
_ANIM_SLIDER = re.compile(r'(<input id="_anim_slider\w*" type="range")(?![^>]*aria-label)')


def set_alt_texts(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """doctree-resolved: give every image (and raw-HTML <img>) a description."""
    counts = {"explicit": 0, "metadata": 0, "caption": 0, "code": 0}
    for img in doctree.findall(nodes.image):
        if img.get("alt") and not is_file_name(img["alt"], img.get("uri", "")):
            counts["explicit"] += 1
            continue
        alt, origin = describe(app, docname, img)
        img["alt"] = alt
        counts[origin] += 1
    for raw in doctree.findall(nodes.raw):
        if "html" not in raw.get("format", ""):
            continue
        text = raw.astext()
        if not _IMG.search(text) and not _ANIM_SLIDER.search(text):
            continue
        alt, origin = describe(app, docname, raw)
        counts[origin] += 1
        esc = alt.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
        text = _IMG.sub(lambda m: f'<img alt="{esc}"{m.group(1)}>', text)
        text = _ANIM_SLIDER.sub(r'\1 aria-label="Animation frame"', text)
        raw.children = [nodes.Text(text)]
        raw.rawsource = text
    if counts["code"]:
        LOGGER.info(f"qtheory_a11y: {docname}: {counts['code']} figure(s) described from "
                    "their code (add `mystnb: image: alt:` to describe them better)")


#: Runs on pages with embedded ipywidgets: the widget manager draws sliders without an
#: accessible name and output images without alt; name each slider after its widget's
#: label and describe each image, as they appear (a MutationObserver).
WIDGET_A11Y_JS = """<script>
(function () {
  function fix(root) {
    root.querySelectorAll('[role="slider"]:not([aria-label]):not([aria-labelledby])')
      .forEach(function (el) {
        var box = el.closest('.widget-inline-hbox, .jupyter-widgets');
        var label = box && box.querySelector('.widget-label');
        var name = label && label.textContent.trim();
        el.setAttribute('aria-label', name ? name : 'slider');
      });
    root.querySelectorAll('.jupyter-widgets img:not([alt]), .jp-RenderedImage img:not([alt])')
      .forEach(function (img) {
        img.setAttribute('alt', 'Figure of the explorer for the values of its controls ' +
          '(redrawn when a kernel runs the notebook; the captioned figure on this page ' +
          'describes the default view)');
      });
  }
  new MutationObserver(function () { fix(document); })
    .observe(document.documentElement, {childList: true, subtree: true});
  document.addEventListener('DOMContentLoaded', function () { fix(document); });
})();
</script>
"""
#: myst-nb's hide-input toggles: an aria-label that hides the visible "Show code cell
#: source" text from assistive technology (axe: label-content-name-mismatch).
_TOGGLE_LABEL = re.compile(r'(<summary\b[^>]*?)\s+aria-label="Toggle hidden content"')


def repair_body(app, pagename, templatename, context, doctree) -> None:
    """html-page-context: repairs in the page body (see the module docstring)."""
    body = context.get("body")
    if not body:
        return
    body = body.replace('role="doc-biblioentry"', 'role="listitem"')
    body = _TOGGLE_LABEL.sub(r"\1", body)
    if "application/vnd.jupyter.widget-view+json" in body:
        body += WIDGET_A11Y_JS
    context["body"] = body


_SEARCH_FIELD = re.compile(
    r'(<button class="[^"]*search-button-field[^"]*"[^>]*?) aria-label="[^"]*"')
#: The colour-mode button's icons: their titles ("Light", ...) become SVG <title>s that
#: contradict the button's name ("Color mode"); the button's tooltip already says it.
_THEME_ICON = re.compile(r'(<i class="theme-switch [^"]*"[^>]*?)\s+title="[^"]*"')


def repair_theme(app: Sphinx, exc: Exception | None) -> None:
    """build-finished: the search field button is named by its visible text."""
    if exc is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        if "_static" in page.parts:
            continue
        html = page.read_text(encoding="utf-8")
        fixed = _SEARCH_FIELD.sub(r"\1", html)
        fixed = _THEME_ICON.sub(r'\1 aria-hidden="true"', fixed)
        if fixed != html:
            page.write_text(fixed, encoding="utf-8")


def one_search_box(app: Sphinx, config) -> None:
    """config-inited: no second search field in a header bar (see the docstring, 3)."""
    options = dict(config.html_theme_options or {})
    options.setdefault("navbar_persistent", [])
    config.html_theme_options = options


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", one_search_box)
    app.connect("doctree-resolved", set_alt_texts)
    app.connect("html-page-context", repair_body)
    app.connect("build-finished", repair_theme)
    static = Path(__file__).resolve().parents[1] / "_static"
    app.connect("builder-inited", lambda a: a.config.html_static_path.append(str(static))
                if str(static) not in a.config.html_static_path else None)
    app.add_css_file("qtheory-a11y.css")
    app.add_css_file("qtheory-reader.css")  # code and output wrap (issue 31, item 9)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
