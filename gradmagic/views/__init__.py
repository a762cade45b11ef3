"""How a run is shown: DOT text, tables, the widget and the display bundle.

Imports :mod:`gradmagic.analysis` and :mod:`gradmagic.core`; the model never imports a view.
Importing this package sets the one-way hook ``CheckReport.text`` (what ``str(report)`` prints);
:func:`gradmagic.views.display.register` teaches an IPython shell to show Traces and reports.
"""

from ..analysis.check import CheckReport
from .render import report_text
from . import teaching  # noqa: F401 - adds its section to render.static_html

CheckReport.text = report_text
