"""gradmagic.grade: checking answers without a display, for autograders."""

import importlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from IPython.testing import globalipapp

import gradmagic
from gradmagic.notebook import session
from gradmagic import grade
from gradmagic.analysis.check import CheckReport

grade_module = importlib.import_module("gradmagic.grade")

TEXTBOOK = Path(__file__).parents[2] / "shared/cases/textbook.json"

# L = (a*b + c) * f: dL/da = 6, dL/db = -4, dL/dc = -2, dL/df = 4, L = -8
WALK = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f\nL"
RIGHT = {"a": 6, "b": -4, "c": -2, "f": 4, "L.data": -8}


def row(report, name):
    (found,) = [r for r in report.rows if r.name == name]
    return found


def not_a_number(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return True
    return False


# --------------------------------------------------------------------------- answers
def test_right_answers_pass():
    report = grade(WALK, RIGHT)
    assert isinstance(report, CheckReport) and report.kind == "expect"
    assert report.passed and report.verdict == "5 of 5 correct"
    assert [r.name for r in report.rows] == list(RIGHT)  # the order they were given in
    assert row(report, "L.data").got == -8.0 and row(report, "a").got == 6.0
    report.assert_passed()
    text = str(report)
    assert text.startswith("✓ 5 of 5 correct") and "∂L/∂a" in text and "L (value)" in text


def test_wrong_answers_fail_and_the_message_names_each_with_expected_got_and_tolerance():
    report = grade(WALK, {"a": 6, "b": 4, "c": 2, "f": 4})
    assert not report.passed and report.verdict == "2 of 4 correct"
    assert {r.name: r.status for r in report.rows} == {
        "a": "pass",
        "b": "fail",
        "c": "fail",
        "f": "pass",
    }
    with pytest.raises(AssertionError) as info:
        report.assert_passed()
    lines = str(info.value).splitlines()
    assert lines[0] == "2 of 4 correct"
    (b_line,) = [line for line in lines if "'b'" in line]
    (c_line,) = [line for line in lines if "'c'" in line]
    assert "expected 4," in b_line and "got -4" in b_line and "tolerance 0.00401" in b_line
    assert "expected 2," in c_line and "got -2" in c_line and "tolerance 0.00201" in c_line
    assert not [line for line in lines if "'a'" in line or "'f'" in line]
    assert "atol 1e-05" in str(info.value) and "rtol 0.001" in str(info.value)


def test_tolerances():
    close = {"a": 6.004}  # off by 0.004; the default bound is 1e-5 + 1e-3 * 6.004
    assert grade(WALK, close).passed
    assert not grade(WALK, close, rtol=0).passed
    assert grade(WALK, close, atol=0.005, rtol=0).passed
    r = row(grade(WALK, close, atol=0.001, rtol=0.0), "a")
    assert r.bound == pytest.approx(0.001) and r.abs_err == pytest.approx(0.004)
    assert grade(WALK, {"a": 6}, atol=0, rtol=0).passed  # exact answers need no slack


def test_unknown_names_are_errors_not_skipped():
    report = grade(WALK, {"a": 6, "zz": 1.0})
    assert not report.passed and report.verdict == "1 of 2 correct"
    assert row(report, "zz").status == "error" and "no node named 'zz'" in row(report, "zz").note
    assert "∂L/∂zz" in str(report) and "no node named 'zz'" in str(report)
    with pytest.raises(AssertionError, match="'zz': no node named"):
        report.assert_passed()


def test_value_and_grad_suffixes():
    report = grade(WALK, {"L.data": -8.0, "d.data": 4.0, "e.grad": -2.0, "e.data": 5.0})
    assert {r.name: r.status for r in report.rows} == {
        "L.data": "pass",
        "d.data": "pass",
        "e.grad": "pass",
        "e.data": "fail",
    }


def test_expected_as_text_or_pairs():
    assert grade(WALK, "a=6, b=-4, L.data=-8").passed
    assert grade(WALK, [("a", 6), ("b.grad", -4)]).passed
    assert not grade(WALK, "a=-12/2").passed


def test_a_bad_expected_number_is_an_error_row_not_a_crash():
    report = grade(WALK, {"a": "six", "b": -4})
    assert [r.status for r in report.rows] == ["error", "pass"] and not report.passed


def test_textbook_cases_pass():
    cases = json.loads(TEXTBOOK.read_text())["cases"] if TEXTBOOK.exists() else []
    cases.append({"cell": WALK, "checks": [[k, v] for k, v in RIGHT.items()]})
    for case in cases:
        report = grade(case["cell"], case["checks"], atol=1e-9, rtol=1e-9)
        assert report.passed, (case["cell"], str(report))


def test_tensor_answers():
    source = (
        "import numpy as np\nfrom gradmagic import tensor\n"
        "W = tensor([[1.0, 2.0], [3.0, 4.0]])\nx = tensor([1.0, -1.0])\n"
        "L = (W @ x).sum()"
    )
    assert grade(source, {"W": [[1.0, -1.0], [1.0, -1.0]], "x": [4.0, 6.0]}).passed
    report = grade(source, {"x": [4.0, 7.0]})
    assert not report.passed and "worst element (1,)" in row(report, "x").note


# --------------------------------------------------------------------------- running the source
def test_grade_runs_in_a_fresh_namespace_or_the_one_given():
    with pytest.raises(AssertionError, match="NameError"):
        grade("L = x * 3\nL", {"x": 3}).assert_passed()
    ns = {"x": 2.0}
    report = grade("L = x * x * 3\nL", {"x": 12, "L.data": 12}, namespace=ns)
    assert report.passed
    assert ns == {"x": 2.0}  # isolated: a copy went to the child; the grader's dict is unchanged
    report = grade("L = x * x * 3\nL", {"x": 12, "L.data": 12}, namespace=ns, isolate=False)
    assert report.passed
    assert ns["x"].grad == 12.0 and ns["L"].data == 12.0  # in-process: bound, as in the magic
    with pytest.raises(TypeError, match="must pickle"):
        grade("L = f(2.0)\nL", {"x": 1}, namespace={"f": lambda x: x})
    assert grade(
        "L = f(2.0)\nL", {"L.data": 4.0}, namespace={"f": lambda x: x * x}, isolate=False
    ).passed


def test_target_option_and_the_magic_line():
    source = "a = 2.0\nb = a * a\nc = b * 3"
    assert grade(source, {"a": 12}).passed  # the last assignment: c
    assert grade(source, {"a": 4}, target="b").passed
    assert grade("%%autograd -t b --atol 1\n" + source, {"a": 4}).passed
    bad = grade("%%autograd --frobnicate\n" + source, {"a": 4})
    assert not bad.passed and "line 1" in bad.error and "--frobnicate" in bad.error


def test_the_same_rewrite_and_engine_as_the_magic():
    """math.tanh keeps the graph, literals in range() stay ints, names are labels."""
    source = "import math\nw = 0.5\ns = 0.0\nfor k in range(3):\n    s = s + math.tanh(w * k)\ns"
    report = grade(source, {"w": sum(k * (1 - math.tanh(0.5 * k) ** 2) for k in range(3))})
    assert report.passed, str(report)
    shell = globalipapp.get_ipython()
    before = set(shell.user_ns)
    shell.run_line_magic("load_ext", "gradmagic")
    try:
        shell.run_cell("%%autograd -q\n" + source)
        from_magic = gradmagic.last.expect({"w": 1.0}).to_dict()
    finally:
        shell.run_line_magic("unload_ext", "gradmagic")
        for name in set(shell.user_ns) - before:
            del shell.user_ns[name]
        session.last = None
    graded = grade(source, {"w": 1.0}).to_dict()
    assert graded.pop("sandbox")["sandboxed"] is True
    assert graded.pop("outcome") == "wrong" and graded.pop("feedback") == "full"
    assert graded == from_magic


def test_grade_leaves_the_magics_last_trace_alone():
    session.last = before = object()
    try:
        grade(WALK, RIGHT)
        assert gradmagic.last is before
    finally:
        session.last = None


# --------------------------------------------------------------------------- failures of the source
def test_a_syntax_error_is_a_failing_report_with_the_line():
    report = grade("a = 2.0\nL = a *\nL", {"a": 1.0})
    assert not report.passed and report.verdict.startswith("0 of 1 correct")
    assert "syntax error on line 2" in report.error and "L = a *" in report.error
    assert row(report, "a").status == "error"
    text = str(report)
    assert "syntax error on line 2" in text and "2 | L = a *" in text
    with pytest.raises(AssertionError, match="syntax error on line 2"):
        report.assert_passed()
    assert report.to_dict()["error"] == report.error


def test_an_exception_names_its_type_message_and_line():
    source = "def f(x):\n    return x / (x + x) + [][0]\n\na = 2.0\nL = f(a)\nL"
    report = grade(source, {"a": 1.0})
    assert "IndexError on line 2" in report.error  # the deepest line of the cell
    assert "list index out of range" in report.error and "2 | return x / (x + x)" in report.error


def test_the_magic_line_counts_in_line_numbers():
    report = grade("%%autograd\na = 2.0\nL = a + undefined_name\nL", {"a": 1.0})
    assert "NameError on line 3" in report.error


def test_no_target_and_exit_are_failing_reports():
    report = grade("a = 2.0\nfor i in range(3):\n    pass", {"a": 1.0})
    assert not report.passed and "Nothing to grade" in report.error
    report = grade("import sys\nsys.exit(3)", {"a": 1.0})
    assert not report.passed and "SystemExit" in report.error
    report = grade("L = 'text'", {"L.data": 1.0})
    assert not report.passed and "not a Value" in report.error


def test_raise_errors_lets_the_grader_see_the_exception():
    with pytest.raises(SyntaxError):
        grade("L = (", {"a": 1}, raise_errors=True, isolate=False)
    with pytest.raises(ZeroDivisionError):
        grade(
            "import fractions\nL = fractions.Fraction(1, 0)",
            {"a": 1},
            raise_errors=True,
            isolate=False,
        )
    with pytest.raises(ValueError, match="isolate=False"):  # an exception cannot cross processes
        grade("L = (", {"a": 1}, raise_errors=True)


@pytest.mark.parametrize(
    "expected, atol, error",
    [
        (3, 1e-5, TypeError),
        ("not a spec", 1e-5, ValueError),
        ({}, 1e-5, ValueError),
        ({"a": 1}, -1.0, ValueError),
        ({"a": 1}, math.nan, ValueError),
    ],
)
def test_a_graders_own_mistakes_raise_at_once(expected, atol, error):
    with pytest.raises(error):
        grade(WALK, expected, atol=atol)


@pytest.mark.parametrize(
    "limits",
    [
        {"timeout": 0},
        {"timeout": -1},
        {"timeout": math.inf},
        {"timeout": "10"},
        {"memory": 0},
        {"memory": 10},
        {"memory": True},
        {"namespace": [("x", 1)]},
    ],
)
def test_bad_limits_raise_at_once(limits):
    with pytest.raises((ValueError, TypeError)):
        grade(WALK, RIGHT, **limits)


def test_source_must_be_text():
    with pytest.raises(TypeError, match="str"):
        grade(b"a = 1.0", {"a": 1})


# --------------------------------------------------------------------------- for autograders
NOISY = (
    "import sys, warnings\nimport numpy as np\na = 2.0\nprint('to stdout')\n"
    "print('to stderr', file=sys.stderr)\nwarnings.warn('careful')\n"
    "np.log(np.array([-1.0]))\nL = a * a\nL"
)


def test_nothing_reaches_stdout_or_stderr(capfd):
    for source in (NOISY, WALK, "a = 2.0\nL = a *", "L = 1 / 0"):
        grade(source, {"a": 4})
    out, err = capfd.readouterr()
    assert err == "" and out == ""


def test_stderr_and_warnings_become_notes():
    report = grade(NOISY, {"a": 4})
    assert report.passed
    notes = "\n".join(report.notes)
    assert "The cell wrote to stderr: to stderr" in notes
    assert "UserWarning: careful" in notes
    assert "Warning on line 7: RuntimeWarning: invalid value encountered in log" in notes
    assert "to stdout" not in str(report)


def test_the_text_never_reads_as_a_number_and_is_deterministic():
    reports = [
        grade(WALK, RIGHT),
        grade(WALK, {"a": 1}),
        grade("L = (", {"a": 1}),
        grade(WALK, {"a": 6}),
        grade("a = 2.0\nL = a * a\nL", {"L.data": 4}),
    ]
    for report in reports:
        text = str(report)
        assert not_a_number(text) and not_a_number(repr(report))
        assert all(not_a_number(line) for line in text.splitlines() if line.strip())
    for source, expected in ((WALK, {"a": 1, "zz": 2}), (NOISY, {"a": 4}), ("L = (", {"a": 1})):
        first, second = grade(source, expected), grade(source, expected)
        assert str(first) == str(second) and first.to_dict() == second.to_dict()


def test_to_dict_is_json():
    d = json.loads(json.dumps(grade(WALK, {"a": 6, "zz": 1}).to_dict()))
    assert d["passed"] is False and d["kind"] == "expect" and d["error"] is None
    assert [r["status"] for r in d["rows"]] == ["pass", "error"]
    assert d["rows"][0]["got"] == 6.0 and d["rows"][0]["expected"] == 6


def test_the_graded_cell_is_compiled_under_its_own_name():
    with pytest.raises(ZeroDivisionError) as info:
        grade(
            "import fractions\nL = fractions.Fraction(1, 0)",
            {"a": 1},
            raise_errors=True,
            isolate=False,
        )
    frames = [f.filename for f in __import__("traceback").extract_tb(info.value.__traceback__)]
    assert grade_module.FILENAME in frames


def test_numpy_answers():
    assert grade(WALK, {"a": np.float64(6.0), "b": np.int64(-4)}).passed


def test_the_magic_and_grade_share_one_run_function(monkeypatch):
    magic = importlib.import_module("gradmagic.notebook.magic")
    calls = []
    real = magic.execute

    def spy(cell, ns, options, **kw):
        calls.append(cell.filename)
        return real(cell, ns, options, **kw)

    monkeypatch.setattr(magic, "execute", spy)
    grade(WALK, RIGHT, isolate=False)  # isolated, the child imports the very same functions
    shell = globalipapp.get_ipython()
    before = set(shell.user_ns)
    shell.run_line_magic("load_ext", "gradmagic")
    try:
        shell.run_cell("%%autograd -q\n" + WALK)
    finally:
        shell.run_line_magic("unload_ext", "gradmagic")
        for name in set(shell.user_ns) - before:
            del shell.user_ns[name]
        session.last = None
    assert calls[0] == grade_module.FILENAME and len(calls) == 2


# --------------------------------------------------------------------------- the sandbox
def test_the_report_says_how_the_cell_ran():
    sandboxed = grade(WALK, RIGHT)
    assert sandboxed.sandbox["sandboxed"] is True and "bubblewrap" in sandboxed.sandbox["how"]
    assert all(sandboxed.sandbox["limits"].values())
    plain = grade(WALK, RIGHT, sandbox=False)
    assert plain.passed and plain.sandbox["sandboxed"] is False
    assert "Not sandboxed" in str(plain) and "Not sandboxed" not in str(sandboxed)
    assert not plain.sandbox["limits"]["processes"] and not plain.sandbox["limits"]["memory_total"]
    assert json.loads(json.dumps(plain.to_dict()))["sandbox"]["sandboxed"] is False
    assert grade(WALK, RIGHT, isolate=False).sandbox["sandboxed"] is False
    unlimited = grade(WALK, RIGHT, timeout=None, memory=None).sandbox["limits"]
    assert not unlimited["time"] and not unlimited["memory_total"] and unlimited["processes"]


def test_without_a_sandbox_grade_refuses_unless_told(monkeypatch):
    sandbox = importlib.import_module("gradmagic.grade._sandbox")
    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    sandbox._probe.cache_clear()
    try:
        with pytest.raises(grade_module.SandboxUnavailable) as info:
            grade(WALK, RIGHT)
        message = str(info.value)
        assert "bubblewrap is not installed" in message and "sandbox=False" in message
        report = grade(WALK, RIGHT, sandbox=False)
        assert report.passed and report.sandbox["sandboxed"] is False
        assert grade(WALK, RIGHT, isolate=False).passed  # in-process needs no sandbox
        # a bwrap that cannot make namespaces (as in a container that forbids them)
        monkeypatch.setattr(sandbox, "_bwrap", lambda: "/bin/false")
        sandbox._probe.cache_clear()
        with pytest.raises(grade_module.SandboxUnavailable, match="cannot make a sandbox here"):
            grade(WALK, RIGHT)
    finally:
        sandbox._probe.cache_clear()
    with pytest.raises(TypeError, match="True or False"):
        grade(WALK, RIGHT, sandbox="no")
    with pytest.raises(ValueError, match="processes"):
        grade(WALK, RIGHT, processes=1)


def test_expected_answers_become_plain_numbers_once():
    class Shifty:
        """A number that changes each time it is read (as a student's object could)."""

        reads = 0

        def __float__(self):
            Shifty.reads += 1
            return 6.0 if Shifty.reads == 1 else 7.0

    report = grade(WALK, {"a": Shifty(), "b": np.float32(-4), "c": [[-2.0]]}, isolate=False)
    assert Shifty.reads == 0  # an object of a type of its own is never read: an error row
    assert type(row(report, "b").expected) is float and row(report, "b").status == "pass"
    assert row(report, "a").status == "error" and row(report, "c").status == "error"


def test_verdicts_feedback_leaves_the_expected_values_out():
    wrong = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f*1.5\nL"
    report = grade(wrong, {"a": 6.25, "b": -4.125, "L.data": -8.375}, feedback="verdicts")
    assert not report.passed and report.feedback == "verdicts"
    assert all(r.expected is None and r.bound is None and r.abs_err is None for r in report.rows)
    d = report.to_dict()
    with pytest.raises(AssertionError) as info:
        report.assert_passed()
    for shown in (str(report), json.dumps(d), str(info.value)):
        assert "6.25" not in shown and "4.125" not in shown and "8.375" not in shown
    assert "a: wrong" in str(report) and d["feedback"] == "verdicts"
    assert grade(WALK, RIGHT, feedback="verdicts").passed
    with pytest.raises(ValueError, match="feedback"):
        grade(WALK, RIGHT, feedback="some")


def test_answers_of_a_type_of_their_own_are_never_asked_for_anything():
    """A dict subclass, a float subclass, a str subclass key: no method of theirs is called
    (they are error rows); plain types still work."""
    called = []

    class Spy(float):
        def __float__(self):
            called.append("float")
            return 6.0

        def __reduce_ex__(self, protocol):
            called.append("pickle")
            return (float, (6.0,))

    class SpyDict(dict):
        def items(self):
            called.append("items")
            return super().items()

    class Key(str):
        def __str__(self):
            called.append("str")
            return "a"

    report = grade(WALK, {"a": Spy(6.0), Key("b"): -4, "c": -2, "f": np.int64(4)})
    assert [r.status for r in report.rows] == ["error", "error", "pass", "pass"]
    report = grade(WALK, SpyDict(a=6))
    assert not report.passed and report.outcome == "wrong" and not called


def test_a_source_of_a_type_of_its_own_is_sent_as_plain_text():
    class Source(str):
        def __reduce_ex__(self, protocol):
            raise AssertionError("pickled in the grader")

        def encode(self, *args):
            raise AssertionError("encoded in the grader")

    assert grade(Source(WALK), RIGHT, target=Source("L")).passed


@pytest.mark.parametrize("answer", [2.4, 1.7])  # the code's own slope, and the graph's
def test_a_gradient_the_code_refutes_is_not_graded_either_way(answer):
    # json round-trips a, which no graph follows: the graph says 1.7, the code 2.4
    cell = "import json\na = 0.7\nL = json.loads(json.dumps(a)) * a + a\nL"
    report = gradmagic.grade(cell, {"a": answer})
    assert not report.passed
    (row,) = report.rows
    assert row.status == "error" and "not graded" in row.note
    assert gradmagic.grade("a = 0.7\nL = a * a + a\nL", {"a": 2.4}).passed
