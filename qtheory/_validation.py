"""Input checks shared by every public function of qtheory.

Each checker returns the value converted to a plain Python or NumPy type and raises
``ValueError`` (never ``TypeError``, never a silent fix) with a message that names the
parameter and its valid range.  Keeping them in one place gives the whole package one
voice: ``lam`` must satisfy ``0 <= lam < 1`` everywhere, ``p`` lies in ``[0, 1]``
everywhere, and so on.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "check_real",
    "check_lam",
    "check_p",
    "check_int",
    "check_positive_int",
    "check_n_stations",
    "check_times",
    "check_s0",
    "check_seed",
    "check_flag",
    "check_size",
    "real_array",
    "unwrap_scalar",
    "count_text",
]


def _as_float(value, name):
    """Convert a real scalar to float; reject bools, strings, arrays and complex."""
    value = unwrap_scalar(value)
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a real number, got the bool {value!r}")
    if not isinstance(value, numbers.Real):
        raise ValueError(
            f"{name} must be a real number, got {type(value).__name__} {value!r}"
        )
    try:
        x = float(value)
    except OverflowError:
        raise ValueError(f"{name} must be a real number representable in double "
                         f"precision, got an integer with {len(str(value))} digits") from None
    if math.isnan(x):
        raise ValueError(f"{name} must be a real number, got NaN")
    return x


def check_real(value, name, *, low=-math.inf, high=math.inf,
               low_open=False, high_open=False):
    """Check that ``value`` is a finite-or-bounded real number in an interval.

    Parameters
    ----------
    value : object
        The candidate.
    name : str
        The parameter's name, used in the error message.
    low, high : float
        Interval bounds.
    low_open, high_open : bool
        Whether the corresponding bound is excluded.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``value`` is not a real number, is NaN, or lies outside the interval.
    """
    x = _as_float(value, name)
    lo_ok = x > low if low_open else x >= low
    hi_ok = x < high if high_open else x <= high
    if not (lo_ok and hi_ok):
        lb = "(" if low_open else "["
        rb = ")" if high_open else "]"
        raise ValueError(f"{name} must lie in {lb}{low:g}, {high:g}{rb}, got {x!r}")
    return x


def check_lam(lam, name="lam"):
    """Check an arrival rate per station: a real number with ``0 <= lam < 1``.

    A value such as ``1 - 1e-17`` is stored as exactly 1.0 in double precision; the
    message says so, since the user may not have typed 1.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``lam`` is not a real number, is NaN, negative, or at least 1 (the system
        is unstable at ``lam >= 1``: total capacity per station is 1).
    """
    x = _as_float(lam, name)
    if x < 0.0 or x >= 1.0:
        extra = ""
        if x == 1.0:
            extra = (" (the value is 1.0 in double precision; 1 - lam must be at "
                     "least about 1.1e-16 to be representable)")
        raise ValueError(
            f"{name} must satisfy 0 <= {name} < 1 (load per unit of capacity; the "
            f"system is unstable at {name} >= 1), got {x!r}{extra}"
        )
    return x


def check_p(p, name="p"):
    """Check a centralization fraction: a real number with ``0 <= p <= 1``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``p`` is not a real number, is NaN, or lies outside ``[0, 1]``.
    """
    return check_real(p, name, low=0.0, high=1.0)


def unwrap_scalar(value):
    """A 0-d NumPy array becomes its element; anything else is returned unchanged.

    The one rule for scalars: a 0-d array stands for its element, for integer parameters
    as for real ones (``np.array(3)`` is the integer 3, ``np.array(0.5)`` the real 0.5).
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    return value


def check_int(value, name, *, minimum=None, what=None):
    """Check a whole number: a Python or NumPy integer or a 0-d integer array.

    Bools and floats (even ``3.0``) are refused: an integer parameter takes integers, so
    that ``3.5`` can never be silently rounded.

    Parameters
    ----------
    value : object
        The candidate.
    name : str
        The parameter's name, used in the error message.
    minimum : int or None
        Smallest accepted value.
    what : str or None
        What the parameter means, added to the message (e.g. "a level: every station
        starts with that many jobs").

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``value`` is not an integer or is below ``minimum``.
    """
    v = unwrap_scalar(value)
    rng = f" >= {minimum}" if minimum is not None else ""
    extra = f" ({what})" if what else ""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
        raise ValueError(
            f"{name} must be an integer{rng}{extra}, got {type(v).__name__} {v!r}"
        )
    v = int(v)
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be an integer{rng}{extra}, got {v}")
    return v


def check_positive_int(value, name, *, minimum=1):
    """Check a whole number ``>= minimum`` (Python or NumPy integer or 0-d integer array;
    no bools, no floats).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``value`` is not an integer or is below ``minimum``.
    """
    v = check_int(value, name, minimum=minimum)
    if v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {v}")
    return v


_IS_BOOL = np.frompyfunc(lambda x: isinstance(x, (bool, np.bool_)), 1, 1)


def real_array(value, name):
    """Convert an array_like of real numbers to a float64 array (a new copy).

    Parameters
    ----------
    value : array_like
        Nested sequences or an array of int/float entries (NumPy or Python numbers).
    name : str
        The parameter's name, used in the error message.

    Returns
    -------
    ndarray of float64, the shape of ``value``

    Raises
    ------
    ValueError
        If ``value`` is ragged, or holds anything other than real numbers: strings (no
        ``"0.5"`` is read as a number), bools (also mixed with numbers, as in
        ``[True, 0.5]``), complex numbers, None.
    """
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of real numbers; got a ragged or "
                         f"non-numeric sequence") from None
    kind = raw.dtype.kind
    if kind == "O":
        bad = [x for x in raw.ravel()
               if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real)]
        if bad:
            raise ValueError(f"{name} must hold real numbers only, got "
                             f"{type(bad[0]).__name__} {bad[0]!r}")
    elif kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers only, got entries of type "
                         f"{raw.dtype}")
    elif raw.ndim and not isinstance(value, np.ndarray):
        # NumPy turns [True, 1.0] into [1.0, 1.0]: look at the entries of a sequence
        entries = np.array(value, dtype=object).ravel()
        if _IS_BOOL(entries).any():
            raise ValueError(f"{name} must hold real numbers only, got a bool among its "
                             f"entries (True is not the number 1 here)")
    try:
        return np.array(raw, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        raise ValueError(f"{name} must hold real numbers representable in double "
                         f"precision") from None


def check_flag(value, name, *, allow_none=False):
    """Check an on/off switch: ``True`` or ``False`` (or ``None`` where it means "auto").

    Parameters
    ----------
    value : object
        The candidate.
    name : str
        The parameter's name, used in the error message.
    allow_none : bool
        Whether ``None`` is accepted (and returned as is).

    Returns
    -------
    bool or None

    Raises
    ------
    ValueError
        If ``value`` is anything else (a string such as ``"no"`` is not read as a
        switch, since every non-empty string would mean True).
    """
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    allowed = "True, False or None" if allow_none else "True or False"
    raise ValueError(f"{name} must be {allowed}, got {type(value).__name__} {value!r}")


def check_n_stations(n_stations, name="n_stations"):
    """Check the number of stations N: an integer ``>= 1``."""
    return check_positive_int(n_stations, name, minimum=1)


def check_times(times, name="times"):
    """Check a grid of observation times.

    Parameters
    ----------
    times : array_like of float, shape (m,)
        Times in mean service times; finite, non-negative and non-decreasing.

    Returns
    -------
    ndarray of float64, shape (m,)

    Raises
    ------
    ValueError
        If ``times`` is not a non-empty one-dimensional array of finite, non-negative,
        non-decreasing numbers.
    """
    t = real_array(times, name)
    if t.ndim == 0:
        t = t.reshape(1)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if np.any(t < 0):
        raise ValueError(f"{name} must be non-negative, got minimum {t.min()!r}")
    if np.any(np.diff(t) < 0):
        raise ValueError(f"{name} must be non-decreasing")
    return t


def check_s0(s0, name="s0", *, atol=1e-12):
    """Check an initial occupancy vector of tail fractions.

    Parameters
    ----------
    s0 : array_like of float, shape (levels,)
        ``s0[i]`` is the fraction of stations with at least ``i`` jobs: ``s0[0] == 1``,
        entries in ``[0, 1]``, non-increasing, with finite sum (finite mean queue).
    atol : float
        Slack allowed for rounding in the range and monotonicity checks.

    Returns
    -------
    ndarray of float64, shape (levels,)
        A copy with trailing zeros removed (at least ``[1.0]``).

    Raises
    ------
    ValueError
        If any of the conditions above fails.
    """
    s = real_array(s0, name)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"{name} must be finite (no NaN or inf); infinite mass is not "
                         "a valid state")
    if s[0] != 1.0:
        raise ValueError(f"{name}[0] must equal 1 (every station has at least 0 jobs), "
                         f"got {s[0]!r}")
    if np.any(s < -atol) or np.any(s > 1 + atol):
        raise ValueError(f"{name} entries must lie in [0, 1]")
    if np.any(np.diff(s) > atol):
        i = int(np.argmax(np.diff(s) > atol))
        raise ValueError(f"{name} must be non-increasing; {name}[{i + 1}] = "
                         f"{s[i + 1]!r} > {name}[{i}] = {s[i]!r}")
    s = np.clip(s, 0.0, 1.0)
    nz = np.flatnonzero(s > 0)
    return s[: nz[-1] + 1].copy()


def check_seed(seed, name="seed"):
    """Turn ``seed`` into a :class:`numpy.random.SeedSequence`.

    Parameters
    ----------
    seed : None, int >= 0, or numpy.random.SeedSequence
        ``None`` draws fresh entropy from the operating system (the result is then not
        reproducible; the entropy is recorded in the returned sequence).

    Returns
    -------
    numpy.random.SeedSequence

    Raises
    ------
    ValueError
        If ``seed`` is negative or of another type.
    """
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, np.random.SeedSequence):
        return seed
    seed = unwrap_scalar(seed)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"{name} must be None, a non-negative integer or a "
                         f"numpy.random.SeedSequence, got {type(seed).__name__}")
    if int(seed) < 0:
        raise ValueError(f"{name} must be non-negative, got {int(seed)}")
    return np.random.SeedSequence(int(seed))


def check_size(value, name, *, minimum=0, maximum, what=None):
    """Check a size or count: an integer in ``[minimum, maximum]``.

    Sizes (numbers of levels, of grid points, of time points, of seeds) decide how much
    memory and time a call takes; an unbounded one gives a ``MemoryError`` or a hang
    instead of an answer, so every such parameter has a ceiling, checked here before
    anything is allocated.

    Parameters
    ----------
    value : object
        The candidate (Python or NumPy integer, or a 0-d integer array; no bools, no
        floats).
    name : str
        The parameter's name, used in the error message.
    minimum, maximum : int
        The accepted range, both ends included.
    what : str or None
        Why the ceiling is there (e.g. "each level takes a column of the output"),
        added to the message.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``value`` is not an integer in ``[minimum, maximum]``.
    """
    v = check_int(value, name, minimum=minimum)
    if v > maximum:
        extra = f"; {what}" if what else ""
        shown = f"{v:,}" if v < 10**18 else f"about 10^{int(v.bit_length() * 0.30103)}"
        raise ValueError(f"{name} must be an integer in [{minimum:,}, {maximum:,}], got "
                         f"{shown}{extra}")
    return v


def count_text(count):
    """A count (of states, say) for an error message: exact below 1e15, else its order
    of magnitude; ``math.inf`` (what :func:`qtheory.exact.exact_state_space_size` returns
    beyond 2^4096) as "more than 10^1233"."""
    if count == math.inf:
        return "more than 10^1233"
    if count < 10**15:
        return f"{count:,}"
    return f"about 10^{math.log10(count):.1f}"
