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
