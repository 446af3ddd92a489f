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
# Executed chapters are cached under _build/.jupyter_cache; the cache is wiped whenever
# qtheory's sources (or the chapters' environment) change, so no stale result is served.
"$VENV/bin/python" scripts/cache_guard.py
