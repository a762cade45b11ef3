"""What is the learner's own code: the notebook, and the modules beside it.

A function or class defined in the notebook is the learner's (its ``__module__`` is
``__main__``); so is one from a module whose file lies in the notebook's folder tree
(``cs231n/layers.py`` imported with ``from cs231n.layers import *``): the magic follows
both as it follows a cell. Installed packages and the standard library are libraries,
wherever they lie, and so is gradmagic itself.

:data:`FOLDERS` sets the folder trees that hold the learner's modules: ``None`` (the
default) means the working directory, which is the notebook's folder in Jupyter; ``[]``
means the notebook only.
"""

from __future__ import annotations

import os
import sys
import sysconfig

__all__ = ["FOLDERS", "is_own", "own_module", "own_modules"]

FOLDERS: list[str] | None = None
"""The folder trees whose modules are the learner's own (None: the working directory)."""

_LIBRARIES = ("gradmagic", "IPython", "ipykernel")
"""Packages never the learner's, even in their folder (a checkout of gradmagic itself)."""

_known: dict = {}  # (module name, folders) → whether it is the learner's


def _installed() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    places = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(os.path.realpath(p) + os.sep for p in places if p)


_INSTALLED = _installed()


def own_module(name, folders=None) -> bool:
    """True for the name of a module that is the learner's own (see the module docstring);
    ``folders``: :func:`_folders`, when the caller asks of many modules."""
    if name == "__main__":
        return True
    if not isinstance(name, str) or name.partition(".")[0] in _LIBRARIES:
        return False
    key = (name, folders or _folders())
    known = _known.get(key)
    if known is None:
        known = _known[key] = _in_folders(sys.modules.get(name), key[1])
    return known


def own_modules() -> list:
    """The learner's own modules that are imported (not the notebook's ``__main__``): found
    again only when the number of imported modules or the folders changed, or one of them
    was imported afresh (a cell's end asks, and a process holds thousands of modules)."""
    folders = _folders()
    key, found = _OWN
    if key != (len(sys.modules), folders) or any(sys.modules.get(n) is not m for n, m in found):
        found = [
            (name, m)
            for name, m in list(sys.modules.items())
            if name != "__main__" and m is not None and own_module(name, folders)
        ]
        _OWN[:] = [(len(sys.modules), folders), found]
    return [m for _, m in found]


_OWN: list = [None, []]  # (the number of modules and the folders, the (name, module) pairs)


def _folders() -> tuple:
    if FOLDERS is not None:
        return tuple(FOLDERS)
    try:
        return (os.getcwd(),)
    except OSError:  # the working directory was deleted: no folder holds the learner's modules
        return ()


def _in_folders(module, folders) -> bool:
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not folders:
        return False
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts or path.startswith(_INSTALLED):
        return False
    return any(path.startswith(os.path.realpath(f) + os.sep) for f in folders)


def is_own(obj) -> bool:
    """True for a function or class of the learner's own code."""
    return own_module(getattr(obj, "__module__", None))
