"""The live view's widgets: anywidget models and their messages with the browser.

:class:`LiveView` is an `anywidget <https://anywidget.dev>`_ whose front-end
(``static/widget.js``, built from ``js/src``) lays the graph out with the WebAssembly build
of Graphviz; :class:`VizLibrary` carries that build (``static/viz.js.gz``, from
``@viz-js/viz``) as bytes, once per kernel, for every view. No system ``dot`` and nothing
fetched at run time: it works wherever Jupyter widgets do (JupyterLab, Notebook 7, VS Code,
Colab). A view holds the run's payload as JSON and the run itself weakly; the tabs it defers
are made here when the browser first asks for them.
"""

from __future__ import annotations

import functools
import html
import json
import weakref
from pathlib import Path

import anywidget
import traitlets
from ipywidgets import widget_serialization

from ..analysis.groups import Grouping
from . import grouped

__all__ = ["LiveView", "VizLibrary", "library"]

STATIC = Path(__file__).with_name("static")


class VizLibrary(anywidget.AnyWidget):
    """Graphviz for the browser, gzipped (0.47 MB), sent once per kernel.

    Every LiveView refers to this one model, so the module is sent (and saved with widget
    state) once, not with every run. Bytes travel as a binary buffer; the browser gunzips
    them.
    """

    _esm = "export default { initialize() {} };"
    code = traitlets.Bytes(b"").tag(sync=True)


def _message(text: str) -> dict:
    return {"kind": "html", "payload": {"html": f"<p>{text}</p>"}}


_GONE = _message(
    "This run is no longer in memory (the kernel restarted, or <code>Out</code> and "
    "<code>gradmagic.last</code> no longer hold it): run the cell again to see this view."
)
_EMPTY = _message("This view has nothing to show for this run.")


class LiveView(anywidget.AnyWidget):
    """The live view of one run. ``selected`` (a node index, -1 for none), ``step`` (of the
    backward pass) and ``tab`` (the shown tab's id) follow the browser both ways."""

    _esm = STATIC / "widget.js"
    _css = STATIC / "widget.css"
    lib = traitlets.Instance(VizLibrary).tag(sync=True, **widget_serialization)
    # the payload as one JSON string: a displayed run keeps a few hundred kB, not megabytes
    # of small Python objects (ipywidgets keeps every widget alive)
    data = traitlets.Unicode("{}").tag(sync=True)
    # the deferred tabs made so far (tab id → tab), as JSON: kept with the widget's state, so
    # a saved notebook shows the tabs that were opened
    opened = traitlets.Unicode("{}").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    step = traitlets.Int(0).tag(sync=True)
    tab = traitlets.Unicode("").tag(sync=True)

    def __init__(self, *args, source=None, deferred=None, answer=None, grouped_view=None, **kwargs):
        """``source()`` gives the run or None (a weak reference: ``Out`` and
        ``gradmagic.last`` keep it, the view never does); ``deferred`` maps a tab id to
        ``make(trace) -> tab``; ``answer(run, message)`` answers the browser's other
        messages (see :meth:`ask`); ``grouped_view`` lists the groups the first picture
        opened, when it is drawn grouped by the code."""
        super().__init__(*args, **kwargs)
        self._source = source
        self._deferred = dict(deferred or {})
        self._answer = answer
        self._grouped = grouped_view
        if self._deferred or answer is not None or grouped_view is not None:
            self.on_msg(self._on_msg)

    def _on_msg(self, widget, content, buffers):
        if not isinstance(content, dict):
            return
        if content.get("type") == "open" and (self._deferred or self._grouped is not None):
            self.open_tab(str(content.get("tab", "")))
        elif content.get("type") == "close" and self._grouped is not None:
            self.close_group(str(content.get("group", "")))
        elif self._answer is not None:
            self.ask(content)

    def ask(self, content: dict) -> dict | None:
        """The answer to a message of the browser: a new payload (a dict with ``kind``)
        replaces ``data`` (the view draws itself again), anything else is sent back as a
        custom message. An error is an answer too: the kernel goes on."""
        run = self._source() if self._source is not None else None
        if run is None:
            reply = {"type": "error", "error": "This run is no longer in memory."}
        else:
            try:
                reply = self._answer(run, content)
            except Exception as exc:  # noqa: BLE001 - a view must not break the kernel
                reply = {"type": "error", "error": f"{type(exc).__name__}: {exc}"}
        if reply is None:
            return None
        if "kind" in reply:  # (the boxes are numbered anew: nothing stays selected)
            with self.hold_sync():
                self.selected, self.step = -1, 0
                self.data = json.dumps(reply, separators=(",", ":"))
        else:
            self.send(reply)
        return reply

    def open_group(self, gid: str) -> dict | None:
        """Open the group ``gid`` of a picture grouped by the code: the new picture's DOT
        and its opened groups go into ``opened["graph"]`` (kept with the widget's state, so a
        saved notebook shows the groups that were opened)."""
        state = self._grouped_state()
        if state is None:
            return None
        trace, graph, groups = state
        if gid in groups:
            return graph
        grouping = Grouping(trace)
        try:
            grouping.group(gid)
        except (ValueError, IndexError, KeyError):  # not a group of this run
            return None
        return self._redraw(trace, grouping, groups | {gid})

    def close_group(self, gid: str) -> dict | None:
        """Close the opened group ``gid`` and every group opened inside it: its frame is
        drawn as one box again."""
        state = self._grouped_state()
        if state is None:
            return None
        trace, graph, groups = state
        if gid not in groups:
            return graph
        grouping = Grouping(trace)
        frames = grouping.view(groups).frames  # opened id → (group, the frame around it)

        def within(g) -> bool:
            seen = set()
            while g is not None and g not in seen:
                if g == gid:
                    return True
                seen.add(g)
                g = frames.get(g, (None, None))[1]
            return False

        return self._redraw(trace, grouping, {g for g in groups if not within(g)})

    def _grouped_state(self):
        """(the run, the grouped picture now, its opened groups), or None when the view
        draws no grouped picture (or its run is gone)."""
        trace = self._source() if self._source is not None else None
        if self._grouped is None or trace is None:
            return None
        graph = json.loads(self.opened).get("graph") or {"id": "graph", "groups": self._grouped}
        return trace, graph, set(graph["groups"])

    def _redraw(self, trace, grouping, groups: set) -> dict:
        """The grouped picture with ``groups`` opened, kept in ``opened["graph"]``."""
        opened = json.loads(self.opened)
        graph = {
            "id": "graph",
            "groups": sorted(groups),
            "dot": grouped.grouped_dot(trace, grouping, groups),
        }
        opened["graph"] = graph
        self.opened = json.dumps(opened, separators=(",", ":"))
        return graph

    def open_tab(self, ident: str) -> dict | None:
        """Make the deferred tab ``ident`` (or ``node:<i>``, node i's explanation, from the
        maker ``node``) and add it to ``opened`` (once)."""
        kind, _, arg = ident.partition(":")
        if kind == "group":
            return self.open_group(arg)
        opened = json.loads(self.opened)
        if ident in opened:
            return opened[ident]
        make = self._deferred.get(ident)
        if make is None and kind == "node" and "node" in self._deferred:
            make = functools.partial(self._deferred["node"], node=arg)
        if make is None:
            return None
        trace = self._source() if self._source is not None else None
        if trace is None:
            tab = _GONE
        else:
            try:
                tab = make(trace) or _EMPTY
            except Exception as exc:  # noqa: BLE001 - a view must not break the kernel
                tab = _message(f"This view could not be made: {html.escape(str(exc))}")
            self._deferred.pop(ident, None)
        opened[ident] = {"id": ident, **tab}
        self.opened = json.dumps(opened, separators=(",", ":"))
        return opened[ident]


def keep_open(view) -> None:
    """Keep ``view``'s comm open when a front-end other than its own closes it.

    A browser page that is connected to the same kernel but shows no widgets (Notebook 7's
    file page, after its New menu started the notebook's kernel) answers every new widget's
    comm_open with a comm_close, for a target it does not know. The kernel then dropped the
    comm, and the page that does show the view sent its messages (a deferred tab asked for,
    a node selected) into nothing. Only the kernel side closes a view's comm (``close()``).
    """
    own = getattr(view, "comm", None)
    if own is None or not hasattr(own, "on_close"):
        return
    ref = weakref.ref(view)

    def reopen(msg):
        widget = ref()
        if widget is None or widget.comm is not own:
            return
        try:
            from comm import get_comm_manager

            own._closed = False
            get_comm_manager().register_comm(own)
        except Exception:  # noqa: BLE001 - another comm implementation: leave it closed
            pass

    own.on_close(reopen)


_LIBRARY: VizLibrary | None = None


def library() -> VizLibrary:
    """The kernel's one VizLibrary (made again if it was closed)."""
    global _LIBRARY
    if _LIBRARY is None or _LIBRARY.comm is None:
        _LIBRARY = VizLibrary(code=(STATIC / "viz.js.gz").read_bytes())  # gzipped by the build
        keep_open(_LIBRARY)
    return _LIBRARY
