"""Markers the suite derives from fixtures.

Every test that drives the headless browser (the ``browser`` fixture of
``tests/test_browser.py`` or ``tests/test_notebook_route.py``) is marked ``browser``:
the README's quick test command (``bash scripts/test.sh``) deselects them, and
``.ci/run`` runs them after the book build, with the other gates of the rendered book.
"""
import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
