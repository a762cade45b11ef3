"""The fresh process an isolated :func:`gradmagic.grade` runs a cell in.

Started by the grader as ``python -I -c "...main()"`` with a clean environment,
an empty working directory and its own process group. ``main`` reads the job
(pickled by the grader) from stdin, points stdin and stdout at ``/dev/null``,
sets the memory limit, runs the cell with :func:`gradmagic.grade.collect` and,
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
