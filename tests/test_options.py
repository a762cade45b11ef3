"""The magic's options, declared once as the fields of Options."""

from dataclasses import fields

import pytest
from IPython.core.error import UsageError

from gradmagic.analysis.options import Options, option_specs
from gradmagic.notebook.magic import AutogradMagics, parse_options


def test_every_field_is_an_option_with_its_default_help_and_flags():
    specs = option_specs()
    assert [s.name for s in specs] == [f.name for f in fields(Options)]
    defaults = Options()
    for spec in specs:
        assert spec.default == getattr(defaults, spec.name)
        assert spec.help and spec.flags and all(f.startswith("-") for f in spec.flags)
        assert spec.flags[-1] == "--" + spec.name.replace("_", "-")
    by_name = {s.name: s for s in specs}
    assert by_name["target"].flags == ("-t", "--target") and by_name["target"].type is str
    assert by_name["eps"].type is float and by_name["max_nodes"].type is int
    assert by_name["quiet"].type is bool and by_name["rankdir"].choices == ("LR", "TB")


def test_the_parser_is_made_from_the_fields():
    doc = AutogradMagics.autograd.__doc__
    for spec in option_specs():
        assert spec.flags[-1] in doc
    assert "(default 1e-6)" in doc and "(default 150)" in doc
    assert parse_options("") == Options()
    parsed = parse_options(
        "-t y --eps 1e-4 --rankdir TB --max-nodes 9 --max-memory 2.5 -q --expect 'a=1'"
    )
    assert parsed == Options(
        target="y",
        eps=1e-4,
        rankdir="TB",
        max_nodes=9,
        max_memory=2.5,
        quiet=True,
        expect={"a": 1.0},
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("--atol -1", "--atol must not be negative"),
        ("--rtol -1", "--rtol must not be negative"),
        ("--eps 0", "--eps must be positive"),
        ("--max-nodes 0", "--max-nodes must be at least 1"),
        ("--max-memory 0", "--max-memory must be positive"),
        ("-t 'a b'", "--target needs a variable name"),
    ],
)
def test_each_fields_check_gives_a_usage_error(text, message):
    with pytest.raises(UsageError, match=message):
        parse_options(text)
