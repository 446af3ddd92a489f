"""Course materials: exercises, student notebooks, the book without solutions, assignments.

* every main chapter has at least three exercises, each with a gated solution, at least one of
  them with code (that code runs in every build: the chapter tests execute it);
* the student notebooks (scripts/student_notebooks.py) are valid notebooks whose first
  cell installs the exact qtheory version, with no solution text or code and no MyST
  markup left; values glued into the text are written out, formatted as MyST-NB does,
  when the chapter's execution is at hand, and a readable placeholder otherwise (never a
  glue name); the book's hidden cells (asserts, glue) are kept with their input
  collapsed; and the notebooks run top to bottom without their solutions and without
  MyST-NB installed (as on Colab);
* the extension behind the book without solutions removes gated solutions (text and code)
  and nothing else;
* the proof-based problem set for Part III and the exact chapter (book/problems-part3.md)
  has at least six problems, each with a worked solution that the book shows and that
  the book without solutions and the student notebook do not contain; the course page's
  graduate module covers Part III and the exact chapter and lists every problem;
* the otter-grader assignments build; the autograder gives the reference solutions full
  marks and a blank and a wrong notebook less.  These tests need requirements-course.txt;
  without otter-grader they are skipped, unless QTHEORY_REQUIRE_COURSE=1 (set by .ci/run),
  which turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import student_notebooks as sn  # noqa: E402

CHAPTERS = sn.toc_chapters()
REQUIRE = os.environ.get("QTHEORY_REQUIRE_COURSE") == "1"
ROLE_OR_DIRECTIVE = re.compile(r"\{[a-zA-Z][\w:+-]*\}`|^\s*(```+|:::+)\s*\{|^:[\w-]+:|"
                               r"\$\$[ \t]*\([\w:.-]+\)[ \t]*$|^\([\w-]+\)=", re.M)


def _exercises(text):
    return re.findall(r"^```+\{exercise\}[^\n]*\n:label:\s*(\S+)", text, re.M)


def _solutions(nb):
    """(markdown lines, code sources) inside solution-start ... solution-end."""
    text_lines, code = [], []
    inside = False
    for cell in nb.cells:
        if cell.cell_type == "code":
            if inside:
                code.append(cell.source.strip())
            continue
        for line in cell.source.splitlines():
            if re.match(r"^```+\{solution-start\}", line):
                inside = True
            elif re.match(r"^```+\{solution-end\}", line):
                inside = False
            elif inside and len(line.strip()) > 30 and not line.startswith((":", "```")):
                text_lines.append(line.strip())
    return text_lines, code


# ---------------------------------------------------------------------------------------
# exercises per chapter
# ---------------------------------------------------------------------------------------
def test_toc_has_chapters():
    assert len(CHAPTERS) >= 5, CHAPTERS


def _is_support_page(path):
    """Evidence pages (evidence-*), appendices of technical proofs (lemmas-*), the tools
    appendix and the inside-qtheory pages (internals*): executed notebooks, but not
    chapters a course assigns, so they need not carry three exercises."""
    return path.stem.startswith(("evidence", "lemmas-", "internals", "tools"))


# evidence pages (book/evidence-*.md) are notebooks without exercises: they show how the
# chapters' numbers are known, and teach nothing of their own
TEACHING = [p for p in CHAPTERS if not p.stem.startswith("evidence")]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_has_exercises_with_solutions(path):
    import jupytext

    text = path.read_text()
    labels = _exercises(text)
    if _is_support_page(path):
        starts = re.findall(r"^```+\{solution-start\}\s*(\S+)", text, re.M)
        assert sorted(starts) == sorted(labels), f"{path.name}: solutions {starts} vs {labels}"
        return
    # at least three in each main chapter; the computational drills that repeat a chapter's
    # study moved to its evidence page, where the course plan can still assign them
    assert len(labels) >= 3, f"{path.name}: {len(labels)} exercises, at least 3 required"
    assert len(set(labels)) == len(labels)
    starts = re.findall(r"^```+\{solution-start\}\s*(\S+)", text, re.M)
    ends = re.findall(r"^```+\{solution-end\}", text, re.M)
    assert sorted(starts) == sorted(labels), f"{path.name}: solutions {starts} vs {labels}"
    assert len(ends) == len(starts)
    _, code = _solutions(jupytext.read(path))
    assert code, f"{path.name}: no exercise has a computational solution"


# ---------------------------------------------------------------------------------------
# the converter on a synthetic page
# ---------------------------------------------------------------------------------------
SAMPLE = '''---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# Sample chapter

````{admonition} Learning goals
:class: tip

- nested code:

```python
x = 1  # {eq}`not-a-role` stays literal inside code
```
````

(sample-sec)=
## A section

$$
a = b
$$ (sample-eq-a)

:::{prf:theorem} Big result
:label: sample-thm

It follows from {eq}`sample-eq-a` and {cite:t}`little1961proof`.
:::

```{prf:proof}
Obvious {cite}`little1961proof,kleinrock1975queueing`.
```

See {numref}`sample-fig`, {numref}`Fig. %s <sample-fig>`, {prf:ref}`sample-thm`,
{ref}`sample-sec`, {ref}`the text <sample-sec>` and Exercise {ref}`sample-ex-b`.

```{code-cell} ipython3
from myst_nb import glue

glue("sample-x", 0.123456, display=False)
glue("sample-n", 1234567, display=False)
```

```{code-cell} ipython3
:tags: [remove-cell]
hidden = 2 * 21
glue("sample-msg", "reports success", display=False)
assert hidden == 42, "prose says forty-two"
```

GLUED: x = {glue:text}`sample-x:.3f` = {glue:text}`sample-x:.1%` =
{glue:text}`sample-x:.2e`, n = {glue:text}`sample-n:,`, the solver
{glue:text}`sample-msg` ({glue:}`sample-msg`, {glue}`sample-n`).

```{code-cell} ipython3
print(hidden)
```

```{code-cell} ipython3
---
mystnb:
  figure:
    caption: |
      A caption with {eq}`sample-eq-a`.
    name: sample-fig
---
print("figure")
```

```{exercise}
:label: sample-ex-a

First, about {ref}`sample-ex-b`.
```

```{solution-start} sample-ex-a
:class: dropdown
```

SOLUTION-TEXT-A is here.

```{code-cell} ipython3
print("SOLUTION-CODE-A")
```

```{solution-end}
```

```{exercise} A title
:label: sample-ex-b

Second.
```

```{solution-start} sample-ex-b
:class: dropdown
```

SOLUTION-TEXT-B {eq}`sample-eq-a`.

```{solution-end}
```
'''


@pytest.fixture(scope="module")
def sample_notebook(tmp_path_factory):
    d = tmp_path_factory.mktemp("sample")
    path = d / "sample.md"
    path.write_text(SAMPLE)
    import jupytext

    targets = sn.collect_targets(path, jupytext.read(path))
    bib = sn.Bibliography(ROOT / "book" / "references.bib")
    return sn.convert(path, targets, bib, "9.8.7", "https://example.org/q/q", "v9.8.7")


def test_converter_removes_solutions_and_markup(sample_notebook):
    nb = sample_notebook
    nbformat.validate(nb)
    allsrc = "\n".join(c.source for c in nb.cells)
    assert "SOLUTION-TEXT" not in allsrc and "SOLUTION-CODE" not in allsrc
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    # code inside a Markdown code fence is left alone; outside it no MyST remains
    outside = re.sub(r"```python.*?```", "", md, flags=re.S)
    assert not ROLE_OR_DIRECTIVE.search(outside), ROLE_OR_DIRECTIVE.search(outside)
    assert "{eq}`not-a-role` stays literal" in md
    assert "\\tag{1}" in md and "from (1) and Little (1961)" in md
    assert "(Little, 1961; Kleinrock, 1975)" in md
    assert "**Theorem 1 (Big result).**" in md and "*Proof.*" in md
    assert "See Figure 1, Fig. 1, Theorem 1," in md
    assert "*A section*, the text and Exercise 2." in md
    assert "### Exercise 1" in md and "### Exercise 2 (A title)" in md
    assert "First, about Exercise 2." in md
    assert "**Figure 1.** A caption with (1)." in md
    assert "## References" in md and "Little" in md.split("## References")[1]
    answers = [c for c in nb.cells if "answer" in c.metadata.get("tags", [])]
    assert len(answers) == 2


GLUED_VALUES = ("GLUED: x = 0.123 = 12.3% =\n1.23e-01, n = 1,234,567, the solver\n"
                "reports success (reports success, 1234567).")


def test_converter_glue_without_outputs(sample_notebook):
    """No executed outputs: a placeholder that says where the value comes from."""
    md = "\n".join(c.source for c in sample_notebook.cells if c.cell_type == "markdown")
    text = md.split("GLUED:", 1)[1].split(").", 1)[0]
    assert "sample-" not in text, text
    assert text.count(sn.GLUE_MISSING) == 7, text
    assert sample_notebook.metadata["qtheory"]["glue_missing"] == \
        ["sample-msg", "sample-n", "sample-x"]


@pytest.mark.timeout(300)
def test_converter_glue_from_executed_outputs(sample_notebook, tmp_path, monkeypatch):
    """With the executed chapter, every glue role shows the value formatted as MyST-NB
    formats it (a Python format spec applied to the value)."""
    import jupytext

    path = tmp_path / "sample.md"
    path.write_text(SAMPLE)
    executed = sn.execute_chapter(path, timeout=240)
    assert sorted(sn.glue_values(executed)) == ["sample-msg", "sample-n", "sample-x"]
    targets = sn.collect_targets(path, jupytext.read(path))
    bib = sn.Bibliography(ROOT / "book" / "references.bib")
    nb = sn.convert(path, targets, bib, "9.8.7", "https://example.org/q/q", "v9.8.7",
                    executed=executed)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert GLUED_VALUES in md, md.split("GLUED", 1)[1][:300]
    assert nb.metadata["qtheory"]["glue_missing"] == []
    # the same values through an execution cache, as the book build stores it
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache_dir = tmp_path / "cache"
    assert sn.cached_execution(path, cache_dir) is None
    get_cache(str(cache_dir)).cache_notebook_bundle(CacheBundleIn(executed, str(path)),
                                                    check_validity=False)
    cached = sn.cached_execution(path, cache_dir)
    assert cached is not None and sn.glue_values(cached) == sn.glue_values(executed)
    # the book's cache is read only when made with the current qtheory sources
    import types

    stamp = tmp_path / "stamp"
    guard = types.SimpleNamespace(CACHE=cache_dir, STAMP=stamp, fingerprint=lambda: "now")
    monkeypatch.setattr(sn, "_cache_guard", lambda: guard)
    stamp.write_text("before\n")
    assert sn.cached_execution(path) is None
    stamp.write_text("now\n")
    assert sn.cached_execution(path) is not None
    path.write_text(SAMPLE.replace("0.123456", "0.5"))  # other code: no match
    assert sn.cached_execution(path, cache_dir) is None


def test_converter_keeps_hidden_cells(sample_notebook):
    """The book's hidden cells are build checks, but they may define names that later
    cells use: kept, with the input collapsed, and a stand-in for myst_nb.glue first."""
    code = [c for c in sample_notebook.cells if c.cell_type == "code"]
    assert code[1].metadata["tags"] == ["glue-fallback"]
    hidden = [c for c in code if "hidden = 2 * 21" in c.source]
    assert len(hidden) == 1 and hidden[0].metadata["jupyter"] == {"source_hidden": True}
    assert "remove-cell" in hidden[0].metadata["tags"]
    assert code.index(hidden[0]) < [c.source for c in code].index("print(hidden)")


def test_converter_adds_no_glue_stand_in_for_qtheorys_glue(tmp_path):
    """A chapter that takes glue from qtheory (which degrades by itself where MyST-NB is
    missing) needs no stand-in cell."""
    import jupytext

    path = tmp_path / "sample.md"
    path.write_text(SAMPLE.replace("from myst_nb import glue", "from qtheory.book import glue"))
    targets = sn.collect_targets(path, jupytext.read(path))
    bib = sn.Bibliography(ROOT / "book" / "references.bib")
    nb = sn.convert(path, targets, bib, "9.8.7", "https://example.org/q/q", "v9.8.7")
    assert "from qtheory.book import glue" in "\n".join(c.source for c in nb.cells)
    assert not [c for c in nb.cells if "glue-fallback" in c.metadata.get("tags", [])]


def test_converter_install_cell(sample_notebook):
    first = sample_notebook.cells[0]
    assert first.cell_type == "code"
    assert ('%pip install --quiet "qtheory[widgets] @ https://example.org/q/q/releases/'
            'download/v9.8.7/qtheory-9.8.7-py3-none-any.whl"') in first.source
    assert '!= "9.8.7"' in first.source


def test_converter_rejects_unbalanced_solutions(tmp_path):
    import jupytext

    bad = SAMPLE.replace("```{solution-end}\n```\n\n```{exercise} A title",
                         "```{exercise} A title", 1)
    path = tmp_path / "bad.md"
    path.write_text(bad)
    with pytest.raises(ValueError, match="solution"):
        sn.strip_solutions(jupytext.read(path).cells, "bad")


# ---------------------------------------------------------------------------------------
# the student notebooks of the book
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student-notebooks")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "student_notebooks.py"),
                           "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "unknown directive" not in proc.stderr, proc.stderr
    return out


#: the statement kinds whose numbers the book shows (sphinx-proof)
_KINDS = "Theorem|Lemma|Proposition|Corollary|Definition|Conjecture|Assumption|Remark|Example"


def book_numbers(html: str) -> dict:
    """The numbers the built HTML page shows: exercises, statements, figures, equations."""
    article = html.split("<article", 1)[-1].split("</article>", 1)[0]
    caps = re.findall(r'<span class="caption-number">([^<]*?)\s*</span>', article)
    return {
        "exercises": [c.split()[1] for c in caps if c.startswith("Exercise ")],
        "statements": [tuple(c.split()[:2]) for c in caps if re.match(rf"({_KINDS}) [A-Z\d]", c)],
        "figures": [c.split()[1].rstrip(".") for c in caps if c.startswith("Fig. ")],
        "equations": re.findall(r'class="eqno">\(((?:[A-Z]+|\d+)(?:\.\d+)?)\)', article),
    }


def notebook_numbers(nb) -> dict:
    """The same numbers as a student notebook writes them."""
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return {
        "exercises": re.findall(r"^### Exercise ((?:[A-Z]+|\d+)(?:\.\d+)?)", md, re.M),
        "statements": re.findall(rf"\*\*({_KINDS}) ((?:[A-Z]+|\d+)(?:\.\d+)?)\b", md),
        "figures": re.findall(r"\*\*Figure ((?:[A-Z]+|\d+)(?:\.\d+)?)\.\*\*", md),
        "equations": re.findall(r"\\tag\{((?:[A-Z]+|\d+)(?:\.\d+)?)\}", md),
    }


def number_problems(book: dict, notebook: dict) -> list[str]:
    """The notebook's numbers are the book's: every exercise and statement with the same
    number in the same order; figures and equations (some are inside solutions, which the
    notebook drops) a subsequence of the book's."""
    def subsequence(a, b):
        it = iter(b)
        return all(x in it for x in a)

    problems = []
    for key in ("exercises", "statements"):
        if [tuple(x) if isinstance(x, (list, tuple)) else x for x in notebook[key]] != \
                [tuple(x) if isinstance(x, (list, tuple)) else x for x in book[key]]:
            problems.append(f"{key}: notebook {notebook[key]} != book {book[key]}")
    for key in ("figures", "equations"):
        if not subsequence(notebook[key], book[key]):
            problems.append(f"{key}: notebook {notebook[key]} not among the book's "
                            f"{book[key]} in order")
    return problems


@pytest.mark.parametrize("path", TEACHING, ids=[p.stem for p in TEACHING])
def test_student_numbers_are_the_books(path, student_dir):
    """Exercise, theorem, figure and equation numbers of each student notebook are those
    of the built book (what sphinx-tojupyter would take from Sphinx; this converter counts
    them itself, see its docstring). Needs the HTML build."""
    page = ROOT / "_build" / "html" / "book" / f"{path.stem}.html"
    if not page.is_file():
        pytest.skip("no built book: run `bash scripts/book.sh`")
    nb = nbformat.read(student_dir / f"{path.stem}.ipynb", as_version=4)
    book = book_numbers(page.read_text(encoding="utf-8"))
    assert book["exercises"] or (_is_support_page(path) and not _exercises(path.read_text())), \
        f"no exercise numbers found on {page.name}"
    problems = number_problems(book, notebook_numbers(nb))
    assert not problems, f"{path.stem}:\n  " + "\n  ".join(problems)


def test_planted_number_drift():
    book = {"exercises": ["4", "5"], "statements": [("Theorem", "2")], "figures": ["3", "4"],
            "equations": ["7", "8", "9"]}
    good = {"exercises": ["4", "5"], "statements": [("Theorem", "2")], "figures": ["4"],
            "equations": ["7", "9"]}
    assert number_problems(book, good) == []
    for key, bad in (("exercises", ["4", "6"]), ("statements", [("Theorem", "1")]),
                     ("figures", ["5"]), ("equations", ["1", "2"])):
        assert any(p.startswith(key) for p in number_problems(book, dict(good, **{key: bad})))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_student_notebook(path, student_dir):
    import jupytext

    import qtheory

    nb = nbformat.read(student_dir / f"{path.stem}.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    first = nb.cells[0]
    url = sn.repository_url()
    assert first.cell_type == "code"
    v = qtheory.__version__
    assert (f'%pip install --quiet "qtheory[widgets] @ {url}/releases/download/v{v}/'
            f'qtheory-{v}-py3-none-any.whl"' in first.source)
    assert nb.metadata["qtheory"]["version"] == qtheory.__version__
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = [c.source.strip() for c in nb.cells if c.cell_type == "code"]
    outside = re.sub(r"```.*?```", "", md, flags=re.S)
    found = ROLE_OR_DIRECTIVE.search(outside)
    assert not found, f"{path.name}: MyST markup left: {found.group(0)!r}"
    source = jupytext.read(path)
    sol_text, sol_code = _solutions(source)
    for snippet in sol_code:
        assert snippet not in code, f"{path.name}: solution code left: {snippet[:60]!r}"
    for line in sol_text:
        assert line not in md, f"{path.name}: solution text left: {line[:60]!r}"
    n_ex = len(_exercises(path.read_text()))
    assert len(re.findall(r"^### Exercise [A-Z\d]", md, re.M)) == n_ex
    assert sum("answer" in c.metadata.get("tags", []) for c in nb.cells) == n_ex
    # every non-solution code cell of the chapter is there, in order; the cells the
    # book hides (asserts backing the text, glue) too, with their input collapsed
    kept = [c.source.strip() for c in source.cells
            if c.cell_type == "code" and c.source.strip() not in sol_code]
    assert [c for c in code if c in kept] == kept
    for cell in source.cells:
        if "remove-cell" in cell.metadata.get("tags", []) and \
                cell.source.strip() not in sol_code:
            copy = [c for c in nb.cells if c.cell_type == "code"
                    and c.source.strip() == cell.source.strip()]
            assert copy and copy[0].metadata.get("jupyter", {}).get("source_hidden"), \
                f"{path.name}: hidden cell not kept collapsed: {cell.source[:60]!r}"
    # glued values: the value (when the chapter's execution is cached and current) or
    # the placeholder, never the glue's name
    text = path.read_text()
    names = set(re.findall(r"\{glue(?::\w*)?\}`([^`:]+)", text))
    # a name may also be an ordinary word of the text ("chains"): count it as a word, and
    # it may appear no more often than in the chapter's prose without its glue roles
    prose = [c.source for c in source.cells if c.cell_type == "markdown"]
    prose += [str(c.metadata.get("mystnb", {}).get("figure", {}).get("caption", ""))
              for c in source.cells if c.cell_type == "code"]  # captions are text too
    bare = re.sub(r"\{glue(?::\w*)?\}`[^`]*`", "", "\n".join(prose))
    for name in names:
        word = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
        assert len(re.findall(word, md)) <= len(re.findall(word, bare)), \
            f"{path.name}: glue name {name!r} left in the text"
    if names and sn.cached_execution(path) is not None:
        assert nb.metadata["qtheory"]["glue_missing"] == [], path.name
    if re.search(r"^\s*from myst_nb import", text, re.M):
        assert nb.cells[1].metadata.get("tags") == ["glue-fallback"], path.name


# a light chapter with glue and hidden cells; a chapter that reads stored results
# (qtheory.book.stored) from a folder that is not the book's
RUN_CHAPTERS = ("intro", "problems-part3", "rate")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", RUN_CHAPTERS)
def test_student_notebook_runs(name, student_dir, tmp_path):
    """The student notebook runs top to bottom without its solutions (answer cells left
    empty) and without MyST-NB, as on Colab: a package ``myst_nb`` that fails to import
    is put first on the kernel's path.

    The install cell is dropped (here qtheory comes from this checkout).
    """
    from nbclient import NotebookClient

    sn.install_nbclient_poll()
    assert name in {p.stem for p in CHAPTERS}, name
    nb = nbformat.read(student_dir / f"{name}.ipynb", as_version=4)
    assert "install" in nb.cells[0].metadata.get("tags", [])
    nb.cells = [c for c in nb.cells[1:] if "answer" not in c.metadata.get("tags", [])]
    fake = tmp_path / "no-myst-nb" / "myst_nb"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('myst_nb is not installed')\n")
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(fake.parent), str(ROOT),
                                                             env_path]))
    run_dir = tmp_path / "run"  # not the book's folder: students open it anywhere
    run_dir.mkdir()
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(run_dir)}}).execute()
    finally:
        os.environ["PYTHONPATH"] = env_path
    errors = [o for c in nb.cells if c.cell_type == "code"
              for o in c.get("outputs", []) if o.get("output_type") == "error"
              and "raises-exception" not in c.metadata.get("tags", [])]
    assert not errors


# ---------------------------------------------------------------------------------------
# the book without solutions: our extension on a tiny Sphinx project
# ---------------------------------------------------------------------------------------
TINY = '''# Tiny

```{exercise}
:label: tiny-ex

EXERCISE-TEXT
```

```{solution-start} tiny-ex
:class: dropdown
```

SOLUTION-TEXT

```python
SOLUTION_CODE = 1
```

```{solution-end}
```

AFTER-TEXT
'''


@pytest.mark.parametrize("hide", [True, False])
def test_hide_gated_solutions(tmp_path, hide):
    src = tmp_path / "src"
    src.mkdir()
    (src / "index.md").write_text(TINY)
    (src / "conf.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'course' / '_ext')!r})\n"
        "extensions = ['myst_parser', 'sphinx_exercise', 'hide_gated_solutions']\n"
        f"hide_solutions = {hide}\n")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html",
                           str(src), str(tmp_path / "html")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "html" / "index.html").read_text()
    assert "EXERCISE-TEXT" in html and "AFTER-TEXT" in html
    assert ("SOLUTION-TEXT" in html) is not hide
    assert ("SOLUTION_CODE" in html) is not hide


def test_instructor_config():
    import course_config

    cfg = course_config.config()
    assert cfg["sphinx"]["config"]["hide_solutions"] is True
    assert cfg["sphinx"]["config"]["html_copy_source"] is False
    assert "hide_gated_solutions" in cfg["sphinx"]["local_extensions"]
    assert cfg["html"]["use_download_button"] is False and "launch_buttons" not in cfg
    assert Path(cfg["execute"]["cache"]).is_absolute()


# ---------------------------------------------------------------------------------------
# the problem set for Part III and the exact chapter
# ---------------------------------------------------------------------------------------
PROBLEMS = ROOT / "book" / "problems-part3.md"
PART3_AND_EXACT = ("fluid-solutions", "fluid-limit", "stability", "steady-state", "rate", "exact")
SOLUTION_BLOCK = re.compile(r"^```+\{solution-start\}\s*(\S+)\s*\n(.*?)^```+\{solution-end\}",
                            re.M | re.S)


def _solution_blocks(text):
    """{label: source between solution-start and solution-end}."""
    return {m[1]: m[2] for m in SOLUTION_BLOCK.finditer(text)}


def _plain_lines(source):
    """Fragments of a solution's prose that render as themselves in HTML: the pieces of
    each prose line between inline math, roles and code, with at least four words and no
    characters that Sphinx rewrites (quotes, dashes); for finding the solution in a
    built page."""
    out, in_code, in_math = [], False, False
    for line in source.splitlines():
        s = line.strip()
        if s.startswith("```"):
            in_code = not in_code and "code-cell" in s
            continue
        if s.startswith("$$"):
            in_math = not in_math and not (len(s) > 2 and s.endswith("$$") and s != "$$")
            continue
        if in_code or in_math or s.startswith(":"):
            continue
        s = re.sub(r"^(\d+\.|-)\s+", "", s)  # list markers render as list items
        for piece in re.split(r"\$[^$]*\$|\{[\w:-]+\}`[^`]*`|`[^`]*`|\$|\*", s):
            piece = piece.strip(" ,.;:()")
            if len(piece) >= 20 and len(piece.split()) >= 4 \
                    and re.fullmatch(r"[A-Za-z0-9 ,.;:()]+", piece):
                out.append(piece)
    return out


def _visible_text(html):
    import html as html_lib

    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", html, flags=re.S)
    text = html_lib.unescape(re.sub(r"<[^>]+>", " ", text))
    return " ".join(text.split())


def test_problem_set_has_six_problems_with_proofs():
    text = PROBLEMS.read_text()
    labels = _exercises(text)
    assert len(labels) >= 6, f"{PROBLEMS.name}: {len(labels)} problems, at least 6 required"
    assert len(set(labels)) == len(labels)
    blocks = _solution_blocks(text)
    assert sorted(blocks) == sorted(labels), (sorted(blocks), sorted(labels))
    for label, body in blocks.items():
        prose = re.sub(r"```\{code-cell\}.*?```", "", body, flags=re.S)
        # a worked proof, not a one-liner: at least 600 characters of prose
        assert len(prose.strip()) >= 600, f"{label}: solution prose {len(prose.strip())} chars"
        assert _plain_lines(body), f"{label}: no plain prose line to find in the built page"
    # every Part III chapter and the exact chapter is the subject of some problem
    for doc in PART3_AND_EXACT:
        assert f"{{doc}}`{doc}`" in text, doc
    # numerical sanity checks call qtheory
    assert len(re.findall(r"^```\{code-cell\}", text, re.M)) >= 6


def test_graduate_module_covers_part3_and_exact():
    text = (ROOT / "book" / "course.md").read_text()
    module = text.split("## A graduate module", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in module.splitlines() if re.match(r"\| \d", line)]
    assert len(rows) >= 6, rows
    read = " ".join(r.split("|")[3] for r in rows)
    for doc in PART3_AND_EXACT:
        assert f"{{doc}}`{doc}`" in read, f"the graduate module does not read {doc}"
    for label in _exercises(PROBLEMS.read_text()):
        assert f"{{ref}}`{label}`" in module, f"{label} is assigned in no week"
    assert "{doc}`problems-part3`" in text


NUMBER_WORDS = {w: k for k, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}


def _module_rows(text):
    """The graduate module's table as (week, optional, first session, last session,
    read column, whole row)."""
    module = text.split("## A graduate module", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in module.splitlines():
        m = re.match(r"\| (\d+)( \(optional\))? \| (\d+)-(\d+) \|", line)
        if m:
            rows.append((int(m[1]), bool(m[2]), int(m[3]), int(m[4]),
                         line.split("|")[3], line))
    return module, rows


def test_graduate_module_session_count_is_consistent():
    """Weeks numbered 1, 2, ...; two sessions a week, numbered on; the heading's number of
    weeks, the text's number of sessions and its optional week agree with the table."""
    module, rows = _module_rows((ROOT / "book" / "course.md").read_text())
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1)), [r[0] for r in rows]
    for week, _, first, last, _, _ in rows:
        assert (first, last) == (2 * week - 1, 2 * week), (week, first, last)
    required = [r for r in rows if not r[1]]
    optional = [r for r in rows if r[1]]
    assert rows[:len(required)] == required, "optional weeks come last"
    heading = re.match(r" of (\w+) weeks", module)
    assert heading and NUMBER_WORDS.get(heading[1]) == len(required), \
        (module.splitlines()[0], len(required))
    sessions = re.search(r"two sessions \(lectures\) a week, (\w+) in all", module)
    assert sessions and NUMBER_WORDS.get(sessions[1]) == 2 * len(required), \
        (sessions and sessions[1], 2 * len(required))
    for week, *_ in optional:
        assert f"Week {week} is optional" in module, week


def test_graduate_module_reads_finite_n_after_its_prerequisites():
    """finite-n builds on the steady-state chapter's identity and on planned simulations:
    it is read in a required week after both, and all its exercises are assigned."""
    module, rows = _module_rows((ROOT / "book" / "course.md").read_text())

    def week_of(doc):
        weeks = [r[0] for r in rows if f"{{doc}}`{doc}`" in r[4]]
        assert weeks, f"the graduate module does not read {doc}"
        return weeks[0]

    finite_n = week_of("finite-n")
    assert not [r for r in rows if r[0] == finite_n][0][1], "finite-n in an optional week"
    assert finite_n > week_of("steady-state") and finite_n >= week_of("simulation"), \
        (finite_n, week_of("steady-state"), week_of("simulation"))
    row = [r for r in rows if r[0] == finite_n][0][5]
    for label in _exercises((ROOT / "book" / "finite-n.md").read_text()):
        assert f"{{ref}}`{label}`" in row, f"{label} is not assigned in week {finite_n}"


def test_problem_set_in_toc():
    """The page must be in _toc.yml (Appendices, right after book/course) to be built."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    if "book/problems-part3" not in files:
        msg = ("book/problems-part3 is not listed in _toc.yml yet (add "
               "'      - file: book/problems-part3' under Appendices after book/course)")
        if REQUIRE:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    assert files.index("book/problems-part3") == files.index("book/course") + 1, files


def test_problem_set_student_notebook(tmp_path):
    """The student notebook of the problem set has every problem and no solution."""
    import jupytext

    written = sn.build(tmp_path, chapters=[PROBLEMS])
    nb = nbformat.read(written[0], as_version=4)
    nbformat.validate(nb)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = [c.source.strip() for c in nb.cells if c.cell_type == "code"]
    sol_text, sol_code = _solutions(jupytext.read(PROBLEMS))
    assert len(sol_code) >= 6 and len(sol_text) >= 50
    for snippet in sol_code:
        assert snippet not in code, f"solution code left: {snippet[:60]!r}"
    for line in sol_text:
        assert line not in md, f"solution text left: {line[:60]!r}"
    n = len(_exercises(PROBLEMS.read_text()))
    assert len(re.findall(r"^### Exercise [A-Z\d]", md, re.M)) == n
    assert sum("answer" in c.metadata.get("tags", []) for c in nb.cells) == n
    outside = re.sub(r"```.*?```", "", md, flags=re.S)
    found = ROLE_OR_DIRECTIVE.search(outside)
    assert not found, f"MyST markup left: {found.group(0)!r}"


@pytest.fixture(scope="module")
def problem_set_html(tmp_path_factory):
    """The problem set built alone with Sphinx, with solutions shown (the book) and
    hidden (the book without solutions), as {hide: visible text}.  Links to other
    chapters cannot resolve here (warnings, not errors); the full builds check them."""
    out = {}
    for hide in (False, True):
        d = tmp_path_factory.mktemp(f"problems-hide-{hide}")
        src = d / "src"
        src.mkdir()
        shutil.copy(PROBLEMS, src / "index.md")
        (src / "conf.py").write_text(
            "import sys\n"
            f"sys.path.insert(0, {str(ROOT / 'course' / '_ext')!r})\n"
            "extensions = ['myst_nb', 'sphinx_proof', 'sphinx_exercise', "
            "'hide_gated_solutions']\n"
            "myst_enable_extensions = ['amsmath', 'dollarmath', 'colon_fence', 'deflist', "
            "'substitution']\n"
            "nb_execution_mode = 'off'\n"
            f"hide_solutions = {hide}\n")
        proc = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html",
                               str(src), str(d / "html")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        # only references to the other pages may fail here
        other = [w for w in proc.stderr.splitlines() if "WARNING" in w
                 and not re.search(r"not found|unknown document", w)]
        assert not other, other
        html = (d / "html" / "index.html").read_text()
        out[hide] = (html, _visible_text(html))
    return out


def test_problem_set_solutions_shown_in_book_and_hidden_without(problem_set_html):
    text = PROBLEMS.read_text()
    labels = _exercises(text)
    blocks = _solution_blocks(text)
    book_html, book = problem_set_html[False]
    bare_html, bare = problem_set_html[True]
    # one solution admonition per problem in the book, none in the edition without
    assert len(re.findall(r'class="solution dropdown', book_html)) == len(labels)
    assert not re.search(r'solution-content|class="[^"]*solution[ "]', bare_html)
    for label in labels:
        lines = _plain_lines(blocks[label])
        shown = [s for s in lines if " ".join(s.split()) in book]
        assert len(shown) >= max(1, len(lines) // 2), \
            f"{label}: solution not in the book: {sorted(set(lines) - set(shown))[:3]}"
        left = [s for s in lines if " ".join(s.split()) in bare]
        assert not left, f"{label}: solution text in the book without solutions: {left[:2]}"
    # the problems themselves stay: the first sentence of every exercise
    for m in re.finditer(r"^```+\{exercise\}[^\n]*\n:label:\s*(\S+)\n(.*?)^```+\s*$", text,
                         re.M | re.S):
        pieces = _plain_lines(m[2])
        assert pieces and all(" ".join(s.split()) in bare for s in pieces), (m[1], pieces)
    # solution code is rendered in the book only
    assert "by_hand" in book and "by_hand" not in bare


def test_problem_set_executes():
    """Every code cell of the problem set runs (its asserts check the solutions' claims).

    When the page is in _toc.yml, tests/test_chapters.py executes it like a chapter."""
    if PROBLEMS in CHAPTERS:
        pytest.skip("executed by tests/test_chapters.py")
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(PROBLEMS)
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env_path]))
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT / "book")}}).execute()
    finally:
        os.environ["PYTHONPATH"] = env_path


# ---------------------------------------------------------------------------------------
# autograded assignments (otter-grader)
# ---------------------------------------------------------------------------------------
HAVE_OTTER = importlib.util.find_spec("otter") is not None


def _need_otter():
    if not HAVE_OTTER:
        msg = ("otter-grader is not installed (pip install -r requirements-course.txt); "
               "the assignment tests did not run")
        if REQUIRE:
            pytest.fail(msg + " but QTHEORY_REQUIRE_COURSE=1 requires them", pytrace=False)
        pytest.skip(msg)


# A plausible mistake per question, appended as a last cell to the reference solution.
WRONG = {
    "invariant": ("mean_q = mean_q + 1           # counted s_0 as a level\n"
                  "reduction = 1 / reduction     # inverted ratio\n"
                  "slope = slope * np.log(10)    # log10 instead of ln"),
    "steady_state": ("mm1_estimate = 0.8                      # utilisation, not queue\n"
                     "half_width = ci[1] - ci[0]              # full width\n"
                     "t_needed = 500 + 9_500 * (half_width / 0.01)  # 1/T, not 1/sqrt(T)"),
    "fluid_vs_simulation": ("v1_at_20 = v1_fluid[20]                    # index, not time\n"
                            "sup_gap = np.mean(np.abs(v1_sim - v1_fluid))  # mean, not sup\n"
                            "exponent = np.polyfit(np.log(Ns), np.log10(gaps), 1)[0]"),
}
NAMES = sorted(p.stem for p in (ROOT / "course" / "assignments").glob("*.md"))


def test_three_assignments_with_wrong_answers():
    assert len(NAMES) >= 3 and set(NAMES) == set(WRONG)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    _need_otter()
    import assignments

    out = tmp_path_factory.mktemp("assignments")
    return out, assignments, assignments.build(out, run_tests=False)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", NAMES)
def test_assignment_grading(name, built):
    out, assignments, result = built
    student, zip_ = result[name]
    reference = zip_.parent / f"{name}.ipynb"
    # the student version has no solutions; every question keeps its public tests
    snb = nbformat.read(student, as_version=4)
    ref = nbformat.read(reference, as_version=4)
    sol_lines = {line.strip() for c in ref.cells if c.cell_type == "code"
                 for line in c.source.splitlines() if "= qt." in line or "polyfit" in line}
    student_lines = {line.strip() for c in snb.cells if c.cell_type == "code"
                     for line in c.source.splitlines()}
    assert sol_lines and not (sol_lines & student_lines)
    assert "%pip install" in snb.cells[0].source and "otter.Notebook" in snb.cells[0].source

    full = assignments.grade(zip_, reference, out / f"{name}-reference")
    assert full and all(s == m for s, m in full.values()), full

    blank = assignments.grade(zip_, student, out / f"{name}-blank")
    assert all(s == 0 for s, _ in blank.values()), blank

    # each mistake goes into the answer cell that assigns the variable (otter grades a
    # question with the variables as they are at its check, not at the end)
    wrong_nb = nbformat.read(reference, as_version=4)
    for line in WRONG[name].splitlines():
        var = line.split("=")[0].strip()
        cells = [c for c in wrong_nb.cells if c.cell_type == "code"
                 and re.search(rf"^{var} = ", c.source, re.M)]
        assert cells, (name, var)
        cells[-1].source += "\n" + line + "\n"
    wrong_path = out / f"{name}-wrong" / f"{name}.ipynb"
    wrong_path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(wrong_nb, wrong_path)
    wrong = assignments.grade(zip_, wrong_path, out / f"{name}-wrong" / "results")
    assert set(wrong) == set(full)
    assert all(s < m for s, m in wrong.values()), wrong
