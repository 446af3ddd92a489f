"""Sphinx extension for the qtheory book: a book that works offline, and notebook links.

What it does
------------
1. The ipywidgets manager (``@jupyter-widgets/html-manager``'s ``embed-amd.js`` and its
   fonts) and RequireJS are taken from the npm registry at build time, at pinned versions,
   with ``npm pack`` (npm checks the tarball's integrity), cached under
   ``_build/.offline_assets`` and copied into ``_static/widgets/`` of the HTML output.
   MyST-NB's ``nb_ipywidgets_js`` (in ``_config.yml``) points at those copies, so a page
   with widgets loads nothing from a CDN. MathJax 3 comes from the PyPI package
   ``sphinx-mathjax-offline`` (``mathjax_path`` in ``_config.yml``).
   The files are copied at the end of the build into the output folder, never into the
   book's source ``_static/`` (every ``*.js`` there would be added to every page).
2. The theme's Colab button points at the executed ``.ipynb`` of each chapter on the
   repository's ``notebooks`` branch (Colab opens only ``.ipynb`` files; the chapters are
   MyST Markdown). The Pages workflow publishes that branch from ``_build/notebooks``,
   which this extension writes: the executed notebooks with a first cell that installs
   qtheory when (and only when) the notebook runs on Colab.
3. A chapter taken from the execution cache is offered for download with its outputs
   (MyST-NB 1.4 would offer it without them; see ``restore_cached_outputs``), and in the
   notebooks offered for download and for Colab every value glued into the text
   (``{glue:text}`name:.3f```) is written out, formatted as the book formats it, from the
   notebook's own outputs (``fill_glued_values``): Jupyter, even with jupyterlab-myst,
   knows no glue and would show ``name:.3f``.
4. Small repairs so that pages raise no JavaScript error and fetch nothing from a CDN:
   repeated inline scripts are dropped, the theme gets a default colour mode, and the
   Font Awesome stylesheet link of matplotlib's animations is removed (see below).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

#: npm packages copied into the build: (name, version, files or folders inside the package)
NPM_ASSETS = (
    ("requirejs", "2.3.8", ("require.js",)),
    ("@jupyter-widgets/html-manager", "1.0.15", ("dist",)),
)
#: The branch that holds the executed notebooks (for Colab).
NOTEBOOKS_BRANCH = "notebooks"
#: First cell of a notebook published for Colab: installs qtheory there, nowhere else.
COLAB_SETUP = (
    "# Running on Google Colab? Then install qtheory first (elsewhere this does nothing).\n"
    "import sys\n"
    "if 'google.colab' in sys.modules:\n"
    "    %pip install --quiet git+{repo}@{branch}"
)


def _asset_dir(app: Sphinx) -> Path:
    return Path(app.outdir).parent / ".offline_assets"


def _fetch_npm(name: str, version: str, dest: Path) -> Path:
    """Unpack ``name@version`` from the npm registry into ``dest/<name>-<version>``."""
    target = dest / f"{name.replace('/', '-').lstrip('@')}-{version}"
    if (target / "package.json").is_file():
        return target
    if shutil.which("npm") is None:
        raise ExtensionError(
            f"qtheory_book: npm is needed once to fetch {name}@{version} for the offline "
            "book (install Node.js and npm, e.g. `apt-get install npm`)"
        )
    dest.mkdir(parents=True, exist_ok=True)
    LOGGER.info(f"qtheory_book: fetching {name}@{version} with npm pack")
    out = subprocess.run(
        ["npm", "pack", "--silent", f"{name}@{version}"],
        cwd=dest, check=False, capture_output=True, text=True,
    )
    tgz = dest / (out.stdout.strip().splitlines() or ["?"])[-1]
    if out.returncode != 0 or not tgz.is_file():
        raise ExtensionError(f"qtheory_book: `npm pack {name}@{version}` failed:\n{out.stderr}")
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tgz) as tar:
        tar.extractall(tmp, filter="data")
    (tmp / "package").rename(target)
    shutil.rmtree(tmp)
    tgz.unlink()
    return target


def fetch_assets(app: Sphinx) -> None:
    """builder-inited: make sure the pinned npm packages are in the local cache."""
    if app.builder.format != "html" or app.builder.name == "epub":
        return
    for name, version, _ in NPM_ASSETS:
        _fetch_npm(name, version, _asset_dir(app))


def copy_assets(app: Sphinx, exc: Exception | None) -> None:
    """build-finished: copy the widget manager and RequireJS into _static/widgets."""
    if exc is not None or app.builder.format != "html" or app.builder.name == "epub":
        return
    out = Path(app.outdir) / "_static" / "widgets"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(__file__).with_name("widgets-setup.js"), out / "widgets-setup.js")
    for name, version, items in NPM_ASSETS:
        src = _fetch_npm(name, version, _asset_dir(app))
        for item in items:
            path = src / item
            if path.is_dir():
                for f in path.iterdir():
                    if f.suffix != ".map":  # source maps: 6 MB nobody reading needs
                        shutil.copy2(f, out / f.name)
            else:
                shutil.copy2(path, out / path.name)


def dedupe_inline_scripts(app, pagename, templatename, context, doctree) -> None:
    """html-page-context: drop repeated inline scripts.

    Jupyter Book registers sphinx-thebe's and sphinx-togglebutton's inline configuration
    twice; the second ``const THEBE_JS_URL = ...`` then raises a SyntaxError on every page.
    """
    seen, kept = set(), []
    for script in context.get("script_files", []):
        if not getattr(script, "filename", "x"):  # an inline script
            key = tuple(sorted((k, str(v)) for k, v in script.attributes.items()))
            if key in seen:
                continue  # same body and attributes as one already on the page
            seen.add(key)
        kept.append(script)
    context["script_files"] = kept


def set_default_mode(app: Sphinx, config) -> None:
    """config-inited: a light page by default (the theme otherwise logs a console error
    'Got invalid theme mode' on every page); readers can still switch."""
    config.html_context.setdefault("default_mode", "light")


#: matplotlib's ``to_jshtml()`` animations link Font Awesome 4 from a CDN for their buttons.
FONT_AWESOME_CDN = re.compile(
    r'<link[^>]*href="https://maxcdn\.bootstrapcdn\.com/font-awesome/[^"]*"[^>]*>\s*')


def strip_cdn_links(app: Sphinx, doctree, docname: str) -> None:
    """doctree-resolved: drop the CDN stylesheet of matplotlib animations.

    Their ``<i class="fa fa-play">`` buttons are drawn by the Font Awesome script that the
    theme already serves from ``_static`` (its ``fa`` prefix and the version 4 names are
    understood), so nothing is fetched from the network.
    """
    for raw in doctree.findall(nodes.raw):
        if "html" in raw.get("format", "") and FONT_AWESOME_CDN.search(raw.astext()):
            text = FONT_AWESOME_CDN.sub("", raw.astext())
            raw.children = [nodes.Text(text)]
            raw.rawsource = text


#: MyST-NB's glue role in Markdown (the only glue form the chapters use)
GLUE_TEXT = re.compile(r"\{glue:text\}`([^`]+)`")


def glued_values(nb: dict) -> dict:
    """{name: mime bundle} of the values a notebook's outputs glue (MyST-NB writes a
    display output with ``metadata.scrapbook``; with ``display=False`` its mime types
    carry a prefix, removed here)."""
    out = {}
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            meta = (output.get("metadata") or {}).get("scrapbook") or {}
            if "name" in meta:
                n = len(meta.get("mime_prefix", ""))
                out[meta["name"]] = {k[n:]: v for k, v in output.get("data", {}).items()}
    return out


def fill_glued_values(nb: dict) -> list[str]:
    """Write each ``{glue:text}`` role of the Markdown cells as its value, formatted as
    MyST-NB's role formats it (``name:fmt``, default ``s``). Roles whose value the
    notebook does not hold are left as they are; their names are returned."""
    from myst_nb.core.variables import format_plain_text

    values, missing = glued_values(nb), []

    def repl(m):
        key, _, fmt = m.group(1).rpartition(":") if ":" in m.group(1) else (m.group(1), "", "s")
        data = values.get(key.strip())
        if data is None or "text/plain" not in data:
            missing.append(key.strip())
            return m.group(0)
        text = data["text/plain"]
        return format_plain_text("".join(text) if isinstance(text, list) else str(text), fmt)

    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            src = cell["source"]
            src = "".join(src) if isinstance(src, list) else src
            cell["source"] = GLUE_TEXT.sub(repl, src)
    return missing


def restore_cached_outputs(app: Sphinx, env) -> None:
    """env-updated: put the outputs back into the executed notebooks of cached chapters.

    MyST-NB 1.4 writes ``_build/jupyter_execute/<page>.ipynb`` (the notebook that the
    download button offers) from the notebook *before* merging the cached outputs into
    it, so a chapter taken from the execution cache would be offered without any output.
    Merge them from the cache here, before the pages (and their download links) are
    written.
    """
    from jupyter_cache import get_cache
    import nbformat

    cache_path = env.mystnb_config.execution_cache_path
    executed = Path(app.outdir).parent / "jupyter_execute"
    if not cache_path or not Path(cache_path).exists() or not executed.is_dir():
        return
    cache = get_cache(cache_path)
    for path in sorted(executed.rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        # always from the cache when it holds the chapter: a chapter executed in this
        # build is written with its outputs but without the hidden glue outputs
        # (display=False), which only the cached notebook keeps
        try:
            _, nb = cache.merge_match_into_notebook(nb)
        except KeyError:
            pass  # not a cached notebook (e.g. a page without code)
        missing = fill_glued_values(nb)
        if missing:
            LOGGER.warning(f"qtheory_book: {path.name}: no glued value for "
                           f"{sorted(set(missing))} in the executed notebook")
        nbformat.write(nb, path)


def _repo(app: Sphinx) -> tuple[str, str]:
    opts = app.config.html_theme_options or {}
    return opts.get("repository_url", "").rstrip("/"), opts.get("repository_branch", "main")


def colab_to_notebooks_branch(app, pagename, templatename, context, doctree) -> None:
    """html-page-context (after the theme's): Colab opens the executed .ipynb."""
    repo, _ = _repo(app)
    for button in context.get("header_buttons", []):
        for item in button.get("buttons", []) if isinstance(button, dict) else []:
            if item.get("text") == "Colab" and repo.startswith("https://github.com/"):
                slug = repo[len("https://github.com/"):]
                item["url"] = (
                    "https://colab.research.google.com/github/"
                    f"{slug}/blob/{NOTEBOOKS_BRANCH}/{pagename}.ipynb"
                )


def write_colab_notebooks(app: Sphinx, exc: Exception | None) -> None:
    """build-finished: _build/notebooks/<page>.ipynb = executed notebook + Colab setup cell."""
    if exc is not None or app.builder.format != "html" or app.builder.name == "epub":
        return
    repo, branch = _repo(app)
    executed = Path(app.outdir).parent / "jupyter_execute"
    dest = Path(app.outdir).parent / "notebooks"
    shutil.rmtree(dest, ignore_errors=True)
    for nb_path in sorted(executed.rglob("*.ipynb")):
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        cell = {
            "cell_type": "code", "execution_count": None, "id": "qtheory-colab-setup",
            "metadata": {}, "outputs": [],
            "source": COLAB_SETUP.format(repo=repo, branch=branch),
        }
        nb = copy.deepcopy(nb)
        nb["cells"].insert(0, cell)
        target = dest / nb_path.relative_to(executed)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")


def setup(app: Sphinx) -> dict:
    import nbclient_poll  # beside this file; local_extensions puts book/_ext on sys.path

    nbclient_poll.install()  # chapters executed by the build: no 300 s stall (see there)
    app.connect("config-inited", set_default_mode)
    app.connect("builder-inited", fetch_assets)
    app.connect("doctree-resolved", strip_cdn_links)
    app.connect("env-updated", restore_cached_outputs)
    app.connect("html-page-context", dedupe_inline_scripts, priority=502)
    app.connect("build-finished", copy_assets)
    app.connect("build-finished", write_colab_notebooks)
    # After the theme (501), and early enough: html-page-context stops at the first
    # handler that returns a value.
    app.connect("html-page-context", colab_to_notebooks_branch, priority=502)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
