"""What a chapter needs to run wherever it is opened: the stored results and glue.

A chapter of the book runs as a page of the book, as a notebook from the repository's
root or from ``book/``, as a student notebook in another folder, as a downloaded executed
notebook and on Colab after its setup cell.  Two things would tie it to the book's
folder and toolchain, and both go through this module:

* the results of the long runs that the bench scripts store (``bench/*.py`` writes
  them; they ship with qtheory as package data, in ``qtheory/book/data/``):
  :func:`stored` reads one by name, from any working directory;
* MyST-NB's ``glue``, which puts a computed value into the book's text: :func:`glue`
  calls it when MyST-NB is installed and otherwise does nothing (or shows the value, as
  MyST-NB would, when ``display`` is true).
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["stored", "stored_names", "glue"]

_DATA = "data"


def _folder():
    return resources.files(__package__).joinpath(_DATA)


def stored_names():
    """The names of the stored results, sorted.

    Returns
    -------
    list of str
        One name per file ``qtheory/book/data/<name>.json``.

    Examples
    --------
    >>> "reproduce_large" in stored_names()
    True
    """
    return sorted(p.name[:-5] for p in _folder().iterdir()
                  if p.is_file() and p.name.endswith(".json"))


def stored(name):
    """A stored result of a bench script, parsed from its JSON file.

    Parameters
    ----------
    name : str
        The result's name, such as ``"reproduce_large"`` (the file
        ``qtheory/book/data/reproduce_large.json``; the suffix ``.json`` may be given).

    Returns
    -------
    dict or list
        The parsed JSON: a new object on every call (changing it changes nothing stored).
        Each file records what made it (the bench script, its commit, seeds and plans).

    Raises
    ------
    ValueError
        If ``name`` is not a string or names no stored result; the message lists the
        names there are.

    Examples
    --------
    >>> run = stored("reproduce_large")
    >>> run["seed"], run["plan"]["n_stations"]
    (100000, 100000)
    """
    names = stored_names()
    key = name[:-5] if isinstance(name, str) and name.endswith(".json") else name
    if not isinstance(key, str) or key not in names:
        raise ValueError(f"no stored result named {name!r}; the stored results are: "
                         f"{', '.join(names)}")
    return json.loads(_folder().joinpath(key + ".json").read_text(encoding="utf-8"))


def glue(name, variable, display=True):
    """Glue ``variable`` under ``name`` for the book's text, with or without MyST-NB.

    Where MyST-NB is installed (the book's build), this is ``myst_nb.glue``: the value
    is recorded in the cell's output and the text quotes it with MyST-NB's ``glue:text``
    role (the name and a format, such as ``name:.3f``).  Elsewhere (Colab, a plain JupyterLab, a script) nothing
    is recorded: the value is shown if ``display`` is true and otherwise ignored, so that
    the chapter runs all the same.

    Parameters
    ----------
    name : str
        The key the text quotes (glue names start with the chapter's name).
    variable : object
        The value; glue plain Python numbers (``float(x)``), since MyST-NB stores a NumPy
        scalar by its repr.
    display : bool
        Show the value in the cell's output as well (MyST-NB's default, True).

    Returns
    -------
    None

    Examples
    --------
    >>> glue("example-value", 0.25, display=False)
    """
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        myst_glue = None
    if myst_glue is not None:
        myst_glue(name, variable, display=display)
        return
    if display:
        try:
            from IPython.display import display as show
        except ImportError:
            print(variable)
        else:
            show(variable)
