// TeX to SVG for the EPUB edition (book/_ext/qtheory_epub.py), with MathJax 3 in Node:
// the same TeX input as the HTML book's MathJax, the SVG output with no font cache (each
// picture stands alone, as an <img> of an EPUB page must).
// Usage: node tex2svg.js MATHJAX_ES5_DIR < [{"tex": "...", "display": true}, ...]
// prints [{"svg": "<svg ...>", "error": null | "message"}, ...] as JSON.
"use strict";
const path = require("path");
const es5 = path.resolve(process.argv[2]);
global.MathJax = {
  loader: { paths: { mathjax: es5 }, require: require,
            load: ["input/tex-full", "output/svg", "adaptors/liteDOM"] },
  tex: { tags: "none" },
  svg: { fontCache: "none" },
  startup: { typeset: false },
};
require(path.join(es5, "startup.js"));
let input = "";
process.stdin.on("data", (d) => { input += d; });
process.stdin.on("end", () => {
  MathJax.startup.promise.then(() => {
    const adaptor = MathJax.startup.adaptor;
    const out = JSON.parse(input).map((item) => {
      const node = MathJax.tex2svg(item.tex, { display: !!item.display });
      const svg = adaptor.innerHTML(node);
      const m = svg.match(/data-mjx-error="([^"]*)"/);
      return { svg: svg, error: m ? m[1] : null };
    });
    process.stdout.write(JSON.stringify(out));
  }).catch((e) => { console.error(String(e)); process.exit(1); });
});
