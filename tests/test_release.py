"""The release: one version number, valid citation metadata, a wheel that works alone.

* ``test_one_version_*``: ``qtheory.__version__`` (the single source, in
  ``qtheory/__init__.py``) is what ``pyproject.toml`` reads (setuptools' dynamic version),
  what the book and the PDF print (``book/_ext/qtheory_edition.py`` sets Sphinx's
  ``version``/``release`` from it), what ``CITATION.cff`` says and the newest entry of
  ``CHANGELOG.md``.
* ``test_citation_cff_is_valid``: ``CITATION.cff`` against the CFF 1.2.0 JSON schema as
  shipped in the PyPI package ``cffconvert`` (downloaded once, with ``pip download``, into
  ``_build/.release-cache``; validated with ``jsonschema``, which the book's environment has).
* ``test_wheel_and_sdist_in_a_clean_venv`` (slow, several minutes: it builds and installs;
  runs only with ``QTHEORY_RELEASE_TEST=1``, which ``.ci/run`` sets): ``python -m build``
  makes a wheel and an sdist; a clean virtual environment with only the wheel (and the
  test tools of the ``test`` extra) has no Jupyter Book, no Sphinx and no matplotlib,
  imports qtheory from its own site-packages, and passes the library's tests, copied to a
  temporary folder away from the source tree. The sdist rebuilds the same wheel contents.

The chapter, book, browser and course tests are not library tests and are not run there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from qtheory_edition import qtheory_version  # noqa: E402

RELEASE_TEST = os.environ.get("QTHEORY_RELEASE_TEST", "") not in ("", "0")
CACHE = ROOT / "_build" / ".release-cache"
#: not library tests: they execute chapters, read the sources, the book or its build.
#: Every other tests/test_*.py is a library test and runs against the installed wheel.
NOT_LIBRARY = {"test_chapters.py", "test_book_quality.py", "test_browser.py",
               "test_claims_gate.py", "test_course.py", "test_pdf.py", "test_release.py",
               "test_readme.py", "test_explorers.py", "test_accessibility.py",
               "test_notebook_route.py", "test_epub.py", "test_proof_map.py",
               "test_reader_view.py", "test_readme_notes.py", "test_notebooks_outside.py",
               "test_round_trip.py", "test_two_layers.py"}
# what a test of the book (not of the library) imports: the wheel's clean venv has none
BOOK_ONLY_IMPORTS = re.compile(r"^\s*(from|import) (built_book|yaml|nbformat|jupytext|playwright)\b",
                               re.M)
CFFCONVERT = "cffconvert==2.0.0"
CFF_SCHEMA_IN_WHEEL = "cffconvert/schemas/1.2.0/schema.json"
VERSION = qtheory_version()


# ---------------------------------------------------------------------------------------
# one version number
# ---------------------------------------------------------------------------------------
def test_one_version_package_source():
    text = (ROOT / "qtheory" / "__init__.py").read_text()
    assert re.search(r'^__version__ = "\d+\.\d+\.\d+([.-]?\w+)?"$', text, re.M), \
        "qtheory/__init__.py needs one line __version__ = \"X.Y.Z\""
    import qtheory

    assert qtheory.__version__ == VERSION


def test_one_version_pyproject_reads_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"], "pyproject.toml must not repeat the version"
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "qtheory.__version__"}


def test_one_version_installed_metadata():
    # the editable install of .venv was made from pyproject.toml: same version
    from importlib.metadata import version

    assert version("qtheory") == VERSION


def test_one_version_citation_and_changelog():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert str(cff["version"]) == VERSION
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d[^\]]*)\]", changelog, re.M)
    assert released and released[0] == VERSION, \
        f"the newest version in CHANGELOG.md is {released[:1]}, the package's {VERSION}"
    assert f"[{VERSION}]: " in changelog, "CHANGELOG.md: link for the newest version"


def test_one_version_book_config_uses_it():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "qtheory_edition" in config["sphinx"]["local_extensions"]
    # the extension sets version and release from the package's source
    from qtheory_edition import _config_inited

    class Config:
        latex_elements: dict = {}
        html_theme_options: dict = {}
        version = release = ""

    cfg = Config()
    _config_inited(None, cfg)
    assert cfg.version == cfg.release == VERSION
    assert f"Version {VERSION}" in cfg.html_theme_options["extra_footer"]
    assert "amsthm" in cfg.latex_elements["preamble"]


def test_licences_present():
    mit = (ROOT / "LICENSE").read_text()
    assert mit.startswith("MIT License") and "Copyright (c) 2026 The qtheory authors" in mit
    text = (ROOT / "LICENSE-text.md").read_text()
    assert "CC BY 4.0" in text and "creativecommons.org/licenses/by/4.0" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    readme = (ROOT / "README.md").read_text()
    assert "LICENSE-text.md" in readme and "CITATION.cff" in readme


# ---------------------------------------------------------------------------------------
# citation metadata against the schema
# ---------------------------------------------------------------------------------------
def _cff_schema() -> dict:
    target = CACHE / "cff-1.2.0-schema.json"
    if target.is_file():
        return json.loads(target.read_text())
    CACHE.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
         "--disable-pip-version-check", "--only-binary=:all:", CFFCONVERT, "-d", str(CACHE)],
        capture_output=True, text=True, timeout=300)
    wheels = sorted(CACHE.glob("cffconvert-*.whl"))
    if out.returncode != 0 or not wheels:
        reason = f"pip download {CFFCONVERT} failed: {out.stderr.strip()[-300:]}"
        if RELEASE_TEST:
            pytest.fail(reason)
        pytest.skip(reason)
    with zipfile.ZipFile(wheels[-1]) as whl:
        schema = whl.read(CFF_SCHEMA_IN_WHEEL)
    target.write_bytes(schema)
    return json.loads(schema)


def test_citation_cff_is_valid():
    import jsonschema

    schema = _cff_schema()
    assert "1.2.0" in schema.get("$id", "") or "1.2.0" in json.dumps(schema.get("properties", {})
                                                                      .get("cff-version", {}))
    data = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    errors = sorted(validator_class(schema).iter_errors(data), key=str)
    assert not errors, "CITATION.cff: " + "; ".join(e.message for e in errors)


def test_citation_schema_check_can_fail():
    # the same check on a broken copy (no authors, a bad date) must report errors
    import jsonschema

    schema = _cff_schema()
    data = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    del data["authors"]
    data["date-released"] = "yesterday"
    validator_class = jsonschema.validators.validator_for(schema)
    assert list(validator_class(schema).iter_errors(data))


# ---------------------------------------------------------------------------------------
# wheel and sdist in a clean virtual environment
# ---------------------------------------------------------------------------------------
def _run(cmd, **kw):
    kw.setdefault("timeout", 1800)
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert out.returncode == 0, (f"{' '.join(map(str, cmd))} failed ({out.returncode}):\n"
                                 f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out.stdout


def _venv(path: Path) -> Path:
    _run([sys.executable, "-m", "venv", path])
    py = path / "bin" / "python"
    _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "--upgrade", "pip"])
    return py


def library_tests() -> list[Path]:
    return sorted(p for p in (ROOT / "tests").glob("test_*.py") if p.name not in NOT_LIBRARY)


def test_library_tests_found():
    names = {p.name for p in library_tests()}
    assert {"test_invariant.py", "test_simulation.py", "test_fluid.py"} <= names
    assert not names & {"test_chapters.py", "test_browser.py", "test_course.py"}


def test_library_tests_import_only_the_library():
    """A test file that imports the book's machinery cannot be collected in the wheel's
    clean venv (CI's release test): it must be listed in NOT_LIBRARY."""
    wrong = [p.name for p in library_tests() if BOOK_ONLY_IMPORTS.search(p.read_text())]
    assert wrong == [], f"add to NOT_LIBRARY in tests/test_release.py: {wrong}"


@pytest.mark.slow
def test_wheel_and_sdist_in_a_clean_venv(tmp_path):
    if not RELEASE_TEST:
        pytest.skip("builds and installs the release (minutes): QTHEORY_RELEASE_TEST=1 "
                    "runs it (.ci/run does)")
    # 1. python -m build, from a copy of the tracked sources (no _build, no .venv)
    src = tmp_path / "src"
    files = _run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT).split("\n")
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    tools = _venv(tmp_path / "tools")
    _run([tools, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "build"])
    dist = tmp_path / "dist"
    _run([tools, "-m", "build", "--outdir", dist, src])
    wheels = list(dist.glob(f"qtheory-{VERSION}-py3-none-any.whl"))
    sdists = list(dist.glob(f"qtheory-{VERSION}.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in dist.iterdir())
    wheel = wheels[0]
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        meta = whl.read(f"qtheory-{VERSION}.dist-info/METADATA").decode()
    assert not [n for n in names if n.startswith(("tests/", "book/", "scripts/"))], names
    assert f"qtheory/__init__.py" in names and "qtheory/_kernels.py" in names
    # the book's machinery and the stored results it reads (qtheory.book.stored)
    stored = sorted(p.name for p in (ROOT / "qtheory" / "book" / "data").glob("*.json"))
    assert "qtheory/book/__init__.py" in names and stored, names
    assert [n for n in stored if f"qtheory/book/data/{n}" not in names] == [], names
    assert any(n.endswith("licenses/LICENSE") for n in names), names
    assert f"Version: {VERSION}" in meta
    requires = re.findall(r"^Requires-Dist: (.*)$", meta, re.M)
    core = [r for r in requires if "extra ==" not in r]
    assert not [r for r in core if r.lower().startswith(("matplotlib", "jupyter", "sphinx"))]
    assert any(r.startswith("matplotlib") and 'extra == "plot"' in r for r in requires)

    # 2. the sdist holds everything the wheel is made of
    rebuilt = tmp_path / "rebuilt"
    _run([tools, "-m", "pip", "wheel", "--quiet", "--no-deps", "--disable-pip-version-check",
          "-w", rebuilt, sdists[0]])
    with zipfile.ZipFile(next(rebuilt.glob("*.whl"))) as whl:
        assert sorted(whl.namelist()) == sorted(names)

    # 3. a clean venv with only the wheel (and the test tools)
    py = _venv(tmp_path / "clean")
    _run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          f"qtheory[test] @ {wheel.as_uri()}"])
    probe = _run([py, "-c", (
        "import importlib.util as u, importlib.metadata as m, qtheory, sys; "
        "print(qtheory.__file__); print(m.version('qtheory')); "
        "print([n for n in ('jupyter_book', 'sphinx', 'myst_nb', 'matplotlib') "
        "if u.find_spec(n)])")], cwd=tmp_path)
    where, version, present = probe.strip().split("\n")
    assert where.startswith(str(tmp_path / "clean")) and "site-packages" in where, where
    assert version == VERSION
    assert present == "[]", f"the clean venv has {present}"

    # 4. the library tests, copied away from the source tree, against the installed wheel.
    # tests that locate the package as ROOT / "qtheory" (ROOT = the tests' parent folder)
    # find the installed package there through a symbolic link.
    run = tmp_path / "run"
    (run / "tests").mkdir(parents=True)
    for path in library_tests():
        shutil.copy2(path, run / "tests" / path.name)
    (run / "qtheory").symlink_to(Path(where).parent, target_is_directory=True)
    # repository files that library tests read: the licence (the stored results come
    # with the wheel, through qtheory.book.stored)
    for rel in ["LICENSE"]:
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, run / rel)
    (run / "tests" / "conftest.py").write_text(
        "import qtheory\n\n\n"
        "def pytest_report_header(config):\n"
        "    return f'qtheory {qtheory.__version__} from {qtheory.__file__}'\n\n\n"
        "def pytest_sessionstart(session):\n"
        f"    assert qtheory.__file__.startswith({str(tmp_path / 'clean')!r}), qtheory.__file__\n")
    (run / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    chapters: chapters\n    slow: long statistical tests\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{py.parent}{os.pathsep}{env.get('PATH', '')}"
    out = subprocess.run([py.parent / "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                         cwd=run, env=env, capture_output=True, text=True, timeout=1800)
    summary = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    print(out.stdout[-2000:])
    assert out.returncode == 0, f"library tests against the wheel failed:\n" \
                                f"{out.stdout[-4000:]}\n{out.stderr[-2000:]}"
    assert " passed" in summary, summary
