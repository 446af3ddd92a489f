"""One decorator for every compiled kernel of qtheory.

``jit`` is ``numba.njit(cache=True)`` with one difference: when numba finds no writable
place for its on-disk cache (the package folder is read-only and so is the home cache),
numba raises ``RuntimeError: cannot cache function ...: no locator available`` at import
time.  ``jit`` then warns once and compiles without caching, so ``import qtheory`` always
works.  A user's ``NUMBA_CACHE_DIR`` is honoured by numba itself.
"""

from __future__ import annotations

import warnings

import numba

__all__ = ["jit"]

_warned = False


def jit(*args, **kwargs):
    """Compile a function in nopython mode, caching to disk when possible.

    Parameters
    ----------
    *args, **kwargs
        As for :func:`numba.njit`; ``cache`` defaults to True.

    Returns
    -------
    numba dispatcher, or a decorator when called with options only.
    """
    kwargs.setdefault("cache", True)

    def decorate(func):
        global _warned
        try:
            return numba.njit(**kwargs)(func)
        except RuntimeError as exc:
            if "no locator available" not in str(exc):
                raise
            if not _warned:
                warnings.warn(
                    "qtheory: no writable numba cache directory (set NUMBA_CACHE_DIR "
                    "to one); kernels are compiled at every start",
                    RuntimeWarning,
                    stacklevel=3,
                )
                _warned = True
            return numba.njit(**dict(kwargs, cache=False))(func)

    if args and callable(args[0]) and len(args) == 1:
        return decorate(args[0])
    return decorate
