"""Grading hand-derived gradients without a notebook display: :func:`grade`.

``grade(source, expected)`` runs a cell's source the way ``%%autograd`` does
(the same rewrite and engine, :func:`gradmagic.notebook.magic.prepare` and
:func:`~gradmagic.notebook.magic.execute`), compares the gradients and values named in
``expected`` and returns a :class:`GradeReport` (a
:class:`~gradmagic.analysis.check.CheckReport` with an ``outcome``), with
``.passed``, ``.rows``, ``to_dict()`` and ``assert_passed()``.

Isolation. By default the source runs in a sandbox: a fresh ``python -I`` process
under bubblewrap, in namespaces of its own (PID, network, IPC; a user namespace or
a uid of its own), as an unprivileged user, seeing read-only only the Python
installation, its environment and gradmagic, with a private ``/tmp``, behind a
system-call filter, under limits of wall-clock time, memory (each process, and all its
processes together: a memory cgroup where one can be made), number of processes and
file size. Whatever it starts ends with it. That process learns the source, the names
asked about and the target, never the expected numbers or the tolerances; it sends
back plain data (each named node's value and gradient, the ``.grad`` values a learner's own
engine left beside the true ones, arrays as bytes, or the error with its line, and the
notes) over a pipe. The grader's process checks that data by
exact type and builds and judges the report itself, never calling a method of an
object the student made (the expected answers too are read from plain types only), so
nothing the student's code does
(patching gradmagic, numpy or builtins, exiting, interrupting, looping, forking)
can change how it is judged, and no submission can leave anything behind for the
next one. A student's code can still make its own process report whatever numbers
it likes, as it could by computing them; it cannot learn the expected answers from
the grader. ``docs/grading.md`` has the threat model.

Where no sandbox can be made (no bubblewrap, namespaces forbidden, not Linux),
:func:`grade` raises :class:`SandboxUnavailable`; ``sandbox=False`` runs the same
child process without the sandbox (its own process group and rlimits only: it can
read and write whatever the grader's user can), and the report says so.
``isolate=False`` runs the source in the grader's own process instead (faster, and
the ``namespace`` given is changed as a notebook's would be); it is unsafe for
untrusted code and has no time or memory limit.

It is made for autograders, which score a test cell by what it shows:

* nothing reaches stderr (nbgrader scores a cell that writes to stderr 0):
  what the cell prints is dropped, and what it writes to stderr and the
  warnings it raises become notes of the report (control characters removed);
* the report's text never reads as a bare number (nbgrader would take a
  number for partial credit) and is the same every time;
* whatever the student's code does, ``grade()`` returns a failing report that
  says why: a wrong answer, an error on the student's line, a timeout, running
  out of memory, or a crash of the process that ran it.

Mistakes of the grader's own (expected answers that are not a mapping,
negative tolerances, bad limits) raise at once, before the cell runs.

Reports are safe to print, store and send (text normalised, ``to_dict()`` strict JSON, a
verdict line no message can forge); ``feedback="verdicts"`` leaves the expected values
out. For a class: :func:`check_cell` and :func:`check_answers` declare checks that the
class command (``python -m gradmagic.grade``), nbgrader's :mod:`gradmagic.grade.nbgrader`
and otter's :mod:`gradmagic.grade.otter` read from the teacher's test code and grade on
the submitted notebook's text, which never runs outside the sandbox.
"""

from __future__ import annotations

from ._sandbox import SandboxUnavailable
from ._collect import FILENAME, collect
from ._judging import FEEDBACK, GradeReport, clean
from ._judging import _judge as _judge  # (the verdict on a run's data, for tests)
from ._grading import MEMORY, OUTCOMES, PROCESSES, TIMEOUT, grade
from ._notebook import NotebookError, declared_checks, read_cells
from ._checks import check_answers, check_cell, run_check

__all__ = [
    "grade",
    "GradeReport",
    "SandboxUnavailable",
    "FILENAME",
    "TIMEOUT",
    "MEMORY",
    "PROCESSES",
    "OUTCOMES",
    "FEEDBACK",
    "check_cell",
    "check_answers",
    "run_check",
    "read_cells",
    "declared_checks",
    "NotebookError",
    "collect",
    "clean",
]


# ``gradmagic.grade`` is this function once ``gradmagic`` is imported (the module stays
# ``sys.modules["gradmagic.grade"]``): the names the docs give as ``gradmagic.grade.X`` are
# its attributes too.
for _name in __all__[1:]:
    setattr(grade, _name, globals()[_name])
del _name
