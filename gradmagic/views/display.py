"""How IPython shows gradmagic's objects: registered with the shell's display formatter.

The model (:class:`~gradmagic.analysis.trace.Trace`, :class:`~gradmagic.analysis.check.CheckReport`)
has no ``_repr_*_`` methods that import a view; :func:`register` tells a shell how to show them,
and :func:`unregister` takes that back (``%unload_ext gradmagic``).
"""

from __future__ import annotations

from ..analysis.check import CheckReport
from ..analysis.trace import Trace
from . import render
from .widget import mimebundle

__all__ = ["register", "unregister", "mimebundle"]


def _report_bundle(report) -> dict:
    card = f'<div class="gradmagic" style="{render.STATIC_CARD}">'
    return {
        "text/plain": render.report_text(report),
        "text/html": card + render.report_html(report) + "</div>",
    }


_FOR = (Trace, CheckReport)


def register(shell) -> None:
    """Show Traces and reports in ``shell`` (an IPython ``InteractiveShell``).

    A Trace shows as two outputs: its static copy (published through the
    shell's display publisher), then the live view (see
    :func:`gradmagic.views.widget.mimebundle`).
    """
    formatter = shell.display_formatter.mimebundle_formatter

    def publish(bundle):
        shell.display_pub.publish(data=bundle)

    formatter.for_type(Trace, lambda trace: _shown(mimebundle, trace, publish=publish))
    formatter.for_type(CheckReport, lambda report: _shown(_report_bundle, report))
    formatter.for_type_by_name(  # by name: torch stays unimported
        *_TORCH_RUN, lambda run: _shown(mimebundle, run, publish=publish)
    )


def _shown(make, value, *args, **kwargs) -> dict:
    """``make(value, ...)``, or, if making the view failed, one line saying so: a display
    shows the user no traceback of gradmagic's (the run itself has already finished)."""
    try:
        return make(value, *args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the view's own failure, never the cell's
        said = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return {
            "text/plain": f"{type(value).__name__}: its view could not be shown ({said}); "
            "the run itself finished."
        }


_TORCH_RUN = ("gradmagic.analysis.torchrun", "TorchRun")


def unregister(shell) -> None:
    """Undo :func:`register`."""
    formatter = shell.display_formatter.mimebundle_formatter
    for cls in _FOR:
        formatter.type_printers.pop(cls, None)
    formatter.deferred_printers.pop(_TORCH_RUN, None)
    for cls in list(formatter.type_printers):  # (once a TorchRun was shown, it moved here)
        if (cls.__module__, cls.__qualname__) == _TORCH_RUN:
            formatter.type_printers.pop(cls)
