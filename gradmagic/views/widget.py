"""The interactive view of a run, and the display bundle ``%%autograd`` shows.

:class:`TraceWidget` is an ipywidgets box over a :class:`gradmagic.analysis.trace.Trace`:

* a node picker: choosing a node highlights it and its path to the target
  and explains its local derivatives and the gradient flowing into it;
* **Answers** (only with ``--expect``, and then the tab shown first): each
  expected gradient or value beside the engine's, with ✓/✗ and a verdict;
* **Graph**: the Graphviz SVG of the run (a summary past ``max_nodes``);
* **Gradients**: every node's label, op, data and grad, sortable;
* **Check**: the numerical check, worst rows first (with ``--torch``, a
  PyTorch column too);
* **Backward**: a slider stepping through the backward pass in reverse
  topological order, showing the gradients known so far.

:func:`mimebundle` is what ``Trace._repr_mimebundle_`` returns: the widget's
view plus a static ``text/html`` (SVG and tables) and ``text/plain``, so
nbconvert, GitHub and terminal IPython show the run without a widget frontend.

The widget computes no gradients of its own: the Backward tab only adds up
the recorded products ``grad(child) × ∂child/∂node`` (each node's ``local``).
"""
from __future__ import annotations

import html
from collections import OrderedDict
from collections.abc import Mapping

from . import render

from ..analysis import torchcheck
from ..analysis.graph import backward_steps, children_of, grads_at, path_to_target

__all__ = ["TraceWidget", "mimebundle", "WIDGET_MIME"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
TAB_TITLES = ("Graph", "Gradients", "Check", "Backward")
NONE = -1  # the node picker's "no node" value


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


def _grad_text(grads, state) -> list:
    out = []
    for g, s in zip(grads, state):
        if s == "unknown":
            out.append("?")
        else:
            out.append(render.fmt(g, shape=False) + (" so far" if s == "partial" else ""))
    return out


# =========================================================================== the widget
def _widgets():
    import ipywidgets
    return ipywidgets


class TraceWidget:
    """An ipywidgets view over a Trace: ``TraceWidget(trace).box`` is the widget.

    Displaying a TraceWidget displays its box. ``report`` is the run's
    CheckReport (None when the check was skipped); ``expected`` an optional
    :func:`gradmagic.analysis.check.expect` report, which adds the Answers tab (first,
    and selected); ``torch`` an optional
    :class:`gradmagic.analysis.torchcheck.TorchComparison` for the Check tab; ``cache``
    maps DOT to SVG and may be shared with the static view so each drawing is
    made once.
    """

    def __init__(self, trace, report=None, *, expected=None, torch=None, cache=None):
        w = _widgets()
        self.trace = trace
        self.report = report
        self.expected = expected
        self.torch = torch
        self.cache = SvgCache() if cache is None else cache
        self.summary = render.summarise(trace)
        self.node_children = children_of(trace)
        self.steps = backward_steps(trace)
        self.selected: int | None = None

        self.picker = w.Dropdown(options=self._picker_options(), value=NONE,
                                 description="Node:", layout=w.Layout(width="28em"))
        self.info = w.HTML()
        self.graph = w.HTML()
        self.sort = w.Dropdown(options=[(text, key) for key, text in render.SORT_KEYS.items()],
                               value="graph", description="Sort by:")
        self.table = w.HTML()
        self.check_view = w.HTML()
        self.slider = w.IntSlider(min=0, max=len(self.steps), value=0, step=1,
                                  description="Step:", continuous_update=False,
                                  layout=w.Layout(width="40em"))
        self.step_info = w.HTML()
        self.backward_graph = w.HTML()
        pages = [w.VBox([self.graph]), w.VBox([self.sort, self.table]),
                 w.VBox([self.check_view]),
                 w.VBox([self.slider, self.step_info, self.backward_graph])]
        self.titles = TAB_TITLES
        self.answers = None  # the Answers tab's page, with expected answers
        if expected is not None:
            self.answers = w.HTML()
            pages.insert(0, w.VBox([self.answers]))
            self.titles = ("Answers",) + TAB_TITLES
        self.tabs = w.Tab(children=pages, selected_index=0)
        self.tabs.titles = self.titles
        notes = "".join(f"<br>⚠ {html.escape(n)}" for n in render.run_notes(trace, report))
        self.box = w.VBox([w.HTML(f"<b>{html.escape(render.headline(trace))}</b>{notes}"),
                           self.picker, self.info, self.tabs])

        self.picker.observe(lambda change: self.select(_picked(change["new"])), names="value")
        self.sort.observe(lambda change: self.show_table(), names="value")
        self.slider.observe(lambda change: self.show_step(), names="value")
        self.tabs.observe(lambda change: self._tab_changed(), names="selected_index")
        self.show_graph()
        self.show_table()
        self.show_check()
        self.show_answers()
        self._backward_drawn = False

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)

    def _picker_options(self) -> list:
        nodes = self.trace.nodes
        order = render.node_order(self.trace)
        if self.summary is not None:
            shown = set(self.summary.shown)
            order = [i for i in order if i in shown]
        options = [("(none)", NONE)]
        for i in order:
            node = nodes[i]
            what = render.op_symbol(self.trace, i) if node.op else "leaf"
            options.append((f"{node.name}  [{what}, #{i}]", i))
        return options

    def _draw(self, **dot_options) -> str:
        return render.graph_html(self.trace, self.report, cache=self.cache,
                                 summary=self.summary, **dot_options)

    # ------------------------------------------------------------------ tabs
    def show_graph(self) -> None:
        """Redraw the Graph tab (with the picked node's path highlighted)."""
        if self.selected is None:
            self.graph.value = self._draw()
        else:
            self.graph.value = self._draw(
                path=path_to_target(self.trace, self.selected, self.node_children),
                current=self.selected)

    def show_table(self) -> None:
        order = render.node_order(self.trace, self.sort.value)
        self.table.value = render.nodes_table_html(self.trace, order, self.report)

    def show_check(self) -> None:
        if self.report is not None:
            self.check_view.value = render.report_html(self.report, torch=self.torch)
            return
        skipped = ("<p>The numerical check was skipped (<code>--no-check</code>); "
                   "run <code>trace.check()</code> to compute it.</p>")
        self.check_view.value = skipped + (
            render.torch_html(self.torch) if self.torch is not None else "")

    def show_answers(self) -> None:
        if self.answers is not None:
            self.answers.value = render.answers_html(self.expected)

    def _tab_changed(self) -> None:
        if self.tabs.selected_index == self.titles.index("Backward") and not self._backward_drawn:
            self.show_step()

    def show_step(self) -> None:
        """Redraw the Backward tab at the slider's step."""
        self._backward_drawn = True
        step = self.slider.value
        trace, nodes = self.trace, self.trace.nodes
        grads, state = grads_at(trace, step, self.steps, self.node_children)
        current = self.steps[step - 1] if step else trace.target.index
        node = nodes[current]
        self.step_info.value = self._step_text(step, node)
        self.backward_graph.value = self._draw(
            grad_text=_grad_text(grads, state), current=current,
            path=set(node.parents) | {current} if step else ())

    def _step_text(self, step: int, node) -> str:
        total = len(self.steps)
        if step == 0:
            return (f"<p>Start: the target {_code(node.name)} gets the seed gradient "
                    f"{_code(render.fmt(node.grad))}. Move the slider to process the "
                    f"{total} operation node{'s' if total != 1 else ''} one at a time, "
                    "from the target back to the leaves.</p>")
        terms = []
        for p, local in zip(node.parents, node.local or ()):
            parent = self.trace.nodes[p]
            terms.append(f"{_code(parent.name)} += {render.fmt(node.grad)} × "
                         f"{render.fmt(local)} = {render.fmt(node.grad * local)}")
        rule = getattr(render.op_entry(self.trace, node.index), "rule", "")
        return (f"<p>Step {step} of {total}: {_code(node.name)} "
                f"({html.escape(render.op_symbol(self.trace, node.index))}) has its final gradient "
                f"{_code(render.fmt(node.grad))} and passes it to its inputs"
                + (": " + "; ".join(terms) if terms else "") + "."
                + (f"<br><small>{html.escape(rule)}</small>" if rule else "") + "</p>")

    # ------------------------------------------------------------------ the node picker
    def select(self, index: int | None) -> None:
        """Highlight a node (None clears) and explain its gradient."""
        self.selected = index
        value = NONE if index is None else index
        if self.picker.value != value:
            self.picker.value = value
        self.info.value = "" if index is None else self.explain(index)
        self.show_graph()

    def explain(self, index: int) -> str:
        """The picked node's local derivatives and the gradient flowing into it."""
        nodes = self.trace.nodes
        node = nodes[index]
        lines = [f"<b>{_code(node.name)}</b> (node #{index}): data "
                 f"{_code(render.fmt(node.data, 6))}, grad {_code(render.fmt(node.grad, 6))}"]
        if node.parents:
            entry = render.op_entry(self.trace, index)
            local = node.local
            if local is None:
                lines.append(f"Local derivative: the Jacobian of {html.escape(node.op)} "
                             "(not recorded for tensor ops).")
            else:
                parts = [f"∂{_code(node.name)}/∂{_code(nodes[p].name)} = "
                         f"{_code(render.fmt(d, 6))}" for p, d in zip(node.parents, local)]
                lines.append("Local derivatives: " + ", ".join(parts))
            if entry is not None:
                lines.append(f"<small>{html.escape(entry.rule)}</small>")
        else:
            lines.append("A leaf: no local derivatives.")
        if index == self.trace.target.index:
            lines.append(f"The target: its gradient is the seed {render.fmt(node.grad)}.")
        else:
            terms = []
            for c in dict.fromkeys(self.node_children[index]):
                child = nodes[c]
                if child.local is None:
                    terms.append(f"from {_code(child.name)} (tensor op)")
                    continue
                for p, d in zip(child.parents, child.local):
                    if p == index:
                        terms.append(f"{render.fmt(child.grad, 6)} × {render.fmt(d, 6)} "
                                     f"from {_code(child.name)}")
            lines.append("Incoming gradient: " + " + ".join(terms)
                         + f" = {_code(render.fmt(node.grad, 6))}")
        return "<p>" + "<br>".join(lines) + "</p>"


def _picked(value):
    return None if value == NONE else value


def _code(text: str) -> str:
    return f"<code>{html.escape(str(text))}</code>"


# =========================================================================== the bundle
def mimebundle(trace) -> dict:
    """The display of a run: widget view, static HTML and plain text."""
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
    torch = torchcheck.compare(trace) if trace.options.torch else None
    cache = SvgCache()
    bundle = {
        "text/plain": "\n".join([render.text(trace, report, expected=expected, torch=torch)]
                                + [f"! {p}" for p in problems]),
        "text/html": "".join(f"<p>⚠ {html.escape(p)}</p>" for p in problems)
        + render.static_html(trace, report, expected=expected, torch=torch, cache=cache),
    }
    try:
        view = TraceWidget(trace, report, expected=expected, torch=torch, cache=cache)
    except ImportError:  # ipywidgets is not installed: the static views stand alone
        return bundle
    bundle[WIDGET_MIME] = view.box._repr_mimebundle_()[WIDGET_MIME]
    return bundle
