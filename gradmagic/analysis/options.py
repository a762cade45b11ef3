"""The settings of one run: what the magic's options set, read by the analysis and the views.

Each option is declared once, as a field of :class:`Options` whose metadata holds its default,
flags, help, metavar, choices and the check of its value. Everything else is made from these
fields: the parser of the magic's line (:meth:`Options.parse`), the magic's help
(``%%autograd?``, :func:`help_text`), the keywords of :func:`gradmagic.autograd` and their
defaults, the check of every value however it arrives (``Options(...)`` raises ``TypeError``
or ``ValueError``), and the documentation's table of options (:func:`option_specs`).
"""

from __future__ import annotations

import argparse
import copy
import functools
import math
import numbers
import shlex
from collections.abc import Callable, Collection, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any, NamedTuple, NoReturn, Optional

__all__ = [
    "DEFAULTS",
    "Options",
    "OptionError",
    "OptionSpec",
    "option_specs",
    "help_text",
    "READERS",
]

Check = Callable[[Any], str]  # a value -> what is wrong with it, or ""
Reader = Callable[[str, Mapping[str, Any]], Any]  # (an option's text, the namespace) -> value

READERS: dict[str, Reader] = {}
"""How the text of an option becomes its value, by field name, for options whose value is not
their text: ``expect`` (``"a=6, b=-4"`` or a dict's name) is read by the layer that reads
answers, :mod:`gradmagic.notebook.expect`, which registers its reader here when imported."""


class OptionError(ValueError):
    """A bad ``%%autograd`` line: the message names the option (``--eps must be positive``)."""


class OptionSpec(NamedTuple):
    """One option of ``%%autograd``, as its parser and its documentation show it."""

    name: str  # the Options field
    flags: tuple[str, ...]  # e.g. ("-t", "--target")
    type: type  # what the option's text is read as (bool: a switch without a value)
    default: object
    help: str
    metavar: Optional[str] = None
    choices: Optional[tuple[str, ...]] = None
    check: Optional[Check] = None  # value -> what is wrong with it, or ""


def _option(
    default: Any,
    help: str,
    *,
    kind: type,
    flags: tuple[str, ...] = (),
    text: type | None = None,
    metavar: str | None = None,
    choices: tuple[str, ...] | None = None,
    check: Check | None = None,
) -> Any:
    """A field of :class:`Options`: ``kind`` is its value's type, ``text`` what its text is
    parsed as (default ``kind``)."""
    return field(
        default=default,
        metadata={
            "kind": kind,
            "flags": flags,
            "help": help,
            "type": text or kind,
            "metavar": metavar,
            "choices": choices,
            "check": check,
        },
    )


def _positive(x: float) -> str:
    return "" if x > 0 else f"must be positive, got {x}"


def _not_negative(x: float) -> str:
    return "" if x >= 0 else f"must not be negative, got {x}"


def _name(x: str) -> str:
    return "" if x.isidentifier() else f"needs a variable name, got {x!r}"


def _at_least_one(x: int) -> str:
    return "" if x >= 1 else f"must be at least 1, got {x}"


@dataclass
class Options:
    """One ``%%autograd`` line's settings; the defaults of the magic and of every entry point.

    ``expect`` is a parsed mapping (name → number), never code; given as text it is read as
    ``--expect``'s text is. ``Options(...)`` checks every value: ``TypeError`` for a value of
    the wrong type, ``ValueError`` for a bad one. ``Options.parse(line)`` reads the magic's
    line, ``Options.of`` accepts an Options, a mapping of some of these fields, or None.
    """

    target: str | None = _option(
        None,
        "differentiate the Value bound to NAME after the cell runs (default: the "
        "cell's last expression, or the name its last statement assigns)",
        kind=str,
        flags=("-t", "--target"),
        metavar="NAME",
        check=_name,
    )
    no_check: bool = _option(
        False, "skip the numerical (finite-difference) check of the gradients", kind=bool
    )
    eps: float = _option(1e-6, "step of the numerical check", kind=float, check=_positive)
    atol: float = _option(
        1e-5, "absolute tolerance of the check and of --expect", kind=float, check=_not_negative
    )
    rtol: float = _option(
        1e-3, "relative tolerance of the check and of --expect", kind=float, check=_not_negative
    )
    expect: dict | None = _option(
        None,
        'expected gradients, e.g. "a=6, b=-4" ("a.data=2" for a value), or the '
        "name of a dict holding them",
        kind=Mapping,
        text=str,
        metavar="SPEC",
    )
    rankdir: str | None = _option(
        None,
        "graph direction: left to right or top to bottom (default: left to right, or "
        "top to bottom for a small graph that fits the width better that way)",
        kind=str,
        choices=("LR", "TB"),
    )
    max_nodes: int = _option(
        150,
        "draw at most N nodes; larger graphs, and any graph too big to lay out within "
        "a few seconds, are drawn grouped by the calls and lines of the code",
        kind=int,
        metavar="N",
        check=_at_least_one,
    )
    max_memory: float | None = _option(
        None,
        "stop the cell once it has made the process GB gigabytes bigger (default: 1, or a "
        "quarter of the free memory if that is less); every number a recorded cell computes "
        "is kept until it ends",
        kind=float,
        metavar="GB",
        check=_positive,
    )
    torch: bool = _option(
        False, "also replay the graph in PyTorch (float64) and show its gradients", kind=bool
    )
    quiet: bool = _option(
        False,
        "display nothing (the Trace is still in gradmagic.last)",
        kind=bool,
        flags=("-q", "--quiet"),
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str) and f.name in READERS:
                try:
                    value = READERS[f.name](value, {})
                except ValueError as e:
                    raise ValueError(f"{f.name}: {e}") from None
            setattr(self, f.name, _checked(f, value, f.name))

    @classmethod
    def of(cls, value: Options | Mapping[str, Any] | None = None) -> Options:
        if value is None:
            return cls()
        if isinstance(value, Options):  # a copy (its values were checked as it was made)
            return copy.copy(value)
        names = {f.name for f in fields(cls)}
        unknown = set(value) - names
        if unknown:
            raise TypeError(f"unknown options: {', '.join(sorted(unknown))}")
        return cls(**value)

    @classmethod
    def parse(
        cls, line: str, ns: Mapping[str, Any] | None = None, *, skip: Collection[str] = ()
    ) -> Options:
        """The Options of a ``%%autograd`` line (``"%%autograd -t y --eps 1e-4"``, or the
        options alone); :class:`OptionError` (a ``ValueError``) names what is wrong.

        ``--expect NAME`` is read in ``ns``; the fields named in ``skip`` keep their
        defaults whatever the line says (their text is still parsed).
        """
        values = dict(_parsed(_options_text(line)))
        for f in fields(cls):
            value, flag = values[f.name], _flags(f)[-1]
            if f.name in skip or value is None:
                values[f.name] = f.default
                continue
            try:
                if f.name in READERS:
                    value = READERS[f.name](value, {} if ns is None else ns)
                values[f.name] = _checked(f, value, flag)
            except (TypeError, ValueError) as e:
                text = str(e)
                raise OptionError(text if text.startswith(flag) else f"{flag}: {text}") from None
        return cls(**values)


_KINDS = {
    float: "a number",
    int: "a whole number",
    bool: "True or False",
    str: "a str",
    Mapping: "a mapping or a string",
}


def _checked(f: Field[Any], value: Any, label: str) -> Any:
    """``value`` in its plain form (a float, an int, a dict) once checked for field ``f``."""
    kind = f.metadata["kind"]
    if value is None and f.default is None:  # (an option that may be unset)
        return None
    problem = _type_problem(kind, value)
    if problem:
        raise TypeError(f"{label} {problem}")
    value = _normal(kind, value)
    problem = _value_problem(f.metadata, value)
    if problem:
        raise ValueError(f"{label} {problem}")
    return value


def _flags(f: Field[Any]) -> tuple[str, ...]:
    return f.metadata["flags"] or ("--" + f.name.replace("_", "-"),)


def _type_problem(kind: type, value: object) -> str:
    if kind is float:
        fits = isinstance(value, numbers.Real) and not isinstance(value, bool)
    elif kind is int:
        fits = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    else:
        fits = isinstance(value, kind)
    return "" if fits else f"must be {_KINDS[kind]}, got {type(value).__name__}"


def _normal(kind: type, value: Any) -> Any:
    """A checked value in its plain form: a float, an int, a dict."""
    if kind is float:
        return float(value)
    if kind is int:
        return int(value)
    return dict(value) if kind is Mapping else value


def _value_problem(meta: Mapping[str, Any], value: Any) -> str:
    if meta["kind"] is float and not math.isfinite(value):
        return f"must be finite, got {value}"
    choices = meta["choices"]
    if choices is not None and value not in choices:
        return f"must be one of {', '.join(map(repr, choices))}, got {value!r}"
    return meta["check"](value) if meta["check"] is not None else ""


def option_specs() -> list[OptionSpec]:
    """Every option of ``%%autograd``, in the order ``%%autograd?`` lists them."""
    return list(_SPECS)


def _spec(f: Field[Any]) -> OptionSpec:
    meta = f.metadata
    more = (meta["help"], meta["metavar"], meta["choices"], meta["check"])
    return OptionSpec(f.name, _flags(f), meta["type"], f.default, *more)


_SPECS = tuple(map(_spec, fields(Options)))

DEFAULTS = Options()
"""Every option at its default (the defaults of the keywords of every entry point)."""


# --------------------------------------------------------------------------- the line's parser
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise OptionError(message)


@functools.lru_cache(maxsize=4)
def _parser(prog: str = "%autograd") -> _Parser:
    """The parser of the magic's line, made from the fields (``expression``: the line form's)."""
    parser = _Parser(
        prog=prog, add_help=False, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for spec in _SPECS:
        if spec.type is bool:
            how: dict = {"action": "store_true"}
        else:  # (not given: None, argparse's default)
            how = {"type": spec.type, "metavar": spec.metavar, "choices": spec.choices}
        parser.add_argument(*spec.flags, dest=spec.name, help=_help(spec), **how)
    parser.add_argument(
        "expression", nargs="*", help="line form only: the expression to differentiate"
    )
    return parser


def _help(spec: OptionSpec) -> str:
    shown = spec.default not in (None, False) and not spec.help.startswith("(default")
    return spec.help + (f" (default {_shown(spec.default)})" if shown else "")


def _shown(default: object) -> str:
    return str(default).replace("e-0", "e-")  # 1e-6, not 1e-06


def _options_text(line: str) -> str:
    text = line.strip()
    for magic in ("%%autograd", "%autograd"):
        if text.startswith(magic) and text[len(magic) : len(magic) + 1] in ("", " ", "\t"):
            return text[len(magic) :]
    return text


@functools.lru_cache(maxsize=256)  # argparse is slow next to a small cell
def _parsed(text: str) -> tuple[tuple[str, Any], ...]:
    """The option text's values as parsed (None where not given; switches False)."""
    try:
        words = shlex.split(text)
    except ValueError as e:  # an unclosed quote
        raise OptionError(f"the options cannot be read: {e}") from None
    args = vars(_parser().parse_args(words))
    extra = args.pop("expression")
    if extra:
        raise OptionError(f"unexpected text after the options of %%autograd: {' '.join(extra)!r}")
    return tuple(args.items())


def usage_text(prog: str = "%autograd") -> str:
    """The magic's usage line (every option in brief), as argparse writes it."""
    return _parser(prog).format_usage().strip()


def help_text(description: str = "", prog: str = "%autograd") -> str:
    """The magic's help: its usage line, ``description``, then every option with its help."""
    parser = _parser(prog)
    formatter = parser._get_formatter()
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, "")
    formatter.add_text(description)
    for group in parser._action_groups:
        formatter.start_section(group.title)
        formatter.add_arguments(group._group_actions)
        formatter.end_section()
    return formatter.format_help()
