"""The built book as a reader sees it, offline, in headless Chromium.

Every HTML page of ``_build/html`` is served from 127.0.0.1 and opened in Debian's
Chromium driven by Playwright, with every request to another host aborted (and counted
as a failure): the page must work with no network. On each page:

* no request leaves the machine (MathJax, the widget manager, fonts: all local);
* no JavaScript error is raised (uncaught exceptions and console errors);
* every math element the page contains is typeset by MathJax, without a MathJax error;
* every image has loaded (``naturalWidth > 0``);
* every embedded widget view is rendered by the widget manager, none reads "Error".

The test needs a fresh build (``bash scripts/book.sh``), Playwright and Chromium
(``/usr/bin/chromium`` or ``QTHEORY_CHROMIUM``). Without them it is skipped with the
reason; with ``QTHEORY_REQUIRE_BROWSER=1`` (CI) it fails instead.

**The Playwright/Chromium pair.** A Playwright release is built for one Chromium (the
``browserVersion`` of its ``driver/package/browsers.json``: 159 for Playwright 1.65),
but the tests drive the distribution's Chromium (Debian's: 156 when this was written),
because Playwright's own browser download is not reachable. A pair that works today can
break when either side is updated. So every browser fixture checks the pair it got
against :data:`TESTED_BROWSER_PAIRS` (the pairs these tests were run and passed with) and
prints it; an untested pair fails the run when ``QTHEORY_REQUIRE_BROWSER`` or
``QTHEORY_REQUIRE_LAB`` is set (CI), naming both versions and what to do, and only warns
otherwise. ``QTHEORY_UNTESTED_BROWSER=1`` lets a maintainer run the tests with a new pair
once, to add it to the table after they pass.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import json
import re
import threading
import warnings
from pathlib import Path
from urllib.parse import urlparse

import pytest

from built_book import REQUIRED, HTML, built_pages, parse, require_build, skip_or_fail

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]
SCREENSHOTS = os.environ.get("QTHEORY_SCREENSHOTS")  # a folder: save a picture of each page

# Console messages of the browser itself, not of the page's scripts.
# The aborted requests and missing files are reported with their addresses instead.
IGNORED_CONSOLE = ("Failed to load resource:",)


#: (Playwright major.minor, Chromium major) pairs with which the browser tests were run and
#: passed. Playwright is pinned in requirements.txt; Debian's chromium follows its security
#: updates, so a new Chromium major lands here only after the tests passed with it.
TESTED_BROWSER_PAIRS = {("1.65", 156)}


def playwright_version() -> str:
    """The installed Playwright's version, e.g. ``"1.65.2"``."""
    from importlib.metadata import version

    return version("playwright")


def playwright_built_for() -> str | None:
    """The Chromium version the installed Playwright was built for (its browsers.json)."""
    import playwright

    path = Path(playwright.__file__).parent / "driver" / "package" / "browsers.json"
    try:
        browsers = json.loads(path.read_text())["browsers"]
    except (OSError, ValueError, KeyError):
        return None
    return next((b.get("browserVersion") for b in browsers if b.get("name") == "chromium"),
                None)


def pair_problem(playwright: str, chromium: str, built_for: str | None,
                 tested=TESTED_BROWSER_PAIRS) -> str | None:
    """None when (Playwright, Chromium) is a tested pair, else a message saying why not
    and what to do."""
    pw = ".".join(playwright.split(".")[:2])
    m = re.match(r"(\d+)\.", chromium)
    major = int(m.group(1)) if m else None
    if (pw, major) in tested:
        return None
    known = ", ".join(f"Playwright {a} with Chromium {b}" for a, b in sorted(tested))
    return (f"Playwright {playwright} (built for Chromium {built_for or '?'}) is driving "
            f"Chromium {chromium}: this pair has not been tested (tested: {known}). "
            "Install a tested pair (requirements.txt pins Playwright; `apt-cache policy "
            "chromium` lists Debian's versions), or run the browser tests once with "
            "QTHEORY_UNTESTED_BROWSER=1 and, when they pass, add the pair to "
            "TESTED_BROWSER_PAIRS in tests/test_browser.py.")


def check_browser_pair(browser, required: bool) -> str:
    """Check the pair of a launched browser; fail (``required``: CI) or warn when it is
    not a tested one. Returns a one-line description of the pair."""
    problem = pair_problem(playwright_version(), browser.version, playwright_built_for())
    pair = f"Playwright {playwright_version()} driving Chromium {browser.version}"
    if problem:
        override = os.environ.get("QTHEORY_UNTESTED_BROWSER", "") not in ("", "0")
        if required and not override:
            pytest.fail(problem + " (this run requires a tested pair)")
        warnings.warn(problem)
    print(f"[browser] {pair}")
    return pair


def _chromium() -> str | None:
    path = os.environ.get("QTHEORY_CHROMIUM") or shutil.which("chromium") \
        or shutil.which("chromium-browser")
    return path if path and Path(path).exists() else None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


@contextlib.contextmanager
def serve(directory: Path):
    """Serve a folder on 127.0.0.1 (a free port) for the duration of the block."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def server():
    require_build()
    with serve(HTML) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("Playwright is not installed (pip install -r requirements.txt)")
    exe = _chromium()
    if exe is None:
        skip_or_fail("Chromium not found: `apt-get install chromium` "
                     "(or set QTHEORY_CHROMIUM to a Chromium binary)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        check_browser_pair(b, REQUIRED)
        yield b
        b.close()


def _page_ids() -> list[str]:
    if not HTML.is_dir():
        return ["<no build>"]
    return [str(p.relative_to(HTML)) for p in built_pages()] or ["<no build>"]


# Runs in the page once it has loaded: waits for MathJax and the widget manager, then
# reports what a reader would see.
PAGE_REPORT_JS = """
async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const mathEls = Array.from(document.querySelectorAll('.math'));
  if (mathEls.length) {
    for (let i = 0; i < 200 && !(window.MathJax && MathJax.startup
                                 && MathJax.startup.promise); i++) await sleep(50);
    if (window.MathJax && MathJax.startup && MathJax.startup.promise)
      await MathJax.startup.promise;
  }
  const views = document.querySelectorAll(
      'script[type="application/vnd.jupyter.widget-view+json"]');
  if (views.length) {
    for (let i = 0; i < 200; i++) {
      const done = Array.from(views).every(v => v.parentElement.querySelector(
          '.widget-subarea, .jupyter-widgets, .widget-error'));
      if (done) break;
      await sleep(50);
    }
  }
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(img => img.complete ? null :
      new Promise(r => { img.onload = img.onerror = r; setTimeout(r, 5000); })));
  return {
    math: mathEls.length,
    untypeset: mathEls.filter(el => !el.querySelector('mjx-container'))
                      .map(el => el.textContent.trim().slice(0, 80)),
    merror: Array.from(document.querySelectorAll('mjx-merror'))
                 .map(el => (el.getAttribute('data-mjx-error') || el.textContent).slice(0, 120)),
    broken_images: imgs.filter(i => !(i.complete && i.naturalWidth > 0))
                       .map(i => i.getAttribute('src')),
    widget_views: views.length,
    unrendered_widgets: Array.from(views).filter(v => !v.parentElement.querySelector(
        '.widget-subarea, .jupyter-widgets')).length,
    widget_errors: Array.from(document.querySelectorAll('.widget-error, .jupyter-widgets'))
        .filter(el => /Error displaying widget/.test(el.textContent)).length,
  };
}
"""


def check_page(browser, server: str, root: Path, rel: str) -> list[str]:
    """Open one page of the folder ``root`` served at ``server`` and list what a reader
    would see broken: requests to other hosts, missing files, JavaScript errors, untypeset
    math or MathJax errors, images that did not load, widgets not rendered."""
    external, js_errors, missing = [], [], []
    refresh = parse(root / rel).refresh
    if refresh is not None:  # a redirect page (index.html): its target must exist
        target = (root / rel).parent / refresh.split("#")[0]
        return [] if target.is_file() else [f"{rel} redirects to a missing page {refresh}"]
    context = browser.new_context(viewport={"width": 1280, "height": 900})

    def route(r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda e: js_errors.append(f"uncaught: {e}"))
    page.on("response", lambda r: missing.append(f"{r.status} {r.url}")
            if r.status >= 400 else None)
    page.on("console", lambda m: js_errors.append(f"console.{m.type}: {m.text}")
            if m.type == "error" and not m.text.startswith(IGNORED_CONSOLE) else None)
    try:
        response = page.goto(f"{server}/{rel}", wait_until="load", timeout=60_000)
        if response is None or not response.ok:
            return [f"{rel}: HTTP {response and response.status}"]
        report = page.evaluate(PAGE_REPORT_JS)
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(SCREENSHOTS) / (rel.replace("/", "_") + ".png")))
    finally:
        context.close()
    return page_problems(report, external, missing, js_errors)


def page_problems(report: dict, external: list[str], missing: list[str],
                  js_errors: list[str]) -> list[str]:
    """Turn what the browser saw on one page into a list of problems (empty: all well)."""
    problems = []
    if external:
        problems.append(f"requests to other hosts (the page needs the network): {external}")
    if missing:
        problems.append(f"files missing from the build: {missing}")
    if js_errors:
        problems.append(f"JavaScript errors: {js_errors}")
    if report["untypeset"]:
        problems.append(f"{len(report['untypeset'])} of {report['math']} math elements not "
                        f"typeset, e.g. {report['untypeset'][:3]}")
    if report["merror"]:
        problems.append(f"MathJax errors: {report['merror']}")
    if report["broken_images"]:
        problems.append(f"images that did not load: {report['broken_images']}")
    if report["unrendered_widgets"] or report["widget_errors"]:
        problems.append(f"widgets: {report['unrendered_widgets']} of "
                        f"{report['widget_views']} not rendered, "
                        f"{report['widget_errors']} show an error")
    return problems


@pytest.mark.parametrize("rel", _page_ids())
def test_page_offline(rel, server, browser):
    """One page: offline, no JS errors, math typeset, images loaded, widgets rendered."""
    problems = check_page(browser, server, HTML, rel)
    assert not problems, f"{rel}:\n  " + "\n  ".join(problems)


# A 1x1 PNG, so that the clean planted page has an image that loads.
_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")
_CLEAN = "<!DOCTYPE html><html><head><title>t</title></head><body><p>ok</p>{}</body></html>"
PLANTED = {
    "external.html": '<img src="https://example.org/x.png">',
    "missing.html": '<img src="no-such-image.png">',
    "js.html": '<script>throw new Error("planted")</script>',
    "console.html": '<script>console.error("planted")</script>',
    "math.html": '<span class="math notranslate nohighlight">\\(x^2\\)</span>',
    "widget.html": ('<div><script type="application/vnd.jupyter.widget-view+json">'
                    '{"version_major": 2, "model_id": "m"}</script></div>'),
    "redirect.html": '<meta http-equiv="refresh" content="0; url=nowhere.html">',
}
EXPECTED = {"external.html": "requests to other hosts", "missing.html": "files missing",
            "js.html": "JavaScript errors", "console.html": "JavaScript errors",
            "math.html": "math elements not typeset", "widget.html": "widgets: 1 of 1",
            "redirect.html": "redirects to a missing page"}


def test_planted_page_defects(browser, tmp_path):
    """The browser gate fails on each planted defect and passes on the clean page."""
    (tmp_path / "ok.png").write_bytes(_PNG)
    (tmp_path / "clean.html").write_text(_CLEAN.format('<img src="ok.png">'))
    for name, body in PLANTED.items():
        head = body if name == "redirect.html" else ""
        (tmp_path / name).write_text(_CLEAN.replace("<title>", head + "<title>")
                                     .format("" if head else body))
    with serve(tmp_path) as url:
        assert check_page(browser, url, tmp_path, "clean.html") == []
        for name in PLANTED:
            problems = check_page(browser, url, tmp_path, name)
            assert any(EXPECTED[name] in m for m in problems), (name, problems)


def test_browser_pair_check():
    """The pair check passes a tested pair and names both versions of an untested one."""
    assert pair_problem("1.65.2", "156.0.8078.114", "159.0.8154.6") is None
    problem = pair_problem("1.65.2", "157.0.1.2", "159.0.8154.6")
    assert problem and "Chromium 157.0.1.2" in problem and "built for Chromium 159" in problem
    assert "TESTED_BROWSER_PAIRS" in problem
    assert pair_problem("1.66.0", "156.0.8078.114", "160.0") is not None
    assert pair_problem("1.65.2", "garbage", None) is not None


def test_installed_playwright_is_pinned():
    """The Playwright the tests run with is the one requirements.txt pins, and it is in a
    tested pair (the Chromium side is checked when a browser is launched)."""
    pin = re.search(r"^playwright==(\S+)", (Path(__file__).parents[1] /
                                           "requirements.txt").read_text(), re.M)
    assert pin, "requirements.txt does not pin playwright"
    try:
        installed = playwright_version()
    except Exception:
        skip_or_fail("Playwright is not installed (pip install -r requirements.txt)")
    assert installed == pin.group(1), (installed, pin.group(1))
    assert ".".join(installed.split(".")[:2]) in {a for a, _ in TESTED_BROWSER_PAIRS}


def test_untested_pair_fails_in_ci(monkeypatch):
    """An untested pair fails a run that requires the browser (CI) and warns elsewhere;
    QTHEORY_UNTESTED_BROWSER=1 lets a maintainer try a new pair."""
    from types import SimpleNamespace

    pytest.importorskip("playwright")
    fake = SimpleNamespace(version="1.0.0.0")
    monkeypatch.delenv("QTHEORY_UNTESTED_BROWSER", raising=False)
    with pytest.raises(pytest.fail.Exception, match="has not been tested"):
        check_browser_pair(fake, True)
    with pytest.warns(UserWarning, match="Chromium 1.0.0.0"):
        check_browser_pair(fake, False)
    monkeypatch.setenv("QTHEORY_UNTESTED_BROWSER", "1")
    with pytest.warns(UserWarning):
        check_browser_pair(fake, True)
