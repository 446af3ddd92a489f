# Sourced by scripts/book.sh and scripts/test.sh: creates or refreshes the project's own
# virtual environment in .venv (Python 3.11 or newer) and installs qtheory into it.
# Re-installs only when requirements.txt or pyproject.toml changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[qtheory] creating virtual environment in .venv"
  "$PYTHON" -m venv "$VENV"
fi
STAMP="$VENV/.qtheory-install-stamp"
WANT="$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "[qtheory] installing requirements (first run: about a minute)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e .
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"

# Graphviz's dot draws the proof map (book/proof-map.md, book/_ext/qtheory_proof_map.py).
# The book builds (book.sh, pdf.sh, course.sh instructor-book) call this: it installs
# Debian's graphviz package (about 9 MiB installed) when dot is missing, as root or
# through sudo.
qtheory_ensure_dot() {
  command -v dot >/dev/null && return 0
  echo "[qtheory] Graphviz's dot is missing (it draws the proof map): installing graphviz"
  local SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "[qtheory] not root and no sudo: install the Debian/Ubuntu package graphviz" >&2; return 1; }
    SUDO="sudo"
  fi
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends graphviz; } >/tmp/qtheory-graphviz-apt.log 2>&1 \
    || { tail -20 /tmp/qtheory-graphviz-apt.log; echo "[qtheory] apt-get install graphviz failed" >&2; return 1; }
  command -v dot >/dev/null || { echo "[qtheory] graphviz installed but dot is not on the PATH" >&2; return 1; }
}
# Executed chapters are cached under _build/.jupyter_cache; the cache is wiped whenever
# qtheory's sources (or the chapters' environment) change, so no stale result is served.
"$VENV/bin/python" scripts/cache_guard.py
