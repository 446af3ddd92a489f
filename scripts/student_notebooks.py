"""Write one student notebook (.ipynb) per chapter of the book.

Each chapter listed in ``_toc.yml`` that is a MyST Markdown notebook is read with jupytext
and turned into a notebook that opens cleanly in JupyterLab and in Colab:

* solutions are removed: everything between ``{solution-start}`` and ``{solution-end}``
  (text and code cells), and every ``{solution}`` directive;
* after every exercise comes an empty code cell for the student's answer;
* MyST-only markup, which Jupyter shows as literal text, becomes plain Markdown:
  directives (``{exercise}``, ``{prf:*}``, ``{admonition}`` ...) become headed blocks,
  roles become text (``{eq}`` -> "(3)", ``{numref}`` -> "Figure 2", ``{ref}`` and
  ``{prf:ref}`` -> "Exercise 4", "Theorem 1", ``{cite}`` -> "(Tsitsiklis and Xu, 2012)"),
  labelled equations get ``\\tag{n}``, figure captions (cell metadata in the book) become a
  Markdown cell under the figure's code, and cited works are listed at the end;
* the first cell installs the exact qtheory version the book was built with, from the
  release ``v<version>`` of the repository named in ``_config.yml`` (``repository.url``):
  the wheel that .github/workflows/release.yml attaches to that release (``--ref`` picks
  another tag or a commit, installed from git).  It skips the installation when that version
  is already importable (a local checkout with ``pip install -e .``);
* values the book quotes in its text with MyST-NB's glue (``{glue:text}`name:.3f```,
  ``{glue}`name```, the ``{glue}`` directives) are written into the text, formatted as
  MyST-NB formats them, from the chapter's executed outputs: the book's execution cache
  (``_build/.jupyter_cache``, used only when it matches the chapter's code and the current
  qtheory sources, see ``scripts/cache_guard.py``), or a fresh execution with
  ``--execute``.  Without either, the text says "[value computed by the code above]";
* the hidden cells of the book (tag ``remove-cell``: the asserts that back the claims of
  the text, and the ``glue`` calls) are kept, with their input collapsed
  (``jupyter.source_hidden``): they may define names that later cells use, and dropping
  them would change what the notebook computes;
* the chapters import glue from qtheory (``from qtheory.book import glue``: MyST-NB's glue
  where it is installed, nothing otherwise) and read stored results through qtheory
  (``qtheory.book.stored``), so a notebook runs wherever it is opened; a chapter that still
  imports ``myst_nb`` itself gets a second cell that stands in for ``myst_nb.glue`` where
  MyST-NB is not installed (Colab, a plain JupyterLab).

Numbers (equations, figures, exercises, theorems) are those of the book: every part of
``_toc.yml`` is numbered, chapters are numbered on across the parts (``use_multitoc_numbering``),
and Sphinx counts each kind within its chapter ("Theorem 7.3", "(5.2)", "Figure 4.1",
"Exercise 4.2"; ``numfig_secnum_depth: 1``); all results (theorems, lemmas, definitions...)
share one counter (``prf_realtyp_to_countertyp``). A notebook's title carries its chapter's
number ("# 7. Stability").

Why this converter and not sphinx-tojupyter
-------------------------------------------
QuantEcon's ``sphinx-tojupyter`` (0.6.0, November 2025; it installs beside Sphinx 7.4.7
and the rest of ``requirements.txt``, adding nbdime, nbconvert, GitPython and
jupyter_server) writes notebooks from Sphinx's doctree, so MyST-NB, sphinx-proof,
sphinx-exercise and sphinxcontrib-bibtex resolve the markup first. It was evaluated on the
whole book (December 2026) through Jupyter Book's custom builder
(``--builder custom --custom-builder jupyter``, ``tojupyter_lang_synonyms: [ipython3]``,
with the configuration of the book without solutions, so that ``hide_solutions`` and
``course/_ext/hide_gated_solutions.py`` remove the solutions): 22 notebooks in about 70 s
from the execution cache. What it does well: glued values written in (by MyST-NB
itself), exercise, theorem and figure numbers and citations from Sphinx, links between
the notebooks. What it cannot do, measured against ``tests/test_course.py``:

* equation tags restart at (1) in every notebook (the per-document number) while the
  references in the same text carry the book's numbers ((40), ...): a student sees
  ``\tag{1}`` for the equation the text calls (40);
* the hidden cells of the book (``remove-cell``: asserts backing the prose, ``glue``
  calls) and the ``remove-input`` cells are dropped (MyST-NB removes them from the
  doctree), though later cells may use what they define; the ``from myst_nb import glue``
  line stays, so a notebook fails where MyST-NB is not installed (Colab);
* figure captions (cell metadata in the book) are dropped;
* titled exercises come out garbled ("##  (The exact identity from the tail
  sums)Exercise 65"), every proof starts "**Proof.** Proof.", and admonitions such as the
  learning goals become a second level-1 heading;
* no install cell, no answer cell after each exercise, no ``### Exercise n`` headings,
  and citations are links into a separate bibliography notebook rather than a list of
  the works cited in each notebook.

Each of these would need post-processing of tojupyter's Markdown, which ties the result to
the exact text of one tojupyter release, for what this converter already does. So the
converter stays; what tojupyter has and this converter could lose, Sphinx's numbers, is
checked instead: ``tests/test_course.py`` compares the exercise, theorem, figure and
equation numbers of every student notebook with those of the built HTML book.

Usage: ``python scripts/student_notebooks.py [--out DIR] [--ref REF] [--execute]
[CHAPTER.md ...]`` (default: every notebook chapter of ``_toc.yml``, written to
``_build/student-notebooks``; ``--execute`` runs the chapters that have no current cached
execution, to quote their values).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "_build" / "student-notebooks"

# ---------------------------------------------------------------------------------------
# MyST syntax
# ---------------------------------------------------------------------------------------
DIRECTIVE_OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|:{3,})\{(?P<name>[^}\s]+)\}"
                            r"[ \t]*(?P<arg>.*?)\s*$")
PLAIN_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})")
OPTION = re.compile(r"^:(?P<key>[\w-]+):[ \t]*(?P<value>.*)$")
ROLE = re.compile(r"\{(?P<role>[a-zA-Z][\w:+-]*)\}`(?P<content>[^`]*)`")
EQ_LABEL = re.compile(r"^(?P<head>.*)\$\$[ \t]*\((?P<label>[^)\s]+)\)\s*$")
TARGET = re.compile(r"^\((?P<label>[^)\s]+)\)=\s*$")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
COMMENT = re.compile(r"^%(?!%)")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)

ADMONITIONS = {"note", "tip", "hint", "important", "warning", "caution", "attention",
               "danger", "error", "seealso", "admonition"}
PROOF_KINDS = {"definition", "theorem", "lemma", "proposition", "corollary", "algorithm",
               "remark", "conjecture", "example", "property", "observation", "criterion",
               "assumption", "axiom", "notation"}


def counter_kind(kind: str) -> str:
    """The counter a kind of numbered thing uses: all results share the theorem's
    (``prf_realtyp_to_countertyp`` in ``_config.yml``)."""
    return "theorem" if kind in PROOF_KINDS else kind


def chapter_numbers() -> dict:
    """{page stem: its chapter number as text} for the numbered pages of ``_toc.yml``;
    a page nested under a chapter (``sections:``) has its chapter's number (figures,
    results and equations are counted per chapter: ``numfig_secnum_depth: 1``). A part
    with ``style: alphaupper`` (the appendices) is lettered A, B, ... and, with
    ``restart_numbering``, starts again at A, as sphinx-external-toc numbers it."""
    global _CHAPTER_NUMBERS
    if _CHAPTER_NUMBERS is None:
        toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
        out, n = {}, 0

        def nested(node, number):
            for sub in node.get("sections", []) or []:
                if "file" in sub:
                    out[Path(sub["file"]).stem] = number
                nested(sub, number)

        letters = 0
        for part in toc.get("parts", []):
            lettered = part.get("style") == "alphaupper"
            if lettered and part.get("restart_numbering"):
                letters = 0
            for ch in part.get("chapters", []):
                if part.get("numbered") and "file" in ch:
                    if lettered:
                        letters += 1
                        number = _alpha(letters)
                    else:
                        n += 1
                        number = str(n)
                    out[Path(ch["file"]).stem] = number
                    nested(ch, number)
        _CHAPTER_NUMBERS = out
    return _CHAPTER_NUMBERS


_CHAPTER_NUMBERS = None


def _alpha(n: int) -> str:
    """1 -> "A", 26 -> "Z", 27 -> "AA" (sphinx-external-toc's alphaupper)."""
    out = ""
    while n > 0:
        n, rem = divmod(n - 1, 26)
        out = chr(ord("A") + rem) + out
    return out


def format_number(prefix: str, n: int):
    """"7.3" in chapter 7, the bare count on an unnumbered page."""
    return f"{prefix}.{n}" if prefix else n


SOLUTION_MARK = "\x00ANSWER-CELL\x00"
GLUE_ROLES = {"glue", "glue:", "glue:any", "glue:text", "glue:md"}
GLUE_DIRECTIVES = {"glue", "glue:", "glue:any", "glue:figure", "glue:math", "glue:md"}
#: what the text says where the book quotes a value that no executed output gives here
GLUE_MISSING = "[value computed by the code above]"


@dataclass
class Directive:
    name: str
    arg: str
    options: dict
    body: list  # of str lines (raw, unparsed)


@dataclass
class Fence:
    lines: list  # a plain fenced code block, verbatim (fences included)


def _closes(stripped: str, fence: str) -> bool:
    """Whether a stripped line closes a fence opened by ``fence`` (same character, at
    least as long)."""
    return bool(stripped) and set(stripped) == {fence[0]} and len(stripped) >= len(fence)


def _closing_fence(lines: list, start: int, fence: str) -> int:
    """Index of the first line from ``start`` that closes ``fence`` (len(lines) if none)."""
    j = start
    while j < len(lines) and not _closes(lines[j].strip(), fence):
        j += 1
    return j


def parse_blocks(lines):
    """Split Markdown lines into plain lines, ``Fence`` and top-level ``Directive`` objects.

    Plain fenced code blocks (```python) are kept verbatim and never parsed inside.
    """
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = DIRECTIVE_OPEN.match(line)
        if m:
            fence = m["fence"]
            j = i + 1
            options = {}
            if j < len(lines) and lines[j].strip() == "---":  # YAML options block
                k = j + 1
                while k < len(lines) and lines[k].strip() != "---":
                    k += 1
                options = yaml.safe_load("\n".join(lines[j + 1:k])) or {}
                j = k + 1
            else:
                while j < len(lines) and OPTION.match(lines[j]):
                    om = OPTION.match(lines[j])
                    options[om["key"]] = om["value"]
                    j += 1
            body_start = j
            depth = 0
            while j < len(lines):
                s = lines[j].strip()
                inner = DIRECTIVE_OPEN.match(lines[j])
                if inner and inner["fence"][0] == fence[0] and len(inner["fence"]) == len(fence):
                    depth += 1
                elif _closes(s, fence):
                    if depth == 0:
                        break
                    depth -= 1
                j += 1
            else:
                raise ValueError(f"unclosed directive {{{m['name']}}}: {line!r}")
            out.append(Directive(m["name"], m["arg"], options, lines[body_start:j]))
            i = j + 1
            continue
        m = PLAIN_FENCE.match(line)
        if m:
            fence = m["fence"]
            j = _closing_fence(lines, i + 1, fence)
            out.append(Fence(lines[i:j + 1]))
            i = j + 1
            continue
        out.append(line)
        i += 1
    return out


# ---------------------------------------------------------------------------------------
# Labels: what every {eq}, {numref}, {ref}, {prf:ref} points to
# ---------------------------------------------------------------------------------------
@dataclass
class Target:
    kind: str          # "equation", "figure", "exercise", "section" or a proof kind
    number: int | None
    title: str
    chapter: str       # stem of the chapter file
    chapter_title: str


@dataclass
class Chapter:
    path: Path
    title: str = ""
    counters: dict = field(default_factory=dict)
    prefix: str = ""  # the chapter's number, "" on an unnumbered page

    def next(self, kind):
        key = counter_kind(kind)
        self.counters[key] = self.counters.get(key, 0) + 1
        return format_number(self.prefix, self.counters[key])


def _walk_directives(lines):
    for item in parse_blocks(lines):
        if isinstance(item, Directive):
            yield item
            yield from _walk_directives(item.body)


def _text_lines(lines):
    """Markdown text lines outside code fences, directive bodies included, in order."""
    for item in parse_blocks(lines):
        if isinstance(item, Directive):
            yield from _text_lines(item.body)
        elif isinstance(item, str):
            yield item


def collect_targets(path: Path, nb, counters: dict | None = None) -> dict:
    """Number the labelled things of one chapter, per kind, in document order.

    Like the book, numbers are counted within the chapter and carry its number ("7.3");
    pass the same ``counters`` dict for pages that share a chapter number (a chapter and
    its nested pages), in table-of-contents order.
    """
    ch = Chapter(path, counters=counters if counters is not None else {},
                 prefix=chapter_numbers().get(Path(path).stem, ""))
    found = []  # (label or None, kind, title) in document order within each kind
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = cell.source.splitlines()
            if not ch.title:
                for line in lines:
                    h = re.match(r"^#\s+(.+)$", line)
                    if h:
                        ch.title = h[1].strip()
                        break
            text = list(_text_lines(lines))
            for k, line in enumerate(text):
                t = TARGET.match(line)
                if t:
                    title = next((HEADING.match(x)["title"] for x in text[k + 1:]
                                  if HEADING.match(x)), t["label"])
                    found.append((t["label"], "section", title))
                e = EQ_LABEL.match(line)
                if e:
                    found.append((e["label"], "equation", ""))
            for d in _walk_directives(lines):
                label = d.options.get("label") or d.options.get("name")
                kind = d.name.split(":", 1)[-1]
                if d.name == "exercise":
                    found.append((label, "exercise", d.arg))
                elif d.name.startswith("prf:") and kind in PROOF_KINDS:
                    found.append((label, kind, d.arg))
                elif d.name == "math" and label:
                    found.append((label, "equation", ""))
                elif d.name in ("figure", "glue:figure") and label:
                    found.append((label, "figure", ""))
        elif cell.cell_type == "code":
            fig = (cell.metadata.get("mystnb", {}) or {}).get("figure")
            if fig and fig.get("name"):
                found.append((fig["name"], "figure", fig.get("caption", "")))
    out = {}
    for label, kind, title in found:
        number = None if kind == "section" else ch.next(kind)
        if label:
            if label in out:
                raise ValueError(f"{path.name}: label {label!r} defined twice")
            out[label] = Target(kind, number, title, path.stem, ch.title)
    return out


def _read_page(path: Path):
    """A page as a notebook: a MyST notebook through jupytext, a plain MyST page (an
    appendix of statements and proofs, no code) as one Markdown cell."""
    from myst_nb.core.read import is_myst_markdown_notebook

    text = Path(path).read_text(encoding="utf-8")
    if is_myst_markdown_notebook(text):
        return jupytext.read(path)
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])


def collect_all(paths):
    """Label table of the pages ``paths`` (in table-of-contents order; plain pages too,
    since Sphinx numbers their statements), and for each page the counts per kind of the
    pages before it that share its chapter number (none on a page of its own)."""
    table, starts, per_chapter = {}, {}, {}
    numbers = chapter_numbers()
    for path in paths:
        nb = _read_page(path)
        prefix = numbers.get(path.stem, "")
        # unnumbered pages (the root) count on among themselves, as Sphinx does
        counters = per_chapter.setdefault(prefix, {})
        starts[path.stem] = dict(counters)
        found = collect_targets(path, nb, counters)
        dup = set(found) & set(table)
        if dup:
            raise ValueError(f"labels defined twice: {sorted(dup)}")
        table.update(found)
    return table, starts


# ---------------------------------------------------------------------------------------
# Citations
# ---------------------------------------------------------------------------------------
class Bibliography:
    def __init__(self, bibfile: Path):
        from pybtex.database import parse_file

        self.db = parse_file(str(bibfile))
        self.cited = []

    def _names(self, key):
        entry = self.db.entries[key]
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        last = [" ".join(p.last_names).replace("{", "").replace("}", "") for p in people]
        if len(last) == 1:
            who = last[0]
        elif len(last) == 2:
            who = f"{last[0]} and {last[1]}"
        else:
            who = f"{last[0]} et al."
        return who, entry.fields.get("year", "n.d.")

    def cite(self, keys, textual):
        parts = []
        for key in keys:
            if key not in self.db.entries:
                raise KeyError(f"unknown citation key {key!r}")
            if key not in self.cited:
                self.cited.append(key)
            who, year = self._names(key)
            parts.append(f"{who} ({year})" if textual else f"{who}, {year}")
        return "; ".join(parts) if textual else "(" + "; ".join(parts) + ")"

    def entry(self, key):
        e = self.db.entries[key]
        people = e.persons.get("author") or e.persons.get("editor") or []
        names = ", ".join(" ".join(p.first_names + p.middle_names + p.last_names)
                          for p in people)
        f = {k: v.replace("{", "").replace("}", "").replace("--", "\u2013")
             for k, v in e.fields.items()}
        where = f.get("journal") or f.get("booktitle") or f.get("publisher") or \
            f.get("school") or f.get("institution") or ""
        extra = ", ".join(x for x in (f.get("volume", ""), f.get("pages", "")) if x)
        text = f"{names.replace('{', '').replace('}', '')} ({f.get('year', 'n.d.')}). " \
               f"{f.get('title', '')}."
        if where:
            text += f" *{where}*" + (f", {extra}" if extra else "") + "."
        if f.get("doi"):
            text += f" https://doi.org/{f['doi']}"
        return text


# ---------------------------------------------------------------------------------------
# Conversion of Markdown text
# ---------------------------------------------------------------------------------------
class Converter:
    def __init__(self, chapter: str, targets: dict, bib: Bibliography, start=None,
                 glue: dict | None = None):
        self.chapter = chapter
        self.targets = targets
        self.bib = bib
        self.counters = dict(start or {})  # numbers used before, within this chapter
        self.prefix = chapter_numbers().get(chapter, "")  # "7" in chapter 7
        self.glue = glue or {}  # {name: mime bundle} from the executed chapter
        self.glue_missing = []  # names quoted in the text without a value here

    def _glue_data(self, key):
        """The mime bundle glued under ``key`` in this chapter, or None."""
        if "::" in key:  # glued in another document: not looked up
            return None
        if key not in self.glue:
            self.glue_missing.append(key)
            return None
        return self.glue[key]

    def glue_role(self, role, content):
        """Text of a glue role: the value formatted as MyST-NB formats it."""
        from myst_nb.core.variables import format_plain_text

        if role == "glue:text":
            key_fmt = content.strip().rsplit(":", 1)
            key, fmt = (key_fmt[0], key_fmt[1]) if len(key_fmt) == 2 and \
                not key_fmt[0].endswith(":") else (content.strip(), "s")
        else:
            key, fmt = content.strip(), ""
        data = self._glue_data(key)
        if data is None:
            return GLUE_MISSING
        if role == "glue:md" or (role != "glue:text" and "text/markdown" in data):
            if "text/markdown" in data:
                return str(data["text/markdown"]).strip()
        if role != "glue:text" and "text/latex" in data:
            return str(data["text/latex"]).strip()
        if "text/plain" not in data:
            return GLUE_MISSING
        return format_plain_text(str(data["text/plain"]), fmt)

    def glue_directive(self, d: Directive):
        """Lines for a ``{glue}``, ``{glue:figure}``, ``{glue:math}`` or ``{glue:md}``
        directive: the glued value as Markdown (text, math, an embedded PNG)."""
        key = d.arg.strip()
        data = self._glue_data(key)
        kind = d.name.split(":", 1)[-1]
        if data is None:
            body = [f"*{GLUE_MISSING}*"]
        elif kind == "math" and ("text/latex" in data or "text/plain" in data):
            tex = str(data.get("text/latex") or data["text/plain"]).strip().strip("$")
            body = ["$$", tex, "$$"]
        elif "image/png" in data:
            png = "".join(str(data["image/png"]).split())
            body = [f"![{key}](data:image/png;base64,{png})"]
        elif "text/markdown" in data:
            body = [str(data["text/markdown"]).strip()]
        elif "text/plain" in data:
            from myst_nb.core.variables import format_plain_text

            body = ["```", format_plain_text(str(data["text/plain"]), ""), "```"]
        else:
            body = [f"*{GLUE_MISSING}*"]
        caption = " ".join(self.render(d.body)).strip() if kind == "figure" else ""
        label = d.options.get("name") or d.options.get("label")
        if kind == "figure" and label:
            caption = f"**Figure {self._target(label).number}.** {caption}".strip()
        elif caption:
            caption = f"*{caption}*"
        return ["", *body, "", caption, ""]

    def _count(self, kind, label):
        """Number of this exercise or statement; checked against the label table."""
        key = counter_kind(kind)
        self.counters[key] = self.counters.get(key, 0) + 1
        number = format_number(self.prefix, self.counters[key])
        if label and self._target(label).number != number:
            raise AssertionError(f"{self.chapter}: {label} numbered {number}, "
                                 f"expected {self._target(label).number}")
        return number

    def _target(self, label):
        if label not in self.targets:
            raise KeyError(f"{self.chapter}: unknown label {label!r}")
        return self.targets[label]

    def _where(self, t):
        return "" if t.chapter == self.chapter else f" in the chapter *{t.chapter_title}*"

    def _name(self, t):
        if t.kind == "section":
            return f"the section *{t.title}*" + self._where(t)
        if t.kind == "equation":
            return f"equation ({t.number})" + self._where(t)
        return f"{t.kind.capitalize()} {t.number}" + self._where(t)

    def role(self, m):
        role, content = m["role"], m["content"]
        explicit = EXPLICIT.match(content)
        text, label = (explicit["text"], explicit["target"].strip()) if explicit \
            else (None, content.strip())
        if role == "eq":
            t = self._target(label)
            return f"({t.number})" + self._where(t)
        if role == "numref":
            t = self._target(label)
            if text:
                return text.replace("%s", str(t.number)).replace("{number}", str(t.number))
            return self._name(t)
        if role in ("ref", "prf:ref"):
            if text:
                return text
            t = self._target(label)
            if t.kind == "section":
                return f"*{t.title}*" + self._where(t)
            before = m.string[:m.start()]
            if t.kind == "exercise" and before.rstrip().lower().endswith("exercise"):
                return str(t.number) + self._where(t)
            return self._name(t)
        if role.startswith("cite"):
            keys = [k.strip() for k in content.split(",") if k.strip()]
            return self.bib.cite(keys, textual=role in ("cite:t", "cite:ts", "cite:author"))
        if role in GLUE_ROLES:
            return self.glue_role(role, content)
        if role == "math":
            return f"${content}$"
        if role in ("doc", "download", "term", "abbr", "sub", "sup"):
            return text or content
        return text or content

    def inline(self, text):
        return ROLE.sub(self.role, text)

    def render(self, lines):
        """Convert a list of MyST Markdown lines to plain Markdown lines."""
        out = []
        for item in parse_blocks(lines):
            if isinstance(item, Directive):
                out.extend(self.directive(item))
            elif isinstance(item, Fence):
                out.extend(item.lines)
            elif TARGET.match(item) or COMMENT.match(item):
                continue
            else:
                e = EQ_LABEL.match(item)
                if e:
                    t = self._target(e["label"])
                    head = e["head"].rstrip()
                    if head:
                        out.append(self.inline(head))
                    out.append(f"\\tag{{{t.number}}}")
                    out.append("$$")
                else:
                    out.append(self.inline(item))
        return out

    def _blockquote(self, title, body):
        rendered = self.render(body)
        while rendered and not rendered[0].strip():
            rendered.pop(0)
        lines = [f"**{title}**", ""] + rendered
        while lines and not lines[-1].strip():
            lines.pop()
        return ["> " + x if x.strip() else ">" for x in lines]

    def directive(self, d: Directive):
        name = d.name
        kind = name.split(":", 1)[-1]
        if name in ("solution", "solution-start", "solution-end"):
            raise ValueError(f"{self.chapter}: stray {{{name}}} (solutions are removed "
                             "before conversion)")
        if name == "exercise":
            number = self._count("exercise", d.options.get("label"))
            title = f" ({self.inline(d.arg)})" if d.arg else ""
            body = self.render(d.body)
            return ["", f"### Exercise {number}{title}", "", *body, "", SOLUTION_MARK, ""]
        if name.startswith("prf:"):
            if kind == "proof":
                body = self.render(d.body)
                while body and not body[-1].strip():
                    body.pop()
                return ["", "*Proof.*", "", *body, "", "$\\blacksquare$", ""]
            number = self._count(kind, d.options.get("label"))
            title = f" ({self.inline(d.arg)})" if d.arg else ""
            head = f"{kind.capitalize()} {number}{title}.".replace("  ", " ")
            return ["", *self._blockquote(head, d.body), ""]
        if name in ADMONITIONS:
            title = self.inline(d.arg) if d.arg else name.capitalize()
            return ["", *self._blockquote(title, d.body), ""]
        if name == "math":
            label = d.options.get("label")
            tag = [f"\\tag{{{self._target(label).number}}}"] if label else []
            return ["", "$$", *d.body, *tag, "$$", ""]
        if name in ("code", "code-block", "sourcecode"):
            return ["", f"```{d.arg}", *d.body, "```", ""]
        if name in GLUE_DIRECTIVES:
            return self.glue_directive(d)
        if name in ("bibliography", "tableofcontents"):
            return []
        if name in ("figure", "image"):
            caption = " ".join(self.render(d.body)).strip()
            alt = d.options.get("alt", caption or "figure")
            return ["", f"![{alt}]({d.arg})", "", f"*{caption}*" if caption else "", ""]
        if name == "epigraph" or name == "margin" or name == "sidebar" or name == "dropdown":
            return ["", *self._blockquote(self.inline(d.arg) or name.capitalize(), d.body), ""]
        print(f"[student-notebooks] {self.chapter}: unknown directive {{{name}}} rendered as a "
              "quoted block", file=sys.stderr)
        return ["", *self._blockquote(f"{name.capitalize()} {self.inline(d.arg)}".strip(),
                                      d.body), ""]


# ---------------------------------------------------------------------------------------
# Notebook level
# ---------------------------------------------------------------------------------------
def strip_solutions(cells, chapter):
    """Drop solutions: text and code between solution-start and solution-end fences."""
    out = []
    inside = False
    for cell in cells:
        if cell.cell_type != "markdown":
            if not inside:
                out.append(cell)
            continue
        kept = []
        lines = cell.source.splitlines()
        i = 0
        while i < len(lines):
            m = DIRECTIVE_OPEN.match(lines[i])
            name = m["name"] if m else None
            if m and name in ("solution-start", "solution-end", "solution"):
                j = _closing_fence(lines, i + 1, m["fence"])
                if name == "solution-start":
                    if inside:
                        raise ValueError(f"{chapter}: nested solution-start")
                    inside = True
                elif name == "solution-end":
                    if not inside:
                        raise ValueError(f"{chapter}: solution-end without solution-start")
                    inside = False
                i = j + 1
                continue
            if not inside:
                kept.append(lines[i])
            i += 1
        text = "\n".join(kept).strip("\n")
        if text.strip():
            cell.source = text
            out.append(cell)
    if inside:
        raise ValueError(f"{chapter}: solution-start without solution-end")
    return out


def install_spec(version: str, url: str, ref: str, extras: str = "") -> str:
    """What a notebook's first cell installs: the wheel attached to the GitHub release
    ``v<version>`` (made by .github/workflows/release.yml from this version), or, for
    another ``--ref``, the repository at that git ref."""
    url = url.rstrip("/")
    if ref == f"v{version}":
        return (f"qtheory{extras} @ {url}/releases/download/v{version}/"
                f"qtheory-{version}-py3-none-any.whl")
    return f"qtheory{extras} @ git+{url}@{ref}"


def install_cell(version: str, url: str, ref: str):
    spec = install_spec(version, url, ref, "[widgets]")
    source = (
        f"# Installs qtheory {version}, the version this notebook was made with (from\n"
        f"# {url}, release {ref}). Skipped when qtheory {version} is already installed.\n"
        "import importlib.metadata\n"
        "\n"
        "try:\n"
        "    _installed = importlib.metadata.version(\"qtheory\")\n"
        "except importlib.metadata.PackageNotFoundError:\n"
        "    _installed = None\n"
        f"if _installed != \"{version}\":\n"
        f"    %pip install --quiet \"{spec}\"\n"
    )
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["install"]})


GLUE_FALLBACK = (
    "# The book quotes values computed here in its text with MyST-NB's glue(); this\n"
    "# notebook has them in its text already. Where MyST-NB is not installed (Colab, a\n"
    "# plain JupyterLab), this stand-in lets `from myst_nb import glue` work.\n"
    "try:\n"
    "    import myst_nb\n"
    "except ImportError:\n"
    "    import sys\n"
    "    import types\n"
    "\n"
    "    def _glue(name, variable, display=True):\n"
    "        \"\"\"Show ``variable`` if ``display`` (as myst_nb.glue does).\"\"\"\n"
    "        if display:\n"
    "            from IPython.display import display as _display\n"
    "            _display(variable)\n"
    "\n"
    "    sys.modules[\"myst_nb\"] = types.ModuleType(\"myst_nb\")\n"
    "    sys.modules[\"myst_nb\"].glue = _glue\n"
)


def glue_fallback_cell():
    return nbformat.v4.new_code_cell(GLUE_FALLBACK, metadata={"tags": ["glue-fallback"]})


def _md_config():
    """MyST parser configuration of the book (``parse.myst_enable_extensions``)."""
    from myst_parser.config.main import MdParserConfig

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    exts = cfg.get("parse", {}).get("myst_enable_extensions", [])
    return MdParserConfig(enable_extensions=set(exts))


def read_as_book(path: Path):
    """The chapter as the book build reads it (MyST-NB's reader): the notebook whose
    executions jupyter-cache stores."""
    from myst_nb.core.read import read_myst_markdown_notebook

    return read_myst_markdown_notebook(path.read_text(), _md_config(), path=str(path))


def _cache_guard():
    import importlib.util

    spec = importlib.util.spec_from_file_location("cache_guard",
                                                  ROOT / "scripts" / "cache_guard.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cached_execution(path: Path, cache_dir: Path | None = None):
    """The chapter with the outputs of its execution in the book's execution cache, or
    None: no cache, a cache made with other qtheory sources (its fingerprint, see
    ``scripts/cache_guard.py``, differs; the cache is only read here, never wiped), or no
    execution of the chapter's current code."""
    guard = _cache_guard()
    cache_dir = Path(cache_dir) if cache_dir else guard.CACHE
    if not cache_dir.is_dir():
        return None
    if cache_dir == guard.CACHE:
        stamp = guard.STAMP.read_text().strip() if guard.STAMP.exists() else None
        if stamp != guard.fingerprint():
            return None
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(str(cache_dir)).merge_match_into_notebook(read_as_book(path))
    except KeyError:
        return None
    return merged


def install_nbclient_poll():
    """The build's guard against nbclient's lost wake-ups (``book/_ext/nbclient_poll.py``:
    after a cell with widgets, a client can otherwise sleep until the cell timeout)."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import nbclient_poll
    finally:
        sys.path.pop(0)
    nbclient_poll.install()


def execute_chapter(path: Path, timeout: int = 600):
    """Execute the chapter in a fresh kernel from its folder (qtheory from this checkout);
    return the executed notebook."""
    from nbclient import NotebookClient

    install_nbclient_poll()
    nb = read_as_book(path)
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env_path]))
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        os.environ["PYTHONPATH"] = env_path
    return nb


def glue_values(nb) -> dict:
    """{name: mime bundle} of every value glued in an executed notebook (MyST-NB's
    ``glue`` writes a display output with ``metadata.scrapbook``; for ``display=False``
    its mime types carry a prefix, removed here)."""
    out = {}
    if nb is None:
        return out
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            meta = (output.get("metadata") or {}).get("scrapbook")
            if not meta or "name" not in meta:
                continue
            n = len(meta.get("mime_prefix", ""))
            out[meta["name"]] = {k[n:]: v for k, v in output.get("data", {}).items()}
    return out


def _clean_markdown(lines):
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n")


def convert(path: Path, targets: dict, bib: Bibliography, version: str, url: str, ref: str,
            start: dict | None = None, executed=None):
    """One student notebook; ``start``: counts per kind of the chapters before it;
    ``executed``: the chapter executed (a notebook with outputs), for the glued values.

    Names quoted with glue that the executed notebook does not give are listed in the
    notebook's metadata (``qtheory.glue_missing``)."""
    nb = jupytext.read(path)
    chapter = path.stem
    conv = Converter(chapter, targets, bib, start, glue=glue_values(executed))
    cells = [install_cell(version, url, ref)]
    if any(c.cell_type == "code" and re.search(r"^\s*(from|import)\s+myst_nb\b", c.source,
                                               re.M) for c in nb.cells):
        cells.append(glue_fallback_cell())
    for cell in strip_solutions(nb.cells, chapter):
        if cell.cell_type == "markdown":
            text = _clean_markdown(conv.render(cell.source.splitlines()))
            for k, part in enumerate(text.split(SOLUTION_MARK)):
                if k > 0:
                    cells.append(nbformat.v4.new_code_cell(
                        "# Your answer\n", metadata={"tags": ["answer"]}))
                part = part.strip("\n")
                if part.strip():
                    cells.append(nbformat.v4.new_markdown_cell(part))
        elif cell.cell_type == "code":
            meta = {k: v for k, v in cell.metadata.items() if k in ("tags",)}
            tags = meta.get("tags", [])
            if {"remove-cell", "remove-input"} & set(tags):
                # hidden in the book (checks of the text, glue): kept, input collapsed
                meta["jupyter"] = {"source_hidden": True}
            cells.append(nbformat.v4.new_code_cell(cell.source, metadata=meta))
            fig = (cell.metadata.get("mystnb", {}) or {}).get("figure")
            if fig and fig.get("name"):
                t = targets[fig["name"]]
                caption = " ".join(conv.inline(fig.get("caption", "")).split())
                cells.append(nbformat.v4.new_markdown_cell(
                    f"**Figure {t.number}.** {caption}"))
        else:
            cells.append(nbformat.v4.new_raw_cell(cell.source))
    if conv.prefix:  # the title carries the chapter's number, as in the book
        for c in cells:
            if c.cell_type == "markdown" and re.search(r"^# ", c.source, re.M):
                c.source = re.sub(r"^# (.+)$", rf"# {conv.prefix}. \1", c.source, count=1,
                                  flags=re.M)
                break
    if bib.cited:
        entries = [f"- {bib.entry(k)}" for k in bib.cited]
        cells.append(nbformat.v4.new_markdown_cell("## References\n\n" + "\n".join(entries)))
    out = nbformat.v4.new_notebook(cells=cells)
    out.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "qtheory": {"version": version, "source": f"book/{path.name}", "ref": ref,
                    "glue_missing": sorted(set(conv.glue_missing))},
    }
    nbformat.validate(out)
    return out


def toc_chapters():
    """The pages of ``_toc.yml`` that are MyST notebooks, in order."""
    from myst_nb.core.read import is_myst_markdown_notebook

    return [p for p in toc_pages() if is_myst_markdown_notebook(p.read_text())]


def toc_pages():
    """Every page of ``_toc.yml`` that exists as a ``.md`` file, in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())

    def files(node):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for v in node.values():
                yield from files(v)
        elif isinstance(node, list):
            for v in node:
                yield from files(v)

    out = []
    for f in [toc["root"], *files(toc.get("parts", toc.get("chapters", [])))]:
        p = ROOT / (f if f.endswith(".md") else f + ".md")
        if p.exists():
            out.append(p)
    return out


def qtheory_version():
    text = (ROOT / "qtheory" / "__init__.py").read_text()
    return re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)[1]


def repository_url():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    return cfg["repository"]["url"]


def build(out_dir: Path = DEFAULT_OUT, ref: str | None = None, chapters=None,
          execute: bool = False, cache_dir: Path | None = None):
    """Write the student notebooks; return the list of paths written.

    Glued values come from the book's execution cache (``cache_dir``, default the
    book's); with ``execute``, a chapter without a current cached execution is executed
    here."""
    version = qtheory_version()
    url = repository_url()
    ref = ref or f"v{version}"
    all_chapters = toc_chapters()
    all_pages = toc_pages()
    chapters = [Path(c).resolve() for c in chapters] if chapters else all_chapters
    targets, starts = collect_all(all_pages + [c for c in chapters if c not in all_pages])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in chapters:
        bib = Bibliography(ROOT / "book" / "references.bib")
        executed = cached_execution(path, cache_dir)
        if executed is None and execute:
            print(f"[student-notebooks] executing {path.name} for its glued values",
                  file=sys.stderr)
            executed = execute_chapter(path)
        nb = convert(path, targets, bib, version, url, ref, starts[path.stem], executed)
        missing = nb.metadata["qtheory"]["glue_missing"]
        if missing:
            print(f"[student-notebooks] {path.name}: no executed output for the glued "
                  f"values {', '.join(missing)}: the text says {GLUE_MISSING!r} "
                  "(build the book first, or pass --execute)", file=sys.stderr)
        dest = out_dir / (path.stem + ".ipynb")
        nbformat.write(nb, dest)
        written.append(dest)
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapters", nargs="*", help="chapter .md files (default: all in _toc.yml)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output folder")
    ap.add_argument("--ref", default=None,
                    help="git tag or commit to install qtheory from (default v<version>)")
    ap.add_argument("--execute", action="store_true",
                    help="execute chapters that have no current cached execution, to "
                         "quote their glued values")
    args = ap.parse_args(argv)
    written = build(Path(args.out), args.ref, args.chapters or None, execute=args.execute)
    for p in written:
        shown = p.relative_to(Path.cwd()) if p.is_relative_to(Path.cwd()) else p
        print(f"[student-notebooks] wrote {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
