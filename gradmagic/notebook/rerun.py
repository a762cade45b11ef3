"""The check's independent side: the user's code run again, plainly, at perturbed inputs.

A recorded graph can miss a path (a write into a plain array, a number that went through
``json`` or C and came back): then the graph and its own replay agree on a wrong gradient.
So the numerical check asks the code instead, as HIPS autograd's ``check_grads`` and PyTorch's
``gradcheck`` call the function rather than its graph. The cell (or function) runs again
unrecorded, with its inputs moved by ±eps, and the change of its value is the slope that
the gradient must match.

Every re-run happens in a child process forked when the recorded run began (a
:class:`Zygote`): it starts from exactly the state the cell started from (the names, the
objects they reach, modules, random generators) and whatever it changes dies with it, so the
user's namespace is never touched. The points run in a fork of that child (see
:class:`_Answers`), with their output thrown away and their time and memory bounded. A re-run that reaches the outside world (opens a
file for writing, a socket, a subprocess: the events Python's audit hooks report) is stopped,
and the check says that it compared with the recorded graph only.

Inputs are matched by birth (:mod:`gradmagic.notebook.runtime`): each leaf keeps the count of
the place that made it, and the re-run moves what is born at the same count. The unmoved
re-run must meet the same inputs and give the recorded value, or nothing is judged by it.
"""

from __future__ import annotations

import fcntl
import functools
import gc
import io
import os
import pickle
import random
import select
import signal
import struct
import sys
import time
import warnings
import weakref

import numpy as np

from ..analysis.replay import Measured

__all__ = ["Zygote", "Rerun", "available", "OUTSIDE"]

# events a re-run may not cause: they reach past the process (files written, the network,
# other programs); reading a file is fine
_OUTSIDE_PREFIXES = tuple(
    (
        "socket. subprocess. os.exec os.posix_spawn os.spawn os.fork os.kill os.system "
        "os.remove os.rename os.rmdir os.mkdir os.link os.symlink os.truncate os.chmod "
        "os.chown os.utime shutil. tempfile. sqlite3.connect urllib. http. ftplib. "
        "smtplib. webbrowser. winreg. ctypes.dlopen pty."
    ).split()
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
OUTSIDE = "outside"
"""The status of a re-run stopped for reaching the outside world."""

# the re-runs of one check start no new point after this many seconds, or this many times
# the recorded run, whichever is longer (the directions through every input always run)
BUDGET = 0.5
BUDGET_TIMES = 2.0
# at most this many re-run processes are kept (the oldest is closed first)
KEEP = 4
_LIVE: list = []  # weak references to the live zygotes, oldest first
_GiB = 2**30


def available() -> bool:
    """True where a re-run can be forked (POSIX)."""
    return hasattr(os, "fork") and hasattr(os, "register_at_fork")


class _Outside(BaseException):
    """Raised in a re-run at an event that reaches the outside world (a BaseException, so a
    cell's ``except Exception`` cannot take it for its own error)."""


def _audit(event: str, args) -> None:
    if _Stop.event is not None:
        return
    if event == "open":
        mode, flags = args[1], args[2]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if not writes:
            return
        _Stop.event = f"opens {args[0]!r} for writing"
    elif event.startswith(_OUTSIDE_PREFIXES):
        _Stop.event = f"calls {event}"
    else:
        return
    raise _Outside(_Stop.event)


class _Stop:
    event: str | None = None


# --------------------------------------------------------------------------- the processes
def _send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = struct.pack("<Q", len(data)) + data
    while data:
        data = data[os.write(fd, data) :]


def _receive(fd: int, deadline: float | None = None):
    """The next object on ``fd``; None at its end or past ``deadline``."""
    head = _read(fd, 8, deadline)
    if head is None:
        return None
    body = _read(fd, struct.unpack("<Q", head)[0], deadline)
    return None if body is None else pickle.loads(body)


def _read(fd: int, n: int, deadline: float | None):
    parts, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class Zygote:
    """A child process forked now, holding the process as it is, that runs ``job(point)`` for
    each point it is sent, in a fork of it (see :class:`_Answers`). ``job`` returns a
    float (the target) or raises; a point's answer is ``("ok", value, seen)``,
    ``("error", text)``, ``("outside", event)`` or ``("timeout",)``."""

    def __init__(self, job):
        others = [fd for z in _live() for fd in z._fds()]
        global _RANDOM
        _RANDOM = random.getstate()
        # numpy imports numpy.random on first use, seeding it from the system: imported now,
        # so that the re-runs draw what the cell draws
        np.random.get_state()
        with warnings.catch_warnings():  # (a multi-threaded kernel: the child uses no thread)
            warnings.simplefilter("ignore", DeprecationWarning)
            answers = _Answers(job)
            self._process = _Worker(answers, functools.partial(_zygote, others), answers.end)
        try:
            os.setpgid(self._process.pid, self._process.pid)  # (as the child does, first or not)
        except OSError:  # (it has ended)
            pass
        _LIVE.append(weakref.ref(self))
        while len(_live()) > KEEP:
            _live()[0].close()

    def _fds(self):
        return [fd for fd in (self._process._to, self._process._from) if fd >= 0]

    @property
    def alive(self) -> bool:
        return self._process.pid > 0

    def run(self, points: list, timeout: float, first_timeout: float, budget=None, must=1) -> list:
        """The answers for ``points`` (the first is given ``first_timeout``, each other
        ``timeout`` seconds); ``("error", ...)`` for every point once the zygote is gone.
        Past ``budget`` seconds no point after the first ``must`` is started: the answers
        then stop short."""
        if not self.alive:
            return [("error", "the re-run process was closed")] * len(points)
        request = (points, timeout, first_timeout, budget, must)
        answers = self._process.ask(request, first_timeout + timeout * len(points) + 5)
        if isinstance(answers, tuple):  # (it timed out, or ended: it is closed)
            return [("error", "the re-run process stopped answering")] * len(points)
        return answers

    def close(self) -> None:
        self._process.close(grace=0.1)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at the interpreter's end, os may be gone
            pass


def _zygote(others: list, keep: int) -> None:
    """The zygote's start: its own process group (closed with the process that runs its
    points), the garbage collector's objects frozen (a collection would touch, so copy,
    every page it shares), the other zygotes' pipes closed, its output nowhere."""
    os.setpgid(0, 0)
    gc.freeze()
    for fd in others:
        _close(fd)
    _quiet()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _live() -> list:
    _LIVE[:] = [r for r in _LIVE if r() is not None and r().alive]
    return [r() for r in _LIVE]


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _quiet() -> None:
    """Nothing a re-run prints reaches the notebook (the kernel's streams are its parent's)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    sys.stdin = io.StringIO()


class _Answers:
    """The zygote's answer to each request, a list of points, answered in one list.

    A fork costs more than a small cell's run, so one process (a fork of the zygote, made at
    the first request) runs all the points of every request, the namespace, the moved inputs
    and the random generators put back between them. The unmoved point is run again at the
    end of each request: if it no longer gives what it first gave, the cell changes state the
    next run reads, and each point is run in a fork of its own from then on.
    """

    def __init__(self, job):
        self.job, self.worker, self.leaky = job, None, False

    def __call__(self, request):
        points, timeout, first, budget, must = request
        if not self.leaky:  # (past the budget only the first ``must`` points start)
            job = self.job
            self.worker = self.worker or _Worker(functools.partial(_work_all, job, {}), _enter)
            rest = timeout * len(points) if budget is None else budget + timeout * must
            answers = self.worker.ask((points, budget, must), first + rest)
            if answers[0] in ("timeout", "ended"):
                answers = [answers] * len(points)
            self.leaky = answers[0] == "leaky"
            if self.leaky or any(a[0] != "ok" for a in answers):  # (state may be left)
                self.end()
            if not self.leaky:
                return answers
        answers, start = [], time.monotonic()
        for k, point in enumerate(points):
            if k >= must and budget is not None and time.monotonic() - start > budget:
                break
            alone = _Worker(functools.partial(_work, self.job), _enter)
            answers.append(alone.ask(point, first if k == 0 else timeout))
            alone.close()
        return answers

    def end(self) -> None:
        """Ends the worker (the zygote reaps it: nothing is left to whoever adopts orphans)."""
        if self.worker is not None:
            self.worker.close()
            self.worker = None


class _Worker:
    """A fork of this process that answers ``work(request)`` for each request it is sent,
    after ``enter(the descriptor it answers on)``; ``end()`` runs when its requests end."""

    def __init__(self, work, enter, end=None):
        inbox, self._to = os.pipe()
        self._from, outbox = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                os.close(self._to)
                os.close(self._from)
                enter(outbox)
                while (request := _receive(inbox)) is not None:
                    _send(outbox, work(request))
            finally:
                if end is not None:
                    end()
                os._exit(0)
        os.close(inbox)
        os.close(outbox)

    def ask(self, request, timeout: float):
        """Its answer to ``request``; ``("timeout",)`` past ``timeout`` seconds, ``("ended",)``
        if it ended (either way it is closed)."""
        deadline = time.monotonic() + timeout
        try:
            _send(self._to, request)
            answer = _receive(self._from, deadline)
        except OSError:
            answer = None
        if answer is None:
            answer = ("timeout",) if time.monotonic() >= deadline else ("ended",)
            self.close()
        return answer

    def close(self, grace: float = 0.0) -> None:
        """Ends it: its requests end, it is given ``grace`` seconds to end by itself, then it
        is killed (with the process group it leads, for a zygote)."""
        if self.pid <= 0:
            return
        _close(self._to)
        _close(self._from)
        self._to = self._from = -1
        given = time.monotonic() + grace
        try:
            while os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                if time.monotonic() >= given:
                    for kill in (os.killpg, os.kill):
                        try:
                            kill(self.pid, signal.SIGKILL)
                        except OSError:
                            pass
                    os.waitpid(self.pid, 0)
                    break
                time.sleep(0.001)
        except ChildProcessError:  # (reaped already: SIGCHLD ignored)
            pass
        self.pid = 0


def _enter(keep: int) -> None:
    """A re-run process's bounds: memory, the outside world closed, the random generator as
    the cell found it (``random`` reseeds itself in a forked child)."""
    _blind(keep)
    try:
        import resource

        size = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = size + 2 * _GiB
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, OSError, ValueError):
        pass
    if _RANDOM is not None:
        random.setstate(_RANDOM)
    sys.addaudithook(_audit)


_RANDOM = None  # the random module's state when the zygote was made


def _blind(keep: int) -> None:
    """Every file descriptor the process inherited open for writing (a file an earlier cell
    opened, a socket, the kernel's own channels), but ``keep``, made to write nowhere: a
    re-run's ``fh.write`` raises no audit event, so it must not reach the file."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:  # (no /proc: the audit hook alone guards)
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in fds:
            if fd in (0, 1, 2, keep, null):
                continue
            try:
                writes = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
            except OSError:
                continue
            if writes:
                os.dup2(null, fd)
    finally:
        os.close(null)


def _work_all(job, kept: dict, request):
    """Every point in this process, the state put back before each (see :func:`_serve`);
    past ``budget`` seconds, only the first ``must``. ``kept`` holds the state to put back
    and the unmoved point's first answer, from this process's first request."""
    if not kept:
        kept["state"] = _Kept(job.namespaces)
    state, (points, budget, must) = kept["state"], request
    answers: list = []
    start = time.monotonic()
    for k, point in enumerate(points):
        if k >= must and budget is not None and time.monotonic() - start > budget:
            break
        state.restore()
        answers.append(_work(job, point))
        if answers[-1][0] == OUTSIDE:
            return [answers[-1]] * len(points)
    state.restore()
    again = _work(job, points[0])  # the unmoved point again: did state leak?
    first = kept.setdefault(repr(points[0]), answers[0])
    return ("leaky",) if again != answers[0] or first != answers[0] else answers


class _Kept:
    """The namespaces and random generators as they are now, to put back."""

    def __init__(self, namespaces):
        self.namespaces = [(ns, dict(ns)) for ns in namespaces]
        self.random = random.getstate()
        self.np_random = np.random.get_state()

    def restore(self) -> None:
        for ns, kept in self.namespaces:
            ns.clear()
            ns.update(kept)
        random.setstate(self.random)
        np.random.set_state(self.np_random)


def _work(job, point):
    """One re-run: its value, or why there is none."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                value, seen = job(point)
            finally:
                job.undo()
    except _Outside:
        pass
    except BaseException as e:  # noqa: BLE001 - the re-run's own error, reported
        if _Stop.event is None:
            return ("error", f"{type(e).__name__}: {e}"[:300])
    else:
        if _Stop.event is None:
            return ("ok", value, seen)
    return (OUTSIDE, _Stop.event)


# --------------------------------------------------------------------------- the measures
class Rerun:
    """The run's code, ready to be re-run: ``handles`` maps each input leaf's position in the
    trace to its birth; :meth:`measure` gives what :class:`~gradmagic.analysis.replay.Replay`
    gives, measured on the code."""

    def __init__(
        self,
        zygote: Zygote | None,
        handles: dict,
        seconds: float,
        what="cell",
        problem="",
        arrays=None,
    ):
        self.zygote, self.handles, self.seconds, self.what = zygote, handles, seconds, what
        # birth → (shape, sum) an array input held when the recorded run made it
        self.arrays = arrays or {}
        self.problem = problem  # why the code cannot be asked (then the graph is)
        self.per_point: float | None = None  # seconds one re-run takes, once measured
        # "plain", or "magic" for code that fails plainly (x.tanh() on a number) but runs
        # under the magic: then each re-run is recorded, and only its value is read
        self.mode = "plain"
        self.plain_error = ""
        self.left_out = 0  # inputs not moved one by one, past the budget
        self.explicit: frozenset = frozenset()  # the explicit engine's leaves (their graph is code)
        self.outside: frozenset = frozenset()  # births of inputs the graph does not reach

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()

    def measure(self, trace, perturbation, eps: float, whole: bool = False):
        """(the :class:`Measured` of ``perturbation``, the part of it measured), or None with
        :attr:`problem` set when the code cannot judge. Past the time budget the elements
        left are not measured, unless ``whole``."""
        if self.zygote is None:
            return None
        # the directions first: they move every input, and are never left out
        points: list = [{}]
        hp: list = []
        hm: list = []
        for signs in perturbation.signs:
            hp.append(eps)
            hm.append(eps)
            for sign in (1, -1):
                points.append(
                    {self.handles[i]: sign * eps * s for i, s in zip(perturbation.spread, signs)}
                )
        data, tensors = trace.data, trace.tensor_data
        for i, e in zip(perturbation.node.tolist(), perturbation.elem.tolist()):
            born = self.handles[i]
            kind = float if e < 0 else np.asarray(tensors[i]).dtype.type
            x = float(data[i]) if e < 0 else float(tensors[i].flat[e])
            up, down = float(kind(x + eps)), float(kind(x - eps))  # in the input's precision
            hp.append(up - x)
            hm.append(x - down)
            if e < 0:
                points += [{born: up - x}, {born: down - x}]
            else:
                points += [{born: ([e], [up - x])}, {born: ([e], [down - x])}]
        ways = len(perturbation.signs)
        values = self._values(trace, points, must=None if whole else 1 + 2 * ways)
        if values is None:
            return None
        done = (len(values) - 1) // 2 - ways  # the elements measured within the budget
        kept = perturbation.select(
            [*range(done), *range(len(perturbation.node), len(perturbation))]
        )
        f = np.array(values[1 : 1 + 2 * (ways + done)], dtype=float)
        order = np.r_[ways : ways + done, 0:ways]  # back to the elements, then the directions
        self.left_out = len(perturbation.node) - done
        return (
            Measured(
                np.float64(values[0]),
                f[0::2][order],
                f[1::2][order],
                np.array(hp)[order],
                np.array(hm)[order],
            ),
            kept,
        )

    def directions(self, trace, spread: list, signs: np.ndarray, eps: float):
        """The :class:`Measured` of moving every element of the leaves in ``spread`` at once,
        by ``eps`` times each row of ``signs`` (one sign per element, leaves in order); None
        with :attr:`problem` set when the code cannot judge."""
        if self.zygote is None:
            return None
        points: list = [{}]
        for row in signs:
            for sign in (1, -1):
                point, k = {}, 0
                for i in spread:
                    size = (
                        1 if i not in trace.tensor_data else np.asarray(trace.tensor_data[i]).size
                    )
                    part = row[k : k + size] * (sign * eps)
                    k += size
                    point[self.handles[i]] = (
                        float(part[0]) if i not in trace.tensor_data else (np.arange(size), part)
                    )
                points.append(point)
        values = self._values(trace, points)
        if values is None:
            return None
        f, steps = np.array(values[1:], dtype=float), np.full(len(signs), eps)
        return Measured(np.float64(values[0]), f[0::2], f[1::2], steps, steps)

    def strays(self, trace, eps: float, seed: int):
        """(the :class:`Measured` of moving every input the graph does not reach at once, each
        number by a random 0.5 to 1.5 eps, how many inputs), or None: none, or no plain
        re-run."""
        if self.zygote is None or not self.outside or self.mode != "plain" or self.problem:
            return None
        first, per, budget = self._limits()
        points: list = [({}, (), False, (sign, eps, seed, self.outside)) for sign in (1, -1)]
        answers = self.zygote.run(points, per, first, budget, 2)
        if len(answers) < 2 or any(a[0] != "ok" for a in answers):
            return None  # (moved numbers that broke the code: nothing judged, no problem set)
        count = len(self.outside)
        f0 = np.float64(np.sum(np.asarray(trace.target.data, dtype=float)))
        plus, minus, steps = np.array([answers[0][1]]), np.array([answers[1][1]]), np.array([eps])
        return Measured(f0, plus, minus, steps, steps), count

    def _limits(self) -> tuple:
        """Seconds for the first point, for each other one, and for all of them."""
        first = max(2.0, 3 * self.seconds)
        per = first if self.per_point is None else max(0.5, 20 * self.per_point)
        return first, per, max(BUDGET, BUDGET_TIMES * self.seconds)

    def _values(self, trace, moves: list, must: int | None = None):
        """The target at each of ``moves`` (the first: no move), or None (see measure); past
        the budget, only the first ``must`` (all of them if None)."""
        assert self.zygote is not None
        watch = tuple(self.handles.values())
        first, per, budget = self._limits()
        started = time.perf_counter()
        while True:
            recorded = self.mode == "magic"
            points = [(m, watch if k == 0 else (), recorded, None) for k, m in enumerate(moves)]
            answers = self.zygote.run(
                points, per, first, budget, len(points) if must is None else must
            )
            if recorded or answers[0][0] != "error":
                break
            # a cell that only runs under the magic (x.tanh() on a number): run again there
            self.mode, self.plain_error = "magic", answers[0][1]
        if self.per_point is None:
            self.per_point = (time.perf_counter() - started) / max(1, len(points))
        for answer in answers:
            if answer[0] != "ok":
                self.problem = _why(answer, self.what)
                return None
        value = answers[0][1]
        if not self._same_inputs(trace, answers[0][2]) or not _same(value, trace.target.data):
            if not self.problem:
                self.problem = (
                    f"re-running the {self.what} plainly gives {value:.6g}, but the "
                    f"recorded run gave {float(np.sum(trace.target.data)):.6g}: the {self.what} "
                    "does not compute the same thing twice (randomness it does not seed, state "
                    "it changes), so it cannot be compared with itself"
                )
            return None
        return [a[1] for a in answers]

    def _same_inputs(self, trace, seen: dict) -> bool:
        for i, born in self.handles.items():
            got = seen.get(born)
            if i in trace.tensor_data:
                held = self.arrays.get(born)
                if held is None:
                    want = np.asarray(trace.tensor_data[i], dtype=float)
                    held = (want.shape, float(want.sum()))
                met = (
                    isinstance(got, tuple)
                    and tuple(got[0]) == tuple(held[0])
                    and _same(got[1], held[1])
                )
            else:
                met = got is not None and _same(got, float(trace.data[i]))
            if not met:
                self.problem = (
                    f"re-running the {self.what} plainly did not meet the input "
                    f"{trace.nodes[i].name!r} where the recorded run made it, so the two runs "
                    "cannot be matched"
                )
                return False
        return True


def _why(answer, what: str) -> str:
    kind = answer[0]
    if kind == OUTSIDE:
        return f"the {what} reaches outside the notebook ({answer[1]}), so it was not run again"
    if kind == "timeout":
        return f"re-running the {what} took too long"
    if kind == "ended":
        return f"re-running the {what} ended its process (os._exit, or a crash)"
    return f"re-running the {what} plainly failed ({answer[1]})"


def _same(a, b) -> bool:
    a = float(np.sum(np.asarray(a, dtype=float)))
    b = float(np.sum(np.asarray(b, dtype=float)))
    return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(b)) or (a != a and b != b)
