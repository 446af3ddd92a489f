// Loaded between RequireJS and the widget manager (embed-amd.js) on pages with widgets.
(function () {
  // The widget manager finds its fonts next to the place RequireJS believes it lives:
  // point that at this folder of the build (by default it is the page's own folder).
  var here = document.currentScript.src.replace(/\/[^\/]*$/, "");
  require.config({ paths: { "@jupyter-widgets/html-manager/dist": here } });
  // The widgets typeset math in their labels through the MathJax 2 API (MathJax.Hub);
  // the book loads MathJax 3. Give them the one call they make.
  function shim() {
    if (window.MathJax && !window.MathJax.Hub) {
      window.MathJax.Hub = {
        Queue: function (job) {
          var el = job && job[2];
          if (el && MathJax.startup && MathJax.startup.promise) {
            MathJax.startup.promise.then(function () { return MathJax.typesetPromise([el]); });
          }
        },
      };
    }
  }
  window.addEventListener("load", shim);
})();
