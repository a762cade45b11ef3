"""The process an isolated :func:`gradmagic.grade` runs a cell in.

Started by the grader as ``python -I .../_child.py`` (inside bubblewrap, or as a plain
child with ``sandbox=False``), with a clean environment. It reads the job (pickled by the
grader: the source, the names asked about, the target, the limits, the number of the
report pipe; never the expected answers) from stdin, then:

* in the sandbox it is process 1 of a PID namespace of its own. It drops to the job's
  unprivileged uid if it was started as root, makes itself non-dumpable (the cell, of
  the same uid, cannot trace it or open its memory or descriptors), sets the limits,
  forks the *worker* that runs the cell, and stays behind as the reaper: it reaps
  whatever the cell leaves behind, ends the sandbox if the memory of all its processes
  together passes the limit, and exits as soon as the worker has ended or the grader
  closes stdin, after passing the worker's report on to the grader's pipe. Process 1
  ending makes the kernel end every other process of the namespace, so nothing the
  cell started outlives it;
* without the sandbox it is the worker itself.

The worker points stdin and stdout at ``/dev/null``, imports gradmagic, runs the cell with
:func:`gradmagic.grade.collect` and, once the cell has finished, puts the plain-data report
into memory it shares with process 1 (without the sandbox: writes it to the report pipe);
then it ends with ``os._exit(0)`` so nothing the cell registered (atexit hooks, threads,
finalizers) runs after it. Any failure of its own ends it with a non-zero status; the
grader then reports a crash.

This file imports only the standard library before the worker forks.
"""

from __future__ import annotations

import os
import pickle
import sys

_POLL = 0.05  # seconds between two looks at the sandbox's memory


def main() -> None:
    job = pickle.loads(_read_job(0))
    report = job["report_fd"]
    if not job["sandbox"]:
        _limit(job["timeout"], None)
        _work(job, report)
    if job["uid"] is not None:
        _become(job["uid"])
    _dumpable(False)  # the cell cannot trace process 1 or open its memory or descriptors
    _limit(job["timeout"], job["processes"])
    _cap_files()
    _filter()
    import mmap
    import signal

    # process 1 of a PID namespace gets no signal from inside it unless it set a handler:
    # Python's SIGINT handler goes, so no signal of the cell's can interrupt the reaper
    signal.signal(signal.SIGINT, signal.SIG_DFL)

    # the worker's report: memory shared with process 1, which no closed descriptor loses
    shared = mmap.mmap(-1, job["max_report"])
    wake_r, wake_w = os.pipe()
    signal.signal(signal.SIGCHLD, lambda *args: None)
    worker = os.fork()
    if worker == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in (report, wake_r, wake_w):
            os.close(fd)
        _dumpable(True)  # process 1 reads its memory use in /proc
        _work(job, shared)
    quiet = os.open(os.devnull, os.O_WRONLY)  # nothing of process 1's reaches the report
    os.dup2(quiet, 2)
    os.close(quiet)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    code = _reap(worker, job["memory"], job["memory_exit"], wake_r)
    if code == 0:
        _send(shared, report)
    os._exit(code)


def _read_job(fd: int) -> bytes:
    """The job: its length (8 bytes), then its bytes. The grader keeps the pipe open after
    it, and closes it when it is done with the run."""
    head = _read_exactly(fd, 8)
    return _read_exactly(fd, int.from_bytes(head, "big"))


def _read_exactly(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the job ended early")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _become(uid: int) -> None:
    """Started as root (with only CAP_SETUID and CAP_SETGID): become ``uid``, a user of its own.

    A uid no other process has makes the process limit count this sandbox's processes
    alone, and leaves the cell without any capability or any file of its own outside the
    sandbox.
    """
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _dumpable(flag: bool) -> None:
    import ctypes

    ctypes.CDLL(None).prctl(4, int(flag), 0, 0, 0)  # PR_SET_DUMPABLE


def _limit(timeout, processes) -> None:
    """Limits the cell cannot raise again: CPU time, file size, core dumps, and in the
    sandbox the number of processes (threads count too)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows: the grader's time limit only
        return
    if timeout is not None:  # a backstop for processes that leave the group
        _cap(resource.RLIMIT_CPU, int(timeout) + 2)
    if processes is not None:
        _cap(resource.RLIMIT_NPROC, int(processes))
    _cap(resource.RLIMIT_FSIZE, 64 << 20)
    _cap(resource.RLIMIT_CORE, 0)


def _cap_files() -> None:
    """At most ``_FILES`` open descriptors: with the system-call filter's fixed socket buffers,
    a bound on the memory that sockets can hold in the kernel."""
    try:
        import resource
    except ImportError:  # pragma: no cover
        return
    _cap(resource.RLIMIT_NOFILE, _FILES)


# ------------------------------------------------------------------ the system-call filter
# per architecture: (AUDIT_ARCH, the system calls refused with EPERM (the kernel's keyrings,
# namespaces, io_uring, bpf, userfaultfd, perf), with ENOSYS (clone3, which glibc then does
# with clone; memfd_create, memory no tmpfs size bounds), unshare, clone, socket,
# socketpair, setsockopt)
_SYSCALLS = {
    "x86_64": (0xC000003E, (248, 249, 250, 308, 425, 321, 323, 298, 447), (435, 319)),
    "aarch64": (0xC00000B7, (217, 218, 219, 268, 425, 280, 282, 241, 447), (435, 279)),
}
_CALLS = {"x86_64": (272, 56, 41, 53, 54), "aarch64": (97, 220, 198, 199, 208)}
_FILES = 256


def _filter() -> bool:
    """Install the sandbox's seccomp filter (inherited by everything the cell starts); False
    on a machine it does not know (the rest of the sandbox still holds).

    Refused: new user namespaces (``unshare``/``clone`` with ``CLONE_NEWUSER``), the
    kernel's keyrings, ``setns``, ``io_uring``, ``bpf``, ``userfaultfd``, ``perf_event_open``,
    ``memfd_create`` and ``memfd_secret``; sockets other than Unix ones; changing a socket's
    buffer sizes.
    """
    import ctypes
    import platform

    machine = platform.machine()
    if machine not in _SYSCALLS:
        return False
    program = _program(*_SYSCALLS[machine], *_CALLS[machine], x32=machine == "x86_64")
    raw = b"".join(
        code.to_bytes(2, "little") + bytes([jt, jf]) + k.to_bytes(4, "little")
        for code, jt, jf, k in program
    )
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    fprog = Program(len(program), ctypes.addressof(buffer))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    return libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, FILTER


def _program(arch, refused, missing, unshare, clone, socket, socketpair, setsockopt, x32):
    """The filter as (code, jt, jf, k) BPF instructions, jumps resolved from labels."""
    ld, jeq, jset, jge, ret = 0x20, 0x15, 0x45, 0x35, 0x06
    allow, errno = 0x7FFF0000, 0x00050000
    lines: list = [(ld, 0, 0, 4), (jeq, 0, "eperm", arch), (ld, 0, 0, 0)]
    if x32:
        lines.append((jge, "eperm", 0, 0x40000000))
    lines += [(jeq, "eperm", 0, nr) for nr in refused]
    lines += [(jeq, "enosys", 0, nr) for nr in missing]
    lines += [(jeq, "ns", 0, unshare), (jeq, "ns", 0, clone)]
    lines += [(jeq, "unix", 0, socket), (jeq, "unix", 0, socketpair), (jeq, "opt", 0, setsockopt)]
    lines += [(ret, 0, 0, allow)]
    lines += ["ns", (ld, 0, 0, 16), (jset, "eperm", 0, 0x10000000), (ret, 0, 0, allow)]
    lines += ["unix", (ld, 0, 0, 16), (jeq, 0, 1, 1), (ret, 0, 0, allow)]
    lines += [(ret, 0, 0, errno | 97)]  # EAFNOSUPPORT
    lines += ["opt", (ld, 0, 0, 24), (jeq, 0, "allow", 1), (ld, 0, 0, 32)]
    lines += [(jeq, "eperm", 0, n) for n in (7, 8, 32, 33)]  # SO_SNDBUF, SO_RCVBUF, *FORCE
    lines += ["allow", (ret, 0, 0, allow), "eperm", (ret, 0, 0, errno | 1)]
    lines += ["enosys", (ret, 0, 0, errno | 38)]
    where, n = {}, 0
    for line in lines:
        if isinstance(line, str):
            where[line] = n
        else:
            n += 1
    program = [line for line in lines if not isinstance(line, str)]
    return [
        (code, *(where[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)), k)
        for i, (code, jt, jf, k) in enumerate(program)
    ]


def _limit_memory(memory) -> None:
    """The address space of one process (set once gradmagic and numpy are imported)."""
    if memory is not None:
        try:
            import resource
        except ImportError:  # pragma: no cover
            return
        _cap(resource.RLIMIT_AS, int(memory) << 20)


def _cap(which, value) -> None:
    """Set both limits of ``which`` to ``value`` (never above a hard limit already set)."""
    import resource

    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _reap(worker: int, memory, memory_exit: int, wake: int) -> int:
    """Process 1: reap every child until the worker ends; its exit status as ours. It also
    ends when the grader closes the job pipe (stdin): the grader is done with the run (a
    timeout), or gone.

    Every ``_POLL`` seconds it adds up the memory of the namespace's processes; past the
    limit it returns ``memory_exit`` at once (the kernel then ends them all).
    """
    import select

    limit = None if memory is None else int(memory) << 20
    os.set_blocking(wake, False)
    while True:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 1
            if pid == 0:
                break
            if pid == worker:
                if os.WIFEXITED(status):
                    code = os.WEXITSTATUS(status)
                    return 1 if code == memory_exit else code
                return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 1
        if limit is not None and _memory_used() > limit:
            return memory_exit
        ready = select.select([wake, 0], [], [], _POLL)[0]
        if 0 in ready:
            return 1
        _drain(wake)


def _send(shared, report: int) -> None:
    """Pass the report the worker left in ``shared`` (its length, then its bytes) on to the
    grader's pipe; nothing if it does not fit (the grader then says crash)."""
    size = int.from_bytes(shared[:8], "big")
    if size > len(shared) - 8:
        return
    view = memoryview(shared)[8 : 8 + size]
    try:
        while view:
            view = view[os.write(report, view) :]
    except OSError:  # the grader stopped reading
        pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


def _memory_used() -> int:
    """Bytes of memory the namespace's processes hold together (their proportional share of
    shared pages, so that forked copies are not counted twice), and what the sandbox's
    tmpfs hold: their files' bytes, and about 1 KiB of the kernel's memory per file or
    folder."""
    total = 0
    for folder in ("/tmp", "/dev/shm"):
        try:
            fs = os.statvfs(folder)
        except OSError:
            continue
        total += (fs.f_blocks - fs.f_bfree) * fs.f_frsize + ((fs.f_files - fs.f_ffree) << 10)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            total += _process_memory(entry)
    return total


def _process_memory(pid: str) -> int:
    """A process's proportional memory (PSS); its resident memory where the PSS cannot be
    read (a process that made itself non-dumpable); 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # gone meanwhile, or a kernel thread
        return 0


def _work(job: dict, out) -> None:
    """The worker: run the cell and send its report (to the pipe ``out``, or into the
    shared memory ``out`` in the sandbox); never returns."""
    try:
        sys.path.insert(0, job["path"])  # the folder gradmagic is imported from in the grader
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        if job["sandbox"]:  # a working folder of its own in the private /tmp
            os.mkdir("/tmp/cell", 0o700)
            os.chdir("/tmp/cell")
        # everything of ours is imported before the cell
        from gradmagic.grade import collect
        import gradmagic.notebook.magic  # noqa: F401
        import json

        dumps, write, exit_ = json.dumps, os.write, os._exit
        _limit_memory(job["memory"])
        ns = {"__name__": "__main__"}
        if job["namespace"] is not None:
            ns.update(pickle.loads(job["namespace"]))
        data = collect(
            job["source"], job["names"], ns, job["target"], restore=True, files=job["files"]
        )
        raw = dumps(data).encode("utf-8")
        if isinstance(out, int):
            while raw:
                raw = raw[write(out, raw) :]
        elif len(raw) + 8 <= len(out):
            out[8 : 8 + len(raw)] = raw
            out[:8] = len(raw).to_bytes(8, "big")
        else:
            exit_(71)  # too big a report
    except BaseException:  # noqa: BLE001 - our own failure: no report, the grader says crash
        os._exit(70)
    exit_(0)


if __name__ == "__main__":
    main()
