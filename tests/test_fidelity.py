"""Plain-Python fidelity of ``%%autograd`` (issue #12): a cell runs as it does without the magic."""
import pytest

pytestmark = pytest.mark.usefixtures("fresh_names")


def run(ip, body, options="-q"):
    return ip.run_cell(f"%%autograd {options}\n{body}")


# --------------------------------------------------------------------------- shell syntax
def test_line_magics_and_shell_commands_work_inside_the_cell(ip, capfd):
    result = run(ip, "%time t = 3.0\n!echo from-the-shell\nx = 2.0\nL = x * t\nL", options="")
    assert result.success, result.error_in_exec
    out = capfd.readouterr().out
    assert "Wall time" in out and "from-the-shell" in out
    assert ip.user_ns["t"] == 3.0 and ip.user_ns["L"].data == 6.0
    assert ip.user_ns["x"].grad == 3.0


def test_shell_syntax_keeps_the_users_line_numbers(ip, capsys):
    result = run(ip, "\n\n%time a = 1.0\n!true\nb = a / 0")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    shown = capsys.readouterr().out
    assert "----> 6 b = a / 0" in shown


def test_the_trace_keeps_the_users_text(ip):
    run(ip, "%time z = 1.0\nw = 2.0\nw * w")
    import gradmagic
    assert gradmagic.last.source.rstrip() == "%time z = 1.0\nw = 2.0\nw * w"


# --------------------------------------------------------------------------- hostile cells
from types import SimpleNamespace

from fidelity_corpus import Runner
from hostile_cells import CELLS

SETUP = {7: "x = 0.9"}  # a number from an earlier plain cell
# cells that still differ, each with its reason (README: Documented differences); the
# test fails when one starts behaving as plain Python, so the list only shrinks
KNOWN = {
    "W += 1": "a float array read by the cell is a Tensor leaf, which cannot change in "
              "place: W += 1 binds W to a new array and an alias V keeps the old numbers",
}


@pytest.mark.parametrize("item, source", CELLS,
                         ids=[f"{item}-{i}" for i, (item, _) in enumerate(CELLS)])
def test_hostile_cell_behaves_as_plain_python(ip, item, source):
    examples = [SimpleNamespace(source=SETUP[item])] if item in SETUP else []
    examples.append(SimpleNamespace(source=source))
    differences = Runner(ip).run_docstring(f"item {item}", {}, examples)
    if any(key in source for key in KNOWN):
        assert differences, "now behaves as plain Python: remove it from KNOWN and the README"
        return
    assert not differences, (differences[0].plain, differences[0].magic)


def test_the_hostile_corpus_covers_every_item():
    assert {item for item, _ in CELLS} >= set(range(1, 12)) and len(CELLS) >= 70
