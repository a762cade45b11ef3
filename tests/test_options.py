"""The magic's options, declared once as the fields of Options."""

import inspect
import math
import re
from dataclasses import fields

import pytest
from IPython.core.error import UsageError

import gradmagic
from gradmagic.analysis.options import OptionError, Options, option_specs
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


# ----------------------------------------------------------------- the entry points agree
def _keyword_defaults(fn) -> dict:
    return {
        name: p.default
        for name, p in inspect.signature(fn).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def test_every_entry_point_has_the_options_defaults():
    from gradmagic import grade
    from gradmagic.analysis import check, torchgraph
    from gradmagic.views import summary

    defaults = Options()
    api = _keyword_defaults(gradmagic.autograd)
    assert api.pop("check") is (not defaults.no_check)
    assert api == {name: getattr(defaults, name) for name in api}
    assert set(api) == {s.name for s in option_specs()} - {"no_check", "quiet"}
    graded = _keyword_defaults(grade)
    assert (graded["atol"], graded["rtol"], graded["target"]) == (
        defaults.atol,
        defaults.rtol,
        defaults.target,
    )
    checked = _keyword_defaults(check.check)
    assert (checked["eps"], checked["atol"], checked["rtol"]) == (
        defaults.eps,
        defaults.atol,
        defaults.rtol,
    )
    assert _keyword_defaults(check.expect) == {"atol": defaults.atol, "rtol": defaults.rtol}
    assert _keyword_defaults(torchgraph.layout)["max_nodes"] == defaults.max_nodes
    assert summary.DEFAULT_MAX_NODES == defaults.max_nodes
    assert parse_options("") == Options.parse("") == Options.parse("%%autograd") == defaults


def test_the_function_and_the_magic_make_the_same_options(ip):
    """The same run, by the magic and by gradmagic.autograd: the same options, layout included."""
    cell = "a = 2.0\nb = a * a + 1.0"
    for line, keywords in [
        ("-q", {}),
        (
            "-q -t b --no-check --eps 1e-4 --atol 0.5 --rtol 0 --rankdir TB --max-nodes 7 "
            "--max-memory 2 --expect 'a=4, b.data=5'",
            dict(
                target="b",
                check=False,
                eps=1e-4,
                atol=0.5,
                rtol=0,
                rankdir="TB",
                max_nodes=7,
                max_memory=2,
                expect={"a": 4, "b.data": 5},
            ),
        ),
    ]:
        ip.run_cell_magic("autograd", line, cell)
        by_magic = gradmagic.last.options
        by_function = gradmagic.autograd(cell, **keywords)().trace.options
        assert by_magic == by_function == Options.parse(line)
        assert by_magic.rankdir == keywords.get("rankdir")  # None: the view fits the layout


def test_a_string_expect_reads_the_same_everywhere():
    text = "a=-4/3, b.data = 2**3"
    want = {"a": -4 / 3, "b.data": 8.0}
    assert Options(expect=text).expect == want
    assert Options.parse(f"--expect '{text}'").expect == want
    run = gradmagic.autograd("b = a * 2.0", expect=text)(a=1.0)
    assert run.trace.options.expect == want
    assert Options.parse(f"--expect '{text}' -t x", skip=("expect",)) == Options(target="x")


# (the magic's option text, the same value as a keyword of gradmagic.autograd, the words)
BAD_VALUES = [
    ("--eps 0", {"eps": 0.0}, "eps must be positive"),
    ("--eps nan", {"eps": math.nan}, "eps must be finite"),
    ("--atol -1", {"atol": -1}, "atol must not be negative"),
    ("--rtol inf", {"rtol": math.inf}, "rtol must be finite"),
    ("--max-nodes 0", {"max_nodes": 0}, "max-nodes must be at least 1"),
    ("--max-memory -2", {"max_memory": -2.0}, "max-memory must be positive"),
    ("-t 'a b'", {"target": "a b"}, "target needs a variable name"),
    ("--expect 'a=six'", {"expect": "a=six"}, "expect: 'six' is not a number"),
]


@pytest.mark.parametrize("line, keywords, words", BAD_VALUES)
def test_a_bad_value_is_the_same_error_in_every_entry_point(ip, line, keywords, words):
    with pytest.raises(UsageError, match=re.escape("--" + words)) as shown:
        ip.run_cell_magic("autograd", line, "a = 1.0")
    assert "--max-nodes N" in str(shown.value)  # the help follows
    with pytest.raises(OptionError, match=re.escape("--" + words)):
        Options.parse(line)
    plain = words.replace("max-nodes", "max_nodes").replace("max-memory", "max_memory")
    with pytest.raises(ValueError, match=re.escape(plain)) as raised:
        gradmagic.autograd(lambda a: a * a, **keywords)
    assert not isinstance(raised.value, OptionError)  # a plain ValueError, no magic help
    assert str(raised.value).startswith(plain)


@pytest.mark.parametrize(
    "keywords, words",
    [
        ({"eps": "1e-4"}, "eps must be a number, got str"),
        ({"atol": None}, "atol must be a number, got NoneType"),
        ({"max_nodes": None}, "max_nodes must be a whole number, got NoneType"),
        ({"max_nodes": 2.5}, "max_nodes must be a whole number, got float"),
        ({"max_nodes": True}, "max_nodes must be a whole number, got bool"),
        ({"torch": "yes"}, "torch must be True or False, got str"),
        ({"check": None}, "check must be True or False, got NoneType"),
        ({"expect": 3}, "expect must be a mapping or a string, got int"),
        ({"target": 3}, "target must be a str, got int"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_type_error(keywords, words):
    with pytest.raises(TypeError, match=re.escape(words)):
        gradmagic.autograd(lambda a: a * a, **keywords)


def test_the_magic_rejects_what_its_parser_cannot_read(ip):
    for line, words in [
        ("--max-nodes 2.5", "invalid int value"),
        ("--rankdir XY", "invalid choice"),
        ("--expect 'a=1", "cannot be read"),
        ("a b", "unexpected text"),
    ]:
        with pytest.raises(UsageError, match=words):
            ip.run_cell_magic("autograd", line, "a = 1.0")
        with pytest.raises(OptionError, match=words):
            Options.parse(line)
    with pytest.raises(ValueError, match="rankdir must be one of 'LR', 'TB', got 'XY'"):
        gradmagic.autograd(lambda a: a * a, rankdir="XY")


def test_grade_checks_its_options_and_reads_the_line_as_the_magic_does():
    from gradmagic import grade

    source = "a = 2.0\nb = a * a\nc = b * 3"
    for keywords, words in [
        ({"atol": -1}, "atol must not be negative"),
        ({"rtol": math.nan}, "rtol must be finite"),
        ({"target": "a b"}, "target needs a variable name"),
    ]:
        with pytest.raises(ValueError, match=words):
            grade(source, {"a": 4}, **keywords)
    with pytest.raises(TypeError, match="atol must be a number, got str"):
        grade(source, {"a": 4}, atol="0.1")
    bad = grade("%%autograd -t b --eps 0\n" + source, {"a": 4}, isolate=False)
    assert not bad.passed and "--eps must be positive" in bad.error and "line 1" in bad.error
    # the student's own --expect (a name in their notebook) is not read: -t still is
    assert grade("%%autograd --expect mine -t b\n" + source, {"a": 4}, isolate=False).passed


def test_a_bad_line_says_why_and_the_usage_not_the_whole_help(ip):
    with pytest.raises(UsageError) as shown:
        ip.run_cell_magic("autograd", "--max-nodes 0", "a = 1.0")
    text = str(shown.value)
    assert text.splitlines()[0].startswith("--max-nodes")  # the reason first
    assert "usage: %autograd" in text and "%%autograd? describes every option" in text
    assert "draw at most N nodes" not in text and len(text.splitlines()) < 10
