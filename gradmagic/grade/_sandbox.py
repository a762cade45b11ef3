"""Starting the process that runs a graded cell, and reading what it sends back.

With the sandbox the cell's process is started under bubblewrap (``bwrap``): new PID,
network, IPC and UTS namespaces, a new session, read-only binds of the Python installation,
its environment and gradmagic only, a private size-limited ``/tmp``, a ``/proc`` of its own,
a minimal ``/dev``. Run by root, bwrap keeps the user namespace of the host and the child
drops to a uid no other process has (it gets CAP_SETUID/CAP_SETGID for that and nothing
else); run by anyone else, bwrap makes a user namespace where the cell is uid 65534 and
cannot make another. See ``docs/grading.md`` for the threat model.

The job goes in on stdin; the report and stderr come back over pipes the grader made, read
here with a size bound and against the deadline; nothing goes through a file.
"""

from __future__ import annotations

import functools
import os
import pickle
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_child.py")
MAX_REPORT = 16 << 20  # bytes: a larger report is a crash
MAX_ITEMS = 100_000  # JSON containers and items in a report: more is a crash
STDERR_TAIL = 4096  # bytes of the child's stderr kept (the last ones)
TMP_SIZE = 64 << 20  # bytes: the sandbox's /tmp
SHM_SIZE = 4 << 20  # bytes: its /dev/shm (multiprocessing's semaphores)
SANDBOX_UID = 65534  # the cell's uid inside a user namespace (nobody)
MEMORY_EXIT = 86  # the sandbox's exit status when its processes together passed the memory limit

ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
}


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here; ``grade(..., sandbox=False)`` runs without one."""


# =========================================================================== the sandbox
def unavailable() -> str | None:
    """Why no sandbox can be made on this machine, or None if one can (probed once)."""
    return _probe(os.geteuid() if hasattr(os, "geteuid") else -1)


@functools.lru_cache(maxsize=None)
def _probe(euid: int) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (bubblewrap); this is {sys.platform}"
    if _bwrap() is None:
        return (
            "bubblewrap is not installed (the `bwrap` command; Debian and Ubuntu: "
            "apt-get install bubblewrap)"
        )
    for path in _binds():
        if path == "/":
            return "the Python installation is at /, which the sandbox never exposes whole"
    try:
        done = subprocess.run(
            command(None) + [sys.executable, "-I", "-S", "-c", ""],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=ENV,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not be started: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip()[-300:]
        return (
            "bubblewrap cannot make a sandbox here (the kernel or the container may "
            f"forbid namespaces): {why or f'exit code {done.returncode}'}"
        )
    return None


@functools.lru_cache(maxsize=None)
def _bwrap() -> str | None:
    found = shutil.which("bwrap", path=os.environ.get("PATH", "") + os.pathsep + "/usr/bin")
    return os.path.realpath(found) if found else None


def package_folder() -> str:
    """The folder gradmagic is imported from (put first on the child's path)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


@functools.lru_cache(maxsize=None)
def _binds() -> tuple:
    """The host folders the child sees (read-only): ``/usr``, the Python installation, the
    environment (venv) it runs in, and gradmagic's own folder. Nothing else of the host:
    not the grader's script, its working directory, ``/etc``, ``/home``, ``/run``."""
    here = os.path.join(package_folder(), "gradmagic")
    wanted = {"/usr", here, os.path.dirname(os.path.realpath(sys.executable))}
    for prefix in (sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix):
        wanted.add(os.path.realpath(prefix))
    chosen: list[str] = []
    for path in sorted(wanted, key=len):
        if os.path.isdir(path) and not any(_under(path, p) for p in chosen):
            chosen.append(path)
    return tuple(chosen)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def command(uid: int | None) -> list:
    """The bwrap command line (the child's command goes after it).

    ``uid``: run by root, the uid the child drops to (None: it does not drop).
    """
    args = [_bwrap(), "--die-with-parent", "--new-session", "--as-pid-1"]
    args += _namespace_args()
    args += _binds_args()
    args += [
        "--ro-bind-try",
        "/etc/ld.so.cache",
        "/etc/ld.so.cache",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(SHM_SIZE),
        "--perms",
        "1777",
        "--tmpfs",
        "/dev/shm",
        "--chdir",
        "/tmp",
        "--setenv",
        "HOME",
        "/tmp",
        "--setenv",
        "TMPDIR",
        "/tmp",
        # in a user namespace the cell owns the sandbox's root and /dev (tmpfs of no
        # set size): read-only, so only /tmp and /dev/shm take writes
        "--remount-ro",
        "/dev",
        "--remount-ro",
        "/",
    ]
    return args


def _namespace_args() -> list:
    """bwrap's namespaces and identity: a user namespace of its own, or (run by root) none."""
    args = []
    if os.geteuid() == 0:
        # no user namespace: the child becomes a plain unprivileged user of the host,
        # which the process limit counts apart from everyone else
        args += [
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CAP_SETUID",
            "--cap-add",
            "CAP_SETGID",
        ]
    else:
        args += [
            "--unshare-all",
            "--unshare-user",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--disable-userns",
        ]
    return args


def _binds_args() -> list:
    """A private /tmp, then the host's folders the child sees, read-only."""
    args = []
    # the private /tmp first: a Python installation under the host's /tmp is bound over it
    args += ["--size", str(TMP_SIZE), "--perms", "1777", "--tmpfs", "/tmp"]
    ancestors = set()
    for path in _binds():
        args += ["--ro-bind", path, path]
        parent = os.path.dirname(path)
        while parent != "/":
            ancestors.add(parent)
            parent = os.path.dirname(parent)
    for folder in sorted(ancestors - {"/tmp"}):  # bwrap copies a host folder's mode (/root: 0700)
        args += ["--chmod", "0755", folder]
    for path in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path) and not any(_under(path, p) for p in _binds()):
            args += ["--ro-bind", path, path]
    return args


def filter_known() -> bool:
    """True if the sandbox's system-call filter knows this machine's architecture."""
    import platform

    return platform.machine() in ("x86_64", "aarch64")


# =========================================================================== the cgroup
def cgroup_parent() -> tuple | None:
    """(version, folder) where this process can make a memory cgroup for a sandbox (the
    kernel's own accounting: the cell's memory, its tmpfs and memfd pages, the kernel's
    memory it causes), or None (only root, or a user the machine delegated a cgroup to,
    can). Probed once, by making and removing one."""
    return _cgroup_parent(os.geteuid() if hasattr(os, "geteuid") else -1)


@functools.lru_cache(maxsize=None)
def _cgroup_parent(euid: int) -> tuple | None:
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):
            found.append((1, os.path.join("/sys/fs/cgroup/memory", path.lstrip("/"))))
        elif number == "0" and not controllers:
            found.append((2, os.path.join("/sys/fs/cgroup", path.lstrip("/"))))
    for version, folder in found:
        try:
            probe = make_cgroup((version, folder), 256 << 20)
        except OSError:
            continue
        remove_cgroup(probe)
        _sweep(folder)
        return version, folder
    return None


def _sweep(folder: str, age: float = 60.0) -> None:
    """Remove the sandboxes' cgroups a grader that was killed left behind: empty ones (the
    kernel refuses to remove any other) made more than ``age`` seconds ago."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.name.startswith("gradmagic-") and time.time() - entry.stat().st_mtime > age:
                os.rmdir(entry.path)
        except OSError:
            pass


def make_cgroup(parent: tuple, limit: int) -> tuple:
    """A new cgroup under ``parent`` whose processes together hold at most ``limit`` bytes
    (no swap); (version, folder). Raises OSError if it cannot be made."""
    version, base = parent
    folder = os.path.join(base, f"gradmagic-{secrets.token_hex(8)}")
    os.mkdir(folder)
    try:
        if version == 1:
            _write(folder, "memory.limit_in_bytes", limit)
            if os.path.exists(os.path.join(folder, "memory.memsw.limit_in_bytes")):
                _write(folder, "memory.memsw.limit_in_bytes", limit)
        else:
            _write(folder, "memory.max", limit)
            if os.path.exists(os.path.join(folder, "memory.swap.max")):
                _write(folder, "memory.swap.max", 0)
            _write(folder, "memory.oom.group", 1)
    except OSError:
        os.rmdir(folder)
        raise
    return version, folder


def _write(folder: str, name: str, value: int) -> None:
    with open(os.path.join(folder, name), "w", encoding="ascii") as f:
        f.write(str(value))


def cgroup_ran_out(cgroup: tuple) -> bool:
    """True if the kernel had to end a process of the cgroup for want of memory."""
    version, folder = cgroup
    name = "memory.oom_control" if version == 1 else "memory.events"
    try:
        with open(os.path.join(folder, name), encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
    except (OSError, ValueError):
        pass
    return False


def remove_cgroup(cgroup: tuple, wait: float = 2.0) -> None:
    """Remove the cgroup once its last process is gone (the kernel ends the sandbox's
    processes as its process 1 ends); never raises."""
    end = time.monotonic() + wait
    while True:
        try:
            os.rmdir(cgroup[1])
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > end:
                return
            time.sleep(0.01)


def fresh_uid() -> int:
    """A uid for one sandbox run by root: far above any real account's, random."""
    return 0x40000000 + secrets.randbelow(1 << 29)


# =========================================================================== one run
def run(job: dict, timeout, sandbox: bool) -> dict:
    """Run ``job`` in a child (in the sandbox or not); its report as plain data.

    Returns the child's report (a dict with ``status``), or ``{"status": "timeout" |
    "crash", ...}`` (``memory_total`` when the sandbox's processes together passed the
    memory limit); ``stderr`` holds the last of what the child wrote there.
    """
    work = None if sandbox else tempfile.mkdtemp(prefix="gradmagic-cell-")
    parent = cgroup_parent() if sandbox and job.get("memory") is not None else None
    cgroup = None
    if parent is not None:
        try:
            cgroup = make_cgroup(parent, int(job["memory"]) << 20)
        except OSError:  # (the report's sandbox says which bound held)
            pass
    report_r, report_w = os.pipe()
    proc = None
    try:
        job = dict(
            job,
            report_fd=report_w,
            sandbox=sandbox,
            path=package_folder(),
            memory_exit=MEMORY_EXIT,
            max_report=MAX_REPORT,
            uid=fresh_uid() if sandbox and os.geteuid() == 0 else None,
        )
        try:
            proc = _start(job, work, cgroup)
        finally:
            os.close(report_w)
        deadline = None if timeout is None else time.monotonic() + timeout
        raw = pickle.dumps(job)
        report, too_big, stderr, timed_out = _exchange(
            proc, len(raw).to_bytes(8, "big") + raw, report_r, deadline
        )
        if not timed_out:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        if proc is not None:
            _kill(proc)
        os.close(report_r)
        if work:
            remove_tree(work)
        out_of_memory = cgroup is not None and cgroup_ran_out(cgroup)
        if cgroup is not None:
            remove_cgroup(cgroup)
    report = None if too_big else report
    return _ended(proc.returncode, report, stderr, timed_out, sandbox, out_of_memory)


def _start(job: dict, work, cgroup):
    """The child's process: bwrap's (in ``cgroup``, when there is one), or a plain one."""
    env = dict(ENV, HOME=work, TMPDIR=work) if work else dict(ENV)
    prefix = command(job["uid"]) if job["sandbox"] else []
    if cgroup is not None:  # the shell joins the cgroup, then becomes bwrap
        procs = os.path.join(cgroup[1], "cgroup.procs")
        prefix = ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', procs] + prefix
    return subprocess.Popen(
        prefix + [sys.executable, "-I", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=work or "/",
        env=env,
        close_fds=True,
        pass_fds=(job["report_fd"],),
        start_new_session=True,
    )


def _ended(code, report, stderr: bytes, timed_out: bool, sandbox: bool, out_of_memory) -> dict:
    """What an ended child's run gives: its report (None: too big), or why there is none."""
    text = stderr.decode("utf-8", "replace").strip()
    if timed_out:
        return {"status": "timeout", "stderr": text}
    if sandbox and code is not None and code > 128:  # bwrap reports a signal as 128 + n
        code = -(code - 128)
    if sandbox and (code == MEMORY_EXIT or out_of_memory):
        return {"status": "crash", "memory_total": True, "returncode": code, "stderr": text}
    data = _parse(report) if code == 0 and report is not None else None
    if data is None:
        return {"status": "crash", "returncode": code, "stderr": text}
    if text:
        data["stderr"] = text
    return data


def _exchange(proc, job: bytes, report_fd: int, deadline):
    """Write the job, read the report and stderr until both end or the deadline passes.

    stdin stays open after the job: closing it (in :func:`_kill`) tells the sandbox's
    process 1 to end, which ends the sandbox even if bwrap's parent-death signal cannot
    reach it (a process whose uid changed).

    Returns (report bytes, whether the report was too big, stderr's tail, timed out).
    """
    out: dict = {"report": bytearray(), "stderr": b"", "too_big": False}
    timed_out = False
    sel = selectors.DefaultSelector()
    stdin, err = proc.stdin.fileno(), proc.stderr.fileno()
    for fd in (stdin, err, report_fd):
        os.set_blocking(fd, False)
    sel.register(stdin, selectors.EVENT_WRITE, "job")
    sel.register(err, selectors.EVENT_READ, "stderr")
    sel.register(report_fd, selectors.EVENT_READ, "report")
    sent = 0
    try:
        while any(key.data != "job" for key in sel.get_map().values()):
            wait = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if wait <= 0:
                timed_out = True
                break
            for key, _ in sel.select(wait):
                if key.data == "job":
                    try:
                        sent += os.write(key.fd, job[sent : sent + (1 << 16)])
                    except BlockingIOError:
                        continue
                    except OSError:  # it ended before reading the job
                        sent = len(job)
                    if sent >= len(job):
                        sel.unregister(key.fd)
                elif not _take(key.fd, key.data, out):
                    sel.unregister(key.fd)
            if proc.poll() is not None:
                # it ended; what it sent is in the pipes (a process it left behind may
                # hold them open: it is not waited for)
                for key in list(sel.get_map().values()):
                    if key.data != "job":
                        _take(key.fd, key.data, out, everything=True)
                break
    finally:
        sel.close()
    return bytes(out["report"]), out["too_big"], out["stderr"], timed_out


def _take(fd: int, what: str, out: dict, everything: bool = False) -> bool:
    """Read what ``fd`` holds now into ``out`` (bounded); False at its end or past the bound."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        if what == "stderr":
            out["stderr"] = (out["stderr"] + chunk)[-STDERR_TAIL:]
        elif len(out["report"]) + len(chunk) > MAX_REPORT:
            out["too_big"] = True
            return False
        else:
            out["report"] += chunk
        if not everything:
            return True


def _parse(raw: bytes):
    """The report as JSON data, or None. Parsed only if it holds few enough containers and
    items that parsing takes memory near its size (arrays come as base64 text)."""
    import json

    if raw.count(b"[") + raw.count(b"{") + raw.count(b",") > MAX_ITEMS:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _kill(proc) -> None:
    """End the child: close its stdin (the sandbox's process 1 then ends, and with it
    everything in the sandbox), kill its process group (bwrap, or the plain child and what
    stayed in its group); reap it; close its pipes."""
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process in uninterruptible sleep
        pass
    for stream in (proc.stdin, proc.stderr):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


def remove_tree(root: str) -> None:
    """Remove a folder and everything in it, however deep, without following links; never
    raises (what cannot be removed stays).

    It walks down by folder descriptors, one open at a time, and back up through ``..``,
    so neither the path length nor the depth nor the number of open files limits it.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(root, flags)
    except OSError:
        return
    names, stuck = [], set[int]()
    try:
        while True:
            down = _empty(fd, stuck)
            if down is not None:
                try:
                    os.chmod(down[0], 0o700, dir_fd=fd)  # a folder made unreadable
                    deeper = os.open(down[0], flags, dir_fd=fd)
                except OSError:
                    stuck.add(down[1])
                    continue
                os.close(fd)
                fd = deeper
                names.append(down)
                continue
            if not names:
                break
            name, key = names.pop()
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = up
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                stuck.add(key)
    except Exception:  # noqa: BLE001 - clean-up never raises
        pass
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        os.rmdir(root)
    except OSError:
        pass


def _empty(fd: int, stuck: set):
    """Remove the files of the open folder ``fd``; (name, inode) of a folder in it to go
    down into (not one of ``stuck``), or None."""
    down = None
    try:
        entries = list(os.scandir(fd))
    except OSError:
        entries = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                key = entry.inode()
                if key not in stuck and down is None:
                    down = entry.name, key
            else:
                os.unlink(entry.name, dir_fd=fd)
        except OSError:
            continue
    return down
