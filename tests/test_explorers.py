"""The explorers of the built book, in headless Chromium with the network blocked.

Each of the six explorers (``qb.explorer(name)``, drawn by
``book/_ext/explorers/explorers.js`` with Plotly) is opened on its page of ``_build/html``.
For every explorer the test

* moves every slider with the keyboard (focus, arrow keys) and checks that the figure
  (Plotly's SVG) changes;
* sets the sliders to at least 20 settings (each control moved, then seeded random
  settings) and checks that the numbers the explorer displays (``data-value`` of its
  ``<output>``) are qtheory's for that setting, computed here with the view functions
  of ``qtheory.book.explorers``: integers exactly, floats to a relative error of 1e-9 (the
  page stores 10 significant digits; the M/M/1 tail and the ratio are computed in the
  page from closed forms);
* sees no request leave the machine and no JavaScript error;
* checks that every slider has a label, that without JavaScript (and in print) the
  explorer is hidden and the static figures remain, and that the page's HTML (explorer
  data included, the shared Plotly library excluded) stays within 3 MB.

Needs a fresh build (``bash scripts/book.sh``), Playwright and Chromium, as
``tests/test_browser.py``; skipped (or failed in CI) without them.
"""

from __future__ import annotations

import json
from urllib.parse import urlparse

import numpy as np
import pytest

import qtheory as qt
from qtheory import book as qb
from built_book import HTML
from test_browser import browser, server  # noqa: F401  (fixtures)

#: The page of each explorer.
PAGES = {"small-system": "book/model.html", "fluid": "book/fluid.html",
         "invariant": "book/invariant.html", "heavy-traffic": "book/intro.html",
         "fluid-limit": "book/model.html", "design": "book/design.html"}
RTOL = 1e-9
N_RANDOM = 20
MAX_PAGE_BYTES = 3_000_000


def close(a, b, rtol=RTOL):
    """Relative error at most rtol (exact for zero)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rtol * np.abs(b)))


def expected_problems(name: str, s: dict, shown: dict) -> list[str]:
    """Compare what the page shows at setting ``s`` (control name -> grid value) with
    qtheory's view at that setting."""
    bad = []

    def check(label, ok, got, want):
        if not ok:
            bad.append(f"{name} {s}: {label} shows {got}, qtheory gives {want}")

    if name == "small-system":
        v = qb.small_system_view(s["n_stations"], s["lam"], s["p"])
        q = v["queues"][list(v["times"]).index(s["t"])].tolist()
        check("queues", shown["queues"] == q, shown["queues"], q)
        check("longest", shown["longest"] == max(q), shown["longest"], max(q))
        check("total", shown["total"] == sum(q), shown["total"], sum(q))
    elif name == "fluid":
        v = qb.fluid_view(s["lam"], s["p"], s["start"], 10)
        i = list(v["times"]).index(s["t"])
        row = np.trim_zeros(v["s"][i, 1:], "b")
        check("v1(t)", close(shown["mean"], v["mean"][i]), shown["mean"], v["mean"][i])
        check("s(t)", close(shown["s"], row), shown["s"], row.tolist())
        check("invariant mean", close(shown["invariant_mean"], v["invariant_mean"]),
              shown["invariant_mean"], v["invariant_mean"])
    elif name == "invariant":
        v = qb.invariant_view(s["lam"], s["p"])
        check("top level", shown["top_level"] == v["top_level"], shown["top_level"],
              v["top_level"])
        for key in ("mean", "mm1_mean", "mm1_tail_top"):
            check(key, close(shown[key], v[key]), shown[key], v[key])
        check("s", close(shown["s"], v["s"][1:]), shown["s"][:5], v["s"][1:6])
    elif name == "heavy-traffic":
        v = qb.heavy_traffic_view(s["lam"], s["p"])
        for key in ("x", "mean", "scale", "mm1_mean"):
            check(key, close(shown[key], v[key]), shown[key], v[key])
        check("ratio", close(shown["ratio"], v["mean"] / v["scale"]), shown["ratio"],
              v["mean"] / v["scale"])
    elif name == "fluid-limit":
        v = qb.fluid_limit_view(s["n_stations"], s["lam"], s["p"])
        check("distance", close(shown["distance"], v["distance"]), shown["distance"],
              v["distance"])
    elif name == "design":
        d = qt.design_point(s["lam"], s["target"])
        for key, want in (("p_min", d.p_min), ("mean", d.mean_queue_length),
                          ("sojourn", d.mean_sojourn_time),
                          ("mm1_mean", d.mm1_mean_queue_length)):
            check(key, close(shown[key], want), shown[key], want)
        check("top level", shown["top_level"] == d.top_level, shown["top_level"],
              d.top_level)
    return bad


# Runs in the page: the state of one explorer.
STATE_JS = """
root => ({
  renders: Number(root.dataset.renders || 0),
  ms: Number(root.dataset.ms || NaN),
  hidden: root.hidden,
  value: root.querySelector('.qt-explorer-value').dataset.value,
  text: root.querySelector('.qt-explorer-value').textContent,
  svg: Array.from(root.querySelectorAll('.qt-explorer-plot svg'))
            .map(s => s.outerHTML).join(''),
  data: JSON.parse(root.querySelector('script.qt-explorer-data').textContent).controls,
  sliders: Array.from(root.querySelectorAll('input[type=range]')).map(el => ({
      name: el.name, value: Number(el.value),
      labelled: !!root.querySelector('label[for="' + el.id + '"]')})),
})
"""


def _open(browser, server, rel, external, errors):  # noqa: F811
    context = browser.new_context(viewport={"width": 1200, "height": 900})

    def route(r):
        if r.request.url.startswith(("data:", "blob:")) or \
                urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error"
            and not m.text.startswith("Failed to load resource:") else None)
    page.goto(f"{server}/{rel}", wait_until="load", timeout=60_000)
    return context, page


def _state(root):
    return root.evaluate(STATE_JS)


def _wait_render(page, root, before: int):
    sel = f"#{root.get_attribute('id')}"
    page.wait_for_function(
        f"Number(document.querySelector('{sel}').dataset.renders || 0) > {before}",
        timeout=10_000)


def _set(page, root, control: str, index: int):
    """Set one slider to a grid index as a script would (input event); returns state."""
    before = _state(root)["renders"]
    changed = root.evaluate(
        """(root, [name, i]) => { const el = root.querySelector('input[name="' + name + '"]');
             if (Number(el.value) === i) return false;
             el.value = String(i); el.dispatchEvent(new Event('input', {bubbles: true}));
             return true; }""", [control, index])
    if changed:
        _wait_render(page, root, before)
    return _state(root)


def _setting(state) -> dict:
    """The setting shown: control name -> grid value."""
    by_name = {c["name"]: c for c in state["data"]}
    return {s["name"]: by_name[s["name"]]["values"][s["value"]] for s in state["sliders"]}


@pytest.mark.parametrize("name", list(PAGES))
def test_explorer_in_browser(name, server, browser):  # noqa: F811
    """Every control moves the figure; 20+ settings show qtheory's values; offline."""
    external, errors = [], []
    context, page = _open(browser, server, PAGES[name], external, errors)
    problems, times_ms = [], []
    try:
        root = page.locator(f"#qt-explorer-{name}")
        assert root.count() == 1, f"{PAGES[name]}: no explorer {name!r} on the page"
        page.wait_for_function(
            f"Number(document.querySelector('#qt-explorer-{name}').dataset.renders||0)>0",
            timeout=30_000)
        state = _state(root)
        assert not state["hidden"], "the script did not reveal the explorer"
        assert all(s["labelled"] for s in state["sliders"]), state["sliders"]
        controls = state["data"]
        n_checked = 0

        def check_now(st, timed=True):
            nonlocal n_checked
            problems.extend(expected_problems(name, _setting(st), json.loads(st["value"])))
            if timed:  # from the input event to the redrawn figure (reported, not asserted)
                times_ms.append(st["ms"])
            n_checked += 1

        check_now(state, timed=False)  # the first drawing also sets Plotly up
        # 1. Each control moved with the keyboard: the figure changes.
        for c in controls:
            default = _setting(state)
            key = "ArrowLeft" if c["default"] == len(c["values"]) - 1 else "ArrowRight"
            slider = root.locator(f'input[name="{c["name"]}"]')
            before = _state(root)
            slider.focus()
            page.keyboard.press(key)
            _wait_render(page, root, before["renders"])
            after = _state(root)
            moved = _setting(after)
            assert moved[c["name"]] != default[c["name"]], (c["name"], default, moved)
            assert after["svg"] != before["svg"], \
                f"{name}: moving {c['name']} did not change the figure"
            assert after["text"] != before["text"], \
                f"{name}: moving {c['name']} did not change the readout"
            check_now(after)
            state = _set(page, root, c["name"], c["default"])  # back to the default
        # 2. Seeded random settings of all controls.
        rng = np.random.default_rng(15)
        for _ in range(N_RANDOM):
            for c in controls:
                state = _set(page, root, c["name"], int(rng.integers(len(c["values"]))))
            check_now(state)
        assert n_checked >= 20
    finally:
        context.close()
    print(f"{name}: {n_checked} settings checked; redraw {np.nanmedian(times_ms):.1f} ms "
          f"(median), {np.nanmax(times_ms):.1f} ms (max)")
    assert not external, f"requests to other hosts: {external}"
    assert not errors, f"JavaScript errors: {errors}"
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("name", list(PAGES))
def test_explorer_degrades(name, server, browser):  # noqa: F811
    """Without JavaScript or in print the explorer is hidden and the static figures
    remain; the page (with its explorer data) weighs at most 3 MB."""
    rel = PAGES[name]
    size = (HTML / rel).stat().st_size
    assert size <= MAX_PAGE_BYTES, f"{rel}: {size:,} bytes of HTML"
    print(f"{rel}: {size / 1e6:.2f} MB of HTML")
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{server}/{rel}", wait_until="load")
        assert not page.locator(f"#qt-explorer-{name}").is_visible()
        assert page.locator("figure img").count() >= 1
    finally:
        context.close()
    external, errors = [], []
    context, page = _open(browser, server, rel, external, errors)
    try:
        root = page.locator(f"#qt-explorer-{name}")
        page.wait_for_function(
            f"Number(document.querySelector('#qt-explorer-{name}').dataset.renders||0)>0",
            timeout=30_000)
        assert root.is_visible()
        page.emulate_media(media="print")
        assert not root.is_visible(), "the explorer is printed"
    finally:
        context.close()


def test_value_check_catches_a_wrong_value():
    """The comparison with qtheory fails on a planted wrong value (and passes on the
    right one)."""
    v = qb.invariant_view(0.95, 0.05)
    shown = {"top_level": v["top_level"], "mean": v["mean"], "mm1_mean": v["mm1_mean"],
             "mm1_tail_top": v["mm1_tail_top"], "s": v["s"][1:].tolist()}
    setting = {"lam": 0.95, "p": 0.05}
    assert expected_problems("invariant", setting, shown) == []
    for key, wrong in (("mean", v["mean"] * (1 + 1e-8)), ("top_level", v["top_level"] + 1),
                       ("mm1_tail_top", 0.95 ** (v["top_level"] + 1))):
        assert expected_problems("invariant", setting, {**shown, key: wrong}), key
    d = qt.design_point(0.95, 2.0)
    shown = {"p_min": d.p_min, "mean": d.mean_queue_length, "sojourn": d.mean_sojourn_time,
             "mm1_mean": d.mm1_mean_queue_length, "top_level": d.top_level}
    assert expected_problems("design", {"lam": 0.95, "target": 2.0}, shown) == []
    assert expected_problems("design", {"lam": 0.95, "target": 2.5}, shown)


@pytest.mark.parametrize("name", list(PAGES))
def test_explorer_data(name):
    """Without a browser: the explorer's HTML has a labelled slider per control, its JSON
    holds one record per grid setting, and stored records are the view's values."""
    e = qb.explorer(name)
    page = e._repr_html_()
    data = json.loads(page.split('class="qt-explorer-data">')[1].split("</script>")[0]
                      .replace("<\\/", "</"))
    sizes = [len(c["values"]) for c in data["controls"] if c["keyed"]]
    assert len(data["records"]) == int(np.prod(sizes))
    assert str(int(np.prod(sizes))) + " settings" in e.grid_note
    for c in e.controls:
        assert f'<label for="qt-explorer-{name}-{c.name}">' in page
        assert f'<input type="range" id="qt-explorer-{name}-{c.name}"' in page
    assert " hidden>" in page.split("<p")[0]  # hidden until the page's script runs
    assert len(repr(e)) < 200  # the notebook's text/plain output stays small
    rng = np.random.default_rng(1)
    for _ in range(3):
        s = {c.name: c.values[rng.integers(len(c.values))] for c in e.controls}
        rec = e.record(**s)
        keys = {"small-system": ("queues",), "fluid": ("mean", "invariant_mean"),
                "invariant": ("top_level", "mean", "mm1_mean", "s"),
                "heavy-traffic": ("mean", "scale"), "fluid-limit": ("distance",),
                "design": ("p_min", "mean", "top_level")}[name]
        if name == "small-system":
            want = {"queues": qb.small_system_view(s["n_stations"], s["lam"], s["p"])["queues"]}
        elif name == "fluid":
            want = qb.fluid_view(s["lam"], s["p"], s["start"], 10)
        elif name == "invariant":
            want = dict(qb.invariant_view(s["lam"], s["p"]))
            want["s"] = want["s"][1:]
        elif name == "heavy-traffic":
            lams = [c for c in e.controls if c.name == "lam"][0].values
            views = [qb.heavy_traffic_view(lam, s["p"]) for lam in lams]
            want = {k: [v[k] for v in views] for k in ("mean", "scale")}
        elif name == "fluid-limit":
            want = qb.fluid_limit_view(s["n_stations"], s["lam"], s["p"])
        else:
            d = qt.design_point(s["lam"], s["target"])
            want = {"p_min": d.p_min, "mean": d.mean_queue_length, "top_level": d.top_level}
        for k in keys:
            assert close(rec[k], want[k]), (name, s, k)


def test_widgets_and_explorers_share_the_views():
    """The explorer's stored record at a grid point is the view function's value there
    (the one source of truth of the notebook widgets and the HTML explorers)."""
    e = qb.explorer("fluid-limit")
    rec = e.record(n_stations=100, lam=0.9, p=0.1)
    v = qb.fluid_limit_view(100, 0.9, 0.1)
    assert close(rec["distance"], v["distance"])
    assert close(rec["path"][0], v["path"][:, 1])
    with pytest.raises(ValueError, match="name"):
        qb.explorer("no-such-explorer")
    with pytest.raises(ValueError, match="start"):
        qb.fluid_start(0.9, 0.1, "full")
    with pytest.raises(ValueError, match="p"):
        qb.invariant_view(0.9, 0.0)
