"""Sphinx extension: the book's proof map (the page ``book/proof-map.md``), built from
the sources on every build.

What it does
------------
* **Reads** every page of the book in table-of-contents order with
  ``book/_ext/proof_map.py`` (the same code the tests use): each result directive
  (theorem, lemma, proposition, corollary, conjecture), its ``:class: status-...`` marker,
  its ``{prf:proof}`` block and the ``{prf:ref}``/``{eq}`` references inside the proof.
  The parse is checked against what sphinx-proof itself recorded while reading (the
  labels, kinds and classes of its nodes); a disagreement is a build warning.
* **Checks** the proof-status convention (``proof_map.check``: a proved result may use
  only proved or cited results, no unannounced forward reference, no cycle, markers and
  status tables agree, ...). Every problem is a build warning, hence an error under
  ``-W``: the book cannot be built with a result shown as proved that rests on an open one.
* **Draws** the directive ``{proof-map} graph`` as inline SVGs laid out by Graphviz's
  ``dot``: an overview of the chapters (which chapter's proofs use which), then one panel
  per page that states results, with the results of other pages that its proofs use
  drawn dashed above (HTML: every node links to its result, every chapter to its page;
  status shown by fill colour, by border and shape, and by a text line); each panel is
  narrow enough to fit a 1280 px window at its natural size (``proof_map.panel_source``).
  In the LaTeX edition the panels are vector PDFs through ``sphinx.ext.graphviz`` (no
  links). ``{proof-map} table``
  is the accessible version: one row per result with its chapter, status (cited results
  with their source and the place in it), the results its proof uses and those that use
  it, all as cross-references. ``{proof-map} summary`` counts the results by status.
  Numbers are Sphinx's own (``env.toc_fignumbers``, as sphinx-proof prints them), so the
  map says "Theorem 7" where the chapter does, in the HTML and in the PDF.

Why Graphviz (``dot``)
----------------------
A proof map is a layered drawing of a directed acyclic graph with groups: the problem
``dot`` was made for (Sugiyama layering, crossing reduction, spline edges, clusters drawn
as boxes, links and ids in its SVG, PDF for LaTeX), maintained since the 1990s and the
layout engine behind ``sphinx.ext.graphviz``, which Sphinx ships and whose LaTeX path this
extension uses. The pure-Python alternatives on PyPI are weaker at exactly this: networkx
(3.6) has no layered layout with clusters or edge routing (its ``multipartite_layout``
places points, the drawing would be ours), grandalf (0.8, 2023) lays out layers without
clusters. The cost is one Debian package (``graphviz``, 2.42, about 10 small libraries);
``scripts/book.sh``, ``scripts/pdf.sh`` and the book-without-solutions build install it
when ``dot`` is missing (``scripts/_env.sh``: ``qtheory_ensure_dot``), as ``pdf.sh`` does
for TeX, and the build fails with that advice when it cannot. Nothing is fetched at build
or view time: the SVG is in the page.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import proof_map as pm  # noqa: E402

LOGGER = logging.getLogger(__name__)
PARTS = ("graph", "table", "summary")
ROOT = Path(__file__).resolve().parents[2]
STATUS_WORDS = {"proved": "proved here", "cited": "cited from a source",
                "open": "open (sketch or conjecture)", "unknown": "no status"}


class proof_map_node(nodes.General, nodes.Element):
    """Placeholder for one part of the map; replaced when the doctree is resolved."""


class proof_map_svg(nodes.General, nodes.Element):
    """The drawing in the HTML (inline SVG made by dot)."""


class ProofMapDirective(SphinxDirective):
    """``{proof-map} graph``, ``{proof-map} table`` or ``{proof-map} summary``."""

    required_arguments = 1
    has_content = False

    def run(self):
        part = self.arguments[0].strip()
        if part not in PARTS:
            raise self.error(f"proof-map: the argument is one of {', '.join(PARTS)}, "
                             f"not {part!r}")
        node = proof_map_node(part=part)
        self.set_source_info(node)
        self.env.qtheory_proof_map_pages = getattr(self.env, "qtheory_proof_map_pages",
                                                   set()) | {self.env.docname}
        return [node]


# ---------------------------------------------------------------------------------------
# reading: what sphinx-proof recorded, for the cross-check
# ---------------------------------------------------------------------------------------
def _collect(app: Sphinx, doctree) -> None:
    env = app.env
    seen = getattr(env, "qtheory_proof_nodes", {})
    rows = []
    for node in doctree.findall(nodes.Element):
        kind = node.get("realtype")
        if kind in pm.RESULT_KINDS and node.get("label") is not None \
                and "proof" in node.get("classes", []):
            rows.append((node.get("label"), kind,
                         tuple(c for c in node["classes"] if c.startswith("status-"))))
    seen[env.docname] = rows
    env.qtheory_proof_nodes = seen


def _purge(app, env, docname) -> None:
    getattr(env, "qtheory_proof_nodes", {}).pop(docname, None)
    pages = getattr(env, "qtheory_proof_map_pages", set())
    pages.discard(docname)


def _merge(app, env, docnames, other) -> None:
    mine = getattr(env, "qtheory_proof_nodes", {})
    mine.update({d: v for d, v in getattr(other, "qtheory_proof_nodes", {}).items()
                 if d in docnames})
    env.qtheory_proof_nodes = mine
    env.qtheory_proof_map_pages = getattr(env, "qtheory_proof_map_pages", set()) | \
        {d for d in getattr(other, "qtheory_proof_map_pages", set()) if d in docnames}


def _always_reread(app, env, added, changed, removed):
    """The map page depends on every chapter: re-read it on every build."""
    return sorted(getattr(env, "qtheory_proof_map_pages", set()) - set(removed))


def book_order(env) -> list[str]:
    """Docnames in the order of the table of contents (depth first from the root)."""
    order: list[str] = []

    def walk(doc):
        if doc in order or doc not in env.found_docs:
            return
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(env.config.root_doc)
    return order


def _analyse(app: Sphinx, env) -> None:
    order = book_order(env)
    sources = {}
    for doc in order:
        path = Path(env.doc2path(doc))
        if path.suffix == ".md" and path.is_file():
            sources[doc] = path.read_text(encoding="utf-8")
    book = pm.build_book(sources)
    env.qtheory_proof_map = book
    # the parse against sphinx-proof's own nodes
    recorded = getattr(env, "qtheory_proof_nodes", {})
    for doc in sources:
        parsed = sorted((r.label, r.kind, tuple(r.statuses)) for r in book.results
                        if r.docname == doc)
        sphinx = sorted(recorded.get(doc, []))
        if parsed != sphinx:
            LOGGER.warning(f"proof map: the parse of {doc} does not agree with "
                           f"sphinx-proof's nodes: parsed {parsed}, sphinx-proof {sphinx}",
                           location=doc, type="qtheory", subtype="proof_map")
    for problem in pm.check(book):
        LOGGER.warning(f"proof map: [{problem.code}] {problem.message}",
                       location=(problem.docname, problem.line), type="qtheory",
                       subtype="proof_map")


# ---------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------
def printed_name(env, label: str) -> str:
    """The name sphinx-proof prints for a result: "Theorem 7" (its own translation and
    numbers, from ``env.toc_fignumbers``)."""
    from sphinx.locale import get_translation

    info = getattr(env, "proof_list", {}).get(label)
    if info is None:
        return label
    kind = str(get_translation("proof")(info["realtype"].title()))
    if info.get("nonumber"):
        return kind
    number = env.toc_fignumbers.get(info["docname"], {}).get(info["countertype"], {}) \
        .get(label)
    return f"{kind} {'.'.join(map(str, number))}" if number else kind


def _source_names(app) -> dict[str, str]:
    names = {}
    for bib in getattr(app.config, "bibtex_bibfiles", []) or []:
        path = Path(app.srcdir) / bib
        if path.is_file():
            names.update(pm.bib_names(path.read_text(encoding="utf-8")))
    return names


def _ref(app, fromdoc: str, todoc: str, target: str, text: str):
    classes = ["xref", "prf"] if app.builder.format == "html" else []
    return make_refnode(app.builder, fromdoc, todoc, target,
                        nodes.inline(text, text, classes=classes))


def _refs_paragraphs(app, env, docname, labels: list[str]) -> list[nodes.paragraph]:
    """One paragraph per result named (a list reads better in a narrow cell, and the PDF
    never stretches a one-line paragraph)."""
    if not labels:
        return [nodes.paragraph(text="—")]
    book = env.qtheory_proof_map
    out = []
    for label in labels:
        r = book.by_label[label]
        para = nodes.paragraph()
        para += _ref(app, docname, r.docname, label, printed_name(env, label))
        out.append(para)
    return out


def _table(app, env, docname) -> nodes.table:
    book = env.qtheory_proof_map
    names = _source_names(app)
    table = nodes.table(classes=["qtheory-proof-map-table", "longtable", "colwidths-given"])
    group = nodes.tgroup(cols=5)
    table += group
    for width in (28, 16, 24, 16, 16):
        group += nodes.colspec(colwidth=width)
    head, body = nodes.thead(), nodes.tbody()
    row = nodes.row()
    for title in ("Result", "Chapter", "Status", "Its proof uses", "Used by"):
        entry = nodes.entry()
        entry += nodes.paragraph(text=title)
        row += entry
    head += row
    group += head
    group += body
    for r in book.results:
        if not r.label:
            continue
        row = nodes.row(classes=[f"status-{r.status}"])
        cell = nodes.entry()
        para = nodes.paragraph()
        para += _ref(app, docname, r.docname, r.label, printed_name(env, r.label))
        cell += para
        if r.title:
            cell += nodes.paragraph(text=pm.plain_title(r.title))
        row += cell
        cell = nodes.entry()
        para = nodes.paragraph()
        title = env.titles[r.docname].astext() if r.docname in env.titles else r.docname
        para += make_refnode(app.builder, docname, r.docname, "",
                             nodes.inline(title, title))
        cell += para
        row += cell
        cell = nodes.entry()
        para = nodes.paragraph(text=pm.status_text(r, names))
        cell += para
        if r.status == "open":
            words, rests = pm.open_reasons(r, book)
            if words:
                para += nodes.Text(": " + "; ".join(words))
            if rests:
                cell += nodes.paragraph(text="its proof uses the open results")
                cell += _refs_paragraphs(app, env, docname, rests)
        row += cell
        for labels in (r.uses, r.used_by):
            cell = nodes.entry()
            cell += _refs_paragraphs(app, env, docname, labels)
            row += cell
        body += row
    return table


def _summary(env) -> nodes.paragraph:
    book = env.qtheory_proof_map
    counts = {s: sum(1 for r in book.results if r.status == s)
              for s in ("proved", "cited", "open", "unknown")}
    chapters = len({r.docname for r in book.results})
    edges = sum(len(r.uses) for r in book.results)
    text = (f"The book states {len(book.results)} results in {chapters} chapters: "
            f"{counts['proved']} proved here, {counts['cited']} cited from a named source "
            f"and {counts['open']} open (a sketch, a conjecture, or a proof that rests on "
            f"an open result). Their proofs refer to one another {edges} times.")
    if counts["unknown"]:
        text += f" {counts['unknown']} carry no status marker."
    return nodes.paragraph(text=text)


def _chapter_title(env, doc: str) -> str:
    """A page's title with its chapter number when it has one ("6. The fluid limit")."""
    title = env.titles[doc].astext() if doc in env.titles else doc
    number = getattr(env, "toc_secnumbers", {}).get(doc, {}).get("")
    return f"{'.'.join(map(str, number))}. {title}" if number else title


def _drawings(app, env, docname: str, links: bool) -> list[tuple[str, str, str]]:
    """The map's drawings in DOT, with the page each is about (empty for the overview)
    and its caption: the chapters overview (HTML only), then one panel per page."""
    book = env.qtheory_proof_map
    numbers = {r.label: printed_name(env, r.label) for r in book.results if r.label}
    titles = {d: _chapter_title(env, d) for d in book.docnames}
    urls, chapter_urls = {}, {}
    if links:
        for r in book.results:
            if r.label:
                urls[r.label] = app.builder.get_relative_uri(docname, r.docname) + \
                    "#" + r.label
        for d in book.docnames:
            chapter_urls[d] = app.builder.get_relative_uri(docname, d)
    names = _source_names(app)
    out = []
    if links:
        out.append(("", pm.overview_source(book, titles, chapter_urls),
                    "The chapters and appendices that state results: an arrow from one to "
                    "a later one means that a proof of the later one uses a result of the "
                    "earlier. Each box links to its page; each page's own map follows."))
    for doc in pm.panel_docs(book):
        out.append((doc, pm.panel_source(book, doc, numbers, titles, urls=urls,
                                         source_names=names, compact=not links),
                    f"The results of {titles[doc]} (coloured boxes) and, dashed above "
                    "them, the results of other pages that their proofs use."))
    return out


def _caption_text() -> str:
    return ("The proof map, one drawing per page. Each box is a result; a result joined "
            "to one below it is used by the proof of the lower one. Status: proved here "
            "(green, solid rounded box, marked [proved]); cited from a source (blue, box "
            "with a folded corner, marked [cited]; the source is in the table below); "
            "open, a sketch or a conjecture (orange, dashed box, marked [open]). Dashed "
            "white boxes are results of other pages. The table below gives the same "
            "information.")


def _replace(app: Sphinx, doctree, docname: str) -> None:
    env = app.env
    for node in list(doctree.findall(proof_map_node)):
        if not hasattr(env, "qtheory_proof_map"):
            node.replace_self([])
            continue
        part = node["part"]
        if part == "summary":
            node.replace_self(_summary(env))
        elif part == "table":
            node.replace_self(_table(app, env, docname))
        elif app.builder.name.startswith("epub"):
            # e-readers: no drawing (an inline <svg> with ARIA roles is not valid EPUB 3,
            # and graphviz's picture files bring an image map or a DTD that EPUB refuses);
            # the table that follows carries the same information
            node.replace_self(nodes.paragraph(
                text="The drawing of the map is in the HTML and PDF editions; the table "
                     "below gives the same information: every result, its status and the "
                     "results its proof uses.", classes=["caption"]))
        elif app.builder.format == "html":
            new = [nodes.paragraph(text=_caption_text(), classes=["qtheory-proof-map-caption"],
                                   ids=["proof-map-caption"])]
            for k, (doc, code, caption) in enumerate(_drawings(app, env, docname, True)):
                if doc:
                    title = _chapter_title(env, doc)
                    rubric = nodes.rubric(classes=["qtheory-proof-map-panel-title"])
                    rubric += make_refnode(app.builder, docname, doc, "",
                                           nodes.inline(title, title))
                    new.append(rubric)
                new.append(proof_map_svg(code=code, caption=caption, index=k))
            node.replace_self(new)
        else:
            from sphinx.ext.graphviz import graphviz

            new = [nodes.paragraph(text=_caption_text().replace(
                "The table below gives the same information.",
                "The boxes give only the numbers; the table below gives the titles and the "
                "same information."), classes=["caption"])]
            for doc, code, _ in _drawings(app, env, docname, False):
                new.append(nodes.rubric(text=_chapter_title(env, doc)))
                graph = graphviz()
                graph["code"] = code
                graph["options"] = {"docname": docname}
                graph["align"] = "center"
                graph["alt"] = f"The proof map of {_chapter_title(env, doc)}"
                new.append(graph)
            node.replace_self(new)


_SVG_CACHE: dict[str, str] = {}


def render_svg(code: str, dot: str = "dot", args: list[str] | None = None) -> str:
    """The SVG ``dot`` makes of ``code``, with Graphviz's own ``<title>`` elements (node
    names) and the XML prolog removed, ready to inline in HTML."""
    key = code + dot + str(args)
    if key in _SVG_CACHE:
        return _SVG_CACHE[key]
    exe = shutil.which(dot) or (dot if Path(dot).is_file() else None)
    if exe is None:
        raise FileNotFoundError(
            f"Graphviz's {dot!r} is not on the PATH: the proof map needs it (Debian: "
            "apt-get install graphviz; scripts/book.sh installs it when it can)")
    out = subprocess.run([exe, *(args or []), "-Tsvg"], input=code.encode(),
                         capture_output=True, check=True).stdout.decode("utf-8")
    out = out[out.index("<svg"):]
    out = re.sub(r"<!--.*?-->", "", out, flags=re.S)
    out = re.sub(r"<title>.*?</title>", "", out, flags=re.S)
    _SVG_CACHE[key] = out
    return out


def visit_svg_html(self, node) -> None:
    cfg = self.builder.config
    try:
        svg = render_svg(node["code"], cfg.graphviz_dot, list(cfg.graphviz_dot_args))
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", b"") or b""
        LOGGER.warning(f"proof map: dot failed: {err} {detail.decode(errors='replace')}",
                       location=node, type="qtheory", subtype="proof_map")
        raise nodes.SkipNode from err
    label = self.encode(node["caption"])
    width = re.search(r'<svg width="([\d.]+pt)"', svg)
    # at most its own size, narrower when the column is: each panel is drawn narrow
    # enough (proof_map.panel_source) to fit a 1280 px window at its natural size
    size = f"width:100%;max-width:{width[1]};height:auto" if width else "height:auto"
    svg = svg.replace("<svg ", '<svg role="group" aria-labelledby="proof-map-caption" '
                      f'focusable="false" style="{size}" ', 1)
    self.body.append(
        '<div class="qtheory-proof-map">'
        f'<div class="qtheory-proof-map-scroll" role="region" tabindex="0" '
        f'aria-label="{label}">{svg}</div></div>\n')
    raise nodes.SkipNode


def _skip(self, node) -> None:
    raise nodes.SkipNode


def setup(app: Sphinx):
    app.setup_extension("sphinx_proof")
    app.setup_extension("sphinx.ext.graphviz")
    app.add_directive("proof-map", ProofMapDirective)
    app.add_node(proof_map_node)
    app.add_node(proof_map_svg, html=(visit_svg_html, None), latex=(_skip, None),
                 text=(_skip, None), man=(_skip, None), texinfo=(_skip, None))
    app.connect("doctree-read", _collect)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-get-outdated", _always_reread)
    app.connect("env-check-consistency", _analyse)
    app.connect("doctree-resolved", _replace)
    static = Path(__file__).resolve().parents[1] / "_static"
    app.connect("builder-inited", lambda a: a.config.html_static_path.append(str(static))
                if str(static) not in a.config.html_static_path else None)
    app.add_css_file("qtheory-proof-map.css")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True,
            "env_version": 1}
