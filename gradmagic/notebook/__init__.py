"""The notebook side: the cell rewrite, the cell runtime, the magic's options and the magic.

The only layer that imports IPython.
"""

from ..analysis.options import READERS as _READERS
from .expect import parse_expect as _parse_expect

_READERS["expect"] = _parse_expect  # --expect's text (or a dict's name) read as answers
