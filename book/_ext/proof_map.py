"""The book's proof map: which result's proof uses which, and what is proved (analysis).

This module reads the book's MyST sources (no Sphinx needed) and returns

* every ``prf:theorem``, ``prf:lemma``, ``prf:proposition``, ``prf:corollary`` and
  ``prf:conjecture`` directive of every page of ``_toc.yml``, in book order (the order of
  ``_toc.yml``, then the position in the file), with its label, title and status token
  (``:class: status-proved``, ``status-cited`` or ``status-open``);
* the ``{prf:proof}`` block(s) that follow each result (before the next result of the
  same page; proofs inside exercises and solutions are the exercises' own);
* the edges of the map: each ``{prf:ref}`` inside a proof that names a result, and each
  ``{eq}`` inside a proof that names an equation displayed in a result's statement (the
  edge then goes to that result);
* the "Status of the results" tables of the chapters;
* the problems found by :func:`check`, the project's proof-status convention
  (``CONTRIBUTING.md``, "Proof status and the proof map").

It is one module so that the tests (``tests/test_proof_map.py``) and the build
(``book/_ext/qtheory_proof_map.py``, which draws the page ``book/proof-map.md``) run the
same code. :func:`overview_source` (the chapters) and :func:`panel_source` (one panel per
chapter) write the map in Graphviz's DOT language; the extension lays it out with
Graphviz's ``dot`` (see its docstring for why).

Entry points: :func:`load_book` (the real book, from ``_toc.yml``), :func:`build_book`
(any ``{docname: MyST text}`` in book order, e.g. synthetic pages in a test),
:func:`check`, :func:`overview_source`, :func:`panel_source`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

#: the sphinx-proof kinds that are results (nodes of the map)
RESULT_KINDS = ("theorem", "lemma", "proposition", "corollary", "conjecture")
#: the status tokens of the convention, one per result, in its ``:class:`` option
STATUSES = ("status-proved", "status-cited", "status-open")
#: directives whose content MyST does not parse as Markdown (their text is skipped)
RAW_DIRECTIVES = {"code-cell", "code", "code-block", "sourcecode", "math", "raw",
                  "eval-rst", "literalinclude", "csv-table", "graphviz", "mermaid"}
#: directives whose nested proofs belong to an exercise, not to a result
EXERCISE_DIRECTIVES = {"exercise", "solution", "exercise-start", "solution-start"}

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,}|:{3,})\s*"
                   r"(?:\{(?P<name>[^}\s]+)\})?\s*(?P<arg>.*?)\s*$")
OPTION = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*?)\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
PRF_REF = re.compile(r"\{prf:ref\}`(?P<body>[^`]*)`")
EQ_REF = re.compile(r"\{eq\}`(?P<body>[^`]*)`")
CITE = re.compile(r"\{cite(?::[a-z]+)?\}`(?P<keys>[^`]*)`")
ROLE = re.compile(r"\{[\w:.-]+\}`[^`]*`")
#: equation labels: ``$$ ... $$ (label)``, ``\label{label}``, a ``{math}`` ``:label:``
DOLLAR_LABEL = re.compile(r"\$\$\s*\((?P<label>[^)\s]+)\)\s*$", re.M)
TEX_LABEL = re.compile(r"\\label\{(?P<label>[^}]+)\}")
#: a place in a source: "Theorem 7.3", "Section 2", "p. 14", "Chapter 5", "Eq. (3)"
PLACE = re.compile(
    r"\b(?:Theorems?|Thm\.|Lemmas?|Propositions?|Prop\.|Corollary|Cor\.|Definition|"
    r"Sections?|Sec\.|Chapters?|Ch\.|Appendix|Exercise|Eq\.|Equation|pages?|pp?\.)"
    r"\s*\(?[0-9IVXivx][\w.\-–]*\)?|§\s*[\w.]+")
#: words by which a result's own text says that it is not proved in the book
OPEN_WORDS = re.compile(r"\b(sketch(?:ed)?|conjectur\w*|not proved|unproved|heuristic)\b",
                        re.I)
#: words by which a sentence says that the result it refers to comes later
LATER_WORDS = re.compile(r"\b(later|below)\b", re.I)
#: abbreviations after which a full stop does not end a sentence
ABBREVIATIONS = ("e.g.", "i.e.", "cf.", "etc.", "resp.", "Thm.", "Eq.", "eq.", "Sec.",
                 "Ch.", "p.", "pp.", "vs.", "Prop.", "Cor.", "Lem.", "Fig.", "No.",
                 "a.e.", "a.s.", "w.p.", "i.i.d.")


# ======================================================================================
# Data
# ======================================================================================

@dataclass
class Directive:
    """One MyST directive (fenced block) of a page."""

    name: str
    arg: str
    options: dict[str, str]
    line: int                     # 1-based line of the opening fence
    end_line: int                 # 1-based line of the closing fence
    body: str                     # the content, options removed (nested blocks kept)
    body_line: int                # line of the first body line
    ancestors: tuple[str, ...]    # names of the enclosing directives
    in_solution: bool = False     # between {solution-start} and {solution-end}

    @property
    def classes(self) -> list[str]:
        return self.options.get("class", "").split()

    @property
    def label(self) -> str:
        return self.options.get("label", "").strip()


@dataclass
class Ref:
    """A reference inside a proof: ``{prf:ref}`` (role "prf") or ``{eq}`` (role "eq")."""

    role: str
    target: str                   # the label named by the role
    line: int
    sentence: str                 # the sentence around it (math and roles masked)


@dataclass
class Result:
    """A result directive, with its proofs and what they use."""

    docname: str
    kind: str
    title: str
    label: str
    classes: list[str]
    line: int
    body: str
    order: int = 0                # position in the book (0, 1, 2, ...)
    proofs: list[Directive] = field(default_factory=list)
    refs: list[Ref] = field(default_factory=list)     # inside its proofs
    equations: list[str] = field(default_factory=list)  # labels displayed in the statement
    uses: list[str] = field(default_factory=list)       # result labels (the edges)
    used_by: list[str] = field(default_factory=list)

    @property
    def statuses(self) -> list[str]:
        return [c for c in self.classes if c.startswith("status-")]

    @property
    def status(self) -> str:
        """``proved``, ``cited``, ``open``, or ``unknown`` (no or several tokens)."""
        tokens = [t for t in self.statuses if t in STATUSES]
        return tokens[0][len("status-"):] if len(tokens) == 1 == len(self.statuses) \
            else "unknown"

    @property
    def cites(self) -> list[str]:
        return [k.strip() for m in CITE.finditer(self.body) for k in m["keys"].split(",")
                if k.strip()]

    @property
    def places(self) -> list[str]:
        """The places in the cited source(s) named in the statement ("Theorem 7.3")."""
        text = ROLE.sub(" ", self.body)
        return [m.group(0).strip() for m in PLACE.finditer(text)]

    @property
    def proof_text(self) -> str:
        return "\n".join(p.arg + "\n" + p.body for p in self.proofs)


@dataclass
class StatusRow:
    """A row of a chapter's "Status of the results" table."""

    docname: str
    line: int
    labels: list[str]             # results named in its first column
    status: str                   # the text of its status column
    status_refs: list[str]        # results named in the status column (its conditions)

    @property
    def claim(self) -> str:
        return classify_status(self.status)


@dataclass
class Page:
    docname: str
    title: str
    directives: list[Directive]
    tables: list[StatusRow]
    labels: set[str]              # every labelled prf directive of the page


@dataclass
class Problem:
    code: str
    docname: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.docname}:{self.line}: [{self.code}] {self.message}"


@dataclass
class Book:
    docnames: list[str]
    pages: dict[str, Page]
    results: list[Result]
    by_label: dict[str, Result]
    equation_owner: dict[str, str]   # equation label -> label of the result stating it
    prf_labels: set[str]             # every labelled prf directive (definitions too)
    duplicates: list[tuple[str, str, int]]
    orphan_proofs: list[tuple[str, int]]
    tables: list[StatusRow]

    def result_of(self, target: str, role: str) -> Result | None:
        if role == "eq":
            owner = self.equation_owner.get(target)
            return self.by_label.get(owner) if owner else None
        return self.by_label.get(target)


# ======================================================================================
# MyST parsing
# ======================================================================================

def _front_matter_end(lines: list[str]) -> int:
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() == "---":
                return i + 1
    return 0


def _is_close(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (len(stripped) >= len(fence) and set(stripped) == {fence[0]})


def parse_directives(text: str) -> list[Directive]:
    """Every fenced directive of a MyST page (nested ones too), in document order.

    Fences are backtick, tilde or colon fences (``colon_fence``); a fence closes at a
    line of the same character at least as long. The content of code cells, code blocks
    and math is not searched for directives. Options are the ``:key: value`` lines at
    the top of the content (or a ``---`` YAML block with ``key: value`` lines).
    """
    lines = text.split("\n")
    start = _front_matter_end(lines)
    out: list[Directive] = []
    stack: list[dict] = []       # open fences
    in_solution = False
    for i in range(start, len(lines)):
        line = lines[i]
        if stack:
            top = stack[-1]
            if _is_close(line, top["fence"]):
                stack.pop()
                if top["name"] is not None:
                    body_lines = top["body"]
                    options, skip = _options(body_lines)
                    d = Directive(
                        name=top["name"], arg=top["arg"], options=options,
                        line=top["line"], end_line=i + 1,
                        body="\n".join(body_lines[skip:]),
                        body_line=top["line"] + 1 + skip,
                        ancestors=tuple(s["name"] or "" for s in stack),
                        in_solution=top["in_solution"])
                    out.append(d)
                    if d.name == "solution-start":
                        in_solution = True
                    elif d.name == "solution-end":
                        in_solution = False
                for s in stack:
                    s["body"].append(line)
                continue
            for s in stack:
                s["body"].append(line)
            if top["raw"]:
                continue
        m = FENCE.match(line)
        if m is None:
            continue
        name = m["name"]
        raw = name is None or name in RAW_DIRECTIVES
        stack.append({"fence": m["fence"], "name": name, "arg": m["arg"] or "",
                      "line": i + 1, "body": [], "raw": raw,
                      "in_solution": in_solution})
    out.sort(key=lambda d: d.line)
    return out


def _options(body: list[str]) -> tuple[dict[str, str], int]:
    options: dict[str, str] = {}
    if body and body[0].strip() == "---":
        for j in range(1, len(body)):
            if body[j].strip() == "---":
                for row in body[1:j]:
                    if ":" in row:
                        key, value = row.split(":", 1)
                        options[key.strip()] = value.strip()
                return options, j + 1
    j = 0
    while j < len(body):
        m = OPTION.match(body[j])
        if m is None:
            break
        options[m["key"]] = m["value"]
        j += 1
    return options, j


def _split_cells(row: str) -> list[str]:
    """Cells of a Markdown table row; a ``|`` inside backticks or $...$ is no border."""
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    cells, cur, tick, dollar = [], [], False, False
    k = 0
    while k < len(row):
        ch = row[k]
        if ch == "\\" and k + 1 < len(row):
            cur.append(row[k:k + 2])
            k += 2
            continue
        if ch == "`":
            tick = not tick
        elif ch == "$" and not tick:
            dollar = not dollar
        if ch == "|" and not tick and not dollar:
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        k += 1
    cells.append("".join(cur).strip())
    return cells


def _ref_targets(pattern: re.Pattern, text: str) -> list[str]:
    out = []
    for m in pattern.finditer(text):
        body = m["body"]
        inner = re.search(r"<([^<>]+)>\s*$", body)
        out.append((inner[1] if inner else body).strip())
    return out


def parse_status_tables(text: str, docname: str) -> list[StatusRow]:
    """Rows of the tables under a heading that says "status" whose header has a
    "Result" column and a "Status" column."""
    lines = text.split("\n")
    rows: list[StatusRow] = []
    heading = ""
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence is not None:
            if _is_close(line, fence):
                fence = None
            i += 1
            continue
        m = FENCE.match(line)
        if m is not None and (m["name"] is None or m["name"] in RAW_DIRECTIVES):
            fence = m["fence"]
            i += 1
            continue
        h = HEADING.match(line)
        if h:
            heading = h[2]
        if (line.lstrip().startswith("|") and i + 1 < len(lines)
                and re.match(r"^\s*\|?\s*:?-{3,}", lines[i + 1])
                and "status" in heading.lower()):
            header = [c.lower() for c in _split_cells(line)]
            col_r = next((k for k, c in enumerate(header) if c.startswith("result")), None)
            col_s = next((k for k, c in enumerate(header) if c.startswith("status")), None)
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                if col_r is not None and col_s is not None:
                    cells = _split_cells(lines[i])
                    if len(cells) > max(col_r, col_s):
                        rows.append(StatusRow(
                            docname=docname, line=i + 1,
                            labels=_ref_targets(PRF_REF, cells[col_r]),
                            status=cells[col_s],
                            status_refs=_ref_targets(PRF_REF, cells[col_s])))
                i += 1
            continue
        i += 1
    return rows


def classify_status(text: str) -> str:
    """What a status-table cell claims: ``open``, ``conditional``, ``proved``, ``cited``
    or ``unknown``.

    The rule (documented in CONTRIBUTING.md):

    * it says "sketch", "conjecture", "open", "not proved", "unproved" or "heuristic":
      ``open``;
    * else it says "complete", "proved" or "proof" and also "given", "proviso",
      "assuming", "provided" or "conditional": ``conditional`` (complete up to the
      named condition);
    * else it says "complete", "proved" or "proof": ``proved``;
    * else it says "cited", "external" or holds a ``{cite}``: ``cited``;
    * otherwise ``unknown`` (a status the check does not understand is a problem).
    """
    plain = ROLE.sub(lambda m: " REF " if m.group(0).startswith("{prf:ref}") else " ",
                     text).lower()
    if re.search(r"\b(sketch\w*|conjectur\w*|open|not proved|unproved|heuristic)\b", plain):
        return "open"
    complete = re.search(r"\b(complete|proved|proof)\b", plain)
    if complete and re.search(r"\b(given|proviso|assuming|provided|conditional\w*)\b",
                              plain):
        return "conditional"
    if complete:
        return "proved"
    if re.search(r"\b(cited|external)\b", plain) or CITE.search(text):
        return "cited"
    return "unknown"


def page_title(text: str) -> str:
    lines = text.split("\n")
    for line in lines[_front_matter_end(lines):]:
        m = HEADING.match(line)
        if m and len(m[1]) == 1:
            return m[2]
    return ""


def parse_page(text: str, docname: str) -> Page:
    directives = parse_directives(text)
    labels = {d.label for d in directives if d.name.startswith("prf:") and d.label}
    return Page(docname=docname, title=page_title(text), directives=directives,
                tables=parse_status_tables(text, docname), labels=labels)


# ======================================================================================
# Sentences: for "stated later" references
# ======================================================================================

def _mask(text: str) -> str:
    """Math and roles replaced by 'x' of the same length (line breaks kept), so that
    their dots end no sentence and their words count for nothing."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", "x", m.group(0))

    text = re.sub(r"\$\$.*?\$\$", blank, text, flags=re.S)
    text = re.sub(r"\$[^$]*\$", blank, text)
    return ROLE.sub(blank, text)


def sentence_at(text: str, pos: int) -> str:
    """The sentence of ``text`` (math and roles masked) that contains position ``pos``."""
    masked = _mask(text)
    for abbr in ABBREVIATIONS:
        masked = re.sub(r"(?<![A-Za-z])" + re.escape(abbr),
                        lambda m: m.group(0).replace(".", "x"), masked)
    bounds = [0]
    for m in re.finditer(r"[.!?][\"')\]*_]*\s+|\n\s*\n", masked):
        bounds.append(m.end())
    bounds.append(len(masked) + 1)
    for a, b in zip(bounds, bounds[1:]):
        if a <= pos < b:
            return masked[a:b].strip()
    return masked.strip()


# ======================================================================================
# The book
# ======================================================================================

def plain_title(title: str) -> str:
    """A result's title as plain text (no MyST, simple TeX made Unicode)."""
    t = ROLE.sub(lambda m: m.group(0).split("`")[1], title)
    repl = {r"\lambda": "λ", r"\mu": "μ", r"\ell": "ℓ", r"\infty": "∞", r"\le": "≤",
            r"\ge": "≥", r"\to": "→", r"\pi": "π", r"\varepsilon": "ε", r"\ne": "≠"}
    for k, v in sorted(repl.items(), key=lambda kv: -len(kv[0])):
        t = t.replace(k, v)
    t = re.sub(r"\\[A-Za-z]+", "", t).replace("$", "")
    return re.sub(r"\s+", " ", t.replace("{", "").replace("}", "")).strip()


def build_book(sources: dict[str, str]) -> Book:
    """The proof map of pages given as ``{docname: MyST text}`` in book order."""
    pages = {doc: parse_page(text, doc) for doc, text in sources.items()}
    results: list[Result] = []
    by_label: dict[str, Result] = {}
    duplicates: list[tuple[str, str, int]] = []
    orphans: list[tuple[str, int]] = []
    equation_owner: dict[str, str] = {}
    prf_labels: set[str] = set()
    for doc, page in pages.items():
        prf_labels |= page.labels
        current: Result | None = None
        for d in page.directives:
            if not d.name.startswith("prf:"):
                continue
            kind = d.name[4:]
            if kind in RESULT_KINDS:
                r = Result(docname=doc, kind=kind, title=d.arg, label=d.label,
                           classes=d.classes, line=d.line, body=d.body,
                           order=len(results))
                r.equations = [m["label"] for m in DOLLAR_LABEL.finditer(d.body)]
                r.equations += [m["label"] for m in TEX_LABEL.finditer(d.body)]
                r.equations += [n.label for n in page.directives
                                if n.name == "math" and n.label
                                and d.line < n.line < d.end_line]
                for eq in r.equations:
                    equation_owner.setdefault(eq, r.label or f"{doc}:{d.line}")
                results.append(r)
                if r.label:
                    if r.label in by_label:
                        duplicates.append((r.label, doc, d.line))
                    else:
                        by_label[r.label] = r
                current = r
            elif kind == "proof":
                if d.in_solution or set(d.ancestors) & EXERCISE_DIRECTIVES:
                    continue
                if current is None:
                    orphans.append((doc, d.line))
                    continue
                current.proofs.append(d)
    for r in results:
        for p in r.proofs:
            for role, pattern in (("prf", PRF_REF), ("eq", EQ_REF)):
                for m in pattern.finditer(p.body):
                    body = m["body"]
                    inner = re.search(r"<([^<>]+)>\s*$", body)
                    target = (inner[1] if inner else body).strip()
                    line = p.body_line + p.body[:m.start()].count("\n")
                    r.refs.append(Ref(role=role, target=target, line=line,
                                      sentence=sentence_at(p.body, m.start())))
        for ref in r.refs:
            used = _target(by_label, equation_owner, ref)
            if used is not None and used is not r and used.label not in r.uses:
                r.uses.append(used.label)
    for r in results:
        for u in r.uses:
            by_label[u].used_by.append(r.label)
    tables = [row for page in pages.values() for row in page.tables]
    return Book(docnames=list(sources), pages=pages, results=results, by_label=by_label,
                equation_owner=equation_owner, prf_labels=prf_labels,
                duplicates=duplicates, orphan_proofs=orphans, tables=tables)


def _target(by_label, equation_owner, ref: Ref) -> Result | None:
    if ref.role == "eq":
        owner = equation_owner.get(ref.target)
        return by_label.get(owner) if owner else None
    return by_label.get(ref.target)


def toc_docnames(root: Path) -> list[str]:
    """Docnames of ``_toc.yml`` (root first, then parts and chapters in order)."""
    import yaml

    toc = yaml.safe_load((Path(root) / "_toc.yml").read_text(encoding="utf-8"))

    def files(node):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for value in node.values():
                yield from files(value)
        elif isinstance(node, list):
            for item in node:
                yield from files(item)

    return [toc["root"], *files(toc.get("parts", toc.get("chapters", [])))]


def load_book(root: Path, docnames: list[str] | None = None) -> Book:
    """The proof map of the book at ``root`` (pages of ``_toc.yml`` unless given)."""
    root = Path(root)
    docnames = docnames if docnames is not None else toc_docnames(root)
    sources = {}
    for doc in docnames:
        path = root / f"{doc}.md"
        if path.is_file():
            sources[doc] = path.read_text(encoding="utf-8")
    return build_book(sources)


# ======================================================================================
# The checks
# ======================================================================================

def _says_open(r: Result, book: Book) -> bool:
    """A status-open result tells the reader that it is not proved here."""
    if r.kind == "conjecture":
        return True
    if OPEN_WORDS.search(_mask(r.title + "\n" + r.body + "\n" + r.proof_text)) \
            or OPEN_WORDS.search(r.title):
        return True
    if any("sketch" in p.classes for p in r.proofs):
        return True
    if any(r.label in row.labels and row.claim in ("open", "conditional")
           for row in book.tables):
        return True
    return any(book.by_label[u].status == "open" for u in r.uses)


def check(book: Book) -> list[Problem]:
    """Every breach of the proof-status convention, as a list of problems (empty: none).

    Codes: ``label`` (a result without ``:label:``), ``duplicate``, ``status`` (not
    exactly one status token), ``proof-missing`` (proved, no proof block),
    ``cite-missing`` / ``cite-place`` / ``cited-proof`` (a cited result without a
    ``{cite}``, without the place in the source, or with a proof), ``open-unsaid`` (an
    open result whose text does not say so), ``sketch-class`` / ``sketch-proved`` (a
    proof titled as a sketch without ``:class: sketch``, or a sketch proof of a proved
    result), ``orphan-proof``, ``unknown-ref``, ``uses-unproved`` (a proved result whose
    proof uses a result that is neither proved nor cited), ``forward-ref`` (a proof that
    uses a result stated later without saying "later" or "below" in the same
    sentence), ``cycle`` (proved results whose proofs use each other in a circle),
    ``table-*`` (the chapters' status tables against the markers).
    """
    problems: list[Problem] = []
    add = problems.append
    for label, doc, line in book.duplicates:
        add(Problem("duplicate", doc, line, f"label {label!r} is used twice"))
    for doc, line in book.orphan_proofs:
        add(Problem("orphan-proof", doc, line, "a proof block that follows no result"))
    for r in book.results:
        name = r.label or f"{r.kind} {r.title!r}"
        if not r.label:
            add(Problem("label", r.docname, r.line, f"{r.kind} {r.title!r} has no :label:"))
        if len(r.statuses) != 1 or r.statuses[0] not in STATUSES:
            add(Problem("status", r.docname, r.line,
                        f"{name} needs exactly one of {', '.join(STATUSES)} in :class: "
                        f"(has {r.statuses or 'none'})"))
        if r.status == "proved" and not r.proofs:
            add(Problem("proof-missing", r.docname, r.line,
                        f"{name} is status-proved but no {{prf:proof}} follows it"))
        if r.status == "cited":
            if not r.cites:
                add(Problem("cite-missing", r.docname, r.line,
                            f"{name} is status-cited but its statement has no {{cite}}"))
            elif not r.places:
                add(Problem("cite-place", r.docname, r.line,
                            f"{name} is status-cited but does not say where in the source "
                            "(Theorem/Section/page ...)"))
            if r.proofs:
                add(Problem("cited-proof", r.docname, r.proofs[0].line,
                            f"{name} is status-cited but has a proof: mark it "
                            "status-proved, or state it as an external result only"))
        if r.status == "open" and not _says_open(r, book):
            add(Problem("open-unsaid", r.docname, r.line,
                        f"{name} is status-open but neither its title, statement nor "
                        "proof says sketch/conjecture/not proved, no status table row "
                        "says so, and its proof uses no open result"))
        for p in r.proofs:
            titled = bool(re.search(r"\bsketch", p.arg + " " + p.body[:80], re.I))
            if titled and "sketch" not in p.classes:
                add(Problem("sketch-class", r.docname, p.line,
                            f"the proof of {name} is called a sketch but lacks "
                            ":class: sketch"))
            if r.status == "proved" and ("sketch" in p.classes or titled):
                add(Problem("sketch-proved", r.docname, p.line,
                            f"{name} is status-proved but its proof is a sketch"))
        for ref in r.refs:
            if ref.role == "prf" and ref.target not in book.prf_labels:
                add(Problem("unknown-ref", r.docname, ref.line,
                            f"the proof of {name} refers to unknown label {ref.target!r}"))
                continue
            used = book.result_of(ref.target, ref.role)
            if used is None or used is r:
                continue
            if r.status == "proved" and used.status not in ("proved", "cited"):
                add(Problem("uses-unproved", r.docname, ref.line,
                            f"{name} is status-proved but its proof uses {used.label} "
                            f"(status {used.status})"))
            if used.order > r.order and not LATER_WORDS.search(ref.sentence):
                what = ref.target if ref.role == "prf" else f"{ref.target} ({used.label})"
                add(Problem("forward-ref", r.docname, ref.line,
                            f"the proof of {name} uses {what}, stated later in the book, "
                            "and the sentence does not say 'later' or 'below': "
                            f"{ref.sentence[:120]!r}"))
    problems += _cycles(book)
    problems += _table_problems(book)
    return problems


def _cycles(book: Book) -> list[Problem]:
    graph = {r.label: [u for u in r.uses if book.by_label[u].status == "proved"]
             for r in book.results if r.label and r.status == "proved"}
    out = []
    while True:
        try:
            tuple(TopologicalSorter(graph).static_order())
            return out
        except CycleError as err:
            cycle = err.args[1]
            first = book.by_label[cycle[0]]
            out.append(Problem("cycle", first.docname, first.line,
                               "proved results whose proofs use each other in a circle: "
                               + " -> ".join(cycle)))
            graph[cycle[0]] = [u for u in graph[cycle[0]] if u != cycle[1]]


def _table_problems(book: Book) -> list[Problem]:
    out = []
    # a page is "covered" if it holds a status table, or if a table elsewhere (an
    # evidence page) names one of its results: then every result of it must be named
    listed: dict[str, set[str]] = {}
    for row in book.tables:
        listed.setdefault(row.docname, set()).update(row.labels)
        for label in row.labels:
            if label in book.by_label:
                listed.setdefault(book.by_label[label].docname, set()).add(label)
        claim = row.claim
        if not row.labels:
            continue
        if claim == "unknown":
            out.append(Problem("table-status", row.docname, row.line,
                               f"status {row.status!r} says neither complete/proved, "
                               "cited, nor sketch/conjecture/open"))
            continue
        for label in row.labels:
            r = book.by_label.get(label)
            if r is None:
                if label not in book.prf_labels:
                    out.append(Problem("table-label", row.docname, row.line,
                                       f"unknown label {label!r}"))
                continue
            ok = {"open": r.status == "open",
                  "proved": r.status == "proved",
                  "cited": r.status == "cited",
                  "conditional": r.status == "open" or (
                      r.status == "proved" and all(
                          book.by_label[c].status in ("proved", "cited")
                          for c in row.status_refs if c in book.by_label))}[claim]
            if not ok:
                out.append(Problem("table-mismatch", row.docname, row.line,
                                   f"the status table says {row.status!r} ({claim}) for "
                                   f"{label}, whose marker is status-{r.status}"))
    named = set().union(*listed.values()) if listed else set()
    for doc in listed:
        for r in book.results:
            if r.docname == doc and r.label and r.label not in named:
                out.append(Problem("table-missing", doc, r.line,
                                   f"{r.label} is missing from the chapter's status table"))
    return out


# ======================================================================================
# The drawing (Graphviz DOT)
# ======================================================================================

#: fill, border and the text cue of each status (Okabe-Ito hues, pale fills: black text
#: on them has a contrast above 12:1; the border style and shape differ too)
STYLE = {
    "proved": {"fill": "#d4efe3", "line": "#006b4f", "shape": "box",
               "style": "rounded,filled", "penwidth": "1.4", "text": "proved"},
    "cited": {"fill": "#d9ecf9", "line": "#0b5d8f", "shape": "note",
              "style": "filled", "penwidth": "1.4", "text": "cited"},
    "open": {"fill": "#fde6c4", "line": "#8a4f00", "shape": "box",
             "style": "filled,dashed", "penwidth": "2.2", "text": "open"},
    "unknown": {"fill": "#eeeeee", "line": "#444444", "shape": "box",
                "style": "filled,dotted", "penwidth": "2", "text": "no status"},
}


def _esc(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _wrap(text: str, width: int = 30) -> list[str]:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    if cur:
        lines.append(cur)
    return lines or [""]


def _legend() -> str:
    """The key of the drawings (an HTML-like Graphviz table, drawn above the overview):
    the three statuses with their fill, border and text, and what an arrow means."""
    cells = []
    for status, words in (("proved", "proved here"), ("cited", "cited"),
                          ("open", "open")):
        st = STYLE[status]
        style = ' style="rounded"' if status == "proved" else \
            (' style="dashed"' if status == "open" else "")
        cells.append(f'<td bgcolor="{st["fill"]}" color="{st["line"]}" border="2"'
                     f'{style} cellpadding="4"><i>[{st["text"]}]</i> {words}</td>')
    arrow = ('<tr><td border="0"></td><td border="0" colspan="3" cellpadding="2" '
             'align="left">B below A, joined: the proof of B uses A</td></tr>')
    return ('<table border="0" cellspacing="6"><tr><td border="0"><b>Key</b></td>'
            + "".join(cells) + "</tr>" + arrow + "</table>")


def open_reasons(r: Result, book: Book) -> tuple[list[str], list[str]]:
    """Why an open result is open: words ("conjecture", "sketch proof", "no proof in the
    book") and the open results its proof rests on (labels)."""
    words = []
    if r.kind == "conjecture":
        words.append("conjecture")
    if any("sketch" in p.classes for p in r.proofs):
        words.append("sketch proof")
    if not r.proofs and r.kind != "conjecture":
        words.append("no proof in the book")
    for row in book.tables:
        if r.label in row.labels and row.claim in ("open", "conditional"):
            words.append(f"status table: “{plain_title(row.status)}”")
    rests = [u for u in r.uses if book.by_label[u].status == "open"]
    return words, rests


def status_text(r: Result, source_names: dict[str, str] | None = None) -> str:
    """The text cue of a node: "proved", "open", or "cited: <source>, <place>"."""
    if r.status != "cited":
        return STYLE[r.status]["text"]
    names = source_names or {}
    src = "; ".join(names.get(k, k) for k in r.cites) or "no source"
    place = r.places[0] if r.places else "place not given"
    return f"cited: {src}, {place}"


def _chunk_edges(labels: list[str], per_row: int) -> list[str]:
    """Invisible edges that put at most ``per_row`` of ``labels`` (in book order) side by
    side: each one sits below the one ``per_row`` places before it."""
    return [f'  "{_esc(a)}" -> "{_esc(b)}" [style=invis];'
            for a, b in zip(labels, labels[per_row:])]


def panel_docs(book: Book) -> list[str]:
    """The pages that state results, in book order: one panel of the map each."""
    return [d for d in book.docnames if any(r.docname == d and r.label for r in book.results)]


def panel_source(book: Book, doc: str, numbers: dict[str, str],
                 chapter_titles: dict[str, str] | None = None,
                 urls: dict[str, str] | None = None,
                 source_names: dict[str, str] | None = None,
                 compact: bool = False, per_row: int = 3) -> str:
    """One chapter's panel of the map in DOT: a node per result of the page ``doc``, and
    above them, drawn dashed and white, the results of other pages that their proofs use;
    an arrow from each result used to each result whose proof uses it (drawn pointing at
    the result used, which sits higher up). Status by fill, border and shape and by a
    text line ([proved], [cited], [open]); a cited result's source is in its tooltip and
    in the map's table.

    At most ``per_row`` results of the page (and of the results of other pages)
    sit side by side, so that a panel stays narrow enough for a page at its natural size
    (issue 31, item 9: the whole map in one drawing was 1891 px wide).

    ``numbers`` maps labels to the printed name ("Theorem 7.3"); ``urls`` (optional) to
    link targets; without them the nodes carry no links (the PDF's drawing).
    ``compact`` leaves the titles out of the nodes (the PDF's drawing, whose table gives
    them). Node ids: ``proof-map-node-<label>`` for the page's own results,
    ``proof-map-ext-<n>-<label>`` for the others (``n`` the panel's index).
    """
    urls = urls or {}
    chapter_titles = chapter_titles or {}
    own = [r for r in book.results if r.docname == doc and r.label]
    mine = {r.label for r in own}
    used = []
    for r in own:
        used += [u for u in r.uses if u not in mine and u not in used]
    k = panel_docs(book).index(doc) if doc in panel_docs(book) else 0
    out = [f'digraph "proofmap_{k}" {{',
           '  graph [rankdir=TB, nodesep=0.1, ranksep=0.32, concentrate=true, '
           f'fontname="Helvetica", bgcolor="white", pad=0.1, id="proof-map-panel-{k}"];',
           '  node [fontname="Helvetica", fontsize=10, margin="0.08,0.04", '
           'fontcolor="#000000"];',
           '  edge [color="#3a3a3a", arrowsize=0.7, dir=back, penwidth=1.1];']
    for u in used:
        r = book.by_label[u]
        where = chapter_titles.get(r.docname, r.docname)
        lines = [_esc(numbers.get(u, u))]
        if not compact:
            lines += [f'<font point-size="8">{_esc(t)}</font>' for t in _wrap(where, 22)]
        attrs = [f'label=<{"<br/>".join(lines)}>', 'shape=box', 'style="dashed"',
                 'color="#6b6b6b"', 'fillcolor="#ffffff"', f'id="proof-map-ext-{k}-{_esc(u)}"',
                 f'class="status-{r.status} external"']
        if u in urls:
            tip = f"{numbers.get(u, u)} ({plain_title(r.title)}), in {where}"
            attrs += [f'URL="{_esc(urls[u])}"', 'target="_self"', f'tooltip="{_esc(tip)}"']
        out.append(f'  "{_esc(u)}" [{", ".join(attrs)}];')
    for r in own:
        st = STYLE.get(r.status, STYLE["unknown"])
        lines = [f"<b>{_esc(numbers.get(r.label, r.label))}</b>"]
        if r.title and not compact:
            lines += [_esc(t) for t in _wrap(plain_title(r.title), 22)]
        lines.append(f"<i>[{st['text']}]</i>")
        attrs = [f'label=<{"<br/>".join(lines)}>', f'shape={st["shape"]}',
                 f'style="{st["style"]}"', f'fillcolor="{st["fill"]}"',
                 f'color="{st["line"]}"', f'penwidth={st["penwidth"]}',
                 f'id="proof-map-node-{_esc(r.label)}"', f'class="status-{r.status}"']
        if r.label in urls:
            tip = f"{numbers.get(r.label, r.label)} ({plain_title(r.title)}): " \
                  f"{status_text(r, source_names)}"
            attrs += [f'URL="{_esc(urls[r.label])}"', 'target="_self"',
                      f'tooltip="{_esc(tip)}"']
        out.append(f'  "{_esc(r.label)}" [{", ".join(attrs)}];')
    e = 0
    for r in own:
        for u in r.uses:
            e += 1
            out.append(f'  "{_esc(u)}" -> "{_esc(r.label)}" [id="proof-map-edge-{k}-{e}"];')
    out += _chunk_edges(used, per_row) + _chunk_edges([r.label for r in own], per_row)
    out.append("}")
    return "\n".join(out) + "\n"


def overview_source(book: Book, chapter_titles: dict[str, str] | None = None,
                    chapter_urls: dict[str, str] | None = None, per_row: int = 3) -> str:
    """The map at the scale of chapters, in DOT: one node per page that states results
    (its title and how many results it proves, cites and leaves open), an arrow from a
    page to a later one when a proof of the later page uses a result of the earlier."""
    chapter_titles = chapter_titles or {}
    chapter_urls = chapter_urls or {}
    docs = panel_docs(book)
    out = ['digraph "proofmap_overview" {',
           '  graph [rankdir=TB, nodesep=0.12, ranksep=0.3, concentrate=true, '
           'fontname="Helvetica", bgcolor="white", pad=0.1, id="proof-map-overview"];',
           '  node [fontname="Helvetica", fontsize=10, margin="0.08,0.04", shape=box, '
           'style="rounded,filled", fillcolor="#f2f2f2", color="#6b6b6b", '
           'fontcolor="#000000"];',
           '  edge [color="#3a3a3a", arrowsize=0.7, dir=back, penwidth=1.0];',
           f"  label=<{_legend()}>; labelloc=t; labeljust=l;"]
    for k, d in enumerate(docs):
        rs = [r for r in book.results if r.docname == d and r.label]
        counts = [f"{sum(r.status == s for r in rs)} {w}" for s, w in
                  (("proved", "proved"), ("cited", "cited"), ("open", "open"))
                  if any(r.status == s for r in rs)]
        lines = [f"<b>{_esc(t)}</b>" for t in _wrap(chapter_titles.get(d, d), 24)]
        lines.append(f'<font point-size="8">{_esc(", ".join(counts))}</font>')
        attrs = [f'label=<{"<br/>".join(lines)}>', f'id="proof-map-chapter-{k}"']
        if d in chapter_urls:
            attrs += [f'URL="{_esc(chapter_urls[d])}"', 'target="_self"',
                      f'tooltip="{_esc(chapter_titles.get(d, d))}"']
        out.append(f'  "{_esc(d)}" [{", ".join(attrs)}];')
    pairs = []
    for r in book.results:
        for u in r.uses:
            a, b = book.by_label[u].docname, r.docname
            if a != b and (a, b) not in pairs:
                pairs.append((a, b))
    out += [f'  "{_esc(a)}" -> "{_esc(b)}";' for a, b in pairs]
    out += _chunk_edges(docs, per_row)
    out.append("}")
    return "\n".join(out) + "\n"


def latex_to_text(text: str) -> str:
    """BibTeX's LaTeX (``Br{\\'e}maud``, ``{\\"O}ksendal``) as plain Unicode text."""
    try:
        import latexcodec  # noqa: F401  (pybtex's dependency: registers the codec)
        import codecs

        text = codecs.decode(text, "ulatex")
    except (ImportError, ValueError, UnicodeDecodeError):
        pass
    return text.replace("{", "").replace("}", "").strip()


def bib_names(bibtex: str) -> dict[str, str]:
    """``{key: "Author and Author 2012"}`` from a BibTeX file's text (surnames, year)."""
    out = {}
    for m in re.finditer(r"@\w+\s*\{\s*([^,\s]+)\s*,(.*?)\n\}", bibtex, re.S):
        key, body = m[1], m[2]
        author = re.search(r"\bauthor\s*=\s*[{\"](.+?)[}\"]\s*,?\s*\n", body, re.S)
        year = re.search(r"\byear\s*=\s*[{\"]?(\d{4})", body)
        names = []
        for person in re.split(r"\s+and\s+", author[1]) if author else []:
            person = person.strip().strip("{}")
            last = person.split(",")[0] if "," in person else person.split()[-1]
            names.append(latex_to_text(last))
        who = (names[0] + " et al." if len(names) > 2 else " and ".join(names)) or key
        out[key] = f"{who} {year[1]}" if year else who
    return out
