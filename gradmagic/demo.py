"""Run the demo notebooks headless: ``python -m gradmagic.demo [--out build] [NOTEBOOK ...]``.

Each notebook is executed top to bottom in a fresh kernel (with nbclient) and
written as HTML (with nbconvert) under the output folder, so the whole tour can
be checked, or read in a browser, without a JupyterLab session. A cell that
raises stops that notebook and the command exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "demo_notebooks"


def execute(path: Path, timeout: int = 600):
    """Execute one notebook in a fresh kernel; returns the executed notebook."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        # the kernel runs on loopback for this one notebook: its warning about TCP without
        # encryption says nothing to act on here
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    client.execute()
    return nb


def to_html(nb) -> str:
    """The notebook as a standalone HTML page that reads offline.

    With widget state in the notebook, nbconvert would render each widget with
    a widget manager loaded from a CDN; without it, it shows the static
    ``text/html`` that every gradmagic display carries. The page is for
    reading anywhere, so the state is left out of this copy.
    """
    import copy

    from nbconvert import HTMLExporter

    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    body, _ = HTMLExporter().from_notebook_node(nb)
    return body


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gradmagic.demo",
        description="Execute gradmagic's demo notebooks headless and write them as HTML.",
    )
    parser.add_argument(
        "notebooks",
        nargs="*",
        type=Path,
        help="notebooks to run (default: every demo_notebooks/*.ipynb)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("build"), help="folder for the HTML files (default: build)"
    )
    parser.add_argument(
        "--save",
        action="store_true",
        help="also write the executed notebooks back, outputs and widget state included",
    )
    args = parser.parse_args(argv)

    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    if not paths:
        parser.error(f"no notebooks found in {NOTEBOOKS}")
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in paths:
        try:
            nb = execute(path)
        except Exception as exc:  # a cell raised: report it and go on with the others
            failed += 1
            print(
                f"FAILED {path.name}: {type(exc).__name__}: {str(exc).strip()[-2000:]}",
                file=sys.stderr,
            )
            continue
        html = args.out / (path.stem + ".html")
        html.write_text(to_html(nb), encoding="utf-8")
        if args.save:
            import nbformat

            nbformat.write(nb, path)
        print(f"ok     {path.name} -> {html}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
