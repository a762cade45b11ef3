"""The settings of one run: what the magic's options set, read by the analysis and the views.

Each option is declared once, as a field of :class:`Options` whose metadata holds its flags,
help, metavar, choices and the check of its value. The magic's argument parser
(``%%autograd?`` prints its help) and the documentation's table of options are made from
these fields (:func:`option_specs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Callable, NamedTuple, Optional

__all__ = ["Options", "OptionSpec", "option_specs"]


class OptionSpec(NamedTuple):
    """One option of ``%%autograd``, as its parser and its documentation show it."""

    name: str  # the Options field
    flags: tuple  # e.g. ("-t", "--target")
    type: type  # what the option's text is read as (bool: a switch without a value)
    default: object
    help: str
    metavar: Optional[str] = None
    choices: Optional[tuple] = None
    check: Optional[Callable] = None  # value -> what is wrong with it, or ""


def _option(default, help: str, *, flags=(), type=None, metavar=None, choices=None, check=None):
    return field(
        default=default,
        metadata={
            "flags": flags,
            "help": help,
            "type": type,
            "metavar": metavar,
            "choices": choices,
            "check": check,
        },
    )


def _positive(x) -> str:
    return "" if x > 0 else f"must be positive, got {x}"


def _not_negative(x) -> str:
    return "" if x >= 0 else f"must not be negative, got {x}"


@dataclass
class Options:
    """One ``%%autograd`` line's settings (its defaults are the magic's).

    ``expect`` is a parsed mapping (name → number), never code. ``Options.of``
    accepts an Options, a mapping of some of these fields, or None.
    """

    target: str | None = _option(
        None,
        "differentiate the Value bound to NAME after the cell runs (default: the "
        "cell's last expression, or the name its last statement assigns)",
        flags=("-t", "--target"),
        type=str,
        metavar="NAME",
        check=lambda x: "" if x.isidentifier() else f"needs a variable name, got {x!r}",
    )
    no_check: bool = _option(False, "skip the numerical (finite-difference) check of the gradients")
    eps: float = _option(1e-6, "step of the numerical check", check=_positive)
    atol: float = _option(
        1e-5, "absolute tolerance of the check and of --expect", check=_not_negative
    )
    rtol: float = _option(
        1e-3, "relative tolerance of the check and of --expect", check=_not_negative
    )
    expect: dict | None = _option(
        None,
        'expected gradients, e.g. "a=6, b=-4" ("a.data=2" for a value), or the '
        "name of a dict holding them",
        type=str,
        metavar="SPEC",
    )
    rankdir: str | None = _option(
        None,
        "graph direction: left to right or top to bottom (default: left to right, or "
        "top to bottom for a small graph that fits the width better that way)",
        type=str,
        choices=("LR", "TB"),
    )
    max_nodes: int = _option(
        150,
        "draw at most N nodes; larger graphs, and any graph too big to lay out within "
        "a few seconds, are drawn grouped by the calls and lines of the code",
        metavar="N",
        check=lambda x: "" if x >= 1 else f"must be at least 1, got {x}",
    )
    max_memory: float | None = _option(
        None,
        "stop the cell once it has made the process GB gigabytes bigger (default: 1, or a "
        "quarter of the free memory if that is less); every number a recorded cell computes "
        "is kept until it ends",
        type=float,
        metavar="GB",
        check=_positive,
    )
    torch: bool = _option(
        False, "also replay the graph in PyTorch (float64) and show its gradients"
    )
    quiet: bool = _option(
        False, "display nothing (the Trace is still in gradmagic.last)", flags=("-q", "--quiet")
    )

    @classmethod
    def of(cls, value=None) -> "Options":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return replace(value)
        names = {f.name for f in fields(cls)}
        unknown = set(value) - names
        if unknown:
            raise TypeError(f"unknown options: {', '.join(sorted(unknown))}")
        return cls(**value)


def option_specs() -> list:
    """Every option of ``%%autograd``, in the order ``%%autograd?`` lists them."""
    specs = []
    for f in fields(Options):
        meta = f.metadata
        kind = meta["type"] or type(f.default)
        specs.append(
            OptionSpec(
                name=f.name,
                flags=meta["flags"] or ("--" + f.name.replace("_", "-"),),
                type=kind,
                default=f.default,
                help=meta["help"],
                metavar=meta["metavar"],
                choices=meta["choices"],
                check=meta["check"],
            )
        )
    return specs
