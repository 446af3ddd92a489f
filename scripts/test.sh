#!/usr/bin/env bash
# Run the test suite: set up .venv, then pytest (library tests and every chapter executed
# in a fresh kernel from its own folder, unless the build already executed it with the
# same sources). Extra arguments go to pytest.
# Quick by default: tests marked `slow` (long statistical tests, every notebook executed
# outside the repository, the release wheel) and `browser` (the headless-browser gates
# of the built book) are deselected; `-m slow` runs only the slow set, `-m browser` the
# browser set and `-m ""` everything (a later -m replaces this one). .ci/run runs them all.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
python -m pytest -m "not slow and not browser" "$@"
