// The book's explorers, drawn in the reader's browser (no kernel, no network).
// Served once per site from _static/explorers/ and added only to pages that have an
// explorer (book/_ext/qtheory_explorers.py). The numbers come from qtheory: each
// explorer's data is computed at build time on a grid (qtheory/book/explorers.py) and
// embedded in the page as JSON; the sliders move along that grid. Drawing: Plotly.
(function () {
  "use strict";
  // Okabe-Ito colours (distinguishable with the common colour-vision deficiencies).
  var C = { blue: "#0072B2", orange: "#E69F00", verm: "#D55E00", green: "#009E73",
            sky: "#56B4E9", purple: "#CC79A7", grey: "#555555" };
  var LEVEL_COLOURS = [C.blue, C.orange, C.green];

  // Text with exponents and subscripts written as ^x, ^(..), ^{..}, _{..} (the notation
  // of the captions) as HTML with <sup>/<sub>, the rest escaped; and as words for a
  // screen reader's label. Plotly's trace names and titles take the same <sup>/<sub>.
  var SCRIPT = /([\^_])(?:\{([^{}]*)\}|\(([^()]*)\)|([\w*\u2217]+))/g;
  function esc(t) {
    return String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function rich(t) {
    return esc(t).replace(SCRIPT, function (m, op, a, b, c) {
      var x = a !== undefined ? a : (b !== undefined ? b : c), tag = op === "^" ? "sup" : "sub";
      return "<" + tag + ">" + x + "</" + tag + ">";
    });
  }
  function spoken(t) {
    return String(t).replace(SCRIPT, function (m, op, a, b, c) {
      var x = a !== undefined ? a : (b !== undefined ? b : c);
      return op === "^" ? " to the power " + x : " " + x;
    });
  }
  function num(x, d) { return String(parseFloat(Number(x).toPrecision(d || 4))); }
  function range(a, b) { var r = []; for (var i = a; i <= b; i++) r.push(i); return r; }
  function sum(a) { return a.reduce(function (s, x) { return s + x; }, 0); }
  function max(a) { return a.reduce(function (m, x) { return x > m ? x : m; }, -Infinity); }
  // The text colour of the explorer's box: MyST-NB draws HTML outputs on a light box in
  // the theme's dark mode too (with dark text), so the figure takes the box's colour, not
  // the page's, and keeps its white plotting area in both modes.
  var TEXT = "#222832";
  function base(extra) {
    var l = { height: 340, margin: { l: 60, r: 20, t: 20, b: 50 }, showlegend: true,
              legend: { orientation: "h", y: -0.22 }, font: { size: 12, color: TEXT },
              paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fff" };
    for (var k in extra) l[k] = extra[k];
    return l;
  }

  var RENDER = {};

  RENDER["small-system"] = function (d, v, rec) {
    var q = rec.queues[v.t.i], n = q.length, top = max(q), total = sum(q);
    var ymax = Math.max(1, max(rec.queues.map(max)));
    var value = { t: v.t.value, queues: q, longest: top, total: total };
    return {
      traces: [{ type: "bar", x: range(1, n), y: q, name: "jobs at the station",
                 marker: { color: C.blue } },
               { type: "scatter", mode: "lines", x: [0.5, n + 0.5], y: [top, top],
                 name: "longest queue (the central server works there)",
                 line: { color: C.verm, width: 2 } }],
      layout: base({ xaxis: { title: { text: "station" }, dtick: n > 8 ? 2 : 1 },
                     yaxis: { title: { text: "jobs" }, range: [0, ymax + 0.5] } }),
      value: value,
      text: "N = " + n + ", \u03bb = " + v.lam.text + ", p = " + v.p.text + ", t = " +
            v.t.text + ": longest queue " + top + ", " + total + " jobs in all (" +
            num(total / n, 3) + " per station)."
    };
  };

  RENDER.fluid = function (d, v, rec) {
    var i = v.t.i, s = rec.s[i], inv = rec.invariant, times = d.common.times;
    var L = Math.max(s.length, inv.length, 1);
    var invx = [0.5].concat(range(1, inv.length)).concat([inv.length + 0.5]);
    var invy = [inv[0] || 0].concat(inv).concat([inv[inv.length - 1] || 0]);
    return {
      traces: [
        { type: "bar", x: range(1, s.length), y: s, name: "s\u1d62(t), fluid state",
          marker: { color: C.blue }, xaxis: "x", yaxis: "y" },
        { type: "scatter", mode: "lines", x: invx, y: invy, line: { shape: "hvh",
          dash: "dash", color: "#000" }, name: "invariant state", xaxis: "x", yaxis: "y" },
        { type: "scatter", mode: "lines", x: times, y: rec.mean, name: "mean queue v\u2081(t)",
          line: { color: C.verm }, xaxis: "x2", yaxis: "y2" },
        { type: "scatter", mode: "lines", x: [times[0], times[times.length - 1]],
          y: [rec.invariant_mean, rec.invariant_mean], name: "invariant mean v\u1d35\u2081",
          line: { dash: "dot", color: C.grey }, xaxis: "x2", yaxis: "y2" },
        { type: "scatter", mode: "markers", x: [times[i]], y: [rec.mean[i]],
          marker: { size: 10, color: C.verm }, showlegend: false, xaxis: "x2", yaxis: "y2" }],
      layout: base({
        xaxis: { domain: [0, 0.45], title: { text: "level i" }, range: [0.5, L + 0.5] },
        yaxis: { title: { text: "s\u1d62" }, range: [0, 1.05] },
        xaxis2: { domain: [0.55, 1], title: { text: "time t" }, anchor: "y2" },
        yaxis2: { anchor: "x2", title: { text: "v\u2081(t)" },
                  range: [0, 1.05 * Math.max(max(rec.mean), rec.invariant_mean)] } }),
      value: { t: times[i], mean: rec.mean[i], s: s, invariant_mean: rec.invariant_mean },
      text: "\u03bb = " + v.lam.text + ", p = " + v.p.text + ", start: " + v.start.text +
            ": at t = " + v.t.text + " the mean queue is v\u2081 = " + num(rec.mean[i]) +
            " (invariant: " + num(rec.invariant_mean) + ")."
    };
  };

  RENDER.invariant = function (d, v, rec) {
    var lam = v.lam.value, s = rec.s, top = rec.top_level;
    var J = range(1, Math.max(s.length + 10, 30)), tail = J.map(function (j) {
      return Math.pow(lam, j); });
    var tailTop = Math.pow(lam, top);
    return {
      traces: [
        { type: "bar", x: range(1, s.length), y: s, name: "invariant state, mean " +
          num(rec.mean, 3), marker: { color: C.blue } },
        { type: "scatter", mode: "markers", x: J, y: tail, name: rich("M/M/1 tail \u03bb^i, ") +
          "mean " + num(rec.mm1_mean, 3), marker: { color: C.grey, size: 5 } }],
      layout: base({ xaxis: { title: { text: "level i" } },
                     yaxis: { title: { text: "s\u1d62" }, range: [0, 1.05] } }),
      value: { top_level: top, mean: rec.mean, mm1_mean: rec.mm1_mean,
               mm1_tail_top: tailTop, s: s },
      text: "\u03bb = " + v.lam.text + ", p = " + v.p.text + ": top level i* = " + top +
            ", mean queue " + num(rec.mean) + " (M/M/1: " + num(rec.mm1_mean) +
            "); the M/M/1 tail at i* is \u03bb^{i*} = " + num(tailTop, 3) + "."
    };
  };

  RENDER["heavy-traffic"] = function (d, v, rec) {
    var x = d.common.x, i = v.lam.i;
    return {
      traces: [
        { type: "scatter", mode: "lines", x: x, y: d.common.mm1_mean,
          name: "p = 0 (M/M/1): \u03bb/(1\u2212\u03bb)", line: { color: C.grey } },
        { type: "scatter", mode: "lines", x: x, y: rec.mean, name: "mean queue v\u1d35\u2081(\u03bb, p)",
          line: { color: C.blue, width: 3 } },
        { type: "scatter", mode: "lines", x: x, y: rec.scale,
          name: rich("log_{1/(1\u2212p)} 1/(1\u2212\u03bb)"), line: { color: C.orange, dash: "dash" } },
        { type: "scatter", mode: "markers", x: [x[i]], y: [rec.mean[i]], showlegend: false,
          marker: { color: C.blue, size: 10 } }],
      layout: base({ xaxis: { type: "log", title: { text: "1/(1 \u2212 \u03bb)" } },
                     yaxis: { type: "log", title: { text: "mean number of jobs per station" } } }),
      value: { lam: v.lam.value, x: x[i], mean: rec.mean[i], scale: rec.scale[i],
               mm1_mean: d.common.mm1_mean[i], ratio: rec.mean[i] / rec.scale[i] },
      text: "p = " + v.p.text + ", \u03bb = " + v.lam.text + " (1/(1\u2212\u03bb) = " +
            num(x[i]) + "): mean queue " + num(rec.mean[i]) + ", heavy-traffic scale " +
            num(rec.scale[i]) + " (ratio " + num(rec.mean[i] / rec.scale[i], 3) +
            "), M/M/1 mean " + num(d.common.mm1_mean[i]) + "."
    };
  };

  RENDER["fluid-limit"] = function (d, v, rec) {
    var t = d.common.times, f = d.common.fluid[v.lam.i + "," + v.p.i], traces = [];
    for (var k = 0; k < rec.path.length; k++) {
      traces.push({ type: "scatter", mode: "lines", x: t, y: rec.path[k],
                    name: "s" + "\u2081\u2082\u2083"[k] + ", N = " + v.n_stations.text,
                    line: { color: LEVEL_COLOURS[k], width: 1.5 } });
      traces.push({ type: "scatter", mode: "lines", x: t, y: f[k],
                    name: "s" + "\u2081\u2082\u2083"[k] + ", fluid",
                    line: { color: LEVEL_COLOURS[k], dash: "dash", width: 2.5 } });
    }
    return {
      traces: traces,
      layout: base({ xaxis: { title: { text: "time t" } },
                     yaxis: { title: { text: "fraction of stations" }, range: [0, 1.02] } }),
      value: { distance: rec.distance, n_stations: v.n_stations.value },
      text: "N = " + v.n_stations.text + ", \u03bb = " + v.lam.text + ", p = " + v.p.text +
            ": largest l1 distance to the fluid solution " + num(rec.distance, 3) +
            " jobs per station (\u221aN \u00d7 distance = " +
            num(Math.sqrt(v.n_stations.value) * rec.distance, 3) + ")."
    };
  };

  RENDER.design = function (d, v, rec) {
    var curve = d.common.curves[v.lam.i], L = v.target.value, pm = rec.p_min;
    var ys = curve.mean.filter(function (y) { return y > 0; });
    var lo = Math.min(L, Math.min.apply(null, ys)) / 2, hi = Math.max(L, max(ys)) * 2;
    return {
      traces: [
        { type: "scatter", mode: "lines", x: curve.p, y: curve.mean,
          name: "mean queue v\u1d35\u2081(\u03bb, p)", line: { color: C.blue, width: 2.5 } },
        { type: "scatter", mode: "lines", x: [0, v.lam.value], y: [L, L],
          name: "target L = " + v.target.text, line: { color: C.orange, dash: "dash" } },
        { type: "scatter", mode: "lines", x: [pm, pm], y: [lo, hi],
          name: rich("p_min = " + num(pm)), line: { color: C.verm, dash: "dot" } },
        { type: "scatter", mode: "markers", x: [pm], y: [rec.mean], showlegend: false,
          marker: { color: C.verm, size: 10 } }],
      layout: base({ xaxis: { title: { text: "centralization p" }, range: [0, v.lam.value] },
                     yaxis: { type: "log", title: { text: "mean number of jobs per station" },
                              range: [Math.log10(lo), Math.log10(hi)] } }),
      value: rec,
      text: "\u03bb = " + v.lam.text + ", target L = " + v.target.text + ": p_min = " +
            num(pm, 6) + " (mean queue there " + num(rec.mean) + ", top level " +
            (rec.top_level < 0 ? "unbounded" : rec.top_level) + ", mean sojourn time " + num(rec.sojourn) +
            "); without pooling the mean would be " + num(rec.mm1_mean) + "."
    };
  };

  function init(root) {
    var d = JSON.parse(root.querySelector("script.qt-explorer-data").textContent);
    var render = RENDER[d.name];
    if (!render || !window.Plotly) return;
    var plot = root.querySelector(".qt-explorer-plot"), out = root.querySelector(".qt-explorer-value");
    var inputs = d.controls.map(function (c) {
      return root.querySelector('input[name="' + c.name + '"]'); });
    plot.setAttribute("role", "img");
    var renders = 0;
    function update() {
      var t0 = performance.now(), v = {}, key = [];
      TEXT = getComputedStyle(root).color || TEXT;
      d.controls.forEach(function (c, j) {
        var i = Math.max(0, Math.min(c.values.length - 1, parseInt(inputs[j].value, 10)));
        v[c.name] = { i: i, value: c.values[i], text: c.texts[i] };
        inputs[j].nextElementSibling.textContent = c.texts[i];
        inputs[j].setAttribute("aria-valuetext", c.texts[i]);
        if (c.keyed) key.push(i);
      });
      var r = render(d, v, d.records[key.join(",")]);
      out.innerHTML = rich(r.text);
      out.dataset.value = JSON.stringify(r.value);
      plot.setAttribute("aria-label", spoken(r.text));
      Plotly.react(plot, r.traces, r.layout, { displayModeBar: false, responsive: true })
        .then(function () {
          renders += 1;
          root.dataset.ms = (performance.now() - t0).toFixed(1);
          root.dataset.renders = String(renders);
        });
    }
    inputs.forEach(function (el) { el.addEventListener("input", update); });
    // redrawn in the new colours when the reader switches the theme's colour mode
    new MutationObserver(update).observe(document.documentElement,
                                         { attributes: true, attributeFilter: ["data-theme"] });
    root.hidden = false;
    update();
  }

  function start() {
    document.querySelectorAll(".qt-explorer").forEach(function (root) {
      try { init(root); } catch (e) { console.error("qtheory explorer:", e); }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
