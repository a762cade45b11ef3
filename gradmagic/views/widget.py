"""The display of a run: the live view and its static copy.

:func:`mimebundle` is what IPython shows for a Trace: a static copy (an ``<img>`` of the SVG
and bounded tables, see :func:`gradmagic.views.render.static_html`) published as its own
output, then the live view (:func:`TraceWidget`: an anywidget holding
:func:`~gradmagic.views.tabs.payload` as JSON, see :mod:`gradmagic.views.live`) with a
one-line ``text/plain``. Where widgets run, the copy hides itself once the live view beside
it has drawn (its own style sheet, :func:`gradmagic.views.render.static_style`); an untrusted
notebook, ``nbconvert --to html`` with no network and a notebook reopened without widget
state show the copy. Each run appears once.

In the browser everything is interactive without the kernel, but what a big run makes on
demand (:data:`~gradmagic.views.tabs.DEFERRED` tabs, a node's derivatives):

* click a node (or pick it in the list): its path to the target is highlighted and the side
  panel shows its local derivatives and the gradient flowing into it (past
  :data:`~gradmagic.views.tabs.EAGER_NODES` nodes, asked of the kernel on its first
  selection); hovering a node shows its full value;
* pan (drag) and zoom (buttons, ``+``/``-``/``0`` keys, ctrl + wheel), fitted to the view at
  first but never below 10 px text;
* **Backward**: previous/next buttons, ``←``/``→`` keys and a slider step through the
  backward pass, with the running sum of each gradient;
* tables are bounded, scroll, and sort by a click on a column's header.
"""

from __future__ import annotations

import html
import secrets
import threading
import weakref
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from . import grouped, render, torchview
from ..analysis import torchcheck
from .live import STATIC
from .tabs import (  # noqa: F401 - the payload's names, importable from here as before
    EAGER_NODES,
    STEP_LIMIT,
    TABLE_ROWS,
    TERMS,
    _gradients_tab,
    _Letters,
    _payload,
    _template,
    payload,
)

__all__ = [
    "TraceWidget",
    "TorchWidget",
    "live_view",
    "mimebundle",
    "static_bundle",
    "payload",
    "WIDGET_MIME",
    "STATIC",
]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class SvgCache(OrderedDict):
    """DOT source → SVG, keeping the ``size`` most recently used drawings."""

    def __init__(self, size: int = 32):
        super().__init__()
        self.size = size

    def __getitem__(self, key):
        value = super().__getitem__(key)
        self.move_to_end(key)
        return value

    def get(self, key, default=None):
        return self[key] if key in self else default

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


def _classes():
    """(VizLibrary, LiveView), imported on first use: anywidget loads with the first display."""
    from .live import LiveView, VizLibrary

    return VizLibrary, LiveView


def TraceWidget(trace, report=None, *, expected=None, torch=None, run: str = "", **parts):
    """The live view of a run: a :class:`~gradmagic.views.live.LiveView` holding
    :func:`~gradmagic.views.tabs.payload` as JSON (not the trace).

    The tabs in :data:`~gradmagic.views.tabs.DEFERRED` are made when the browser first
    opens them (``opened``). ``parts`` (``summary``, ``fold``, ``dot``, ``gradients``) are
    what the caller already computed.
    """
    data, deferred = _payload(trace, report, expected=expected, torch=torch, run=run, **parts)
    groups = getattr(parts.get("summary"), "groups", None)
    return _live(
        trace,
        data,
        deferred=deferred,
        grouped_view=sorted(groups.opened_by_default()) if groups is not None else None,
    )


def TorchWidget(run, run_id: str = ""):
    """The live view of a PyTorch run (:func:`gradmagic.views.torchview.payload`); the
    browser asks the kernel later for a module opened or a tensor whole."""

    def reply(run, content):
        out = torchview.answer(run, content)
        if out is not None and "kind" in out:
            out["run"] = run_id
        return out

    return _live(run, dict(torchview.payload(run), run=run_id), answer=reply)


def _live(run, data: dict, **options):
    """A :class:`~gradmagic.views.live.LiveView` of ``data``, holding ``run`` weakly."""
    _, LiveView = _classes()
    from .live import keep_open, library

    source: Callable[[], Any]
    try:
        source = weakref.ref(run)
    except TypeError:  # a run that takes no weak references: kept
        source = lambda: run  # noqa: E731
    first = data["tabs"][0]["id"] if data["tabs"] else ""
    view = LiveView(
        lib=library(),
        data=json.dumps(data, separators=(",", ":")),
        tab=first,
        source=source,
        **options,
    )
    keep_open(view)
    return view


def live_view(run):
    """The live view of any run, its check and answers computed as the display does."""
    if _is_torch(run):
        return TorchWidget(run)
    report, expected, torch, _ = _analyses(run)
    return TraceWidget(run, report, expected=expected, torch=torch)


def _is_torch(run) -> bool:
    """A PyTorch run (told by its class's name: torch stays unimported)."""
    return type(run).__name__ == "TorchRun"


# =========================================================================== the bundle
def _analyses(trace):
    report, problems = None, []
    if not trace.options.no_check:
        try:
            report = trace.check()
        except Exception as exc:  # noqa: BLE001 - a display must not raise
            problems.append(f"The numerical check could not run: {exc}")
    expected = None
    mapping = trace.options.expect
    if isinstance(mapping, (Mapping, list, tuple)) and mapping:
        try:
            expected = trace.expect(mapping)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"The expected answers could not be compared: {exc}")
    if expected is None:  # a learner's own engine: its .grad judged as answers are
        expected = getattr(trace, "claims", None)
    torch = torchcheck.compare(trace) if trace.options.torch else None
    return report, expected, torch, problems


def static_bundle(
    trace,
    report=None,
    *,
    expected=None,
    torch=None,
    problems=(),
    run: str = "",
    cache=None,
    **parts,
) -> dict:
    """The run without a widget front-end: ``text/html`` (an SVG image, tables) and text."""
    return {
        "text/plain": "\n".join(
            [render.text(trace, report, expected=expected, torch=torch)]
            + [f"! {p}" for p in problems]
        ),
        "text/html": "".join(f"<p>⚠ {html.escape(p)}</p>" for p in problems)
        + render.static_html(
            trace,
            report,
            expected=expected,
            torch=torch,
            cache=SvgCache() if cache is None else cache,
            run=run,
            **parts,
        ),
    }


class _Drawing(SvgCache):
    """An SVG cache whose drawings ``dot`` is making while the rest of the display is built.

    Each graph is handed to Graphviz (:func:`gradmagic.views.render.svg`) on a thread of its
    own, which only waits on ``dot``'s pipes: the layout and the writing of a big DOT run
    beside the Python work instead of before or after it, and the static copy reads a
    picture when it needs it (a failure is raised then, and said there).
    """

    def __init__(self, *sources: str, known=None):
        super().__init__()
        self._threads: dict = {}
        self._made: dict = {}
        for source in sources:
            if known is not None and source in known:
                self[source] = known[source]
            else:
                self.draw(source)

    def draw(self, source: str) -> None:
        """Start drawing ``source``."""
        self._threads[source] = thread = threading.Thread(
            target=self._draw, args=(source,), daemon=True
        )
        thread.start()

    def _draw(self, source: str):
        try:
            self._made[source] = ("image", render.svg(source))
        except Exception as exc:  # noqa: BLE001 - raised where the picture is read
            self._made[source] = ("error", exc)

    def get(self, key, default=None):
        thread = self._threads.pop(key, None)
        if thread is not None:
            thread.join()
            kind, made = self._made.pop(key)
            if kind == "error":
                raise made
            self[key] = made
        return super().get(key, default)


def _graph(trace) -> dict:
    """The graph as DOT before the check: ``summary``, ``fold``, ``drawn``, ``ways`` (the
    directions to try), ``dot`` and ``drawing`` (``dot`` already drawing it)."""
    summary = grouped.summarise(trace)
    fold = render.Folded(trace)
    subset = summary.shown if summary else None
    drawn = render.drawn_nodes(trace, summary, fold)
    ways = render.directions(trace, drawn)
    known = SvgCache()
    picture = None  # the static copy's DOT when it is not the live view's
    if summary is not None and summary.dot is not None:  # grouped by the code: left to right
        dot, ways, picture = summary.dot, ("LR",), summary.static
    elif len(ways) > 1:  # a small graph: both directions drawn (a few ms), the fitting one kept
        dot = render.choose_dot(trace, None, subset=subset, fold=fold, cache=known)
    else:
        dot = render.to_dot(trace, None, subset=subset, fold=fold, rankdir=ways[0])
    own = trace.own_graph and render.own_dot(trace.own_graph)  # a learner's, as they draw it
    return {
        "summary": summary,
        "fold": fold,
        "drawn": drawn,
        "ways": ways,
        "dot": dot,
        "picture": picture or dot,
        "drawing": _Drawing(picture or dot, *filter(None, [own]), known=known),
    }


def _checked_graph(trace, report, graph) -> tuple:
    """(dot, dots, drawing) after the check: drawn again only if the check marks a drawn
    node; ``dots`` has a small graph in both directions (the live view picks one). The
    static copy's DOT, if made again, is ``graph["picture"]``."""
    summary, fold, ways = graph["summary"], graph["fold"], graph["ways"]
    subset = summary.shown if summary else None
    dot, drawing = graph["dot"], graph["drawing"]
    rankdir = "TB" if "rankdir=TB" in dot[:120] else "LR"
    marked = [i for i, status in render.statuses(report).items() if status in render.MARKED]
    if marked and summary is not None and summary.groups is not None:
        groups = summary.groups
        opened = groups.opened_by_default()
        dot = summary.dot = grouped.grouped_dot(trace, groups, opened, report)
        summary.static = grouped._static(trace, groups, opened, report)
        graph["picture"] = summary.static or dot
        drawing.draw(graph["picture"])
    elif marked and not set(marked).isdisjoint(graph["drawn"]):
        dot = graph["picture"] = render.to_dot(
            trace, report, subset=subset, fold=fold, rankdir=rankdir
        )
        drawing.draw(dot)
    if len(ways) < 2:
        return dot, None, drawing
    dots = {
        d: dot
        if d == rankdir
        else render.to_dot(trace, report, subset=subset, fold=fold, rankdir=d)
        for d in ways
    }
    return dot, dots, drawing


def mimebundle(trace, publish=None) -> dict:
    """The display of a run: the live view and its static copy.

    With ``publish(bundle)`` (what :mod:`gradmagic.views.display` passes: the
    shell's display publisher) the static copy (``text/html`` and the text a terminal
    prints) is shown first as its own output and the returned bundle holds the widget
    and a one-line ``text/plain`` (:func:`one_line`): that way nbconvert, an untrusted
    notebook or a notebook reopened without widget state shows the copy once, and the
    copy hides itself beside a drawn live view. (One output with the widget and the copy
    would not do: JupyterLab renders the widget's mimetype whenever it has a widget
    manager, and a notebook saved without widget state, its default, would reopen with
    "model not found" and no picture; nbconvert would pick the widget whenever the state
    was saved, and draw nothing offline.) Without ``publish`` one bundle holds all three.
    Without anywidget the static bundle is returned whole and nothing is published.

    The graph's DOT is made once; ``dot`` draws the static copy's picture in its
    own process while the check runs and the live view's payload is built. The
    picture is handed to ``dot`` before the check: the check's verdicts colour a
    node only when it fails (or sits on a kink), and only then is it drawn again.
    A PyTorch run shows the same way, from :mod:`gradmagic.views.torchview`.
    """
    if _is_torch(trace):
        return _torch_mimebundle(trace, publish)
    graph = _graph(trace)
    report, expected, torch, problems = _analyses(trace)
    dot, dots, drawing = _checked_graph(trace, report, graph)
    summary, fold = graph["summary"], graph["fold"]
    run = secrets.token_hex(8)  # marks the copy as one shown beside a live view
    # the Gradients table, made once for the live view and its static copy
    gradients = _gradients_tab(trace, report, {"fold": fold})
    try:
        view = TraceWidget(
            trace,
            report,
            expected=expected,
            torch=torch,
            run=run,
            summary=summary,
            fold=fold,
            dot=dot,
            dots=dots,
            gradients=gradients,
        )
    except ImportError:  # anywidget is not installed: the static view stands alone
        view = None
    static = static_bundle(
        trace,
        report,
        expected=expected,
        torch=torch,
        problems=problems,
        run=run,
        cache=drawing,
        summary=summary,
        fold=fold,
        dot=graph["picture"],
        gradients=gradients["payload"],
    )
    return _shown(static, view, publish, lambda: one_line(trace, report, expected))


def _torch_mimebundle(run, publish=None) -> dict:
    run_id = secrets.token_hex(8)
    static = torchview.mimebundle(run, mark_run=run_id)
    try:
        view = TorchWidget(run, run_id)
    except ImportError:  # anywidget is not installed: the static view stands alone
        view = None
    return _shown(static, view, publish, lambda: torchview.headline(run))


def _shown(static: dict, view, publish, line: Callable[[], str]) -> dict:
    """The bundle of a static copy and its live view: one bundle, or the copy published
    first and the widget with one line of text (see :func:`mimebundle`)."""
    if view is None:
        return static
    bundle = view._repr_mimebundle_()
    bundle = dict(bundle[0] if isinstance(bundle, tuple) else bundle)
    if publish is None:
        return {**static, WIDGET_MIME: bundle[WIDGET_MIME]}
    publish(static)
    return {WIDGET_MIME: bundle[WIDGET_MIME], "text/plain": line()}


def one_line(trace, report=None, expected=None) -> str:
    """The live view's ``text/plain``: the run in one line (its static copy, shown just before,
    has the tables), so an export without widget state does not show the run twice."""
    words = [render.headline(trace)]
    for verdict in (expected, report):
        if verdict is not None:
            words.append(f"{_mark(verdict)} {verdict.verdict}")
    return "  ·  ".join(words)


def _mark(verdict) -> str:
    """The report's own mark (:attr:`CheckReport.mark`): ✓ only where something independent
    agreed."""
    return verdict.mark
