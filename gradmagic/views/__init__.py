"""How a run is shown: DOT text, tables, the widget and the display bundle.

Imports :mod:`gradmagic.analysis` and :mod:`gradmagic.core`; the model never imports a view.
"""
