"""Sphinx configuration of gradmagic's documentation site (``make docs``).

The pages are MyST Markdown (``docs/*.md``, picked up by the index's glob), the
tutorials are the demo notebooks (``docs/tutorials`` links to
``demo_notebooks/``), executed by myst-nb at every build, and the API reference
is made from the docstrings.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import gradmagic  # noqa: E402

project = "gradmagic"
author = "the gradmagic contributors"
copyright = "the gradmagic contributors"
release = gradmagic.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "gradmagic_docs",
]

exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}

myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3

# the tutorials run at every build, in a kernel of the Python that builds the site
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
# a page shows each run's static copy (the graph drawn by dot, the tables); the live view needs
# a kernel, which a static site does not have
nb_mime_priority_overrides = [
    ("html", "application/vnd.jupyter.widget-view+json", None),
]

autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "undoc-members": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True

html_theme = "pydata_sphinx_theme"
html_title = "gradmagic"
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 7,
    "show_toc_level": 2,
}
html_static_path = ["_static"]
html_css_files = ["gradmagic.css"]


def _other_pages(app, docname, source):
    """Add the pages of docs/ that the index does not list to its last table of contents, so a
    new docs/<topic>.md appears on the site without editing the index."""
    if docname != "index":
        return
    text = source[0]
    others = sorted(
        p.stem for p in HERE.glob("*.md") if p.stem != "index" and f"\n{p.stem}\n" not in text
    )
    if others:
        source[0] = (
            text
            + "\n```{toctree}\n:caption: More\n:maxdepth: 1\n\n"
            + "\n".join(others)
            + "\n```\n"
        )


def setup(app):
    app.connect("source-read", _other_pages)
