#!/usr/bin/env bash
# Build the EPUB edition of the book: _build/epub/qtheory-book.epub, from the same sources
# as the HTML and the PDF (Sphinx's epub builder through Jupyter Book 1's custom builder).
#
#   bash scripts/epub.sh                 set up .venv, build the EPUB
#   bash scripts/epub.sh --check-tools   only install epubcheck (Debian package) if missing
#
# Chapters are executed or, with the same sources, taken from the execution cache, exactly
# as for the HTML (so after `bash scripts/test.sh` or a book build nothing is executed
# again). Math is drawn as SVG pictures at build time by MathJax in Node (e-readers run no
# JavaScript; see book/_ext/qtheory_epub.py): Node's `npm` and `node` must be on the PATH,
# as for the HTML build. Interactive explorers and widgets appear as their static figures.
# tests/test_epub.py checks the result (with epubcheck when it is installed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

ensure_epubcheck() {
  [ -f /usr/share/java/epubcheck.jar ] && command -v java >/dev/null && return 0
  echo "[qtheory] epubcheck missing: installing the Debian package (Java; about 100 MB)"
  local SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "[qtheory] not root and no sudo: install epubcheck" >&2; exit 1; }
    SUDO="sudo"
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    epubcheck >/tmp/qtheory-epubcheck-apt.log 2>&1 \
    || { tail -20 /tmp/qtheory-epubcheck-apt.log; echo "[qtheory] apt-get install epubcheck failed" >&2; exit 1; }
}

if [ "${1:-}" = "--check-tools" ]; then ensure_epubcheck; exit 0; fi

source "$ROOT/scripts/_env.sh"
start=$(date +%s)
OUT="$ROOT/_build/epub"
rm -rf "$OUT"
set +e
jupyter-book build --all -W --keep-going --builder custom --custom-builder epub . "$@" 2>&1 \
  | tee /tmp/qtheory-epub-build.log
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ] || [ ! -f "$OUT/qtheory-book.epub" ]; then
  echo "[qtheory] EPUB build failed (exit $rc); log: /tmp/qtheory-epub-build.log" >&2
  exit 1
fi
# an HTML build already in place offers the new EPUB at once (the next HTML build copies it
# again and adds the link to the download menu: book/_ext/qtheory_edition.py)
if [ -d "$ROOT/_build/html" ]; then cp "$OUT/qtheory-book.epub" "$ROOT/_build/html/qtheory-book.epub"; fi
size=$(du -k "$OUT/qtheory-book.epub" | cut -f1)
echo "[qtheory] EPUB built in $(( $(date +%s) - start )) s: _build/epub/qtheory-book.epub (${size} KiB)"
