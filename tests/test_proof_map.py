"""The proof map and the proof-status convention (book/_ext/proof_map.py).

Every check runs on the real book (it must pass) and on small synthetic pages that plant
one defect each (the check must report it) next to the same page without the defect (the
check must pass), so that no check passes whatever it reads. The extension that draws the
page (book/_ext/qtheory_proof_map.py) is exercised by a small Sphinx build (when Graphviz's
``dot`` is installed), and the built page of the book is checked when a fresh build exists.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from html import unescape
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import proof_map as pm  # noqa: E402
from built_book import HTML, require_build  # noqa: E402


# ======================================================================================
# synthetic pages
# ======================================================================================

def result(kind: str, label: str, status: str | None, body: str = "A statement.",
           proof: str | None = None, title: str = "A title", proof_class: str = "",
           extra_options: str = "") -> str:
    """A result directive (and its proof) in MyST."""
    opts = f":label: {label}\n" if label else ""
    if status is not None:
        opts += f":class: {status}\n"
    opts += extra_options
    text = f"```{{prf:{kind}}} {title}\n{opts}\n{body}\n```\n\n"
    if proof is not None:
        pc = f":class: {proof_class}\n" if proof_class else ""
        text += f"```{{prf:proof}}\n{pc}{proof}\n```\n\n"
    return text


def page(title: str, *blocks: str) -> str:
    return f"# {title}\n\nSome prose.\n\n" + "\n".join(blocks)


def problems(sources: dict[str, str], code: str | None = None) -> list[pm.Problem]:
    found = pm.check(pm.build_book(sources))
    return [p for p in found if code is None or p.code == code]


def codes(sources: dict[str, str]) -> set[str]:
    return {p.code for p in problems(sources)}


# ======================================================================================
# the real book
# ======================================================================================

@pytest.fixture(scope="module")
def book() -> pm.Book:
    return pm.load_book(ROOT)


def test_real_book_follows_the_convention(book):
    found = pm.check(book)
    assert not found, "the book breaks the proof-status convention:\n" + \
        "\n".join(map(str, found))


def test_real_book_is_read_whole(book):
    # every result directive of every page of the toc is found (a second, cruder count)
    for doc in book.docnames:
        text = (ROOT / f"{doc}.md").read_text(encoding="utf-8")
        crude = len(re.findall(r"^(`{3,}|:{3,})\{prf:(theorem|lemma|proposition|corollary|"
                               r"conjecture)\}", text, re.M))
        assert crude == sum(r.docname == doc for r in book.results), doc
    assert len(book.results) >= 25
    assert {r.status for r in book.results} <= {"proved", "cited", "open"}
    assert sum(len(r.uses) for r in book.results) >= 15
    # the chain of Part III: the interchange of limits uses the moment bounds, and the
    # global-stability theorem uses the order contraction
    assert "steady-state-lem-moments" in book.by_label["steady-state-thm-concentration"].uses
    assert "stability-thm-contraction" in book.by_label["stability-thm-global"].uses
    # an {eq} to an equation of a statement is an edge to that statement's result
    assert book.equation_owner["steady-state-eq-lower-gap"] == "steady-prop-lower-bound"
    assert "steady-prop-lower-bound" in book.by_label["finite-n-prop-split"].uses


def test_real_book_status_tables_are_read(book):
    rows = [row for row in book.tables if row.labels]
    assert len(rows) >= 15
    assert {row.claim for row in rows} <= {"proved", "conditional", "open", "cited"}


# ======================================================================================
# parsing
# ======================================================================================

def test_parse_edges_equations_and_what_is_skipped():
    a = page("A",
             result("lemma", "a-lem", "status-proved", body="$$\nx = 1\n$$ (a-eq-x)",
                    proof="Clear."),
             result("theorem", "a-thm", "status-proved",
                    proof="By {prf:ref}`the lemma <a-lem>` and {eq}`a-eq-x`, done."),
             "```{code-cell} ipython3\n```{prf:theorem} Not a result\nx = 1\n```\n",
             "```{exercise}\n:label: a-ex\nProve it.\n```\n",
             "```{solution-start} a-ex\n```\n",
             "```{prf:proof}\nThe solution's own proof, {prf:ref}`a-thm`.\n```\n",
             "```{solution-end}\n```\n")
    b = pm.build_book({"a": a})
    assert [r.label for r in b.results] == ["a-lem", "a-thm"]
    assert b.equation_owner == {"a-eq-x": "a-lem"}
    thm = b.by_label["a-thm"]
    assert thm.uses == ["a-lem"] and b.by_label["a-lem"].used_by == ["a-thm"]
    assert len(thm.proofs) == 1 and not b.orphan_proofs
    assert not pm.check(b)


def test_nested_fences_and_colon_fences():
    text = page("N", "````{prf:theorem} Outer\n:label: n-thm\n:class: status-proved\n\n"
                     "```{math}\n:label: n-eq\nx\n```\n````\n\n"
                     ":::{prf:proof}\nUses nothing.\n:::\n")
    b = pm.build_book({"n": text})
    assert [r.label for r in b.results] == ["n-thm"]
    assert b.equation_owner == {"n-eq": "n-thm"} and len(b.results[0].proofs) == 1
    assert not pm.check(b)


# ======================================================================================
# the checks, each shown able to fail
# ======================================================================================

def test_proved_result_may_not_use_an_open_one():
    def src(status):
        sketch = status == "status-open"
        return {"a": page("A",
                          result("lemma", "a-lem", status,
                                 body="A sketch only." if sketch else "A statement.",
                                 proof="Sketch. Omitted." if sketch else "Direct.",
                                 proof_class="sketch" if sketch else ""),
                          result("theorem", "a-thm", "status-proved",
                                 proof="By {prf:ref}`a-lem`."))}
    assert codes(src("status-open")) == {"uses-unproved"}
    assert codes(src("status-proved")) == set()
    # a cited result may be used
    cited = {"a": page("A",
                       result("theorem", "a-ext", "status-cited",
                              body="Prokhorov's theorem {cite}`billingsley1999` "
                                   "(Theorem 5.1)."),
                       result("theorem", "a-thm", "status-proved",
                              proof="By {prf:ref}`a-ext`."))}
    assert codes(cited) == set()
    # an {eq} to an open result's statement counts as a use
    viaeq = {"a": page("A",
                       result("conjecture", "a-conj", "status-open",
                              body="$$\ny < 1\n$$ (a-eq-y)"),
                       result("theorem", "a-thm", "status-proved",
                              proof="By {eq}`a-eq-y`."))}
    assert codes(viaeq) == {"uses-unproved"}


def test_forward_reference_needs_later_or_below_in_the_same_sentence():
    def src(sentence):
        return {"a": page("A", result("theorem", "a-thm", "status-proved",
                                      proof=sentence)),
                "b": page("B", result("lemma", "b-lem", "status-proved",
                                      proof="Direct."))}
    assert codes(src("By {prf:ref}`b-lem`, done.")) == {"forward-ref"}
    assert codes(src("By {prf:ref}`b-lem` (proved later, in chapter B), done.")) == set()
    assert codes(src("We use {prf:ref}`b-lem`, stated below.")) == set()
    # the word in another sentence does not count; nor inside math
    assert codes(src("See below. By {prf:ref}`b-lem`, done.")) == {"forward-ref"}
    assert codes(src("By {prf:ref}`b-lem` and $x_{\\text{later}}$, done.")) == \
        {"forward-ref"}
    # an abbreviation does not end the sentence
    assert codes(src("As shown below, e.g. by {prf:ref}`b-lem`, done.")) == set()
    # within one page the position decides
    same = {"a": page("A",
                      result("theorem", "a-thm", "status-proved",
                             proof="By {prf:ref}`a-lem`."),
                      result("lemma", "a-lem", "status-proved", proof="Direct."))}
    assert codes(same) == {"forward-ref"}


def test_cycles_among_proved_results_fail():
    def src(second_proof):
        return {"a": page("A",
                          result("lemma", "a-one", "status-proved",
                                 proof="By {prf:ref}`a-two`, proved below."),
                          result("lemma", "a-two", "status-proved", proof=second_proof))}
    found = problems(src("By {prf:ref}`a-one`."), "cycle")
    assert len(found) == 1 and "a-one" in found[0].message and "a-two" in found[0].message
    assert codes(src("Direct.")) == set()


def test_every_result_has_a_label_and_one_status():
    ok = result("theorem", "a-thm", "status-proved", proof="Direct.")
    assert codes({"a": page("A", ok)}) == set()
    assert "label" in codes({"a": page("A", result("theorem", "", "status-proved",
                                                   proof="Direct."))})
    assert codes({"a": page("A", result("theorem", "a-thm", None, proof="Direct."))}) == \
        {"status"}
    assert codes({"a": page("A", result("theorem", "a-thm", "status-proved status-open",
                                        proof="Sketch.", proof_class="sketch"))}) >= \
        {"status"}
    assert codes({"a": page("A", result("theorem", "a-thm", "status-done",
                                        proof="Direct."))}) == {"status"}


def test_proved_needs_a_proof_cited_a_source_open_says_so():
    assert codes({"a": page("A", result("theorem", "a-thm", "status-proved"))}) == \
        {"proof-missing"}
    # a proof after the next result belongs to that one
    two = {"a": page("A", result("lemma", "a-lem", "status-proved"),
                     result("theorem", "a-thm", "status-proved", proof="Direct."))}
    found = problems(two)
    assert [(p.code, "a-lem" in p.message) for p in found] == [("proof-missing", True)]
    cited = "Foster's criterion {cite}`meyn2009markov` (Theorem 11.3.4)."
    assert codes({"a": page("A", result("theorem", "a-ext", "status-cited",
                                        body=cited))}) == set()
    assert codes({"a": page("A", result("theorem", "a-ext", "status-cited",
                                        body="Foster's criterion."))}) == {"cite-missing"}
    assert codes({"a": page("A", result("theorem", "a-ext", "status-cited",
                                        body="Foster's criterion {cite}`meyn2009markov`."))}) \
        == {"cite-place"}
    assert codes({"a": page("A", result("theorem", "a-ext", "status-cited", body=cited,
                                        proof="Our own proof."))}) == {"cited-proof"}
    # open: a conjecture, or the text says sketch / conjecture / not proved
    assert codes({"a": page("A", result("conjecture", "a-c", "status-open"))}) == set()
    assert codes({"a": page("A", result("theorem", "a-t", "status-open",
                                        body="We prove only a sketch."))}) == set()
    assert codes({"a": page("A", result("theorem", "a-t", "status-open",
                                        proof="The idea.", proof_class="sketch"))}) == set()
    assert codes({"a": page("A", result("theorem", "a-t", "status-open",
                                        proof="A complete argument."))}) == {"open-unsaid"}
    # ... or its proof uses an open result (complete given an open result)
    given = {"a": page("A", result("conjecture", "a-c", "status-open"),
                       result("theorem", "a-t", "status-open",
                              proof="By {prf:ref}`a-c`."))}
    assert codes(given) == set()


def test_sketch_proofs_are_marked_and_not_of_proved_results():
    assert codes({"a": page("A", result("theorem", "a-t", "status-open",
                                        proof="(Sketch.) The idea."))}) == {"sketch-class"}
    assert codes({"a": page("A", result("theorem", "a-t", "status-proved",
                                        proof="The idea.", proof_class="sketch"))}) == \
        {"sketch-proved"}


def test_unknown_reference_and_orphan_proof():
    assert codes({"a": page("A", result("theorem", "a-t", "status-proved",
                                        proof="By {prf:ref}`nowhere`."))}) == \
        {"unknown-ref"}
    orphan = {"a": page("A", "```{prf:proof}\nOf nothing.\n```\n",
                        result("theorem", "a-t", "status-proved", proof="Direct."))}
    assert codes(orphan) == {"orphan-proof"}


# ---- the status tables --------------------------------------------------------------

def table_page(rows: list[tuple[str, str]], *blocks: str) -> str:
    table = "## Status of the results in this chapter\n\n| Result | Status |\n|---|---|\n"
    table += "".join(f"| {{prf:ref}}`{label}` (what) | {status} |\n" for label, status in rows)
    return page("T", *blocks) + "\n" + table


T_PROVED = result("lemma", "t-lem", "status-proved", proof="Direct.")
T_OPEN = result("theorem", "t-thm", "status-open", proof="(Sketch.) Idea.",
                proof_class="sketch")


@pytest.mark.parametrize("rows, expected", [
    ([("t-lem", "complete proof"), ("t-thm", "sketch; details omitted")], set()),
    ([("t-lem", "complete proof"), ("t-thm", "complete proof")], {"table-mismatch"}),
    ([("t-lem", "sketch"), ("t-thm", "sketch")], {"table-mismatch"}),
    ([("t-lem", "complete proof (given Doob's inequality)"), ("t-thm", "sketch")], set()),
    ([("t-lem", "complete, given {prf:ref}`t-thm`"), ("t-thm", "sketch")],
     {"table-mismatch"}),
    ([("t-lem", "complete proof"), ("t-thm", "complete, given existence")], set()),
    ([("t-lem", "fine"), ("t-thm", "sketch")], {"table-status"}),
    ([("t-lem", "complete proof")], {"table-missing"}),
    ([("t-lem", "complete proof"), ("t-thm", "open"), ("t-gone", "complete proof")],
     {"table-label"}),
])
def test_status_tables_agree_with_markers(rows, expected):
    assert codes({"t": table_page(rows, T_PROVED, T_OPEN)}) == expected


def test_status_table_on_another_page_covers_the_chapter():
    """A status table may live on an evidence page: a chapter one of whose results it
    names must have every result named there (planted: one row left out)."""
    chapter = page("C", T_PROVED, T_OPEN)
    full = table_page([("t-lem", "complete proof"), ("t-thm", "sketch")])
    short = table_page([("t-lem", "complete proof")])
    assert codes({"c": chapter, "evidence": full}) == set()
    found = problems({"c": chapter, "evidence": short}, "table-missing")
    assert [(p.docname, "t-thm" in p.message) for p in found] == [("c", True)]
    assert codes({"c": chapter}) == set()          # no table anywhere: nothing required


def test_status_words_are_classified():
    assert pm.classify_status("complete proof") == "proved"
    assert pm.classify_status("complete, given {prf:ref}`x`") == "conditional"
    assert pm.classify_status("complete, with the same proviso") == "conditional"
    assert pm.classify_status("sketch (relies on the fluid-limit sketch)") == "open"
    assert pm.classify_status("complete, given existence ({prf:ref}`x`, a sketch)") == \
        "open"
    assert pm.classify_status("cited: {cite}`meyn2009markov`, Theorem 11.3.4") == "cited"
    assert pm.classify_status("fine") == "unknown"
    # words inside a role do not count
    assert pm.classify_status("complete proof ({prf:ref}`open-sketch-label`)") == "proved"


def test_cell_splitting_keeps_math_and_code():
    assert pm._split_cells("| $|x|$ and `a|b` | done |") == ["$|x|$ and `a|b`", "done"]


# ======================================================================================
# the drawing
# ======================================================================================

def mini_book() -> pm.Book:
    return pm.build_book({
        "a": page("Chapter A",
                  result("lemma", "a-lem", "status-proved", title="Base", proof="Direct."),
                  result("theorem", "a-ext", "status-cited", title="External",
                         body="From {cite}`meyn2009markov` (Theorem 11.3.4).")),
        "b": page("Chapter B",
                  result("theorem", "b-thm", "status-open", title="Main", body="A sketch.",
                         proof="Uses {prf:ref}`a-lem` and {prf:ref}`a-ext`.",
                         proof_class="sketch"))})


def test_panel_source_has_nodes_external_nodes_edges_and_three_cues():
    b = mini_book()
    numbers = {"a-lem": "Lemma 1.1", "a-ext": "Theorem 1.2", "b-thm": "Theorem 2.1"}
    urls = {k: f"x.html#{k}" for k in numbers}
    names = {"meyn2009markov": "Meyn and Tweedie 2009"}
    titles = {"a": "1. Chapter A", "b": "2. Chapter B"}
    dot_b = pm.panel_source(b, "b", numbers, titles, urls=urls, source_names=names)
    # its own result, and the two results of chapter A that its proof uses, dashed
    assert 'id="proof-map-node-b-thm"' in dot_b
    assert dot_b.count('class="status-') == 3 and dot_b.count("external") == 2
    assert '"a-lem" -> "b-thm" [id=' in dot_b and '"a-ext" -> "b-thm" [id=' in dot_b
    assert "1. Chapter A" in dot_b              # where the used results live
    dot_a = pm.panel_source(b, "a", numbers, titles, urls=urls, source_names=names)
    assert "external" not in dot_a and "->" not in dot_a
    assert "Meyn and Tweedie 2009, Theorem 11.3.4" in dot_a   # the source, in the tooltip
    cues = {}
    for dot, label in ((dot_a, "a-lem"), (dot_a, "a-ext"), (dot_b, "b-thm")):
        line = next(ln for ln in dot.splitlines() if f'id="proof-map-node-{label}"' in ln)
        cues[label] = (re.search(r'fillcolor="([^"]+)"', line)[1],
                       re.search(r"shape=(\w+)", line)[1] + re.search(r'style="([^"]+)"',
                                                                      line)[1],
                       re.search(r"<i>\[(\w+)", line)[1])
    # colour, shape/border and text each tell the three statuses apart on their own
    for k in range(3):
        assert len({c[k] for c in cues.values()}) == 3, cues
    assert cues["a-lem"][2] == "proved" and cues["b-thm"][2] == "open"
    # without links (the PDF's drawing) there is no URL, and no title in the boxes
    bare = pm.panel_source(b, "a", numbers, titles, compact=True)
    assert "URL=" not in bare and "Base" not in bare


def test_panels_hold_at_most_per_row_results_side_by_side():
    # eight independent lemmas: chained invisibly so that at most three share a row
    b = pm.build_book({"a": page("A", *[result("lemma", f"a-{k}", "status-proved",
                                              proof="Direct.") for k in range(8)])})
    dot = pm.panel_source(b, "a", {}, per_row=3)
    chain = re.findall(r'"a-(\d)" -> "a-(\d)" \[style=invis\]', dot)
    assert chain == [(str(k), str(k + 3)) for k in range(5)], chain


def test_overview_joins_chapters_whose_proofs_use_each_other():
    b = mini_book()
    dot = pm.overview_source(b, {"a": "1. Chapter A", "b": "2. Chapter B"},
                             {"a": "a.html", "b": "b.html"})
    assert '"a" -> "b";' in dot and '"b" -> "a"' not in dot
    assert "1 proved, 1 cited" in dot and "1 open" in dot
    assert 'URL="a.html"' in dot and "Key" in dot


def test_dot_renders_with_links():
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (scripts/book.sh installs it)")
    from qtheory_proof_map import render_svg

    b = mini_book()
    numbers = {"a-lem": "Lemma 1", "a-ext": "Theorem 1", "b-thm": "Theorem 2"}
    urls = {k: f"x.html#{k}" for k in numbers}
    svgs = [render_svg(pm.panel_source(b, d, numbers, urls=urls)) for d in ("a", "b")]
    assert all(s.startswith("<svg") and "<title>" not in s for s in svgs)
    linked = sorted(set(re.findall(r'xlink:href="x\.html#([\w-]+)"', "".join(svgs))))
    assert linked == sorted(numbers)


def test_bib_names():
    bib = ("@book{meyn2009markov,\n  author = {Meyn, Sean and Tweedie, Richard L.},\n"
           "  title = {Markov Chains},\n  year = {2009},\n}\n"
           "@article{a2000,\n  author = {Ann One and Bob Two and Cy Three},\n  year = 2000,\n}\n"
           "@book{b1999,\n  author = {Br{\\'e}maud, Pierre},\n  year = {1999},\n}\n"
           "@book{c2003,\n  author = {Bernt {\\O}ksendal and Kurt G{\\\"o}del},\n  year = {2003},\n}\n")
    assert pm.bib_names(bib) == {"meyn2009markov": "Meyn and Tweedie 2009",
                                 "a2000": "One et al. 2000", "b1999": "Brémaud 1999",
                                 "c2003": "Øksendal and Gödel 2003"}


# ======================================================================================
# the extension in a small Sphinx build (warnings are errors)
# ======================================================================================

def _mini_project(tmp_path: Path, second_status: str) -> Path:
    src = tmp_path / "src"
    src.mkdir(parents=True)
    (src / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})
        extensions = ["myst_parser", "sphinx_proof", "qtheory_proof_map"]
        myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
        numfig = True
        html_theme = "basic"
        """))
    (src / "index.md").write_text("# Mini\n\n```{toctree}\na\nb\nmap\n```\n")
    (src / "a.md").write_text(page("Chapter A",
                                   result("lemma", "a-lem", second_status, title="Base",
                                          body="It is a sketch." if "open" in second_status
                                          else "Fine.", proof="Direct.")))
    (src / "b.md").write_text(page("Chapter B",
                                   result("theorem", "b-thm", "status-proved", title="Main",
                                          proof="By {prf:ref}`a-lem`.")))
    (src / "map.md").write_text("# Map\n\n```{proof-map} summary\n```\n\n"
                                "```{proof-map} graph\n```\n\n```{proof-map} table\n```\n")
    return src


def _sphinx(src: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html",
                           str(src), str(out)], capture_output=True, text=True, timeout=120)


def test_extension_builds_the_page_and_fails_on_a_breach(tmp_path):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (scripts/book.sh installs it)")
    src = _mini_project(tmp_path, "status-proved")
    run = _sphinx(src, tmp_path / "out")
    assert run.returncode == 0, run.stderr
    html = (tmp_path / "out" / "map.html").read_text(encoding="utf-8")
    assert "<svg" in html and 'xlink:href="a.html#a-lem"' in html
    assert re.search(r'href="b.html#b-thm"><span class="xref prf">Theorem 1</span>', html)
    assert "2 results in 2 chapters: 2 proved here" in html
    # the same book with the lemma open: the proved theorem now rests on it
    bad = _mini_project(tmp_path / "bad", "status-open")
    run = _sphinx(bad, tmp_path / "bad" / "out")
    assert run.returncode != 0 and "uses-unproved" in run.stderr, run.stderr


# ======================================================================================
# the built book (skipped without a fresh build; mandatory in CI)
# ======================================================================================

def _anchors(html: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', html))


def test_built_page_links_resolve_and_numbers_match(book):
    html_root = require_build()
    page_path = html_root / "book" / "proof-map.html"
    assert page_path.is_file(), "book/proof-map.html is missing from the build"
    html = page_path.read_text(encoding="utf-8")
    assert "<svg" in html, "the map's drawing is missing"
    # (dot writes "-" in its ids and classes as "&#45;")
    main = unescape(html.split("<main", 1)[-1].split("</main>", 1)[0])
    links = re.findall(r'(?:xlink:)?href="([^"]+)"', main)
    cache: dict[Path, set[str]] = {}
    broken, linked = [], set()
    for href in links:
        url = urlparse(href)
        if url.scheme or not url.path.endswith(".html"):
            continue
        target = (page_path.parent / unquote(url.path)).resolve()
        if target not in cache:
            cache[target] = _anchors(target.read_text(encoding="utf-8")) \
                if target.is_file() else set()
        if not target.is_file() or (url.fragment and url.fragment not in cache[target]):
            broken.append(href)
        if url.fragment:
            linked.add(url.fragment)
    assert not broken, f"links of the proof map that do not resolve: {broken[:10]}"
    missing = [r.label for r in book.results if r.label not in linked]
    assert not missing, f"results with no link on the proof map: {missing}"
    # each result is named with the number its chapter prints
    for r in book.results:
        chapter = (HTML / f"{r.docname}.html").read_text(encoding="utf-8")
        m = re.search(rf'id="{re.escape(r.label)}">\s*<p class="admonition-title">'
                      r'<span class="caption-number">([^<]+?)\s*</span>', chapter)
        assert m, f"{r.label}: no numbered heading in {r.docname}.html"
        shown = re.findall(rf'href="[^"]*#{re.escape(r.label)}"><span class="xref prf">'
                           r"([^<]+)</span>", main)
        assert shown and set(shown) == {m[1]}, (r.label, m[1], shown)
        node = re.search(rf'id="proof-map-node-{re.escape(r.label)}".*?</g>\s*</g>', main,
                         re.S)
        assert node and m[1] in re.sub(r"<[^>]+>", " ", node[0]), r.label
