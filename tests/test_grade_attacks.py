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
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gradmagic

import pytest

from gradmagic import grade
from gradmagic.analysis import check
from gradmagic.analysis.check import CheckReport
from gradmagic.core import engine

grade_module = importlib.import_module("gradmagic.grade")
judging = importlib.import_module("gradmagic.grade._judging")  # where the grader's expect is read

WALK = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f\nL"
WRONG = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f + (a - 2.0)\nL"
RIGHT = {"a": 6, "b": -4, "c": -2, "f": 4, "L.data": -8}
FLOAT, ISINSTANCE = float, isinstance
FAST = 3.0  # seconds: the time limit of the attacks that loop (a run takes about 0.3 s)
# seconds: a grade made to wait (for a child that holds its pipe open) waits for its
# timeout, 10 s here; one grade of a harmless attack takes less, even on a loaded machine
WAIT = 8.0

PASSING = (
    "import sys\nfrom gradmagic.analysis.check import CheckReport\n"
    "class Passing(CheckReport):\n    passed = True\n"
    "def fake(*args, **kwargs):\n"
    "    return Passing([], kind='expect', atol=1.0, rtol=1.0)\n"
)

# name → (code before the submission, code after it, outcome wrong, outcome(s) right)
ATTACKS = {
    "patch grade's expect": (
        PASSING + "sys.modules['gradmagic.grade._judging'].expect = fake\n"
        "import gradmagic.analysis.check as c\nc.expect = fake\n",
        "",
        "wrong",
        "pass",
    ),
    "patch check.differences": (
        "import numpy as np\nimport gradmagic.analysis.check as c\n"
        "c.differences = lambda g, w, atol, rtol: (np.zeros(np.shape(g)), np.ones(np.shape(g)), "
        "np.ones(np.shape(g), bool))\n",
        "",
        "wrong",
        "pass",
    ),
    "patch CheckReport.passed": (
        "from gradmagic.analysis.check import CheckReport\n"
        "CheckReport.passed = property(lambda self: True)\n"
        "CheckReport.assert_passed = lambda self: None\n",
        "",
        "wrong",
        "pass",
    ),
    "patch the engine's backward": (
        "import gradmagic.core.engine as eng\n"
        "eng.backward = lambda *args, **kwargs: None\n"
        "eng.Value.backward = lambda *args, **kwargs: None\n",
        "",
        "wrong",
        "wrong",
    ),
    "os._exit(0)": ("", "\nimport os\nos._exit(0)", "crash", "crash"),
    "raise KeyboardInterrupt": ("", "\nraise KeyboardInterrupt", "error", "error"),
    "raise SystemExit(0)": ("", "\nraise SystemExit(0)", "error", "error"),
    "swap sys.modules entries": (
        "",
        "\nimport sys, json\nsys.modules['gradmagic.analysis.check'] = json\n"
        "sys.modules['gradmagic.grade'] = json\nsys.modules['numpy'] = None\n"
        "sys.modules['json'] = sys\nL",
        "wrong",
        "pass",
    ),
    "patch builtins.float": (
        # the engine binds its own float: the cell's arithmetic is unchanged, as in plain Python
        "import builtins\nbuiltins.float = lambda *args: 6.0\n",
        "",
        "wrong",
        "pass",
    ),
    "patch builtins.float after the run": (
        # backward runs after the cell: whether it calls float() is the engine's business
        "",
        "\nimport builtins\nbuiltins.float = lambda *args: 6.0\nL",
        "wrong",
        {"pass", "wrong"},
    ),
    "patch builtins.isinstance after the run": (
        "",
        "\nimport builtins\nbuiltins.isinstance = lambda *args: True\nL",
        "error",
        "error",
    ),
    "while True: pass": ("while True:\n    pass\n", "", "timeout", "timeout"),
    "fake JSON on stdout, then exit 0": (
        "",
        "\nimport json, os, sys\n"
        "fake = json.dumps({'status': 'ran', 'target': 'L', 'branch_dependent': False, "
        "'nodes': {k: {'index': 0, 'data': 0.0, 'grad': v} for k, v in "
        "{'a': 6.0, 'b': -4.0, 'c': -2.0, 'f': 4.0, 'L': -8.0}.items()}, 'notes': []})\n"
        "print(fake)\nsys.__stdout__.write(fake)\nsys.__stdout__.flush()\n"
        "os.write(1, fake.encode())\nos.write(2, fake.encode())\nos._exit(0)",
        "crash",
        "crash",
    ),
    "a huge allocation": ("big = bytearray(64 << 30)\n", "", "memory", "memory"),
    "a huge numpy array": (
        "import numpy as np\nbig = np.ones((1 << 17, 1 << 17))\n",
        "",
        "memory",
        "memory",
    ),
    "a thread that never ends": (
        "import threading, time\nthreading.Thread(target=lambda: time.sleep(1000)).start()\n",
        "",
        "wrong",
        "pass",
    ),
    "an atexit hook and a finalizer": (
        "import atexit, os\natexit.register(os._exit, 3)\n"
        "class Bomb:\n    def __del__(self):\n        os._exit(4)\nbomb = Bomb()\n",
        "",
        "wrong",
        "pass",
    ),
    "close every file descriptor": ("import os\nos.closerange(0, 4096)\n", "", "wrong", "pass"),
    "delete its working directory": (
        "import os, shutil\nshutil.rmtree(os.getcwd())\n",
        "",
        "wrong",
        "pass",
    ),
    "delete the sandbox's /tmp": (
        "import os, shutil\nshutil.rmtree(os.path.dirname(os.getcwd()), ignore_errors=True)\n",
        "",
        "wrong",
        "pass",
    ),
    "a stream of output": (
        "import sys, os\nfor _ in range(2000):\n    print('x' * 10000)\n"
        "    sys.stderr.write('y' * 1000)\nos.write(2, b'z' * 100000)\n",
        "",
        "wrong",
        "pass",
    ),
}


def run(attack: str, submission: str):
    before, after, wrong, right = ATTACKS[attack]
    loops = "timeout" in _set(wrong) | _set(right)
    return grade(before + submission + after, RIGHT, timeout=FAST if loops else 10)


def assert_graded_correctly_next():
    right, wrong = grade(WALK, RIGHT), grade(WRONG, RIGHT)
    assert right.passed and right.outcome == "pass", str(right)
    assert not wrong.passed and wrong.outcome == "wrong"
    assert [r.name for r in wrong.failures] == ["a"]


def assert_this_process_untouched():
    import builtins

    assert judging.expect is check.expect and sys.modules["gradmagic.grade"] is grade_module
    assert sys.modules["gradmagic.analysis.check"] is check
    assert CheckReport.__dict__["passed"].fget.__module__ == "gradmagic.analysis.check"
    assert engine.Value.backward.__module__ == "gradmagic.core.graph"
    assert builtins.float is FLOAT and builtins.isinstance is ISINSTANCE


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack(attack):
    _, _, wrong_outcome, right_outcome = ATTACKS[attack]
    start = time.perf_counter()
    wrong = run(attack, WRONG)
    took = [time.perf_counter() - start]
    assert not wrong.passed, str(wrong)
    assert wrong.outcome in _set(wrong_outcome), str(wrong)
    with pytest.raises(AssertionError):
        wrong.assert_passed()
    start = time.perf_counter()
    right = run(attack, WALK)
    took.append(time.perf_counter() - start)
    assert right.outcome in _set(right_outcome), str(right)
    assert right.passed == (right.outcome == "pass")
    if "timeout" not in _set(wrong_outcome) | _set(right_outcome):
        assert max(took) < WAIT, f"an attack made grade() wait: {took} s"
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
    assert time.perf_counter() - start < 15  # (the cell would sleep 30 s; starting a sandbox
    # takes seconds on a loaded machine)
    assert grade("import time\ntime.sleep(1)\n" + WALK, RIGHT, timeout=8).passed
    fits = "import numpy as np\nbig = np.ones(40 << 20)\n" + WALK  # 320 MB
    # filling 320 MB can take seconds on a loaded machine: a generous time limit here
    assert grade(fits, RIGHT, memory=None, timeout=60).passed
    assert grade(fits, RIGHT, memory=256, timeout=60).outcome == "memory"


def test_the_child_never_sees_the_expected_numbers():
    """Search the child's memory for the expected answer: it is not there."""
    secret = 123.4567891
    spy = (
        "import gc, sys\nfound = []\n"
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
        "raise RuntimeError('found' if found else 'clean')\n"
    )
    report = grade(spy, {"a": secret, "b": secret}, atol=1e-9)
    assert report.outcome == "error" and "RuntimeError" in report.error, report.error
    assert "clean" in report.error
    # the spy does see what is in its process: a number the cell itself holds is found
    planted = grade("z = 123.4567891\n" + spy, {"a": secret})
    assert "found" in planted.error


def test_a_forked_process_is_ended_with_the_run():
    """A process the cell forks does not keep grade() waiting and does not outlive the run."""
    fork = (
        "import os, time\npid = os.fork()\n"
        "if pid == 0:\n    os.execv('/bin/sleep', ['sleep', '1003.5'])\n"
        "time.sleep(0.2)\n"
    )
    start = time.perf_counter()
    report = grade(fork + WALK, RIGHT, timeout=10)
    assert report.passed and time.perf_counter() - start < WAIT
    assert _wait_gone("1003.5")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_each_submission_starts_fresh():
    """What one submission sets up (modules, builtins, files in its directory) is gone next time."""
    first = (
        "import builtins, sys, os\nbuiltins.LEFT = 1\nsys.modules['left_behind'] = sys\n"
        "open('note.txt', 'w').write('hi')\n" + WALK
    )
    second = (
        "import builtins, sys, os\n"
        "assert not hasattr(builtins, 'LEFT') and 'left_behind' not in sys.modules\n"
        "assert os.listdir('.') == []\n" + WALK
    )
    assert grade(first, RIGHT).passed
    report = grade(second, RIGHT)
    assert report.passed, str(report)


def test_the_environment_is_clean(monkeypatch):
    monkeypatch.setenv("GRADER_SECRET", "s3cret")
    probe = (
        "import os, sys\n"
        "assert 'GRADER_SECRET' not in os.environ, 'leaked'\n"
        "assert sys.flags.isolated and sys.flags.ignore_environment\n" + WALK
    )
    report = grade(probe, RIGHT)
    assert report.passed, str(report)


def test_the_in_process_mode_is_not_isolated():
    """isolate=False is what the flag says: an attack there reaches this process (so it is
    documented as unsafe for untrusted code); the test undoes the damage."""
    real = judging.expect
    try:
        grade(ATTACKS["patch grade's expect"][0] + WRONG, RIGHT, isolate=False)
        assert judging.expect is not real
    finally:
        judging.expect = real
        check.expect = real
    assert not grade(WRONG, RIGHT, isolate=False).passed


def test_a_forged_report_file_is_not_read():
    """The report comes over a pipe, never from a file: a cell that writes plausible report
    files wherever it can and exits gets no pass."""
    fake = json.dumps(
        {
            "status": "ran",
            "target": "L",
            "branch_dependent": False,
            "notes": [],
            "nodes": {"a": {"index": 0, "data": 2, "grad": 6}},
            "token": "guess",
        }
    )
    forge = (
        "import os\n"
        "for root in ('/tmp', os.getcwd(), os.path.dirname(os.getcwd())):\n"
        "    for name in ('report.json', 'report-guess.json',\n"
        "                 'report-' + '0' * 32 + '.json'):\n"
        "        try:\n"
        f"            open(os.path.join(root, name), 'w').write({fake!r})\n"
        "        except OSError:\n            pass\n"
        "os._exit(0)\n"
    )
    report = grade(forge, {"a": 6})
    assert report.outcome == "crash" and not report.passed


def test_an_unreadable_report_is_a_crash():
    judge = grade_module._judge
    for data in (
        {
            "status": "ran",
            "nodes": {"a": {"index": "0", "data": 1, "grad": 1}},
            "target": "L",
            "notes": [],
        },
        {
            "status": "ran",
            "nodes": {"a": {"index": 0, "data": {"shape": [3], "values": [1]}, "grad": 1}},
            "target": "L",
            "notes": [],
        },
        {"status": "ran", "nodes": [], "target": "L", "notes": []},
        {"status": "error", "error": {"kind": "other"}, "notes": []},
        {"status": "error", "error": "text", "notes": []},
        {"status": "won"},
        [],
        None,
    ):
        report = judge(data, [("a", 6)], WALK, 1e-5, 1e-3, 10, 1024)
        assert report.outcome == "crash" and not report.passed, data
        json.dumps(report.to_dict())
    gc.collect()


def test_the_cell_cannot_signal_the_grader_or_reach_the_network():
    import signal

    victim = subprocess.Popen(["sleep", "60"])  # a process of the grader's, same user
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *args: got.append(1))
    try:
        attack = (
            f"import os, signal, socket\nblocked = []\n"
            f"for pid, sig in (({os.getpid()}, signal.SIGUSR1), ({victim.pid}, 9)):\n"
            f"    try:\n        os.kill(pid, sig)\n"
            f"    except (ProcessLookupError, PermissionError):\n"
            f"        blocked.append(pid)\n"
            f"try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
            f"except OSError:\n    blocked.append('network')\n"
            f"assert len(blocked) == 3, blocked\n"
        )
        parent = "import os\nos.kill(os.getppid(), 9)\n"  # process 1 of its namespace
        report = grade(attack + WALK, RIGHT)
        assert report.passed, str(report)
        time.sleep(0.2)
        assert got == [] and victim.poll() is None
        assert grade(parent + WRONG, RIGHT).outcome in ("wrong", "crash")
        assert_graded_correctly_next()
    finally:
        signal.signal(signal.SIGUSR1, old)
        victim.kill()
        victim.wait()


def test_everything_the_cell_started_ends_with_it():
    """Processes that leave the process group (setsid) and clear their parent-death signal
    still end: the sandbox's process 1 ends with the cell, and the kernel ends the rest."""
    escape = (
        "import os, time, ctypes\nif os.fork() == 0:\n    os.setsid()\n"
        "    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"  # PR_SET_PDEATHSIG: none
        "    if os.fork() == 0:\n        os.execv('/bin/sleep', ['sleep', '1001.5'])\n"
        "    os._exit(0)\ntime.sleep(0.3)\n"
    )
    assert grade(escape + WALK, RIGHT).passed
    assert not grade(escape + WRONG, RIGHT).passed
    assert _wait_gone("1001.5")
    # the cell itself leaves the group and outlives the time limit: it is ended all the same
    stuck = (
        "import os, time\nos.setsid()\nif os.fork() == 0:\n    os.execv('/bin/sleep', "
        "['sleep', '1002.5'])\ntime.sleep(1000)\n"
    )
    assert grade(stuck + WALK, RIGHT, timeout=2).outcome == "timeout"
    assert _wait_gone("1002.5")


def _wait_gone(marker: str, seconds: float = 5.0) -> bool:
    """True once no process of this machine has ``marker`` in its command line."""
    end = time.monotonic() + seconds
    while _with_marker(marker):
        if time.monotonic() > end:
            return False
        time.sleep(0.1)
    return True


def _with_marker(marker: str) -> set:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _alive(int(entry)):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read().split(b"\0"):
                        found.add(int(entry))
            except OSError:
                pass
    return found


# =========================================================================== the sandbox
# Each probe is a cell fragment that appends to `found` what it could reach; the wrong
# submission runs after the probes, and a non-empty `found` raises, so the report's outcome
# is "wrong" only when nothing was reached (and never "pass").
REPORT_FOUND = "if found:\n    raise RuntimeError('reached: ' + repr(found))\n"


def _read_probes(grader_pid: int, paths) -> str:
    """A cell fragment that tries to read the answers where a grader keeps them."""
    return (
        "import os\nfound = []\n"
        "for entry in os.listdir('/proc'):\n"
        "    if entry.isdigit():\n"
        "        try:\n"
        "            if b'MARKER-7f3a' in open(f'/proc/{entry}/cmdline', 'rb').read():\n"
        "                found.append('cmdline of ' + entry)\n"
        "        except OSError:\n            pass\n"
        f"for path in {[str(p) for p in paths]!r} + "
        f"['/proc/{grader_pid}/cmdline', '/proc/{grader_pid}/environ', "
        f"'/proc/{grader_pid}/mem', '/etc/passwd']:\n"
        "    try:\n"
        "        open(path, 'rb').close()\n"
        "        found.append(path)\n"
        "    except OSError:\n        pass\n"
        "if 'GRADER_SECRET' in os.environ:\n    found.append('environment')\n"
    )


def test_the_answers_cannot_be_read_from_the_graders_files_command_line_or_memory(
    tmp_path, monkeypatch
):
    """Answers beside the grader's script, in its command line (and another process's),
    its environment and its memory: none is reachable from the cell."""
    monkeypatch.setenv("GRADER_SECRET", "answers: a=6")
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(RIGHT))
    helper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--expect", "a=6,MARKER-7f3a"]
    )
    try:
        probes = _read_probes(os.getpid(), [answers, __file__, tmp_path])
        report = grade(probes + REPORT_FOUND + WRONG, RIGHT)
        assert report.outcome == "wrong" and not report.passed, report.error
        # the same probes, without the sandbox, do reach them: the test can fail
        control = grade(probes + REPORT_FOUND + WRONG, RIGHT, sandbox=False)
        assert control.outcome == "error"
        assert "MARKER-7f3a" not in control.error  # the marker is found, not quoted
        for reached in ("cmdline of", str(answers), "/etc/passwd", f"/proc/{os.getpid()}/mem"):
            assert reached in control.error
    finally:
        helper.kill()
        helper.wait()


def test_the_cell_cannot_write_outside_its_private_tmp(tmp_path):
    """/etc, /usr/bin, site-packages (a .pth file), gradmagic's own files, the gradebook:
    all out of reach; the cell's own /tmp works and is gone afterwards."""
    import site

    gradebook = tmp_path / "gradebook.db"
    gradebook.write_bytes(b"scores")
    init = Path(gradmagic.__file__)
    before = init.read_bytes()
    pth = Path(site.getsitepackages()[0]) / "gradmagic-attack.pth"
    targets = [
        "/etc/gradmagic-attack",
        "/usr/bin/gradmagic-attack",
        str(pth),
        str(init),
        str(gradebook),
        "/root/gradmagic-attack",
        "/gradmagic-attack",
    ]
    attack = (
        "import os\nfound = []\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        with open(path, 'a') as f:\n"
        '            f.write(\'import os; os.environ["PWNED"] = "1"\\n\')\n'
        "        found.append(path)\n"
        "    except OSError:\n        pass\n"
        "open('leftover-7f3a', 'wb').write(b'x' * (8 << 20))\n"  # its own folder: fine
        "try:\n"
        "    with open('/tmp/big-7f3a', 'wb') as f:\n"
        "        for _ in range(200):\n            f.write(b'x' * (1 << 20))\n"
        "    found.append('200 MiB in /tmp')\n"
        "except OSError:\n    pass\n"
    )
    try:
        report = grade(attack + REPORT_FOUND + WRONG, RIGHT)
        assert report.outcome == "wrong", report.error
        assert grade(attack + REPORT_FOUND + WALK, RIGHT).passed
        for path in targets:
            assert not Path(path).exists() or path in (str(init), str(gradebook))
        assert init.read_bytes() == before and gradebook.read_bytes() == b"scores"
        assert not _anywhere_under(tempfile.gettempdir(), "leftover-7f3a")
        assert_graded_correctly_next()
    finally:
        pth.unlink(missing_ok=True)


def test_concurrent_grades_cannot_see_each_other():
    """A cell graded beside another sees none of its processes, pipes or files, and the
    other's report arrives intact."""
    spy = (
        "import os, time\nfound = []\nend = time.monotonic() + 1.5\n"
        "while time.monotonic() < end:\n"
        "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "    for pid in pids:\n"
        "        try:\n"
        "            if b'victim-7f3a' in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
        "                found.append(pid)\n"
        "            for fd in os.listdir(f'/proc/{pid}/fd'):\n"
        "                os.readlink(f'/proc/{pid}/fd/{fd}')\n"
        "        except OSError:\n            pass\n"
        "    for root, dirs, files in os.walk('/tmp'):\n"
        "        found += [f for f in files if 'victim' in f]\n"
        "    time.sleep(0.05)\n"
    )
    victim = "import time\nvictim_7f3a = 'victim-7f3a'\ntime.sleep(1)\n" + WALK
    results = {}

    def run_one(name, source):
        results[name] = grade(source, RIGHT, timeout=15)

    import threading

    threads = [
        threading.Thread(target=run_one, args=("spy", spy + REPORT_FOUND + WRONG)),
        threading.Thread(target=run_one, args=("victim", victim)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results["victim"].passed, str(results["victim"])
    assert results["spy"].outcome == "wrong", results["spy"].error


def test_what_the_cell_writes_to_stderr_is_bounded_clean_and_its_own(monkeypatch):
    """A flood on stderr ends at the time limit with a bounded note; the grader's
    environment never shows; escape sequences and other control characters are removed."""
    monkeypatch.setenv("GRADER_SECRET", "s3cret-7f3a")
    flood = "import os\nwhile True:\n    os.write(2, b'\\0' * 65536)\n"
    start = time.perf_counter()
    report = grade(flood + WRONG, RIGHT, timeout=2)
    assert report.outcome == "timeout" and time.perf_counter() - start < 20  # (unbounded: never)
    environ = (
        "import os, sys\n"
        "for path in ('/proc/1/environ', '/proc/self/environ'):\n"
        "    try:\n"
        "        sys.stderr.write(open(path).read())\n"
        "        os.write(2, open(path, 'rb').read())\n"
        "    except OSError:\n        pass\n"
        "os.mkfifo('f')\nos.dup2(os.open('f', os.O_RDWR), 2)\n"
    )  # a FIFO as stderr
    report = grade(environ + WRONG, RIGHT)
    assert report.outcome == "wrong" and "s3cret-7f3a" not in str(report)
    escapes = (
        "import os, sys\nsys.stderr.write('\\x1b[2J\\x1b[HGRADED: 5 of 5\\r\\n')\n"
        "os.write(2, b'\\x1b]0;title\\x07\\x1b[31mred\\x9b1m')\n"
    )
    for source in (escapes + WRONG, escapes + "raise ValueError('\\x1b[31mred\\r\\x07')"):
        report = grade(source, RIGHT)
        text = str(report) + json.dumps(report.to_dict(), ensure_ascii=False)
        assert not report.passed and "red" in text
        assert not any(c in text for c in "\x1b\x07\r\x9b"), repr(text)


def test_deep_folders_and_big_files_leave_nothing_and_never_raise():
    deep = (
        "import os\nfor _ in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "open('big', 'wb').write(b'x' * (1 << 20))\n"
    )
    before = set(Path(tempfile.gettempdir()).glob("gradmagic-cell-*"))
    assert not grade(deep + WRONG, RIGHT).passed
    # without the sandbox the folder is on the grader's disk: removed, however deep
    assert grade(deep + WALK, RIGHT, sandbox=False).passed
    assert set(Path(tempfile.gettempdir()).glob("gradmagic-cell-*")) <= before


def test_a_fork_bomb_is_bounded():
    bomb = (
        "import os\nn = 0\n"
        "while n < 2000:\n"
        "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n        os.execv('/bin/sleep', ['sleep', '1004.5'])\n"
        "    n += 1\n"
        "raise RuntimeError(f'forked {n}')\n"
    )
    start = time.perf_counter()
    report = grade(bomb, RIGHT, processes=16)
    assert report.outcome == "error" and time.perf_counter() - start < 20  # (its sleeps: 1004 s)
    forked = int(report.error.split("forked ")[1].split()[0])
    assert 0 < forked < 16 and report.sandbox["limits"]["processes"]
    assert _wait_gone("1004.5")
    assert_graded_correctly_next()


def test_the_memory_limit_holds_for_all_processes_together():
    """Four processes of 160 MiB each stay under a 512 MiB limit one by one, not together."""
    hog = (
        "import os, time\nkids = []\n"
        "for _ in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        block = b'x' * (160 << 20)\n        time.sleep(30)\n        os._exit(0)\n"
        "    kids.append(pid)\n"
        "time.sleep(6)\n"
    )
    report = grade(hog + WRONG, RIGHT, memory=512, timeout=20)
    assert report.outcome == "memory" and "together" in report.error, str(report)
    assert report.sandbox["limits"]["memory_total"]
    small = hog.replace("160 << 20", "8 << 20").replace("time.sleep(6)", "time.sleep(0.3)")
    assert grade(small + WALK, RIGHT, memory=512, timeout=20).passed


def test_unix_sockets_and_the_terminal_are_out_of_reach(tmp_path):
    import socket

    path = tmp_path / "s"
    listeners = []
    for address in (str(path), "\0gradmagic-attack-7f3a"):
        s = socket.socket(socket.AF_UNIX)
        s.bind(address)
        s.listen()
        listeners.append(s)
    attack = (
        "import os, socket\nfound = []\n"
        f"for address in ({str(path)!r}, '\\0gradmagic-attack-7f3a'):\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    try:\n        s.connect(address)\n        found.append(address)\n"
        "    except OSError:\n        pass\n"
        "try:\n    open('/dev/tty', 'w').write('GRADED: 5 of 5\\n')\n"
        "    found.append('/dev/tty')\nexcept OSError:\n    pass\n"
        "if os.listdir('/dev/pts') != ['ptmx']:\n    found.append('/dev/pts')\n"
    )
    try:
        report = grade(attack + REPORT_FOUND + WRONG, RIGHT)
        assert report.outcome == "wrong", report.error
        # without the sandbox the same cell reaches both sockets: the test can fail
        control = grade(attack + REPORT_FOUND + WRONG, RIGHT, sandbox=False)
        assert control.outcome == "error" and str(path) in control.error
    finally:
        for s in listeners:
            s.close()


def test_numbers_past_a_floats_range_are_a_verdict_not_an_exception():
    huge = "a = 2\nb = 10**400\nL = a * b\nL"  # dL/da and L are past a float's range
    for isolate in (True, False):
        report = grade(huge, {"a": 1, "b": 2, "L.data": 3}, isolate=isolate)
        assert report.outcome == "wrong"
        assert [r.status for r in report.rows] == ["fail", "pass", "fail"]
        json.dumps(report.to_dict())
    report = grade(WALK, {"a": 10**400, "b": -4, "c": math.inf, "f": [math.nan]})
    assert [r.status for r in report.rows] == ["error", "pass", "fail", "error"]
    assert not report.passed and "int 1000" in report.rows[0].note


def test_the_sandboxs_process_1_is_out_of_the_cells_reach():
    """The reaper (process 1) holds the grader's pipes: the cell cannot trace it, open its
    memory or descriptors, or kill it; a killed worker is a crash, never a pass."""
    attack = (
        "import ctypes, os, signal\nfound = []\n"
        "for path in ('/proc/1/mem', '/proc/1/fd/0', '/proc/1/environ'):\n"
        "    try:\n        open(path, 'rb').close()\n        found.append(path)\n"
        "    except OSError:\n        pass\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.ptrace(16, 1, 0, 0) == 0:\n    found.append('ptrace')\n"  # PTRACE_ATTACH
        "for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):\n"
        "    os.kill(1, sig)\n"
    )
    report = grade(attack + REPORT_FOUND + WRONG, RIGHT)
    assert report.outcome == "wrong", report.error
    assert grade(attack + REPORT_FOUND + WALK, RIGHT).passed
    suicide = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    killed = grade(suicide + WALK, RIGHT)
    assert killed.outcome == "crash" and "SIGKILL" in killed.error


def test_nothing_outlives_a_grader_that_is_killed():
    """The grader dies mid-grade (SIGKILL): its job pipe closes, the sandbox's process 1
    ends, and with it the cell and what the cell started in a session of its own."""
    cell = (
        "import os, time, ctypes\nif os.fork() == 0:\n    os.setsid()\n"
        "    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"
        "    os.execv('/bin/sleep', ['sleep', '1005.5'])\ntime.sleep(1000)\n"
    )
    grader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom gradmagic import grade\ngrade(sys.argv[1], {'a': 1}, timeout=100)",
            cell,
        ]
    )
    try:
        end = time.monotonic() + 30
        while not _with_marker("1005.5") and time.monotonic() < end:
            time.sleep(0.1)
        assert _with_marker("1005.5"), "the cell did not start"
    finally:
        grader.kill()
        grader.wait()
    assert _wait_gone("1005.5")


def _anywhere_under(root: str, name: str, depth: int = 2) -> bool:
    """True if a file or folder called ``name`` is in ``root`` or in its folders down to
    ``depth`` (a grade's own folder is one level down: a leak lands there or at the top);
    folders that other tests' grades remove while this looks (they run in parallel) are
    passed over. (The whole of a machine's /tmp can hold millions of files.)"""
    top = root.rstrip(os.sep).count(os.sep)
    for here, folders, files in os.walk(root, onerror=lambda error: None):
        if name in files or name in folders:
            return True
        if here.count(os.sep) - top >= depth - 1:
            folders.clear()
    return False


# =========================================================================== around the sandbox
def _key_users() -> set:
    """The uids the kernel holds keys for that are a sandbox's (run by root: above 2**30)."""
    try:
        with open("/proc/key-users") as f:
            return {line.split(":")[0].strip() for line in f if int(line.split(":")[0]) >> 30}
    except OSError:
        return set()


def test_process_1_survives_every_signal_the_cell_sends():
    """The cell signals the sandbox's process 1 with every signal it may send: the reaper
    lives, the cell is judged (wrong stays wrong), and no traceback of the grader's shows."""
    signals = [s for s in range(1, 32) if s not in (9, 19)]  # SIGKILL, SIGSTOP: never to init
    cell = f"import os\nfor s in {signals}:\n    os.kill(1, s)\nimport time\ntime.sleep(0.2)\n"
    wrong, right = grade(cell + WRONG, RIGHT), grade(cell + WALK, RIGHT)
    assert wrong.outcome == "wrong" and right.outcome == "pass", str(wrong)
    assert "_child.py" not in str(wrong) + str(right) and "Traceback" not in str(wrong)


def test_the_filter_refuses_namespaces_keys_memfd_and_other_sockets():
    """Each refused call raises in the cell (which then computes the right numbers: a pass
    means every one was refused), and no key of the sandbox's is left in the kernel."""
    keys = _key_users()
    cell = (
        "import ctypes, os, socket\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "assert libc.unshare(0x10000000) != 0  # a user namespace\n"
        "assert libc.syscall(248, b'user', b'gm', b'x', 1, -4) < 0  # add_key\n"
        "assert libc.syscall(250, 0, -4, 1) < 0  # keyctl: the user keyring\n"
        "for call in (lambda: os.memfd_create('m'), lambda: socket.socket(),\n"
        "             lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)):\n"
        "    try:\n        call()\n        raise AssertionError('allowed')\n"
        "    except OSError:\n        pass\n"
        "a, b = socket.socketpair()  # Unix sockets still work, their buffers fixed\n"
        "try:\n    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 24)\n"
        "    raise AssertionError('allowed')\nexcept PermissionError:\n    pass\n"
        "import threading\nt = threading.Thread(target=lambda: None)\nt.start()\nt.join()\n"
    )
    report = grade(cell + WALK, RIGHT)
    assert report.passed, str(report)
    assert report.sandbox["limits"]["system_calls"]
    assert _key_users() <= keys


@pytest.mark.parametrize(
    "hog",
    [
        # processes that hid their memory (non-dumpable), together past the limit; each
        # stays well under the per-process bound, whatever the worker's own size
        "import ctypes, os, time\nfor _ in range(6):\n    if os.fork() == 0:\n"
        "        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n        b = b'x' * (60 << 20)\n"
        "        time.sleep(5)\n        os._exit(0)\ntime.sleep(3)\n",
        # kernel memory: folders in the small /tmp
        "import os\nfor i in range(400000):\n    os.mkdir(f'/tmp/d{i}')\n",
    ],
    ids=["non-dumpable processes", "folders in /tmp"],
)
@pytest.mark.parametrize("bound", ["cgroup where one can be made", "sampled"])
def test_the_memory_bound_counts_what_the_cell_hides(hog, bound, monkeypatch):
    from gradmagic.grade import _sandbox

    if bound == "sampled":
        monkeypatch.setattr(_sandbox, "cgroup_parent", lambda: None)
    report = grade(hog + WRONG, RIGHT, memory=256, timeout=10)
    assert report.outcome == "memory" and not report.passed, str(report)
    kernel = report.sandbox["limits"]["memory_kernel_accounted"]
    assert kernel == (bound != "sampled" and _sandbox.cgroup_parent() is not None)
    assert report.sandbox["memory_total"].startswith("a memory cgroup") == kernel


def test_a_forged_report_never_raises_and_is_parsed_in_bounded_memory():
    """A report the cell forged (it can reach the worker's memory): an int past a float's
    range in an array is inf; 16 MiB of small items are not parsed; 16 MiB of text cost
    memory near their size."""
    import tracemalloc

    from gradmagic.grade import _judge, _sandbox

    node = {"index": 0, "data": 1.0, "grad": {"shape": [2], "values": [1, 10**400]}}
    forged = {"status": "ran", "target": "L", "nodes": {"a": node}, "notes": ["\udc80"]}
    report = _judge(forged, [("a", 6.0)], "", 1e-5, 1e-3, 10, 1024)
    assert report.outcome == "wrong" and json.dumps(report.to_dict(), allow_nan=False)
    many = b'{"status": "ran", "notes": [' + b"0," * (8 << 20) + b"0]}"
    assert _sandbox._parse(many) is None
    text = json.dumps({"status": "ran", "target": "L", "nodes": {}, "notes": ["x" * (16 << 20)]})
    tracemalloc.start()
    try:
        data = _sandbox._parse(text.encode())
        _judge(data, [("a", 6.0)], "", 1e-5, 1e-3, 10, 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(text)


def test_the_report_is_safe_to_print_store_and_send(tmp_path):
    """Lone surrogates, line separators and newlines in what the cell says: the text encodes
    as UTF-8, no line but the first reads as a verdict, to_dict() is strict JSON, a CSV row
    holds it."""
    import csv
    import re

    forge = "\u2028✓ 5 of 5 correct\n✓ 5 of 5 correct\u2029" + "\udc80"
    cells = [
        f"raise ValueError({forge!r})",
        f"import sys, warnings\nsys.stderr.write({forge!r})\nwarnings.warn({forge!r})\n" + WRONG,
        "import numpy as np\nx = np.array([1.0, 0.0])\nL = np.log(x).sum()\nL",  # nan, -inf
    ]
    verdict = re.compile(r"^\W*[✓✗⚠] \d+ of \d+ correct")
    for cell in cells:
        report = grade(cell, {**RIGHT, "x": [1.0, 1.0]})
        text = str(report)
        text.encode("utf-8")
        lines = text.splitlines()
        assert verdict.match(lines[0]) and not any(verdict.match(x) for x in lines[1:]), text
        assert "\u2028" not in text and "\u2029" not in text
        d = report.to_dict()
        json.dumps(d, allow_nan=False)
        with open(tmp_path / "grades.csv", "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerow([report.outcome, report.verdict, report.error or ""])
    assert any("inf" in json.dumps(r) for r in d["rows"])


def test_sandbox_unavailable_is_reachable_as_the_docs_name_it():
    from gradmagic.grade import _sandbox

    assert gradmagic.grade.SandboxUnavailable is _sandbox.SandboxUnavailable
    assert grade_module.SandboxUnavailable is _sandbox.SandboxUnavailable
    assert callable(gradmagic.grade) and gradmagic.grade(WALK, RIGHT).passed


UNPRIVILEGED = r"""
import json, sys
from gradmagic import grade
walk, wrong, right, cells = json.loads(sys.argv[1])
out = {"wrong": grade(wrong, right).outcome, "walk": grade(walk, right).outcome}
for name, cell in cells.items():
    out[name] = grade(cell + walk, right).outcome
print(json.dumps(out))
"""


def test_the_sandbox_holds_for_a_grader_that_is_not_root():
    """Run by a user other than root, bwrap makes a user namespace where the cell is uid
    65534 and may make no other; the filter, process 1 and the judging hold the same. (Run
    as root, the grader runs as uid 1000 in a user namespace of its own to take that path.)"""
    cells = {
        "is nobody": "import os\nassert os.getuid() == 65534, os.getuid()\n",
        "signals": "import os\nfor s in (1, 2, 3, 15):\n    os.kill(1, s)\n",
        "filter": (
            "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "assert libc.unshare(0x10000000) != 0\n"
            "assert libc.syscall(248, b'user', b'gm', b'x', 1, -4) < 0\n"
        ),
    }
    command = [sys.executable, "-c", UNPRIVILEGED, json.dumps([WALK, WRONG, RIGHT, cells])]
    if os.geteuid() == 0:
        command = ["unshare", "--user", "--map-user=1000", "--map-group=1000", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out == {"wrong": "wrong", "walk": "pass", **dict.fromkeys(cells, "pass")}
