#!/usr/bin/env bash
# Build the book: set up .venv, execute every chapter (or reuse executions cached with
# the same qtheory sources) and write the HTML to _build/html. Warnings are errors; a
# chapter that raises fails the build and is named in the log. Installs Graphviz (dot,
# for the proof map) from Debian packages when it is missing.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
qtheory_ensure_dot
start=$(date +%s)
jupyter-book build --all -W --keep-going . "$@"
echo "[qtheory] book built in $(( $(date +%s) - start )) s: open _build/html/index.html"
