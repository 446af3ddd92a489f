"""Sphinx extension for the editions of the qtheory book: one version, the PDF, licences.

What it does
------------
1. **One version number.** ``version`` and ``release`` of the book (the PDF's title page,
   the HTML footer) are read from ``qtheory/__init__.py`` (``__version__``, parsed as
   text, not imported), the same single source that ``pyproject.toml`` reads through
   setuptools' dynamic version and ``CITATION.cff`` repeats (``tests/test_release.py``
   checks that they agree).
2. **Theorem environments in the PDF.** sphinx-proof 0.4.0 writes every ``prf:`` block
   as a generic note box in LaTeX, and the proof's own ``\\label`` is not the one Sphinx's
   references point at. Here the LaTeX visitors of sphinx-proof's nodes are replaced:
   theorems, lemmas, propositions, corollaries and conjectures become amsthm environments
   in the ``plain`` style (italic body), definitions, assumptions, examples, remarks and
   the others the ``definition`` style, each headed with the number the HTML shows
   ("Theorem 7.2"), and ``prf:proof`` becomes amsthm's ``proof`` (ending with a square).
   The anchor is Sphinx's own (``\\label{\\detokenize{doc:id}}``), so ``{prf:ref}``
   links are clickable and resolve (no "??").
3. **Exercises and solutions in the PDF** keep sphinx-exercise's own LaTeX (headed
   "Exercise n" and "Solution to Exercise n", after each exercise).
4. **Outputs that only make sense in a browser** (the text/plain stand-ins of HTML
   animations, of widgets and of the book's explorers, e.g. ``<IPython.core.display.HTML
   object>``, ``<Explorer 'fluid': ...>``) are dropped from
   the LaTeX output; the static figure next to each explorer stays.
5. **The PDF and the EPUB in the HTML.** When ``_build/pdf/qtheory-book.pdf`` exists
   (written by ``scripts/pdf.sh``), it is copied into the HTML output as
   ``qtheory-book.pdf`` and the theme's download menu gets a "PDF edition" entry on every
   page; likewise ``_build/epub/qtheory-book.epub`` (``scripts/epub.sh``, see
   ``qtheory_epub.py``) becomes an "EPUB edition" entry. Without the file, nothing is
   added (no dead link); nor in the edition without solutions (``hide_solutions``), as
   both editions have them. The footer names the version and the licences.
   The text stand-ins of item 4 are dropped from the EPUB too (it shows no HTML output).
6. **Lettered appendices in the PDF.** ``_toc.yml`` letters the appendix part (A, B, ...;
   sphinx-external-toc's ``style: alphaupper``), so the HTML says "Lemma B.2". LaTeX
   numbers its own chapters, so ``\\appendix`` is written before the first chapter of the
   part captioned "Appendices": its chapters, figures and equations are lettered as in
   the HTML.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
PDF_NAME = "qtheory-book.pdf"
PDF_SOURCE = ROOT / "_build" / "pdf" / PDF_NAME
EPUB_NAME = "qtheory-book.epub"
EPUB_SOURCE = ROOT / "_build" / "epub" / EPUB_NAME
#: the editions the HTML offers: (file in _build, name in the HTML, menu entry)
EDITIONS = (
    (PDF_SOURCE, PDF_NAME, {"text": "PDF edition", "icon": "fas fa-file-pdf",
                            "tooltip": "Download the whole book as a PDF",
                            "label": "download-pdf-edition-button"}),
    (EPUB_SOURCE, EPUB_NAME, {"text": "EPUB edition", "icon": "fas fa-book",
                              "tooltip": "Download the whole book as an EPUB, for "
                                         "e-readers",
                              "label": "download-epub-edition-button"}),
)

#: sphinx-proof kinds set in amsthm's "plain" style (italic body); the rest "definition"
PLAIN_KINDS = {"theorem", "lemma", "proposition", "corollary", "conjecture", "criterion",
               "property", "axiom"}

LATEX_PREAMBLE = r"""
% --- qtheory_edition: sphinx-proof blocks as amsthm environments (numbers from Sphinx) ---
\usepackage{amsthm}
\newtheoremstyle{qtplain}{\topsep}{\topsep}{\itshape}{}{\bfseries}{.}{ }{\thmname{#1}\thmnote{#3}}
\newtheoremstyle{qtdefinition}{\topsep}{\topsep}{\normalfont}{}{\bfseries}{.}{ }{\thmname{#1}\thmnote{#3}}
\theoremstyle{qtplain}
\newtheorem*{qtprfplainenv}{\qtprfheading}
\theoremstyle{qtdefinition}
\newtheorem*{qtprfdefenv}{\qtprfheading}
\newcommand{\qtprfheading}{}
% #1: heading ("Theorem 7.2"), #2: the block's title, e.g. " (Little's law)"
\newenvironment{qtprfplain}[2]{\renewcommand{\qtprfheading}{#1}\begin{qtprfplainenv}[#2]}{\end{qtprfplainenv}}
\newenvironment{qtprfdef}[2]{\renewcommand{\qtprfheading}{#1}\begin{qtprfdefenv}[#2]}{\end{qtprfdefenv}}
% an anchor whose \ref prints Sphinx's number (#1) of a theorem or an exercise: numbered
% references ("Exercise \ref{...}") show the number the HTML shows, not a section's
\makeatletter
\newcommand{\qtlabel}[2]{\begingroup\phantomsection\def\@currentlabel{#1}\label{#2}\endgroup}
\makeatother
\setlength{\headheight}{14pt}
"""

LICENCE_PAGE = r"""
\clearpage\thispagestyle{empty}\vspace*{\fill}
\noindent\textit{The Power of a Little Centralization}, version @VERSION@ (the version of
the \texttt{qtheory} library it was built with). Copyright \copyright{} 2026 The qtheory
authors.\par\medskip
\noindent Text and figures: Creative Commons Attribution 4.0 International (CC BY 4.0),
\url{https://creativecommons.org/licenses/by/4.0/}. Code (the \texttt{qtheory} library,
the code cells, scripts and tests): MIT License. See \texttt{LICENSE-text.md},
\texttt{LICENSE} and, to cite the book, \texttt{CITATION.cff} in the repository,
\url{https://github.com/qtheory/qtheory}.
\clearpage
"""

#: text/plain stand-ins of outputs that only a browser can show
BROWSER_ONLY = re.compile(
    r"^\s*(<IPython\.core\.display\.\w+ object>"
    r"|<matplotlib\.animation\.\w+ object at 0x[0-9a-f]+>"
    r"|<Explorer '[^']*': .*drawn by the\s+HTML book.*>"
    r"|(interactive|VBox|HBox|Output|Box|Tab|Accordion|GridBox)\(children=.*"
    r"|\w+(Slider|Dropdown|Button|Checkbox|Text|Play)\(.*\))\s*$",
    re.S,
)


def qtheory_version(root: Path = ROOT) -> str:
    """``__version__`` of ``qtheory/__init__.py``, read as text (no import)."""
    text = (root / "qtheory" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', text, re.M)
    if match is None:
        raise ValueError("qtheory/__init__.py has no __version__ = '...' line")
    return match[1]


# ---------------------------------------------------------------------------------------
# 1. version, footer, LaTeX preamble
# ---------------------------------------------------------------------------------------
def _config_inited(app: Sphinx, config) -> None:
    version = qtheory_version()
    config.version = version
    config.release = version
    elements = dict(config.latex_elements or {})
    elements["preamble"] = elements.get("preamble", "") + LATEX_PREAMBLE
    # the back of the title page: version and licences, then the table of contents
    elements["tableofcontents"] = LICENCE_PAGE.replace("@VERSION@", version) + \
        elements.get("tableofcontents", r"\sphinxtableofcontents")
    config.latex_elements = elements
    options = dict(config.html_theme_options or {})
    footer = options.get("extra_footer", "")
    note = (f"<p>Version {version}. Text and figures: "
            '<a href="https://creativecommons.org/licenses/by/4.0/">CC BY 4.0</a>; '
            "code: MIT License.</p>")
    if "CC BY 4.0" not in footer:
        options["extra_footer"] = footer + note
    config.html_theme_options = options


def _chapter_numbers(app: Sphinx) -> None:
    """Figures, equations and results numbered within their chapter in the PDF, as in the
    HTML ("Fig. 4.1", "(5.2)", "Theorem 7.3": every part of _toc.yml is numbered and
    ``numfig_secnum_depth`` is 1); the LaTeX builder must not count them through the whole
    book."""
    if app.builder.format == "latex":
        app.config["numfig_secnum_depth"] = 1


# ---------------------------------------------------------------------------------------
# 2. sphinx-proof in LaTeX
# ---------------------------------------------------------------------------------------
def _number(self, node, typ: str | None = None) -> str:
    """The number the HTML shows for this block ("7.2"), from Sphinx's toc_fignumbers."""
    typ = typ or node.get("countertype") or node.get("type", "")
    ids = node.get("ids", [])
    if not ids:
        return ""
    env = self.builder.env
    docs = list(self.curfilestack[-1:]) + list(env.toc_fignumbers)
    for doc in docs:
        found = env.toc_fignumbers.get(doc, {}).get(typ, {}).get(ids[0])
        if found:
            return ".".join(map(str, found))
    return ""


def _label(self, node_id: str, number: str) -> str:
    """Sphinx's anchor ``doc:id`` for a block; ``\\ref`` to it prints ``number``."""
    target = self.idescape(f"{self.curfilestack[-1]}:{node_id}")
    if not number:
        return self.hypertarget(node_id, anchor=True)
    return f"\\qtlabel{{{number}}}{{{target}}}"


def _exercise_visitor(original):
    """sphinx-exercise's LaTeX visitor, plus an anchor that numbered references find."""

    def visit(self, node):
        # before the admonition: \begin{sphinxadmonition}{note}{title} takes arguments
        number = _number(self, node, "exercise")
        for node_id in node.get("ids", []):
            self.body.append("\n" + _label(self, node_id, number))
        original(self, node)

    return visit


def _kind_title(node) -> str:
    from sphinx.locale import get_translation

    _ = get_translation("proof")
    return _((node.get("realtype") or node.get("type", "")).title())


def visit_prf_latex(self, node) -> None:
    typ = node.get("realtype") or node.get("type", "")
    env_name = "qtprfplain" if typ in PLAIN_KINDS else "qtprfdef"
    heading = _kind_title(node)
    if not isinstance(node, _UNENUMERABLE):
        number = _number(self, node)
        if number:
            heading += " " + number
    self.body.append("\n")
    number = _number(self, node)
    for node_id in node.get("ids", []):
        self.body.append(_label(self, node_id, number))
    # the title node (visited next) writes "{...}": the environment's second argument
    self.body.append(f"\\begin{{{env_name}}}{{{heading}}}")
    self.context.append(f"\\end{{{env_name}}}\n")


def depart_prf_latex(self, node) -> None:
    self.body.append(self.context.pop())


def visit_proof_latex(self, node) -> None:
    # sphinx-proof 0.4.0: proof_node > admonition(ids=["proof"]) whose first paragraph
    # starts with the text "Proof. ". amsthm's proof environment writes "Proof." itself
    # and ends with a square: the wrapper is unwrapped and the prefix removed.
    self.body.append("\n\\begin{proof}\n")
    for child in list(node.children):
        if isinstance(child, nodes.admonition):
            inner = list(child.children)
            child.parent.replace(child, inner)
            for text in (inner[0].findall(nodes.Text) if inner else []):
                if text.astext().startswith("Proof. "):
                    text.parent.replace(text, nodes.Text(text.astext()[len("Proof. "):]))
                break


def depart_proof_latex(self, node) -> None:
    self.body.append("\n\\end{proof}\n")


_UNENUMERABLE: type = type(None)


# ---------------------------------------------------------------------------------------
# 4. browser-only outputs
# ---------------------------------------------------------------------------------------
def _drop_browser_only(app: Sphinx, doctree, docname: str) -> None:
    if app.builder.format != "latex" and app.builder.name != "epub":
        return
    for block in list(doctree.findall(nodes.literal_block)):
        if BROWSER_ONLY.match(block.astext()):
            parent = block.parent
            block.parent.remove(block)
            # an output container left empty goes too
            while parent is not None and not parent.children and parent.parent is not None \
                    and isinstance(parent, nodes.container):
                grand = parent.parent
                grand.remove(parent)
                parent = grand


# ---------------------------------------------------------------------------------------
# 5. the PDF offered by the HTML
# ---------------------------------------------------------------------------------------
def _offered(app: Sphinx) -> list[tuple[Path, str, dict]]:
    """The editions the HTML offers: only the full HTML book offers them (the edition
    without solutions, sphinx-exercise's hide_solutions, must not hand out the solutions),
    and only those built."""
    if app.builder.format != "html" or app.builder.name == "epub" \
            or getattr(app.config, "hide_solutions", False):
        return []
    return [e for e in EDITIONS if e[0].is_file()]


def _offer_pdf(app: Sphinx) -> bool:
    return any(name == PDF_NAME for _, name, _ in _offered(app))


def _add_pdf_button(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """html-page-context: the built editions in the theme's download menu."""
    buttons = context.get("header_buttons")
    if not isinstance(buttons, list):
        return
    for _, name, entry in _offered(app):
        entry = dict(entry, type="link", url=context["pathto"](name, 1))
        for button in buttons:
            if isinstance(button, dict) and button.get("type") == "group" and \
                    "download" in str(button.get("label", "")).lower():
                button.setdefault("buttons", []).append(entry)
                break
        else:
            buttons.append(entry)


def _copy_pdf(app: Sphinx, exc) -> None:
    if exc is not None:
        return
    for source, name, _ in _offered(app):
        shutil.copy2(source, Path(app.outdir) / name)
        LOGGER.info(f"qtheory_edition: {name} copied into the HTML output")


class _AppendixInLatex(SphinxPostTransform):
    """Item 6: ``\\appendix`` before the first document of the "Appendices" part (LaTeX
    only; after sphinx-jupyterbook-latex has turned the toctree captions into parts)."""

    default_priority = 720  # sphinx-jupyterbook-latex's part transform is 700
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        # sphinx-jupyterbook-latex wraps each part in a start_of_file named by its caption
        for part in self.document.findall(addnodes.start_of_file):
            if part.get("docname") == APPENDIX_CAPTION:
                first = next((n for n in part.findall(addnodes.start_of_file)
                              if n is not part), None)
                if first is not None:
                    first.parent.insert(first.parent.index(first),
                                        nodes.raw("", "\\appendix\n", format="latex"))
                return


APPENDIX_CAPTION = "Appendices"


def setup(app: Sphinx):
    global _UNENUMERABLE
    app.setup_extension("sphinx_proof")
    from sphinx_proof.nodes import NODE_TYPES, proof_node, unenumerable_node

    _UNENUMERABLE = unenumerable_node
    for node_class in list(NODE_TYPES.values()) + [unenumerable_node]:
        app.add_node(node_class, override=True, latex=(visit_prf_latex, depart_prf_latex))
    app.add_node(proof_node, override=True, latex=(visit_proof_latex, depart_proof_latex))
    app.setup_extension("sphinx_exercise")
    from sphinx_exercise import nodes as exercise_nodes

    app.add_node(exercise_nodes.exercise_enumerable_node, override=True, latex=(
        _exercise_visitor(exercise_nodes.visit_exercise_enumerable_node),
        exercise_nodes.depart_exercise_enumerable_node))

    app.add_post_transform(_AppendixInLatex)
    app.connect("config-inited", _config_inited)
    # after sphinx-jupyterbook-latex, which asks for per-chapter numbers (2) with parts
    app.connect("builder-inited", _chapter_numbers, priority=900)
    app.connect("doctree-resolved", _drop_browser_only)
    # after sphinx-book-theme has filled the header buttons (its priority is the default 500)
    app.connect("html-page-context", _add_pdf_button, priority=900)
    app.connect("build-finished", _copy_pdf)
    return {"version": qtheory_version(), "parallel_read_safe": True,
            "parallel_write_safe": True}
