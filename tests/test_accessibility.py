"""The built book for every reader: axe-core accessibility scan and figure alt texts.

Every HTML page of ``_build/html`` is opened, offline, in the same headless Chromium as
``tests/test_browser.py`` (Debian's Chromium driven by Playwright, every request to
another host aborted). Once MathJax and the widgets have rendered, the page gets
axe-core (the npm package, pinned below, fetched once with ``npm pack`` into
``_build/.offline_assets`` by the same code that fetches the widget manager for the
build, ``book/_ext/qtheory_book.py``) and is scanned with axe's default rules (WCAG 2.0,
2.1 and 2.2 level A and AA, and axe's best practices). The page fails on

* any axe violation of impact *serious* or *critical* (missing labels, contrast below
  WCAG AA, images without alternative text, ...); the moderate and minor ones are
  listed in ``_build/accessibility.json`` but do not fail;
* an image whose alternative text is a file name (Sphinx writes the image's address as
  its ``alt`` when nothing else is known: ``../_images/<hash>.png``, read out as noise),
  and a figure or cell-output image whose alternative text is empty or shorter than
  three words.

``book/_ext/qtheory_a11y.py`` writes the alternative texts (from the figure captions
or the cells' ``mystnb: image: alt:`` metadata) and ``book/_static/qtheory-a11y.css``
repairs what axe found in the theme. The planted-defect test proves the gate fails on a
file-name alt, a figure without a description and a serious axe violation, and passes a
clean page.

Needs a fresh build, Playwright, Chromium and npm (once, to fetch axe-core); without
them the tests are skipped with the reason, and with ``QTHEORY_REQUIRE_BROWSER=1`` (CI)
they fail instead.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from built_book import HTML, ROOT, built_pages, require_build, skip_or_fail
from test_browser import PAGE_REPORT_JS, serve
from test_browser import browser, server  # noqa: F401  (fixtures)

#: axe-core from npm (checked with `npm view axe-core version`, December 2026).
AXE = ("axe-core", "4.14.1")
#: Impacts that fail a page (axe's scale: minor, moderate, serious, critical).
FAILING_IMPACTS = ("serious", "critical")
REPORT = ROOT / "_build" / "accessibility.json"

#: An alternative text that is a file name or address, not a description.
FILE_NAME_ALT = re.compile(
    r"(^|/)[\w.-]+\.(png|jpe?g|gif|svg|webp|pdf)$|_images/|^[0-9a-f]{16,}", re.I)


def axe_source() -> str:
    """The text of ``axe.min.js`` (fetched once with ``npm pack``, then cached)."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from qtheory_book import _fetch_npm
    finally:
        sys.path.pop(0)
    try:
        folder = _fetch_npm(*AXE, ROOT / "_build" / ".offline_assets")
    except Exception as exc:  # npm missing or the registry unreachable
        skip_or_fail(f"cannot fetch {AXE[0]}@{AXE[1]} with npm: {exc}")
    return (folder / "axe.min.js").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def axe():
    return axe_source()


# Runs in the page after axe has been injected: the scan and every image's alt text.
AXE_RUN_JS = """
async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  const images = Array.from(document.querySelectorAll('img')).map(img => ({
    src: img.getAttribute('src') || '',
    alt: img.getAttribute('alt'),
    role: img.getAttribute('role') || '',
    hidden: !!img.closest('[aria-hidden="true"]'),
    figure: !!img.closest('figure, .cell_output, .output'),
  }));
  return {
    violations: result.violations.map(v => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5), count: v.nodes.length})),
    images: images,
  };
}
"""


def scan_page(browser, server: str, root: Path, rel: str, axe: str) -> dict:
    """Open one page offline, wait for MathJax and widgets, run axe; return the report."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})

    def route(r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            r.continue_()
        else:
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    try:
        page.goto(f"{server}/{rel}", wait_until="load", timeout=60_000)
        page.evaluate(PAGE_REPORT_JS)  # waits for MathJax, widgets and images
        page.add_script_tag(content=axe)
        return page.evaluate(AXE_RUN_JS)
    finally:
        context.close()


def alt_problems(images: list[dict]) -> list[str]:
    """Images whose alternative text is missing, a file name, or (for a figure) empty."""
    problems = []
    for img in images:
        alt = img["alt"]
        if img["hidden"] or img["role"] in ("presentation", "none"):
            continue
        if alt is None:
            problems.append(f"image without alt attribute: {img['src'][:80]}")
        elif FILE_NAME_ALT.search(alt.strip()):
            problems.append(f"alt text is a file name: {alt[:80]!r} ({img['src'][:60]})")
        elif img["figure"] and len(alt.split()) < 3:
            problems.append(f"figure image without a description: alt={alt!r} "
                            f"({img['src'][:60]})")
    return problems


def page_a11y_problems(report: dict) -> list[str]:
    """Serious and critical axe violations and bad alt texts of one page."""
    problems = [f"axe {v['impact']}: {v['id']} ({v['help']}), {v['count']} element(s), "
                f"e.g. {v['nodes'][:3]}"
                for v in report["violations"] if v["impact"] in FAILING_IMPACTS]
    return problems + alt_problems(report["images"])


def _page_ids() -> list[str]:
    if not HTML.is_dir():
        return ["<no build>"]
    pages = [p for p in built_pages() if "http-equiv" not in p.read_text(errors="ignore")[:2000]]
    return [str(p.relative_to(HTML)) for p in pages] or ["<no build>"]


_RESULTS: dict[str, dict] = {}


@pytest.mark.parametrize("rel", _page_ids())
def test_page_accessible(rel, server, browser, axe):
    """One page: no serious/critical axe violation, every image described."""
    report = scan_page(browser, server, HTML, rel, axe)
    _RESULTS[rel] = report
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(_RESULTS, indent=1))
    problems = page_a11y_problems(report)
    assert not problems, f"{rel}:\n  " + "\n  ".join(problems)


def test_every_chapter_figure_described():
    """Counts: the build has figure images, and none of them has a file-name alt.

    (A static check of the HTML, so that it also runs where no browser is available.)
    """
    require_build()
    total, bad = 0, []
    for page in built_pages():
        html = page.read_text(encoding="utf-8")
        for m in re.finditer(r"<img\b[^>]*>", html):
            tag = m.group(0)
            src = re.search(r'\bsrc="([^"]*)"', tag)
            if not src or "_images/" not in src.group(1):
                continue
            total += 1
            alt = re.search(r'\balt="([^"]*)"', tag)
            if alt is None or FILE_NAME_ALT.search(alt.group(1).strip()) \
                    or len(alt.group(1).split()) < 3:
                bad.append(f"{page.relative_to(HTML)}: {tag[:120]}")
    assert total >= 20, f"only {total} figure images found in the build"
    assert not bad, f"{len(bad)} of {total} figure images not described:\n  " + "\n  ".join(bad)


_CLEAN = ('<!DOCTYPE html><html lang="en"><head><title>t</title></head><body>'
          '<main><h1>A page</h1>{}</main></body></html>')
_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")
PLANTED = {
    "file-alt.html": ('<figure><img src="ok.png" alt="../_images/0a1b2c3d4e5f6a7b8c9d.png">'
                      '<figcaption>A caption.</figcaption></figure>'),
    "no-alt.html": '<p><img src="ok.png"></p>',
    "short-alt.html": '<figure><img src="ok.png" alt="figure"></figure>',
    "unlabelled.html": '<p><input type="range" min="0" max="9"></p>',
    "contrast.html": '<p style="color:#bbb;background:#fff">faint text</p>',
}
EXPECTED = {"file-alt.html": "alt text is a file name",
            "no-alt.html": "axe critical: image-alt",
            "short-alt.html": "figure image without a description",
            "unlabelled.html": "axe critical: label",
            "contrast.html": "axe serious: color-contrast"}


def test_planted_accessibility_defects(browser, axe, tmp_path):
    """The gate fails on each planted defect and passes on the clean page."""
    (tmp_path / "ok.png").write_bytes(_PNG)
    (tmp_path / "clean.html").write_text(_CLEAN.format(
        '<figure><img src="ok.png" alt="Mean queue length against the load, three curves">'
        '<figcaption>A caption.</figcaption></figure>'
        '<label for="s">load</label><input id="s" type="range" min="0" max="9">'))
    for name, body in PLANTED.items():
        (tmp_path / name).write_text(_CLEAN.format(body))
    with serve(tmp_path) as url:
        clean = page_a11y_problems(scan_page(browser, url, tmp_path, "clean.html", axe))
        assert clean == [], clean
        for name in PLANTED:
            problems = page_a11y_problems(scan_page(browser, url, tmp_path, name, axe))
            assert any(EXPECTED[name] in m for m in problems), (name, problems)


def _a11y_extension():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import qtheory_a11y
    finally:
        sys.path.pop(0)
    return qtheory_a11y


def test_alt_text_helpers():
    """The extension's text helpers: math read out, plotting code described, file names
    recognised (the cases the chapters use)."""
    ext = _a11y_extension()
    assert ext.latex_to_text(r"\log_{1/(1-p)} \frac{1}{1-\lambda}") == "log_1/(1-p) 1/(1-λ)"
    assert ext.latex_to_text(r"t_{\rm end} = 2\times 10^4") == "t_end = 2× 10^4"
    assert ext.latex_to_text(r"\lambda \le p,\; s^I_i") == "λ ≤ p, s^I_i"
    code = ('fig, ax = plt.subplots()\n'
            'ax.loglog(x, y, "o-", label=f"p = {p}")\n'
            'ax.plot(x, z, "k--", label=r"fluid $\\frac{1}{1-\\lambda}$")\n'
            'ax.set_xlabel("$1/(1-\\\\lambda)$")\nax.set_ylabel("relaxation time $1/\\\\mu$")\n')
    assert ext.describe_from_code(code) == (
        "Line plot (logarithmic axes) of relaxation time 1/μ against 1/(1-λ); "
        "curves: fluid 1/(1-λ).")
    assert ext.describe_from_code("anim = FuncAnimation(fig, f)\nax.bar(x, h)\n"
                                  ).startswith("Animation (bar chart;")
    assert ext.is_file_name("../_images/0a1b.png") and ext.is_file_name("")
    assert not ext.is_file_name("Mean queue length against the load.")
