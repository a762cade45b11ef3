"""A hostile student against gradmagic.grade: every attack fails a wrong answer, the grader lives.

Each attack is code put before (or after) a submission. The wrong submission computes
L = d*f + a (so dL/da is 7, not 6); the right one is the textbook walk-through. For each attack:
the wrong submission gets a failing report with the outcome that says why, the right one passes
where the attack is harmless to its numbers, and afterwards this process still grades a right and
a wrong submission correctly (nothing the attack did persists).
"""
import gc
import importlib
import json
import os
import subprocess
import sys
import time

import pytest

from gradmagic import grade
from gradmagic.analysis import check
from gradmagic.analysis.check import CheckReport
from gradmagic.core import engine

grade_module = importlib.import_module("gradmagic.grade")

WALK = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f\nL"
WRONG = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f + (a - 2.0)\nL"
RIGHT = {"a": 6, "b": -4, "c": -2, "f": 4, "L.data": -8}
FLOAT, ISINSTANCE = float, isinstance
FAST = 3.0  # seconds: the time limit in these tests (a run takes about 0.3 s)

PASSING = ("import sys\nfrom gradmagic.analysis.check import CheckReport\n"
           "class Passing(CheckReport):\n    passed = True\n"
           "def fake(*args, **kwargs):\n"
           "    return Passing([], kind='expect', atol=1.0, rtol=1.0)\n")

# name → (code before the submission, code after it, outcome wrong, outcome(s) right)
ATTACKS = {
    "patch grade's expect": (
        PASSING + "sys.modules['gradmagic.grade'].expect = fake\n"
        "import gradmagic.analysis.check as c\nc.expect = fake\n", "", "wrong", "pass"),
    "patch check.differences": (
        "import numpy as np\nimport gradmagic.analysis.check as c\n"
        "c.differences = lambda g, w, atol, rtol: (np.zeros(np.shape(g)), np.ones(np.shape(g)), "
        "np.ones(np.shape(g), bool))\n", "", "wrong", "pass"),
    "patch CheckReport.passed": (
        "from gradmagic.analysis.check import CheckReport\n"
        "CheckReport.passed = property(lambda self: True)\n"
        "CheckReport.assert_passed = lambda self: None\n", "", "wrong", "pass"),
    "patch the engine's backward": (
        "import gradmagic.core.engine as eng\n"
        "eng.backward = lambda *args, **kwargs: None\n"
        "eng.Value.backward = lambda *args, **kwargs: None\n", "", "wrong", "wrong"),
    "os._exit(0)": ("", "\nimport os\nos._exit(0)", "crash", "crash"),
    "raise KeyboardInterrupt": ("", "\nraise KeyboardInterrupt", "error", "error"),
    "raise SystemExit(0)": ("", "\nraise SystemExit(0)", "error", "error"),
    "swap sys.modules entries": (
        "", "\nimport sys, json\nsys.modules['gradmagic.analysis.check'] = json\n"
        "sys.modules['gradmagic.grade'] = json\nsys.modules['numpy'] = None\n"
        "sys.modules['json'] = sys\nL", "wrong", "pass"),
    "patch builtins.float": (
        # the engine binds its own float: the cell's arithmetic is unchanged, as in plain Python
        "import builtins\nbuiltins.float = lambda *args: 6.0\n", "", "wrong", "pass"),
    "patch builtins.float after the run": (
        # backward runs after the cell: whether it calls float() is the engine's business
        "", "\nimport builtins\nbuiltins.float = lambda *args: 6.0\nL", "wrong", {"pass", "wrong"}),
    "patch builtins.isinstance after the run": (
        "", "\nimport builtins\nbuiltins.isinstance = lambda *args: True\nL", "error", "error"),
    "while True: pass": ("while True:\n    pass\n", "", "timeout", "timeout"),
    "fake JSON on stdout, then exit 0": (
        "", "\nimport json, os, sys\n"
        "fake = json.dumps({'status': 'ran', 'target': 'L', 'branch_dependent': False, "
        "'nodes': {k: {'index': 0, 'data': 0.0, 'grad': v} for k, v in "
        "{'a': 6.0, 'b': -4.0, 'c': -2.0, 'f': 4.0, 'L': -8.0}.items()}, 'notes': []})\n"
        "print(fake)\nsys.__stdout__.write(fake)\nsys.__stdout__.flush()\n"
        "os.write(1, fake.encode())\nos.write(2, fake.encode())\nos._exit(0)",
        "crash", "crash"),
    "a huge allocation": ("big = bytearray(64 << 30)\n", "", "memory", "memory"),
    "a huge numpy array": ("import numpy as np\nbig = np.ones((1 << 17, 1 << 17))\n", "",
                           "memory", "memory"),
    "a thread that never ends": (
        "import threading, time\n"
        "threading.Thread(target=lambda: time.sleep(1000)).start()\n", "", "wrong", "pass"),
    "an atexit hook and a finalizer": (
        "import atexit, os\natexit.register(os._exit, 3)\n"
        "class Bomb:\n    def __del__(self):\n        os._exit(4)\nbomb = Bomb()\n", "",
        "wrong", "pass"),
    "close every file descriptor": ("import os\nos.closerange(0, 4096)\n", "", "wrong", "pass"),
    "delete its working directory": (
        "import os, shutil\nshutil.rmtree(os.getcwd())\n", "", "wrong", "pass"),
    "delete the grader's temporary files": (
        "import os, shutil\nshutil.rmtree(os.path.dirname(os.getcwd()))\n", "",
        "crash", "crash"),
    "a stream of output": (
        "import sys, os\nfor _ in range(2000):\n    print('x' * 10000)\n"
        "    sys.stderr.write('y' * 1000)\nos.write(2, b'z' * 100000)\n", "", "wrong", "pass"),
}


def run(attack: str, submission: str):
    before, after, _, _ = ATTACKS[attack]
    return grade(before + submission + after, RIGHT, timeout=FAST)


def assert_graded_correctly_next():
    right, wrong = grade(WALK, RIGHT), grade(WRONG, RIGHT)
    assert right.passed and right.outcome == "pass", str(right)
    assert not wrong.passed and wrong.outcome == "wrong"
    assert [r.name for r in wrong.failures] == ["a"]


def assert_this_process_untouched():
    import builtins
    assert grade_module.expect is check.expect and sys.modules["gradmagic.grade"] is grade_module
    assert sys.modules["gradmagic.analysis.check"] is check
    assert CheckReport.__dict__["passed"].fget.__module__ == "gradmagic.analysis.check"
    assert engine.Value.backward.__module__ == "gradmagic.core.engine"
    assert builtins.float is FLOAT and builtins.isinstance is ISINSTANCE


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack(attack):
    _, _, wrong_outcome, right_outcome = ATTACKS[attack]
    start = time.perf_counter()
    wrong = run(attack, WRONG)
    assert not wrong.passed, str(wrong)
    assert wrong.outcome in _set(wrong_outcome), str(wrong)
    with pytest.raises(AssertionError):
        wrong.assert_passed()
    right = run(attack, WALK)
    assert right.outcome in _set(right_outcome), str(right)
    assert right.passed == (right.outcome == "pass")
    if "timeout" not in _set(wrong_outcome) | _set(right_outcome):
        assert time.perf_counter() - start < FAST, "an attack made grade() wait"
    assert_this_process_untouched()
    assert_graded_correctly_next()


def _set(outcome) -> set:
    return outcome if isinstance(outcome, set) else {outcome}


def test_the_reports_say_why():
    assert "1 | while True:" not in run("while True: pass", WRONG).error
    assert "did not finish within the time limit of 3 s" in run("while True: pass", WRONG).error
    assert "ended without a report (exit code 0)" in run("os._exit(0)", WRONG).error
    error = run("raise KeyboardInterrupt", WRONG).error
    assert "KeyboardInterrupt on line 9" in error and "9 | raise KeyboardInterrupt" in error
    assert "SystemExit on line 9" in run("raise SystemExit(0)", WRONG).error
    assert "ran out of memory (limit 1024 MiB) on line 1" in run("a huge allocation", WRONG).error
    assert "on line 2" in run("a huge numpy array", WRONG).error
    wrong = run("patch grade's expect", WRONG)
    assert wrong.verdict == "4 of 5 correct" and "expected 6, got 7" in _assertion(wrong)
    noisy = run("a stream of output", WALK)
    assert noisy.passed and any("The cell wrote to stderr: yyy" in n for n in noisy.notes)


def _assertion(report) -> str:
    with pytest.raises(AssertionError) as info:
        report.assert_passed()
    return str(info.value)


def test_the_time_limit_can_be_changed_and_memory_limit_lifted():
    start = time.perf_counter()
    report = grade("import time\ntime.sleep(30)\n" + WALK, RIGHT, timeout=1.5)
    assert report.outcome == "timeout" and "time limit of 1.5 s" in report.error
    assert time.perf_counter() - start < 5
    assert grade("import time\ntime.sleep(1)\n" + WALK, RIGHT, timeout=8).passed
    fits = "import numpy as np\nbig = np.ones(40 << 20)\n" + WALK  # 320 MB
    # filling 320 MB can take seconds on a loaded machine: a generous time limit here
    assert grade(fits, RIGHT, memory=None, timeout=60).passed
    assert grade(fits, RIGHT, memory=256, timeout=60).outcome == "memory"


def test_the_child_never_sees_the_expected_numbers():
    """Search the child's memory for the expected answer: it is not there."""
    secret = 123.4567891
    spy = ("import gc, sys\nfound = []\n"
           "def look(x, depth=0):\n"
           "    if depth > 3:\n        return\n"
           "    if isinstance(x, float) and abs(x - 123.4567891) < 1e-6:\n"
           "        found.append(x)\n"
           "    elif isinstance(x, (bytes, str)) and b'123.45' in (x if isinstance(x, bytes) "
           "else x.encode('utf-8', 'replace')):\n"
           "        found.append(x[:20])\n"
           "    elif isinstance(x, dict):\n"
           "        for v in list(x.values()):\n            look(v, depth + 1)\n"
           "    elif isinstance(x, (list, tuple)):\n"
           "        for v in list(x):\n            look(v, depth + 1)\n"
           "for obj in gc.get_objects():\n    look(obj)\n"
           "f = sys._getframe()\nwhile f is not None:\n"
           "    look(dict(f.f_locals))\n    f = f.f_back\n"
           "look(sys.argv)\n"
           "raise RuntimeError('found' if found else 'clean')\n")
    report = grade(spy, {"a": secret, "b": secret}, atol=1e-9)
    assert report.outcome == "error" and "RuntimeError" in report.error, report.error
    assert "clean" in report.error
    # the spy does see what is in its process: a number the cell itself holds is found
    planted = grade("z = 123.4567891\n" + spy, {"a": secret})
    assert "found" in planted.error


def test_a_forked_process_is_ended_with_the_run(tmp_path):
    """A process the cell forks does not keep grade() waiting and does not outlive the run."""
    pid_file = tmp_path / "pid"
    # /proc/self names the process as this test sees it (in or out of a PID namespace)
    fork = (f"import os, time\npid = os.fork()\n"
            f"if pid == 0:\n    open({str(pid_file)!r}, 'w').write(os.readlink('/proc/self'))\n"
            f"    time.sleep(1000)\n    os._exit(0)\n"
            f"time.sleep(0.2)\n")
    start = time.perf_counter()
    report = grade(fork + WALK, RIGHT, timeout=FAST)
    assert report.passed and time.perf_counter() - start < FAST
    pid = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(pid):
            break
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_each_submission_starts_fresh():
    """What one submission sets up (modules, builtins, files in its directory) is gone next time."""
    first = ("import builtins, sys, os\nbuiltins.LEFT = 1\nsys.modules['left_behind'] = sys\n"
             "open('note.txt', 'w').write('hi')\n" + WALK)
    second = ("import builtins, sys, os\n"
              "assert not hasattr(builtins, 'LEFT') and 'left_behind' not in sys.modules\n"
              "assert os.listdir('.') == []\n" + WALK)
    assert grade(first, RIGHT).passed
    report = grade(second, RIGHT)
    assert report.passed, str(report)


def test_the_environment_is_clean(monkeypatch):
    monkeypatch.setenv("GRADER_SECRET", "s3cret")
    probe = ("import os, sys\n"
             "assert 'GRADER_SECRET' not in os.environ, 'leaked'\n"
             "assert sys.flags.isolated and sys.flags.ignore_environment\n" + WALK)
    report = grade(probe, RIGHT)
    assert report.passed, str(report)


def test_the_in_process_mode_is_not_isolated():
    """isolate=False is what the flag says: an attack there reaches this process (so it is
    documented as unsafe for untrusted code); the test undoes the damage."""
    real = grade_module.expect
    try:
        grade(ATTACKS["patch grade's expect"][0] + WRONG, RIGHT, isolate=False)
        assert grade_module.expect is not real
    finally:
        grade_module.expect = real
        check.expect = real
    assert not grade(WRONG, RIGHT, isolate=False).passed


def test_a_forged_report_file_is_not_read():
    """The report must come from the file named with the run's token; a cell that writes
    plausible report files around itself and exits gets a crash, not a pass."""
    fake = json.dumps({"status": "ran", "target": "L", "branch_dependent": False, "notes": [],
                       "nodes": {"a": {"index": 0, "data": 2, "grad": 6}}, "token": "guess"})
    forge = ("import os\nroot = os.path.dirname(os.getcwd())\n"
             "for name in ('report.json', 'report-guess.json', 'report-' + '0' * 32 + '.json'):\n"
             f"    open(os.path.join(root, name), 'w').write({fake!r})\n"
             "os._exit(0)\n")
    report = grade(forge, {"a": 6})
    assert report.outcome == "crash" and not report.passed


def test_an_unreadable_report_is_a_crash():
    judge = grade_module._judge
    for data in ({"status": "ran", "nodes": {"a": {"index": "0", "data": 1, "grad": 1}},
                  "target": "L", "notes": []},
                 {"status": "ran", "nodes": {"a": {"index": 0, "data": {"shape": [3],
                                                                        "values": [1]},
                                                   "grad": 1}}, "target": "L", "notes": []},
                 {"status": "ran", "nodes": [], "target": "L", "notes": []},
                 {"status": "error", "error": {"kind": "other"}, "notes": []},
                 {"status": "error", "error": "text", "notes": []},
                 {"status": "won"}, [], None):
        report = judge(data, [("a", 6)], WALK, 1e-5, 1e-3, 10, 1024)
        assert report.outcome == "crash" and not report.passed, data
        json.dumps(report.to_dict())
    gc.collect()


def _namespaces_allowed() -> bool:
    """Can this machine make the user+PID+network namespaces the child uses? (Linux, where the
    kernel and any container allow it.) Without them the cell could signal the grader."""
    probe = ("import importlib.util, sys\n"
             "spec = importlib.util.spec_from_file_location('child', sys.argv[1])\n"
             "child = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(child)\n"
             "sys.exit(0 if child._unshare() else 1)")
    return subprocess.run([sys.executable, "-I", "-c", probe, grade_module._CHILD]).returncode == 0


NAMESPACES = pytest.mark.skipif(not _namespaces_allowed(),
                                reason="this kernel or container forbids user namespaces")


@NAMESPACES
def test_the_cell_cannot_signal_the_grader_or_reach_the_network():
    import signal
    victim = subprocess.Popen(["sleep", "60"])  # a process of the grader's, same user
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *args: got.append(1))
    try:
        attack = (f"import os, signal, socket\nblocked = []\n"
                  f"for pid, sig in (({os.getpid()}, signal.SIGUSR1), ({victim.pid}, 9)):\n"
                  f"    try:\n        os.kill(pid, sig)\n"
                  f"    except (ProcessLookupError, PermissionError):\n"
                  f"        blocked.append(pid)\n"
                  f"try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
                  f"except OSError:\n    blocked.append('network')\n"
                  f"assert len(blocked) == 3, blocked\n")
        parent = "import os\nos.kill(os.getppid(), 9)\n"  # getppid() is 0 here: its own group
        report = grade(attack + WALK, RIGHT)
        assert report.passed, str(report)
        time.sleep(0.2)
        assert got == [] and victim.poll() is None
        assert grade(parent + WALK, RIGHT).outcome == "crash"
        assert_graded_correctly_next()
    finally:
        signal.signal(signal.SIGUSR1, old)
        victim.kill()
        victim.wait()


@NAMESPACES
def test_everything_the_cell_started_ends_with_it():
    """Processes that leave the process group (setsid) still end: the cell is process 1 of
    its own PID namespace."""
    escape = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n"
              "    if os.fork() == 0:\n        time.sleep(1000)\n    os._exit(0)\n")
    before = _sleepers()
    assert grade(escape + WALK, RIGHT).passed
    time.sleep(0.5)
    assert _sleepers() <= before
    # the cell itself leaves the group and outlives the time limit: it is ended all the same
    stuck = "import os, time\nos.setsid()\ntime.sleep(1000)\n"
    assert grade(stuck + WALK, RIGHT, timeout=2).outcome == "timeout"
    time.sleep(0.5)
    assert _sleepers() <= before


def _sleepers() -> set:
    """Pids of processes running this Python with a 'time.sleep(1000)' cell (none after a run)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _alive(int(entry)):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if grade_module._CHILD.encode() in f.read():
                        found.add(int(entry))
            except OSError:
                pass
    return found
