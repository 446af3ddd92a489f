"""The book's two layers (issue 31): a main text a student learns from, the evidence behind it.

The main text is every page of the parts of ``_toc.yml`` whose caption starts with "Part".
From the sources (no build needed):

* every main chapter has at most 700 source lines and the main text at most 8,500;
* every main chapter ends with a section "Summary" followed by "Exercises";
* the parts that are not main text (the evidence, the appendices) have captions that do not
  start with "Part", and the evidence part exists;
* no visible code cell of the main text calls ``glue(...)`` or asserts something: both
  belong in cells tagged ``remove-cell`` (the build still runs them);
* no result, equation or figure is numbered by hand in the prose ("Lemma 16"): numbers come
  from Sphinx through ``{prf:ref}``, ``{eq}`` and ``{numref}``, so that they say where to
  look once the chapters are numbered.

From the built book (skipped without a fresh build, mandatory in CI): the rendered main text
shows no build provenance (commit hashes, paths under bench/, tests/ or book/data/, "stored
by", "this build"), no timings and no raw result reprs.

Each check has a planted defect that it catches.
"""

from __future__ import annotations

import re

import pytest
import yaml

from built_book import HTML, ROOT, require_build

MAX_CHAPTER = 700
MAX_MAIN = 8500


def parts() -> list[tuple[str, list[str]]]:
    """``(caption, [docname, ...])`` for every part of the table of contents."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())

    def files(node):
        for item in node or []:
            yield item["file"]
            yield from files(item.get("sections"))

    return [(p["caption"], list(files(p.get("chapters")))) for p in toc["parts"]]


def main_docnames() -> list[str]:
    return [d for caption, docs in parts() if caption.startswith("Part") for d in docs]


def _source(doc: str) -> str:
    return (ROOT / f"{doc}.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------
# the sources
# --------------------------------------------------------------------------------------
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```\s*$", re.M | re.S)
HIDDEN_TAGS = ("remove-cell", "remove-input")


def visible_cells(text: str) -> list[str]:
    """The code of every cell whose input the reader sees (not ``remove-cell`` or
    ``remove-input``), without its option lines."""
    out = []
    for m in CELL.finditer(text):
        body = m["body"]
        head, _, code = body.partition("\n---\n") if body.startswith("---\n") else ("", "", body)
        options = head + "\n" + "\n".join(ln for ln in code.splitlines()
                                         if ln.startswith(":"))
        if any(tag in options for tag in HIDDEN_TAGS):
            continue
        out.append("\n".join(ln for ln in code.splitlines() if not ln.startswith(":")))
    return out


def build_calls(text: str) -> list[str]:
    """Lines of visible cells that talk to the build: glue calls and asserts."""
    bad = []
    for code in visible_cells(text):
        for line in code.splitlines():
            stripped = line.strip()
            if re.match(r"(glue|myst_nb\.glue|qb\.glue)\(", stripped) or \
                    re.match(r"assert\b", stripped):
                bad.append(stripped[:80])
    return bad


PROSE_NUMBER = re.compile(r"\b(Theorem|Lemma|Proposition|Corollary|Definition|Conjecture|"
                          r"Exercise|Figure|Equation|Fig\.|Eq\.)\s+\(?\d+\b(?![.\d])")


def hand_numbers(text: str) -> list[str]:
    """The book's own results numbered by hand in the prose, in the book-wide style the
    readers met ("Lemma 16"). A place in a cited source is not ours: a number right after
    a citation ("{cite:t}`horn2013matrix`, Theorem 8") or after "their" is skipped, and so
    are code cells."""
    prose = CELL.sub("", text)
    bad = []
    for m in PROSE_NUMBER.finditer(prose):
        before = prose[max(0, m.start() - 60):m.start()]
        if "{cite" in before or re.search(r"\b[Tt]heir\s*$", before):
            continue
        bad.append(m[0])
    return bad


def sections(text: str) -> list[str]:
    prose = CELL.sub("", text)
    return [m[1].strip() for m in re.finditer(r"^## (.+)$", prose, re.M)]


def test_the_toc_has_main_parts_and_an_evidence_part():
    captions = [c for c, _ in parts()]
    assert sum(c.startswith("Part") for c in captions) >= 5, captions
    assert "Evidence" in captions, captions
    main_end = max(i for i, c in enumerate(captions) if c.startswith("Part"))
    assert captions.index("Evidence") > main_end, captions


def test_main_chapters_fit_their_budget():
    lengths = {d: len(_source(d).splitlines()) for d in main_docnames()}
    over = {d: n for d, n in lengths.items() if n > MAX_CHAPTER}
    assert not over, f"main chapters over {MAX_CHAPTER} source lines: {over}"
    total = sum(lengths.values())
    assert total <= MAX_MAIN, f"the main text has {total} source lines (at most {MAX_MAIN})"


@pytest.mark.parametrize("doc", main_docnames())
def test_main_chapter_ends_with_summary_then_exercises(doc):
    if doc.endswith("/index"):
        pytest.skip("the landing page is not a chapter")
    names = sections(_source(doc))
    assert names[-2:] == ["Summary", "Exercises"], (doc, names[-3:])


@pytest.mark.parametrize("doc", main_docnames())
def test_no_build_calls_in_visible_cells(doc):
    bad = build_calls(_source(doc))
    assert not bad, f"{doc}: glue calls or asserts in cells the reader sees: {bad[:5]}"


@pytest.mark.parametrize("doc", main_docnames())
def test_no_hand_numbered_results(doc):
    bad = hand_numbers(_source(doc))
    assert not bad, f"{doc}: numbered by hand (use prf:ref, eq, numref): {bad[:5]}"


# --------------------------------------------------------------------------------------
# the rendered main text
# --------------------------------------------------------------------------------------
PROVENANCE = [
    (re.compile(r"\b(?:commit|Commit)\s+[0-9a-f]{7,40}\b"), "a commit hash"),
    (re.compile(r"\b[0-9a-f]{40}\b"), "a commit hash"),
    (re.compile(r"(?<![\w.])(?:bench|tests)/[\w./-]+"), "a path under bench/ or tests/"),
    (re.compile(r"(?:book/)?data/[\w-]+\.json"), "a stored data file"),
    (re.compile(r"\bstored by\b", re.I), "'stored by'"),
    (re.compile(r"\bthis build\b", re.I), "'this build'"),
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:seconds|milliseconds|ms)\b"), "a timing"),
    (re.compile(r"\bevents? (?:per second|/\s*s)\b"), "a timing"),
    (re.compile(r"\b(?:SimulationResult|RunPlan|ExactResult|FiniteNMean|RateConstants|"
                r"DesignPoint|SweepResult|RateWitness)\(\w+="), "a raw result repr"),
]


def provenance(text: str) -> list[str]:
    found = []
    for pattern, what in PROVENANCE:
        found += [f"{what}: {m[0]!r}" for m in pattern.finditer(text)]
    return found


def page_text(html: str) -> str:
    """The visible text of a page's article (scripts, styles and the navigation out)."""
    main = html.split('<main', 1)[-1].split('</main>', 1)[0]
    main = re.sub(r"<(script|style)\b.*?</\1>", " ", main, flags=re.S)
    main = re.sub(r'<div class="header-article.*?</div>\s*</div>\s*</div>', " ", main,
                  flags=re.S)
    text = re.sub(r"<[^>]+>", " ", main)
    from html import unescape

    return re.sub(r"\s+", " ", unescape(text))


@pytest.mark.parametrize("doc", main_docnames())
def test_rendered_main_text_shows_no_provenance(doc):
    require_build()
    found = provenance(page_text((HTML / f"{doc}.html").read_text(encoding="utf-8")))
    assert not found, f"{doc}.html shows build provenance: {found[:6]}"


# --------------------------------------------------------------------------------------
# planted defects
# --------------------------------------------------------------------------------------
def test_planted_defects_are_caught():
    chapter = ("# T\n\n```{code-cell} ipython3\nx = 1\nglue('k', x, display=False)\n```\n\n"
               "```{code-cell} ipython3\n:tags: [remove-cell]\nassert x == 1\n"
               "glue('j', x)\n```\n\n"
               "```{code-cell} ipython3\n---\ntags: [remove-input]\n---\nassert x\n```\n\n"
               "```{code-cell} ipython3\nassert x == 1, 'the text promises'\n```\n\n"
               "By Lemma 16 and {prf:ref}`a`.\n\n"
               "As {cite:t}`x` show in Theorem 3, and their Lemma 2, Theorem 3.2.\n\n"
               "## Exercises\n")
    assert build_calls(chapter) == ["glue('k', x, display=False)",
                                    "assert x == 1, 'the text promises'"]
    assert hand_numbers(chapter) == ["Lemma 16"]
    assert sections(chapter) == ["Exercises"]
    shown = ("stored by commit 27f0615 in bench/reproduce_large.py, data/coverage.json; "
             "this build: 1.2e9 events in 24.1 seconds; SimulationResult(n_stations=10)")
    kinds = {f.split(":")[0] for f in provenance(shown)}
    assert kinds == {"a commit hash", "a path under bench/ or tests/", "a stored data file",
                     "'stored by'", "'this build'", "a timing", "a raw result repr"}, kinds
    clean = "The mean queue is 4.01 with a 95% interval; s_1 is 0.89 after 300 time units."
    assert provenance(clean) == []
