"""The fresh process an isolated :func:`gradmagic.grade` runs a cell in.

Started by the grader as ``python -I .../_child.py FOLDER`` (FOLDER holds the grader's
gradmagic) with a clean environment, an empty working directory and its own process
group; this file imports only the standard library until the namespaces are made
(``unshare`` needs a process with one thread). ``main`` reads the job
(pickled by the grader) from stdin, enters new user, PID and network namespaces
where Linux allows it (then forks: the cell runs as process 1 of its own PID
namespace, unable to signal the grader, with no network), points stdin and stdout
at ``/dev/null``, sets the limits, runs the cell with :func:`gradmagic.grade.collect` and,
after the cell has finished, writes the plain-data report to the file the job
names (created exclusively; the name holds a random token), then ends with
``os._exit(0)`` so nothing the cell registered (atexit hooks, threads,
finalizers) runs after it. Any failure of its own ends it with a non-zero
status; the grader then reports a crash.
"""
from __future__ import annotations

import json
import os
import pickle
import sys


def main() -> None:
    job = pickle.loads(sys.stdin.buffer.read())
    if _unshare():  # before any import that could start a thread
        _wait_for(os.fork())
    sys.path.insert(0, sys.argv[1])  # the folder gradmagic is imported from in the grader
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    # everything of ours is imported before the limits and before the cell
    from gradmagic.grade import collect
    import gradmagic.notebook.magic  # noqa: F401
    dumps, open_, write, exit_ = json.dumps, os.open, os.write, os._exit
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    token, path = job["token"], job["report"]
    _limit(job["memory"], job["timeout"])
    ns = {"__name__": "__main__"}
    if job["namespace"] is not None:
        ns.update(pickle.loads(job["namespace"]))
    data = collect(job["source"], job["names"], ns, job["target"], restore=True)
    data["token"] = token
    raw = dumps(data).encode("utf-8")
    fd = open_(path, flags, 0o600)
    while raw:
        raw = raw[write(fd, raw):]
    exit_(0)


def _unshare() -> bool:
    """Enter new user, PID and network namespaces, where Linux allows it (best effort).

    The next child made is then process 1 of a PID namespace of its own: it cannot see or
    signal any process outside (the grader included), everything it starts ends when it
    ends, and it has no network. Where namespaces are not allowed (other systems, containers
    that forbid them) the cell runs without them.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(0x10000000 | 0x20000000 | 0x40000000) == 0  # USER | PID | NET
    except (OSError, AttributeError):
        return False


def _wait_for(pid: int) -> None:
    """In the process outside the namespaces: wait for the cell's process and end as it ended.

    The cell's process (process 1 of the namespace) is killed if this one dies, so the
    grader's kill of the process group reaches it even if the cell left the group (setsid);
    when it ends, the kernel ends everything else in its namespace.
    """
    if pid == 0:  # the cell's process: go on
        import ctypes
        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
        return
    import signal
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _limit(memory, timeout) -> None:
    """Limits the cell cannot raise again: address space, CPU time, file size, core dumps."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows: the grader's time limit only
        return

    def cap(which, value):
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))

    if memory is not None:
        cap(resource.RLIMIT_AS, int(memory) << 20)
    if timeout is not None:  # a backstop for processes that leave the group
        cap(resource.RLIMIT_CPU, int(timeout) + 2)
    cap(resource.RLIMIT_FSIZE, 64 << 20)
    cap(resource.RLIMIT_CORE, 0)


if __name__ == "__main__":
    main()
