"""What isolation costs, and what 100 sandboxed grades at once leave behind.

One grade: the textbook walk-through, L = (a*b + c)*f with five expected answers, graded
three ways (best of 7, interleaved so that a burst of load hits all alike):

* ``grade(..., isolate=False)``: in this process (rewrite, run, backward, Trace, expect);
* ``grade(..., sandbox=False)``: a fresh ``python -I`` child without the sandbox;
* ``grade(...)``: the same child under bubblewrap (namespaces, an unprivileged user,
  read-only binds, the reaper, the limits). Budget: under 0.5 s.

For scale, the bare start-up of ``python -I`` importing gradmagic's magic module, and of
bubblewrap running ``python -I -S -c ''``.

Then 100 submissions graded at once from 100 threads (a third right, a third wrong, a third
hostile: a process that leaves its session and clears its parent-death signal, a 30 MiB file,
a fork bomb), each with a time limit long enough for the queue. Afterwards: no process of
the sandbox left on the machine, no file left in the temporary folder, this process's open
files as before, and its memory (RSS) within a few MiB of before.

Last, a class in one command: ``python -m gradmagic.grade``'s ``grade_class`` over 200
generated notebooks (right, wrong, crashing, hostile; two checks each: the ``%%autograd``
cell and the hand-derived answers) with two sandboxes at a time, as on a 2-core machine; it
prints the submissions graded per minute and checks the gradebook (every right one full
marks, every other one not) and that no memory cgroup of a sandbox is left.

Run: ``python benchmarks/bench_grade.py`` (``--class`` for the class alone).
"""

from __future__ import annotations

import concurrent.futures
import gc
import os
import subprocess
import sys
import tempfile
import time

from gradmagic import grade
from gradmagic.grade import _sandbox

WALK = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f\nL"
WRONG = "a = 2.0\nb = -3.0\nc = 10.0\ne = a*b\nd = e + c\nf = -2.0\nL = d*f + (a - 2.0)\nL"
RIGHT = {"a": 6, "b": -4, "c": -2, "f": 4, "L.data": -8}
BUDGET_SECONDS = 0.5
HOSTILE = [
    (
        "import os, time, ctypes\nif os.fork() == 0:\n    os.setsid()\n"
        "    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"
        "    os.execv('/bin/sleep', ['sleep', '1009.5'])\ntime.sleep(0.1)\n"
    ),
    "open('big', 'wb').write(b'x' * (30 << 20))\n",
    (
        "import os\nfor _ in range(100):\n    try:\n        if os.fork() == 0:\n"
        "            os.execv('/bin/sleep', ['sleep', '1009.5'])\n    except OSError:\n"
        "        break\n"
    ),
]


def _children_cpu() -> float:
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _python_startup():
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, "-I", "-c", "import gradmagic.notebook.magic"], check=True, env=env
    )


def _bwrap_startup():
    subprocess.run(
        _sandbox.command(None) + [sys.executable, "-I", "-S", "-c", ""],
        check=True,
        env=_sandbox.ENV,
    )


def one_grade() -> bool:
    assert grade(WALK, RIGHT).passed and grade(WALK, RIGHT, sandbox=False).passed
    inproc = _best(lambda: grade(WALK, RIGHT, isolate=False), 20)
    times = {
        "sandbox": float("inf"),
        "plain": float("inf"),
        "python": float("inf"),
        "bwrap": float("inf"),
    }
    runs = {
        "sandbox": lambda: grade(WALK, RIGHT),
        "plain": lambda: grade(WALK, RIGHT, sandbox=False),
        "python": _python_startup,
        "bwrap": _bwrap_startup,
    }
    cpu = dict.fromkeys(runs, 0.0)
    for _ in range(7):
        for name, fn in runs.items():
            before = _children_cpu()
            times[name] = min(times[name], _best(fn, 1))
            cpu[name] += (_children_cpu() - before) / 7
    ok = times["sandbox"] < BUDGET_SECONDS
    rows = [
        ("grade(isolate=False), in this process", inproc, None),
        ("grade(sandbox=False), a fresh child process", times["plain"], cpu["plain"]),
        ("grade(), the child in the bubblewrap sandbox", times["sandbox"], cpu["sandbox"]),
        ("for scale: start python -I and import gradmagic", times["python"], cpu["python"]),
        ("for scale: bwrap running python -I -S -c ''", times["bwrap"], cpu["bwrap"]),
    ]
    print("| run | best time | ratio to in-process | CPU time of its processes (mean) |")
    print("| --- | --- | --- | --- |")
    for name, t, c in rows:
        used = "" if c is None else f"{c * 1e3:.0f} ms"
        print(f"| {name} | {t * 1e3:.0f} ms | {t / inproc:.0f}x | {used} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"sandboxed grade() under {BUDGET_SECONDS:g} s: {'ok' if ok else 'MISSED'}")
    return ok


def _leftover_processes() -> list:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if _sandbox.CHILD.encode() in cmdline or b"1009.5" in cmdline:
            found.append(int(entry))
    return found


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _our_temp_files() -> set:
    """Entries of the temporary folder a grade could have left: its unsandboxed working
    folders, or anything owned by a sandbox's uid (other programs' files are not counted)."""
    found = set()
    for entry in os.scandir(tempfile.gettempdir()):
        try:
            uid = entry.stat(follow_symlinks=False).st_uid
        except OSError:
            continue
        if entry.name.startswith("gradmagic-cell-") or uid >= 0x40000000:
            found.add(entry.name)
    return found


def hundred_at_once() -> bool:
    submissions = []
    for i in range(100):
        kind = ("right", "wrong", "hostile")[i % 3]
        source = {
            "right": WALK,
            "wrong": WRONG,
            "hostile": HOSTILE[(i // 3) % len(HOSTILE)] + WRONG,
        }[kind]
        submissions.append((kind, source))
    grade(WALK, RIGHT)  # warm: the sandbox probe, imports
    fds, rss, temp = len(os.listdir("/proc/self/fd")), _rss(), _our_temp_files()
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=100) as pool:
        reports = list(pool.map(lambda s: grade(s[1], RIGHT, timeout=300), submissions))
    took = time.perf_counter() - start
    time.sleep(0.5)
    gc.collect()
    right = all(r.passed for (kind, _), r in zip(submissions, reports) if kind == "right")
    wrong = not any(r.passed for (kind, _), r in zip(submissions, reports) if kind != "right")
    outcomes = {}
    for r in reports:
        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    left = _leftover_processes()
    new_temp = _our_temp_files() - temp
    fds_after, rss_after = len(os.listdir("/proc/self/fd")), _rss()
    ok = (
        right
        and wrong
        and not left
        and not new_temp
        and fds_after == fds
        and rss_after - rss < 32 << 20
    )
    print(
        f"\n100 submissions at once (100 threads): {took:.1f} s, {took * 10:.0f} ms a "
        f"submission; outcomes {outcomes}"
    )
    print(f"right ones passed: {right}; wrong and hostile ones failed: {wrong}")
    print(
        f"processes left: {len(left)}; files left in {tempfile.gettempdir()}: "
        f"{len(new_temp)}; open files {fds} -> {fds_after}; "
        f"RSS {rss / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB"
    )
    print(f"nothing left behind: {'ok' if ok else 'MISSED'}")
    return ok


CLASS_ASSIGNMENT = (
    "from gradmagic.grade import check_answers, check_cell\n"
    f"check_cell('autograd', {RIGHT!r}, points=2)\ncheck_answers('answers', {WALK!r})\n"
)
CLASS_KINDS = {
    "right": ('answers = {"a": 6, "b": -4}', WALK),
    "wrong": ('answers = {"a": 7, "b": -4}', WRONG),
    "crashing": ('answers = {"a": 6, "b": -4}', "L = 1 / 0"),
    "hostile": ('answers = {"a": 7, "b": -4}', HOSTILE[0] + WRONG),
}


def _class_notebook(answers: str, code: str) -> str:
    import json

    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": answers},
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": "%%autograd\n" + code},
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def a_class(n: int = 200, jobs: int = 2) -> bool:
    from gradmagic.grade import _classroom

    kinds = list(CLASS_KINDS)
    with tempfile.TemporaryDirectory() as root:
        folder = os.path.join(root, "submitted")
        os.mkdir(folder)
        for i in range(n):
            answers, code = CLASS_KINDS[kinds[i % len(kinds)]]
            with open(os.path.join(folder, f"s{i:03d}.ipynb"), "w") as f:
                f.write(_class_notebook(answers, code))
        assignment = os.path.join(root, "assignment.py")
        with open(assignment, "w") as f:
            f.write(CLASS_ASSIGNMENT)
        start = time.perf_counter()
        book = _classroom.grade_class(assignment, folder, os.path.join(root, "out"), jobs=jobs)
        took = time.perf_counter() - start
    scores = {int(s[1:]): e["score"] for s, e in book["students"].items()}
    right = all((scores[i] == 3) == (i % len(kinds) == 0) for i in range(n)) and len(scores) == n
    parent = _sandbox.cgroup_parent()
    cgroups = [] if parent is None else [d for d in os.listdir(parent[1]) if "gradmagic" in d]
    ok = right and not cgroups and not _leftover_processes()
    print(
        f"\na class of {n} notebooks (2 checks each), {jobs} sandboxes at a time: {took:.1f} s, "
        f"{n / took * 60:.0f} submissions a minute on {os.cpu_count()} cores "
        f"(load average {os.getloadavg()[0]:.1f})"
    )
    print(f"gradebook right: {right}; memory cgroups left: {len(cgroups)}")
    print(f"class graded: {'ok' if ok else 'MISSED'}")
    return ok


def main() -> bool:
    why = _sandbox.unavailable()
    if why:
        print(f"no sandbox on this machine: {why}")
        return False
    if "--class" in sys.argv:
        return a_class()
    return all([one_grade(), hundred_at_once(), a_class()])


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
