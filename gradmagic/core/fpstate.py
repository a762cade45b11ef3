"""numpy's floating-point error state, switched cheaply around the engine's own numpy calls.

``np.errstate`` builds a new state each time it is entered (about a microsecond): on a loop
over numpy scalars, where every operation is a node, that is more than the operation. The
states the engine uses are built once here and set with numpy's context variable (a tenth of
that), falling back to ``np.errstate`` where numpy does not have it.

* :func:`quiet`: ``f`` with every floating-point error ignored (the rules' nan and inf are
  the trace's to show), and :class:`ignoring`, the same for a block;
* :func:`raising`: the state in force with each ``"warn"`` made ``"raise"``, so that an
  operation that numpy would warn about raises instead, and the caller runs it again the
  careful way (catching the warning to show it at the user's line); an operation that warns
  about nothing (nearly all) pays for no warning machinery at all.
"""

from __future__ import annotations

import numpy as np

from typing import Any

STATE: Any
_make_extobj: Any
try:  # numpy >= 2.0 keeps its error state in a context variable
    from numpy._core.umath import _extobj_contextvar as STATE, _make_extobj
except ImportError:  # pragma: no cover - an older numpy: the public, slower way
    STATE = _make_extobj = None

__all__ = ["STATE", "TWINS", "ignoring", "quiet", "raising", "calm", "careful", "WARNS"]

_CATEGORIES = ("divide", "over", "under", "invalid")
_IGNORE = None if STATE is None else _make_extobj(all="ignore")
TWINS: dict = {}  # a state in force -> its "warn"-as-"raise" twin (None: not to be made)
_MISSING = object()


def quiet(f):
    """``f`` with numpy's floating-point errors ignored (its results are nan/inf)."""
    if STATE is None:  # pragma: no cover

        def slow(*args, **kwargs):
            with np.errstate(all="ignore"):
                return f(*args, **kwargs)

        slow.__name__ = getattr(f, "__name__", "f")
        return slow
    ignore, state = _IGNORE, STATE

    def g(*args, **kwargs):
        token = state.set(ignore)
        try:
            return f(*args, **kwargs)
        finally:
            state.reset(token)

    g.__name__ = getattr(f, "__name__", "f")
    return g


class ignoring:
    """``with ignoring():`` the block runs with numpy's floating-point errors ignored."""

    __slots__ = ("_token", "_old")

    def __enter__(self):
        if STATE is None:  # pragma: no cover
            self._old = np.seterr(all="ignore")
        else:
            self._token = STATE.set(_IGNORE)

    def __exit__(self, *exc):
        if STATE is None:  # pragma: no cover
            np.seterr(**self._old)
        else:
            STATE.reset(self._token)


def raising():
    """The state in force with each ``"warn"`` made ``"raise"``, to set on :data:`STATE`; None
    where it cannot be made exactly (no such variable, or the user's state calls, prints or
    logs, which running an operation twice would repeat)."""
    if STATE is None:  # pragma: no cover
        return None
    now = STATE.get()
    made = TWINS.get(now, _MISSING)
    if made is _MISSING:
        if len(TWINS) >= 64:
            TWINS.clear()
        made = TWINS[now] = _twin()
    return made


def _twin():
    modes = np.geterr()
    if any(modes[c] not in ("ignore", "warn", "raise") for c in _CATEGORIES):
        return None
    return _make_extobj(**{c: "raise" if modes[c] == "warn" else modes[c] for c in _CATEGORIES})


WARNS = object()
"""What :func:`calm` gives for a computation that would warn."""


def calm(f, args, kwargs=None):
    """``f(*args, **kwargs)`` (a computation that warns only through numpy's error state, and
    writes nothing it reads) run with the warnings it would give made errors; :data:`WARNS`
    when one is raised (or the state cannot be made), and the caller runs it again the careful
    way, catching the warning to show it where plain code does. A computation that warns about
    nothing (nearly all) pays for no warning machinery."""
    if STATE is None:  # pragma: no cover
        return WARNS
    twin = TWINS.get(STATE.get(), _MISSING)
    if twin is _MISSING:
        twin = raising()
    if twin is None:
        return WARNS
    token = STATE.set(twin)
    try:
        return f(*args, **kwargs) if kwargs else f(*args)
    except FloatingPointError:
        return WARNS
    finally:
        STATE.reset(token)


def careful(f, args, kwargs=None):
    """``f(*args, **kwargs)`` (as for :func:`calm`) in the error state in force, its warnings
    returned instead of issued: ``(result, messages, error)``, numpy's words in numpy's order,
    and numpy's ``FloatingPointError`` (result None) where the state says ``"raise"``, to raise
    after the warnings. None where the state calls, prints or logs (only numpy can do that).

    Nothing touches the warnings filters (``catch_warnings`` would reset every registry, so
    a warning plain code shows once a line would show at each pass of a loop): each kind of
    error numpy would warn about is asked for alone, as an exception bearing its message.
    Only a computation that warns pays for these runs."""
    if raising() is None:
        return None
    kwargs = kwargs or {}
    modes = np.geterr()
    messages = []
    for kind in _CATEGORIES:  # numpy's own order
        if modes[kind] == "ignore":
            continue
        try:
            with np.errstate(**{c: "raise" if c == kind else "ignore" for c in _CATEGORIES}):
                f(*args, **kwargs)
        except FloatingPointError as error:
            if modes[kind] == "raise":
                return None, messages, error
            messages.append(str(error))
    with np.errstate(all="ignore"):
        return f(*args, **kwargs), messages, None
