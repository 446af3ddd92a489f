r"""What the book's explorers show: one source of truth for widgets and HTML pages.

Each explorer of the book has a *view* function here: given the explorer's settings it
returns the numbers the explorer draws, computed by qtheory. The notebook version
(ipywidgets, with a kernel) calls the view for the setting of its sliders; the HTML
version (:class:`Explorer`, JavaScript in the reader's browser, no kernel) shows the same
view evaluated at build time on every point of a finite grid of settings, and its sliders
move along that grid. Both therefore show the same numbers at a grid point.

In the page, floats are stored with 10 significant digits (relative error at most
5e-11); integers exactly.

References
----------
Tsitsiklis, J. N. and Xu, K. (2012). On the power of (even a little) resource pooling.
Stochastic Systems 2(1), 1-66 (the model, the fluid limit, the invariant state).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field

import numpy as np

from .. import _invariant as _inv
from .._validation import check_lam, check_p, check_seed, check_size, check_times
from ..design import design_point
from ..fluid import fluid_trajectory, l1_distance
from ..invariant import heavy_traffic_scaling, mm1_mean_queue_length
from ..simulation import sample_path

__all__ = [
    "Explorer",
    "explorer",
    "small_system_view",
    "fluid_start",
    "fluid_view",
    "invariant_view",
    "design_view",
    "fluid_limit_view",
    "heavy_traffic_view",
]

#: Names of the book's explorers, in book order.
EXPLORER_NAMES = ("small-system", "fluid", "invariant", "heavy-traffic", "fluid-limit",
                  "design")
#: Observation times of the small-system explorer (mean service times).
SMALL_SYSTEM_TIMES = np.arange(0.0, 41.0)
#: Seed of every sample path of the small-system explorer.
SMALL_SYSTEM_SEED = 2024
#: Times of the fluid explorer.
FLUID_TIMES = np.arange(0.0, 61.0)
#: Starts of the fluid explorer.
FLUID_STARTS = ("empty", "all at level k", "invariant + layer")
#: Highest level k of the fluid explorer's starts.
FLUID_START_MAX_LEVEL = 100_000
#: Most points of the design explorer's curve.
DESIGN_CURVE_MAX = 10_001
#: Times and seed of the fluid-limit explorer.
FLUID_LIMIT_TIMES = np.linspace(0.0, 30.0, 61)
FLUID_LIMIT_SEED = 7
#: Levels drawn by the fluid-limit explorer.
FLUID_LIMIT_LEVELS = 3
DIGITS = 10


def _round(x):
    """Round floats (nested lists/arrays allowed) to DIGITS significant digits."""
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_round(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    return float(f"{float(x):.{DIGITS}g}")


# ======================================================================================
# The views: what each explorer shows for one setting
# ======================================================================================

def small_system_view(n_stations, lam, p, *, times=SMALL_SYSTEM_TIMES,
                      seed=SMALL_SYSTEM_SEED):
    r"""The queue of every station of a small system along one sample path.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1 (small: the view keeps ``len(times) * N`` queues).
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    times : array_like of float, shape (m,), optional
        Observation times in mean service times (default 0, 1, ..., 40): real, finite,
        non-negative, non-decreasing (complex numbers, bools and strings are refused).
    seed : int >= 0, optional
        Seed of the sample path (default 2024).

    Returns
    -------
    dict
        ``times`` (ndarray, shape (m,)); ``queues`` (ndarray of int64, shape (m, N)):
        jobs at each station at each time, from an empty system.

    Raises
    ------
    ValueError
        As :func:`qtheory.sample_path`.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 2 (the model).
    """
    times = check_times(times)
    _, queues = sample_path(n_stations, lam, p, times, seed=seed, per_station=True)
    return {"times": times, "queues": queues}


def fluid_start(lam, p, start="empty", k=10):
    r"""Initial states of the fluid explorer.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction; ``0 < p <= 1`` for ``"invariant + layer"``.
    start : {"empty", "all at level k", "invariant + layer"}
        The empty system; every station with k jobs; the invariant state with every
        level 1..k raised to at least 1/2.
    k : int
        Level used by the last two starts, in ``[1, 100000]``.

    Returns
    -------
    ndarray of float64, shape (L + 1,)
        Tail fractions ``s0`` with ``s0[0] = 1``.

    Raises
    ------
    ValueError
        If ``start`` is not one of the three names, ``k`` is not an integer in
        ``[1, 100000]``, or ``lam``/``p`` is out of range.

    References
    ----------
    Tsitsiklis and Xu (2012), Section 3 (fluid model, initial conditions).
    """
    lam, p = check_lam(lam), check_p(p)
    k = _check_start_level(k)
    return _fluid_start(lam, p, start, k)


def _check_start_level(k):
    return check_size(k, "k", minimum=1, maximum=FLUID_START_MAX_LEVEL,
                      what="the start holds k + 1 levels and the fluid solver follows each")


def _fluid_start(lam, p, start, k):
    """fluid_start for validated lam, p and k (``start`` is checked here)."""
    if not isinstance(start, str):
        raise ValueError(f"start: one of {FLUID_STARTS}, got {start!r}")
    if start == "empty":
        return np.array([1.0])
    if start == "all at level k":
        return np.ones(k + 1)
    if start == "invariant + layer":
        if p == 0:
            raise ValueError("p: the start 'invariant + layer' needs 0 < p <= 1")
        s = np.append(_inv.invariant_state(lam, p), np.zeros(k))
        s[1:k + 1] = np.maximum(s[1:k + 1], 0.5)
        return s
    raise ValueError(f"start: one of {FLUID_STARTS}, got {start!r}")


def fluid_view(lam, p, start="empty", k=10, times=FLUID_TIMES):
    r"""A fluid trajectory from one of the explorer's starts, and the invariant state.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    start, k
        As :func:`fluid_start`.
    times : array_like of float, shape (m,), optional
        Times in mean service times (default 0, 1, ..., 60), checked as in
        :func:`qtheory.fluid_trajectory` (no complex numbers, bools or strings).

    Returns
    -------
    dict
        ``times`` (shape (m,)); ``s`` (shape (m, L)): :func:`qtheory.fluid_trajectory`;
        ``mean`` (shape (m,)): :math:`v_1(t) = \sum_{i \ge 1} s_i(t)`;
        ``invariant``: :func:`qtheory.invariant_state` (``None`` when ``p = 0``);
        ``invariant_mean``: its mean (``None`` when ``p = 0``).

    Raises
    ------
    ValueError
        As :func:`fluid_start` and :func:`qtheory.fluid_trajectory`.

    References
    ----------
    Tsitsiklis and Xu (2012), Sections 3 and 5.
    """
    lam, p = check_lam(lam), check_p(p)
    k = _check_start_level(k)
    times = check_times(times)
    s = fluid_trajectory(lam, p, times, _fluid_start(lam, p, start, k))
    inv = _inv.invariant_state(lam, p) if p > 0 else None
    return {"times": times, "s": s, "mean": s[:, 1:].sum(axis=1), "invariant": inv,
            "invariant_mean": None if inv is None else float(_inv.mean_queue_length(lam, p))}


def invariant_view(lam, p):
    r"""The invariant state against the M/M/1 tail for one (lam, p).

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 < p <= 1``.

    Returns
    -------
    dict
        ``s``: :func:`qtheory.invariant_state` (shape (i* + 1,)); ``top_level``: i*;
        ``mean``: :func:`qtheory.mean_queue_length`; ``mm1_mean``:
        :func:`qtheory.mm1_mean_queue_length`; ``mm1_tail_top``: the M/M/1 tail
        :math:`\lambda^{i^*}` at the top level.

    Raises
    ------
    ValueError
        If ``lam`` or ``p`` is out of range (``p = 0`` has no finite invariant state).

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3 (the invariant state).
    """
    lam, p = check_lam(lam), check_p(p)
    if p == 0:
        raise ValueError("p: the invariant-state view needs 0 < p <= 1")
    top = int(_inv.top_level(lam, p))
    return {"s": _inv.invariant_state(lam, p), "top_level": top,
            "mean": float(_inv.mean_queue_length(lam, p)),
            "mm1_mean": float(_inv.mm1_mean_queue_length(lam)),
            "mm1_tail_top": float(lam ** top)}


def design_view(lam, target, n_curve=101):
    r"""The design calculator: minimal p for a mean-queue target, and the curve behind it.

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    target : float
        Target mean number of jobs per station, ``> 0``.
    n_curve : int, optional
        Number of points of the curve :math:`p \mapsto v^I_1(\lambda, p)` on
        ``[0, lam]``, an integer in ``[2, 10001]`` (default 101).

    Returns
    -------
    dict
        ``point``: :func:`qtheory.design_point` (a :class:`qtheory.DesignPoint`);
        ``p``, ``mean`` (shape (n_curve,)): the curve.

    Raises
    ------
    ValueError
        As :func:`qtheory.design_point`; or if ``n_curve`` is not an integer in
        ``[2, 10001]``.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3; :func:`qtheory.min_centralization`.
    """
    point = design_point(lam, target)
    lam = point.lam
    n_curve = check_size(n_curve, "n_curve", minimum=2, maximum=DESIGN_CURVE_MAX,
                         what="each point of the curve is one invariant-state mean")
    ps = np.linspace(0.0, lam, n_curve)
    return {"point": point, "p": ps,
            "mean": np.array([_inv.mean_queue_length(lam, q) for q in ps])}


def fluid_limit_view(n_stations, lam, p, *, times=FLUID_LIMIT_TIMES,
                     seed=FLUID_LIMIT_SEED):
    r"""One sample path of N stations from empty against the fluid solution.

    Parameters
    ----------
    n_stations : int
        Number of stations N >= 1.
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 <= p <= 1``.
    times : array_like of float, shape (m,), optional
        Times in mean service times (default 61 points on [0, 30]); real, finite,
        non-negative, non-decreasing.
    seed : int >= 0, optional
        Seed of the sample path (default 7).

    Returns
    -------
    dict
        ``times``; ``path`` (shape (m, L)): :func:`qtheory.sample_path`; ``fluid``
        (shape (m, L')): :func:`qtheory.fluid_trajectory` from empty; ``distance``:
        :math:`\max_t \|s^N(t) - s(t)\|_1` over ``times`` (:func:`qtheory.fluid.l1_distance`),
        in jobs per station.

    Raises
    ------
    ValueError
        As :func:`qtheory.sample_path`.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 1 (the fluid limit).
    """
    check_seed(seed)
    times = check_times(times)
    path = sample_path(n_stations, lam, p, times, seed=seed)
    fluid = fluid_trajectory(lam, p, times)
    return {"times": times, "path": path, "fluid": fluid,
            "distance": float(np.max(l1_distance(path, fluid)))}


def heavy_traffic_view(lam, p):
    r"""Mean queue, M/M/1 mean and heavy-traffic scale at one (lam, p).

    Parameters
    ----------
    lam : float
        Arrival rate per station, ``0 <= lam < 1``.
    p : float
        Centralization fraction, ``0 < p <= 1``.

    Returns
    -------
    dict
        ``x``: :math:`1/(1-\lambda)`; ``mean``: :func:`qtheory.mean_queue_length`;
        ``mm1_mean``: :func:`qtheory.mm1_mean_queue_length`; ``scale``:
        :func:`qtheory.heavy_traffic_scaling`.

    Raises
    ------
    ValueError
        If ``lam`` or ``p`` is out of range.

    References
    ----------
    Tsitsiklis and Xu (2012), Theorem 3 and Section 6 (heavy traffic).
    """
    lam, p = check_lam(lam), check_p(p)
    return {"x": 1.0 / (1.0 - lam), "mean": float(_inv.mean_queue_length(lam, p)),
            "mm1_mean": float(_inv.mm1_mean_queue_length(lam)),
            "scale": float(heavy_traffic_scaling(lam, p))}


# ======================================================================================
# The HTML explorers: views on a grid, for the static book
# ======================================================================================

@dataclass(frozen=True)
class Control:
    """One slider: ``name``, ``label`` (HTML), grid ``values``, their display ``texts``,
    index of the ``default``; ``keyed`` controls select a precomputed record, the others
    move inside it."""
    name: str
    label: str
    values: tuple
    texts: tuple
    default: int
    keyed: bool = True


def _grid_index(control, value):
    """Index of ``value`` on a control's grid, or a ValueError listing the grid."""
    c = control
    ok = not isinstance(value, (bool, np.bool_))
    if ok:
        for i, v in enumerate(c.values):
            if isinstance(v, str) or isinstance(value, str):
                if isinstance(v, str) and isinstance(value, str) and v == value:
                    return i
                continue
            try:
                x = float(value)
            except (TypeError, ValueError, OverflowError):
                break
            if x == v or abs(x - v) <= 1e-9 * max(abs(x), abs(v)):
                return i
    shown = ", ".join(c.texts[:12]) + (", ..." if len(c.texts) > 12 else "")
    raise ValueError(f"{c.name}={value!r} is not on the explorer's grid for {c.name}: "
                     f"{shown}")


def _control(name, label, values, default, fmt="{:g}", keyed=True):
    values = tuple(values)
    texts = tuple(v if isinstance(v, str) else fmt.format(v) for v in values)
    return Control(name, label, values, texts, values.index(default), keyed)


def _grid(lo, hi, step):
    n = int(round((hi - lo) / step))
    return [round(lo + i * step, 6) for i in range(n + 1)]


@dataclass(frozen=True, repr=False)
class Explorer:
    r"""An explorer of the HTML book: sliders over a grid and qtheory's data on it.

    Attributes
    ----------
    name : str
        One of ``"small-system"``, ``"fluid"``, ``"invariant"``, ``"heavy-traffic"``,
        ``"fluid-limit"``, ``"design"`` (the page's JavaScript draws it by this name).
    title : str
        What the explorer shows (one sentence).
    controls : tuple of Control
        The sliders, in order.
    records : dict
        For each combination of the keyed controls' indices (key ``"i,j,..."``), the
        view's numbers (rounded to 10 significant digits) that the page draws.
    common : dict
        Data shared by all records (e.g. the time grid).
    grid_note : str
        The grid and its size, in words (shown under the explorer).

    Notes
    -----
    ``Explorer._repr_html_`` writes the explorer as HTML: a ``hidden`` block (revealed
    by ``_static/explorers/explorers.js`` of the built book, so a notebook or a reader
    without JavaScript sees only the static figure next to it) with labelled
    ``<input type="range">`` sliders, an ``<output>`` whose ``data-value`` holds the
    displayed numbers as JSON, and the data as a JSON script.

    References
    ----------
    Tsitsiklis and Xu (2012); see the view functions of :mod:`qtheory.book.explorers`.
    """

    name: str
    title: str
    controls: tuple
    records: dict
    common: dict = field(default_factory=dict)
    grid_note: str = ""

    def __repr__(self):
        return (f"<Explorer {self.name!r}: {len(self.records)} settings, drawn by the "
                f"HTML book; in a notebook, call its view function (qtheory.book.explorers)>")

    def record(self, **settings):
        """The stored record of a setting of the keyed controls (values on the grid).

        Parameters
        ----------
        **settings
            One value per keyed control (``name=value``), each a value of its grid
            (floats match to a relative 1e-9, so ``0.1 + 0.2`` finds ``0.3``).  Controls
            that are not keyed (they move inside a record, e.g. time) may be given as
            well; they must be on their grid and do not change the record.

        Returns
        -------
        dict
            The record the page draws for that setting.

        Raises
        ------
        ValueError
            If a keyed control is missing, a name is not a control of this explorer, or
            a value is not on its grid (the message lists the grid).
        """
        keyed = [c for c in self.controls if c.keyed]
        names = [c.name for c in keyed]
        loose = {c.name: c for c in self.controls if not c.keyed}
        unknown = [k for k in settings if k not in names and k not in loose]
        if unknown:
            raise ValueError(f"Explorer {self.name!r}.record: {unknown} are not controls "
                             f"of this explorer; its controls are "
                             f"{[c.name for c in self.controls]}")
        for k in settings:
            if k in loose:  # moves inside the record: checked, not needed for the lookup
                _grid_index(loose[k], settings[k])
        missing = [n for n in names if n not in settings]
        if missing:
            raise ValueError(f"Explorer {self.name!r}.record needs a value for every keyed "
                             f"control: missing {missing} (keyed controls: {names})")
        idx = [str(_grid_index(c, settings[c.name])) for c in keyed]
        return self.records[",".join(idx)]

    def to_json(self):
        """The explorer's data as a JSON string (what the page embeds)."""
        return json.dumps({
            "name": self.name,
            "controls": [{"name": c.name, "values": list(c.values), "texts": list(c.texts),
                          "default": c.default, "keyed": c.keyed} for c in self.controls],
            "common": self.common, "records": self.records,
        }, separators=(",", ":"), allow_nan=False)

    def _repr_html_(self):
        uid = f"qt-explorer-{self.name}"
        rows = []
        for c in self.controls:
            cid = f"{uid}-{c.name}"
            rows.append(
                f'<div class="qt-control"><label for="{cid}">{c.label}</label> '
                f'<input type="range" id="{cid}" name="{c.name}" min="0" '
                f'max="{len(c.values) - 1}" step="1" value="{c.default}"> '
                f'<output for="{cid}" class="qt-control-text">'
                f'{html.escape(c.texts[c.default])}</output></div>')
        data = self.to_json().replace("</", "<\\/")
        return (
            f'<div class="qt-explorer" id="{uid}" data-explorer="{self.name}" hidden>'
            f'<p class="qt-explorer-title"><strong>Explorer</strong> (runs in your '
            f'browser, no kernel needed): {html.escape(self.title)}</p>'
            f'<div class="qt-explorer-controls">{"".join(rows)}</div>'
            f'<div class="qt-explorer-plot"></div>'
            f'<p class="qt-explorer-readout"><output class="qt-explorer-value" '
            f'aria-live="polite" data-value=""></output></p>'
            f'<p class="qt-explorer-grid">{html.escape(self.grid_note)}</p>'
            f'<script type="application/json" class="qt-explorer-data">{data}</script>'
            f'</div>')


def _records(controls, fn):
    keyed = [c for c in controls if c.keyed]
    out = {}
    for idx in np.ndindex(*[len(c.values) for c in keyed]):
        out[",".join(map(str, idx))] = fn(*[c.values[i] for c, i in zip(keyed, idx)])
    return out


#: How the grid note names each control.
_SYMBOLS = {"n_stations": "N", "lam": "\u03bb", "target": "L"}


def _describe(controls, extra):
    parts = [f"{_SYMBOLS.get(c.name, c.name)} \u2208 {{{', '.join(c.texts[:3])}"
             + (f", \u2026, {c.texts[-1]}}}" if len(c.texts) > 4 else
                "".join(", " + t for t in c.texts[3:]) + "}")
             + f" ({len(c.values)} values)" for c in controls if c.keyed]
    n = int(np.prod([len(c.values) for c in controls if c.keyed]))
    grid = " \u00d7 ".join(parts)
    return (f"Precomputed by qtheory on the grid {grid}: {n} settings; {extra} "
            f"Values rounded to "
            f"{DIGITS} significant digits.")


def _small_system():
    controls = (
        _control("n_stations", "stations N", (4, 8, 16), 8),
        _control("lam", "arrival rate \u03bb", _grid(0.5, 0.95, 0.05), 0.9, "{:.2f}"),
        _control("p", "centralization p", (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5), 0.1,
                 "{:.2f}"),
        _control("t", "time t", tuple(SMALL_SYSTEM_TIMES), 40.0, "{:g}", keyed=False),
    )

    def rec(n, lam, p):
        return {"queues": small_system_view(n, lam, p)["queues"].tolist()}

    note = (f"one sample path each (seed {SMALL_SYSTEM_SEED}, from empty), observed at "
            f"t = 0, 1, \u2026, 40 ({SMALL_SYSTEM_TIMES.size} times).")
    return Explorer("small-system", "the queue of every station of a small system "
                    "at time t, with the longest queue marked.", controls,
                    _records(controls, rec), {"times": SMALL_SYSTEM_TIMES.tolist()},
                    _describe(controls, note))


def _fluid():
    controls = (
        _control("lam", "arrival rate \u03bb", (0.5, 0.6, 0.7, 0.8, 0.9, 0.95), 0.9,
                 "{:.2f}"),
        _control("p", "centralization p", (0.02, 0.05, 0.1, 0.2, 0.3, 0.5), 0.1, "{:.2f}"),
        _control("start", "start (k = 10)", FLUID_STARTS, "empty"),
        _control("t", "time t", tuple(FLUID_TIMES), 20.0, "{:g}", keyed=False),
    )

    def rec(lam, p, start):
        v = fluid_view(lam, p, start, 10)
        s = [_round(np.trim_zeros(row[1:], "b")) for row in v["s"]]
        return {"s": s, "mean": _round(v["mean"]), "invariant": _round(v["invariant"][1:]),
                "invariant_mean": _round(v["invariant_mean"])}

    note = (f"each trajectory at t = 0, 1, \u2026, 60 ({FLUID_TIMES.size} times), k = 10.")
    return Explorer("fluid", "the fluid state s(t) from a chosen start (left) and the "
                    "mean queue v\u2081(t) approaching the invariant mean (right).", controls,
                    _records(controls, rec), {"times": FLUID_TIMES.tolist()},
                    _describe(controls, note))


def _invariant():
    controls = (
        _control("lam", "arrival rate \u03bb", _grid(0.5, 0.995, 0.005), 0.95, "{:.3f}"),
        _control("p", "centralization p", _grid(0.005, 0.5, 0.005), 0.05, "{:.3f}"),
    )

    def rec(lam, p):
        v = invariant_view(lam, p)
        return {"s": _round(v["s"][1:]), "top_level": v["top_level"],
                "mean": _round(v["mean"]), "mm1_mean": _round(v["mm1_mean"])}

    return Explorer("invariant", "the invariant state (bars) against the M/M/1 tail "
                    "\u03bb^i (dots).", controls, _records(controls, rec), {},
                    _describe(controls, "p = 0 (the M/M/1 queue, no finite top level) is "
                              "left out. The M/M/1 tail \u03bb^i is computed in the page."))


HEAVY_TRAFFIC_EXPONENTS = tuple(range(3, 41))  # 1/(1 - lam) = 10**(k/10)


def _heavy_lams():
    return tuple(float(1.0 - 10.0 ** (-k / 10)) for k in HEAVY_TRAFFIC_EXPONENTS)


def _heavy_traffic():
    lams = _heavy_lams()
    controls = (
        _control("p", "centralization p", _grid(0.01, 0.5, 0.01), 0.05, "{:.2f}"),
        _control("lam", "arrival rate \u03bb", lams, lams[20], "{:.5g}", keyed=False),
    )

    def rec(p):
        views = [heavy_traffic_view(lam, p) for lam in lams]
        return {"mean": _round([v["mean"] for v in views]),
                "scale": _round([v["scale"] for v in views])}

    common = {"x": _round([1.0 / (1.0 - lam) for lam in lams]),
              "mm1_mean": _round([mm1_mean_queue_length(lam) for lam in lams])}
    return Explorer("heavy-traffic", "the mean queue against 1/(1 \u2212 \u03bb) for a "
                    "chosen p (log axes), with the M/M/1 mean and the heavy-traffic "
                    "scale log_{1/(1-p)} 1/(1 \u2212 \u03bb).", controls,
                    _records(controls, rec), common,
                    _describe(controls, f"for each p the curve at 1/(1 \u2212 \u03bb) = "
                              f"10^(k/10), k = 3, \u2026, 40 ({len(lams)} values of \u03bb)."))


def _fluid_limit():
    ns = (10, 30, 100, 300, 1000, 3000, 10000)
    controls = (
        _control("n_stations", "stations N", ns, 100),
        _control("lam", "arrival rate \u03bb", (0.7, 0.9, 0.95), 0.9, "{:.2f}"),
        _control("p", "centralization p", (0.05, 0.1, 0.2), 0.1, "{:.2f}"),
    )
    fluids = {}

    def rec(n, lam, p):
        v = fluid_limit_view(n, lam, p)
        fluids[(lam, p)] = v["fluid"]
        L = FLUID_LIMIT_LEVELS + 1
        path = np.zeros((v["path"].shape[0], L))
        w = min(L, v["path"].shape[1])
        path[:, :w] = v["path"][:, :w]
        return {"path": _round(path[:, 1:].T), "distance": _round(v["distance"])}

    records = _records(controls, rec)
    fl = {}
    for i, lam in enumerate(controls[1].values):
        for j, p in enumerate(controls[2].values):
            f = np.zeros((FLUID_LIMIT_TIMES.size, FLUID_LIMIT_LEVELS + 1))
            w = min(f.shape[1], fluids[(lam, p)].shape[1])
            f[:, :w] = fluids[(lam, p)][:, :w]
            fl[f"{i},{j}"] = _round(f[:, 1:].T)
    note = (f"one sample path per setting (seed {FLUID_LIMIT_SEED}, from empty) at "
            f"{FLUID_LIMIT_TIMES.size} times on [0, 30].")
    return Explorer("fluid-limit", "s\u2081, s\u2082, s\u2083 of one sample path of N "
                    "stations (solid) against the fluid solution (dashed); the distance "
                    "is the largest l1 distance over the times.", controls, records,
                    {"times": FLUID_LIMIT_TIMES.tolist(), "fluid": fl},
                    _describe(controls, note))


DESIGN_MANTISSAS = ("1", "1.2", "1.5", "2", "2.5", "3", "4", "5", "6", "8")


def _design():
    lams = tuple(_grid(0.5, 0.99, 0.01)) + (0.995, 0.999)
    targets = tuple(float(f"{m}e{e}") for e in range(-2, 3) for m in DESIGN_MANTISSAS)
    targets += (1000.0,)
    controls = (
        _control("lam", "arrival rate \u03bb", lams, 0.95, "{:g}"),
        _control("target", "target mean queue L", targets, 2.0, "{:g}"),
    )
    curves = {}

    def rec(lam, target):
        if lam not in curves:
            v = design_view(lam, target)
            curves[lam] = {"p": _round(v["p"]), "mean": _round(v["mean"])}
        d = design_point(lam, target)
        return {"p_min": _round(d.p_min), "mean": _round(d.mean_queue_length),
                "top_level": int(d.top_level), "sojourn": _round(d.mean_sojourn_time),
                "mm1_mean": _round(d.mm1_mean_queue_length)}

    records = _records(controls, rec)
    common = {"curves": [curves[lam] for lam in lams]}
    return Explorer("design", "the minimal fraction p_min for a target mean queue L: "
                    "the curve v\u2081(\u03bb, p) against p, the target and p_min.",
                    controls, records, common,
                    _describe(controls, "targets L = m \u00d7 10^e, m \u2208 {1, 1.2, 1.5, 2, "
                              "2.5, 3, 4, 5, 6, 8}, e = \u22122, \u2026, 2, and 1000; for each "
                              "\u03bb the curve at 101 values of p on [0, \u03bb]."))


_BUILDERS = {"small-system": _small_system, "fluid": _fluid, "invariant": _invariant,
             "heavy-traffic": _heavy_traffic, "fluid-limit": _fluid_limit,
             "design": _design}


def explorer(name):
    r"""The HTML explorer of the book called ``name``, computed on its grid.

    Parameters
    ----------
    name : str
        One of ``"small-system"`` (model chapter), ``"fluid"``, ``"invariant"``,
        ``"heavy-traffic"``, ``"fluid-limit"`` (occupancy-chain chapter), ``"design"``.

    Returns
    -------
    Explorer
        Displayed as HTML in a notebook output (hidden there: the notebook has the
        ipywidgets version); the built book's JavaScript reveals and draws it.

    Raises
    ------
    ValueError
        If ``name`` is not one of these.

    References
    ----------
    Tsitsiklis and Xu (2012); the view functions of this module.
    """
    if not isinstance(name, str) or name not in _BUILDERS:
        raise ValueError(f"name must be one of {EXPLORER_NAMES} (a string), got "
                         f"{type(name).__name__} {name!r}")
    return _BUILDERS[name]()
