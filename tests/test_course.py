"""Course materials: exercises, student notebooks, the book without solutions, assignments.

* every chapter has at least four exercises, each with a gated solution, at least one of
  them with code (that code runs in every build: the chapter tests execute it);
* the student notebooks (scripts/student_notebooks.py) are valid notebooks whose first
  cell installs the exact qtheory version, with no solution text or code and no MyST
  markup left, and whose remaining code still runs;
* the extension behind the book without solutions removes gated solutions (text and code)
  and nothing else;
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


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_has_four_exercises_with_solutions(path):
    import jupytext

    text = path.read_text()
    labels = _exercises(text)
    assert len(labels) >= 4, f"{path.name}: {len(labels)} exercises, at least 4 required"
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


def test_converter_install_cell(sample_notebook):
    first = sample_notebook.cells[0]
    assert first.cell_type == "code"
    assert '%pip install --quiet "qtheory[widgets] @ git+https://example.org/q/q@v9.8.7"' \
        in first.source
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
    assert (f'%pip install --quiet "qtheory[widgets] @ git+{url}@v{qtheory.__version__}"'
            in first.source)
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
    assert len(re.findall(r"^### Exercise \d+", md, re.M)) == n_ex
    assert sum("answer" in c.metadata.get("tags", []) for c in nb.cells) == n_ex
    # every non-solution code cell of the chapter is there, in order
    kept = [c.source.strip() for c in source.cells
            if c.cell_type == "code" and c.source.strip() not in sol_code]
    assert [c for c in code if c in kept] == kept


@pytest.mark.timeout(300)
def test_student_notebook_runs(student_dir):
    """The smallest chapter's student notebook runs without its solutions.

    The install cell is dropped (here qtheory comes from this checkout).
    """
    from nbclient import NotebookClient

    path = min(CHAPTERS, key=lambda p: p.stat().st_size)
    nb = nbformat.read(student_dir / f"{path.stem}.ipynb", as_version=4)
    nb.cells = [c for c in nb.cells[1:] if "answer" not in c.metadata.get("tags", [])]
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env_path]))
    try:
        NotebookClient(nb, timeout=240, kernel_name="python3",
                       resources={"metadata": {"path": str(student_dir)}}).execute()
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
# autograded assignments (otter-grader)
# ---------------------------------------------------------------------------------------
HAVE_OTTER = importlib.util.find_spec("otter") is not None
REQUIRE = os.environ.get("QTHEORY_REQUIRE_COURSE") == "1"


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
