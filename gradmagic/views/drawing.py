"""DOT to SVG with Graphviz's ``dot`` program, bounded in time and memory.

A kept ``dot`` process (:class:`DotServer`) lays out graph after graph; when it cannot answer,
``dot`` runs once for the graph and says why. Every run is bounded by ``DOT_SECONDS`` and
``DOT_BYTES``; a failure is a :class:`DrawError` whose text is one sentence for the reader.
"""

from __future__ import annotations

import atexit
import os
import re
import select
import shutil
import subprocess
import threading
import time

MISSING_DOT = (
    "Graphviz's `dot` program was not found, so this static copy has no picture "
    "(the live view draws the graph in the browser without it); for the picture "
    "here too, install it with `apt-get install graphviz` (or `brew install "
    "graphviz`, `conda install graphviz`)."
)

DOT_SECONDS = 5.0  # wall-clock time Graphviz's dot may take for one picture
DOT_BYTES = 1 << 30  # memory (address space) a dot process may use


class DrawError(RuntimeError):
    """Graphviz's ``dot`` could not draw a graph; ``str()`` says why in one sentence."""


def _dot_argv(dot: str) -> list:
    """The command that runs ``dot -Tsvg`` with its memory bounded to ``DOT_BYTES``.

    A POSIX shell sets the limit and execs dot (``ulimit -v``), rather than a
    ``preexec_fn``: that would run Python in the forked child of a kernel with threads,
    and make the child a copy of the kernel's memory before exec.
    """
    if os.name == "posix" and os.path.exists("/bin/sh"):
        return ["/bin/sh", "-c", f'ulimit -v {DOT_BYTES >> 10} && exec "$0" -Tsvg', dot]
    return [dot, "-Tsvg"]


class DotServer:
    """One long-lived ``dot -Tsvg`` process that lays out graph after graph.

    Starting ``dot`` loads its plugins, which is most of a small graph's drawing;
    a process kept for the kernel's life reads each graph from its stdin and
    answers without that cost. Each graph is followed by an empty marker
    graph, so the answer's end is known (and a graph ``dot`` rejects gives only
    the marker's picture: :func:`svg` then runs ``dot`` once more to say why).
    The process is started on first use, with the ``dot`` found on ``PATH``
    then, and again if that changes, if it died, or in a forked child.
    A graph that takes longer than ``DOT_SECONDS`` ends the process (the next
    graph starts a fresh one); its memory is bounded by ``DOT_BYTES``.
    """

    TIMEOUT = DOT_SECONDS

    def __init__(self):
        self._lock = threading.Lock()
        self._proc = None
        self._key = None  # (pid, dot's path) the process was started for
        self._count = 0
        self._registered = False

    def _start(self, dot: str):
        self._stop()
        self._proc = subprocess.Popen(
            _dot_argv(dot), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self._key = (os.getpid(), dot)
        for pipe in (self._proc.stdin, self._proc.stdout):
            _widen(pipe)
        if not self._registered:
            atexit.register(self.close)
            self._registered = True

    def close(self):
        """End the process (at exit: it ends when its input closes)."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is None or not self._key or self._key[0] != os.getpid():
                return
            try:
                proc.stdin.close()
                proc.wait(timeout=2)
            except Exception:  # noqa: BLE001
                proc.kill()
                proc.wait()
            proc.stdout.close()

    def _stop(self):
        proc, self._proc = self._proc, None
        if proc is not None and self._key and self._key[0] == os.getpid():
            try:
                proc.kill()
                proc.wait(timeout=5)
                proc.stdin.close()
                proc.stdout.close()
            except Exception:  # noqa: BLE001
                pass

    def draw(self, source: str) -> str | None:
        """The SVG of ``source``, None when this way cannot give it (no ``dot``, Windows, dot
        rejected the graph or died: a one-shot ``dot`` then says why).

        Raises :class:`DrawError` when dot took longer than ``TIMEOUT`` (it is ended).
        """
        dot = shutil.which("dot")
        if dot is None or not hasattr(select, "poll"):  # (Windows: no poll() on pipes)
            return None
        with self._lock:
            try:
                if (
                    self._proc is None
                    or self._proc.poll() is not None
                    or self._key != (os.getpid(), dot)
                ):
                    self._start(dot)
                self._count += 1
                marker = f"gm_end_{os.getpid()}_{self._count}"
                proc, started = self._proc, time.monotonic()
                proc.stdin.write(source.encode() + f"\ndigraph {marker} {{}}\n".encode())
                proc.stdin.flush()
                out = self._read(proc, f"<!-- Title: {marker} ".encode(), started)
            except TimeoutError:
                self._stop()
                raise DrawError(_too_slow()) from None
            except Exception:  # noqa: BLE001 - a broken pipe, dot died: start afresh next time
                self._stop()
                return None
        text = out.decode("utf-8", errors="replace")
        start = text.find("<svg")
        if start < 0:  # dot rejected the graph: only the marker was drawn
            return None
        # dot names a later graph's group as a page of a document ("page0,1_graph0")
        return _PAGE_ID.sub('<g id="graph0"', text[start:], count=1)

    def _read(self, proc, marker: bytes, started: float) -> bytes:
        """Everything dot writes before ``marker``'s picture (then reads past that picture)."""
        fd = proc.stdout.fileno()
        poller = select.poll()  # (select() cannot wait on a descriptor past 1023)
        poller.register(fd, select.POLLIN)
        buf = bytearray()
        while True:
            at = buf.find(marker)
            if at >= 0 and buf.find(b"</svg>", at) >= 0:
                head = buf.rfind(b"<?xml", 0, at)
                return bytes(buf[: head if head >= 0 else at])
            left = started + self.TIMEOUT - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                raise TimeoutError("dot gave no answer")
            chunk = os.read(fd, PIPE_BYTES)
            if not chunk:
                raise EOFError("dot ended")
            buf += chunk


PIPE_BYTES = 1 << 20  # a pipe to or from dot holds a big graph or picture whole


def _widen(pipe) -> None:
    """Let ``pipe`` hold ``PIPE_BYTES`` (Linux): dot then writes a picture of a few hundred
    KB at once instead of waiting, a 64 KB piece at a time, for a busy kernel to read it."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError, ValueError):  # (another system, or a lower limit)
        pass


dot_process = DotServer()
_PAGE_ID = re.compile(r'<g id="page[^"]*_graph0"')


def _too_slow() -> str:
    return f"Graphviz's dot took more than {DOT_SECONDS:g} s to lay this graph out and was stopped"


def dot_once(source: str) -> str:
    """``dot -Tsvg`` run once for ``source``, bounded like the kept process.

    Raises ``graphviz.ExecutableNotFound`` without ``dot`` and :class:`DrawError` with a
    sentence for anything else.
    """
    dot = shutil.which("dot")
    if dot is None:
        import graphviz

        raise graphviz.ExecutableNotFound(["dot"])
    try:
        done = subprocess.run(
            _dot_argv(dot), input=source.encode(), capture_output=True, timeout=DOT_SECONDS
        )
    except subprocess.TimeoutExpired:
        raise DrawError(_too_slow()) from None
    except OSError as exc:
        raise DrawError(f"Graphviz's dot could not be started ({exc.strerror or exc})") from None
    if done.returncode == 0 and b"<svg" in done.stdout:
        out = done.stdout.decode("utf-8", errors="replace")
        return out[out.find("<svg") :]
    said = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    said = [line.strip() for line in said if line.strip()]
    if done.returncode < 0 or any("memory" in line.lower() for line in said):
        raise DrawError(
            f"Graphviz's dot ran out of its {DOT_BYTES >> 20:,} MB of memory on "
            "this graph and was stopped"
        )
    raise DrawError(
        "Graphviz's dot rejected the graph"
        + (f": {said[0][:300]}" if said else f" (exit status {done.returncode})")
    )


def svg(dot_source: str) -> str:
    """Render DOT to an ``<svg>`` element with Graphviz's ``dot`` program.

    Graphs go to one long-lived ``dot`` process (:class:`DotServer`); when it
    cannot answer, ``dot`` is run once for this graph, which says why. Every run is
    bounded: ``DOT_SECONDS`` of time, ``DOT_BYTES`` of memory.
    Raises ``graphviz.ExecutableNotFound`` when ``dot`` is not installed and
    :class:`DrawError` (a sentence) when it cannot draw the graph.
    """
    image = dot_process.draw(dot_source)
    if image is not None:
        return image
    return dot_once(dot_source)


def svg_data_uri(image: str) -> str:
    """An SVG as a ``data:`` URI: an ``<img>`` with it survives HTML sanitisers.

    Untrusted notebooks and GitHub strip inline ``<svg>`` (and print its text);
    they keep an image.
    """
    import base64

    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    if "xmlns=" not in image[:300]:
        image = image.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
    return "data:image/svg+xml;base64," + base64.b64encode((head + image).encode()).decode()


def draw_failure(exc) -> str:
    """What went wrong drawing a picture, as one sentence for the reader."""
    if isinstance(exc, DrawError):
        said = str(exc)
    else:
        said = f"Graphviz could not draw the graph ({type(exc).__name__}: {exc})"
        said = said if len(said) < 300 else said[:297] + "…"
    return said.rstrip(".") + "; the tables below still show the run."
