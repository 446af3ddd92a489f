#!/usr/bin/env bash
# Run the test suite: set up .venv, then pytest (library tests and every chapter executed
# in a fresh kernel from its own folder). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
python -m pytest "$@"
