"""Build the autograded assignments (otter-grader) and grade notebooks against them.

The masters live in ``course/assignments/<name>.md`` (MyST Markdown notebooks in otter's
assignment format: raw cells ``# BEGIN QUESTION`` ... ``# END QUESTION``, solutions between
``# BEGIN SOLUTION`` and ``# END SOLUTION``, tests that ``assert`` values with tolerances,
hidden ones marked ``hidden: true``).  ``build`` converts each master to ``.ipynb``, puts a
set-up cell first (it installs the qtheory version of the book, like the student notebooks,
and otter-grader, then creates the ``grader``), writes a ``requirements.txt`` for the
grading environment, and runs ``otter assign``.  Result, per assignment::

    _build/assignments/<name>/dist/student/<name>.ipynb     hand this to students
    _build/assignments/<name>/dist/autograder/<name>.ipynb  the reference solution
    _build/assignments/<name>/dist/autograder/<name>-autograder_*.zip
                                                            the autograder bundle

``grade`` runs ``otter run`` (no container) on one notebook and returns the scores.

Usage::

    python scripts/assignments.py build [--out DIR] [--ref REF] [--no-run-tests] [NAME ...]
    python scripts/assignments.py grade AUTOGRADER.zip NOTEBOOK.ipynb [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
MASTERS = ROOT / "course" / "assignments"
DEFAULT_OUT = ROOT / "_build" / "assignments"
OTTER_VERSION = "7.0.0"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from student_notebooks import install_spec, qtheory_version, repository_url  # noqa: E402


def masters():
    return sorted(MASTERS.glob("*.md"))


def _otter():
    exe = Path(sys.executable).with_name("otter")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("otter")
    if not found:
        raise RuntimeError("otter-grader is not installed: pip install -r "
                           "requirements-course.txt (bash scripts/course.sh does it)")
    return [found]


def _env():
    env = dict(os.environ)
    # the grading runs import this checkout's qtheory even without pip install -e .
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def setup_cell(name: str, version: str, url: str, ref: str):
    spec = install_spec(version, url, ref)
    source = (
        f"# Set-up: installs qtheory {version} (the version of the book; from {url}, release\n"
        f"# {ref}) and otter-grader {OTTER_VERSION} when they are missing, then starts the grader.\n"
        "import importlib.metadata\n"
        "\n"
        "\n"
        "def _version(package):\n"
        "    try:\n"
        "        return importlib.metadata.version(package)\n"
        "    except importlib.metadata.PackageNotFoundError:\n"
        "        return None\n"
        "\n"
        "\n"
        f"if _version(\"qtheory\") != \"{version}\" or _version(\"otter-grader\") is None:\n"
        f"    %pip install --quiet \"{spec}\" otter-grader=={OTTER_VERSION}\n"
        "\n"
        "import otter\n"
        "\n"
        f"grader = otter.Notebook(\"{name}.ipynb\")\n"
    )
    return nbformat.v4.new_code_cell(source)


def prepare(master: Path, workdir: Path, version: str, url: str, ref: str) -> Path:
    """Write ``workdir/<name>.ipynb`` (set-up cell added) and its requirements.txt."""
    name = master.stem
    nb = jupytext.read(master)
    config = nb.cells[0]
    if config.cell_type != "raw" or not config.source.startswith("# ASSIGNMENT CONFIG"):
        raise ValueError(f"{master}: the first cell must be the raw ASSIGNMENT CONFIG cell")
    if not re.search(rf"^name:\s*{re.escape(name)}\s*$", config.source, re.M):
        raise ValueError(f"{master}: the assignment name must be the file name {name!r}")
    config.source = (config.source.rstrip() + "\nrequirements: requirements.txt\n"
                     "python_version: \"3.11\"\n")
    nb.cells.insert(1, setup_cell(name, version, url, ref))
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                 "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    workdir.mkdir(parents=True, exist_ok=True)
    dest = workdir / f"{name}.ipynb"
    nbformat.write(nb, dest)
    (workdir / "requirements.txt").write_text(
        f"# grading environment of the assignment {name}\n"
        f"{install_spec(version, url, ref)}\n")
    return dest


def build(out: Path = DEFAULT_OUT, ref: str | None = None, names=None, run_tests=True):
    """Build student notebooks and autograder bundles; return {name: (student, zip)}."""
    version, url = qtheory_version(), repository_url()
    ref = ref or f"v{version}"
    chosen = [m for m in masters() if not names or m.stem in names]
    if names and len(chosen) != len(set(names)):
        raise ValueError(f"unknown assignments: {sorted(set(names) - {m.stem for m in chosen})}")
    results = {}
    for master in chosen:
        name = master.stem
        work = Path(out) / name
        if work.exists():
            shutil.rmtree(work)
        nb_path = prepare(master, work / "master", version, url, ref)
        cmd = [*_otter(), "assign", str(nb_path), str(work / "dist")]
        if not run_tests:
            cmd.insert(2, "--no-run-tests")
        proc = subprocess.run(cmd, env=_env(), cwd=work, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"otter assign failed for {name}:\n{proc.stdout}\n{proc.stderr}")
        student = work / "dist" / "student" / f"{name}.ipynb"
        zips = sorted((work / "dist" / "autograder").glob(f"{name}-autograder_*.zip"))
        if not student.exists() or len(zips) != 1:
            raise RuntimeError(f"otter assign did not write the expected files for {name}")
        results[name] = (student, zips[0])
    return results


def grade(autograder_zip: Path, notebook: Path, out_dir: Path) -> dict:
    """Grade one notebook with ``otter run``; return {question: (score, max_score)}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [*_otter(), "run", "--no-logo", "-a", str(autograder_zip), "-o", str(out_dir),
           str(notebook)]
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
    results = out_dir / "results.json"
    if proc.returncode != 0 or not results.exists():
        raise RuntimeError(f"otter run failed on {notebook}:\n{proc.stdout}\n{proc.stderr}")
    data = json.loads(results.read_text())
    return {t["name"]: (t["score"], t["max_score"]) for t in data["tests"]
            if "max_score" in t}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="student notebooks and autograder bundles")
    b.add_argument("names", nargs="*", help="assignments (default: all)")
    b.add_argument("--out", default=str(DEFAULT_OUT))
    b.add_argument("--ref", default=None, help="git tag or commit of qtheory to install "
                   "(default v<version>)")
    b.add_argument("--no-run-tests", action="store_true",
                   help="skip otter's check of the tests against the solutions")
    g = sub.add_parser("grade", help="grade one notebook")
    g.add_argument("autograder")
    g.add_argument("notebook")
    g.add_argument("--out", default=None, help="folder for results.json")
    args = ap.parse_args(argv)
    if args.cmd == "build":
        for name, (student, zip_) in build(Path(args.out), args.ref, args.names or None,
                                           not args.no_run_tests).items():
            print(f"[assignments] {name}: student notebook {student}\n"
                  f"[assignments] {name}: autograder {zip_}")
    else:
        out = Path(args.out or Path(args.notebook).with_suffix("").as_posix() + "-grading")
        scores = grade(Path(args.autograder), Path(args.notebook), out)
        total = sum(s for s, _ in scores.values())
        most = sum(m for _, m in scores.values())
        for q, (s, m) in scores.items():
            print(f"{q}: {s:g} / {m:g}")
        print(f"total: {total:g} / {most:g} (results in {out}/results.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
