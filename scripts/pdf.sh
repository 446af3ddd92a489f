#!/usr/bin/env bash
# Build the PDF edition of the book: _build/pdf/qtheory-book.pdf, from the same sources as
# the HTML (Sphinx's LaTeX builder through Jupyter Book 1, XeLaTeX, latexmk).
#
#   bash scripts/pdf.sh              set up .venv and TeX if missing, build the PDF
#   bash scripts/pdf.sh --tex-only   only install TeX (Debian packages) if missing
#
# TeX comes from Debian packages (about 350 MB installed, --no-install-recommends); the
# script installs them when xelatex, latexmk, pdftotext or pdftoppm is missing (as root,
# or through sudo). Chapters are executed (or reused from the cache) exactly as for the
# HTML; interactive explorers appear as their static figures.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TEX_PACKAGES=(texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended
              texlive-xetex fonts-freefont-otf latexmk poppler-utils)

ensure_tex() {
  local missing=()
  for cmd in xelatex latexmk pdftotext pdftoppm; do
    command -v "$cmd" >/dev/null || missing+=("$cmd")
  done
  if [ ${#missing[@]} -eq 0 ] && fc-list : family 2>/dev/null | grep -ci FreeSerif >/dev/null; then return 0; fi
  echo "[qtheory] TeX tools missing (${missing[*]:-FreeFont}): installing Debian packages"
  local SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "[qtheory] not root and no sudo: install ${TEX_PACKAGES[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  local t0; t0=$(date +%s)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${TEX_PACKAGES[@]}" >/tmp/qtheory-tex-apt.log 2>&1 \
    || { tail -20 /tmp/qtheory-tex-apt.log; echo "[qtheory] apt-get install failed" >&2; exit 1; }
  echo "[qtheory] TeX installed in $(( $(date +%s) - t0 )) s"
}

ensure_tex
if [ "${1:-}" = "--tex-only" ]; then exit 0; fi

source "$ROOT/scripts/_env.sh"
qtheory_ensure_dot   # the proof map's drawing (a vector PDF made by dot)
start=$(date +%s)
OUT="$ROOT/_build/pdf"
rm -rf "$ROOT/_build/latex"
# Sphinx's LaTeX builder (chapters executed or taken from the execution cache, as for the
# HTML), then latexmk with XeLaTeX. Warnings are errors, like the HTML build.
set +e
jupyter-book build --all -W --keep-going --builder pdflatex . "$@" 2>&1 \
  | tee /tmp/qtheory-pdf-build.log
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ] || [ ! -f "$ROOT/_build/latex/qtheory-book.pdf" ]; then
  echo "[qtheory] PDF build failed (exit $rc); LaTeX log: _build/latex/qtheory-book.log" >&2
  grep -n -A3 "^!" "$ROOT/_build/latex/qtheory-book.log" 2>/dev/null | head -30 >&2 || true
  exit 1
fi
mkdir -p "$OUT"
cp "$ROOT/_build/latex/qtheory-book.pdf" "$OUT/qtheory-book.pdf"
# an HTML build already in place offers the new PDF at once (the next HTML build copies it
# again and adds the link to the download menu: book/_ext/qtheory_edition.py)
if [ -d "$ROOT/_build/html" ]; then cp "$OUT/qtheory-book.pdf" "$ROOT/_build/html/qtheory-book.pdf"; fi
pages=$(pdfinfo "$OUT/qtheory-book.pdf" 2>/dev/null | awk '/^Pages:/ {print $2}')
size=$(du -k "$OUT/qtheory-book.pdf" | cut -f1)
echo "[qtheory] PDF built in $(( $(date +%s) - start )) s: _build/pdf/qtheory-book.pdf" \
     "(${pages:-?} pages, ${size} KiB)"
