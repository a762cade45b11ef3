"""Pages of gradmagic's site made from the code and the committed data when the site is built.

``{autograd-options}``: the table of ``%%autograd``'s options and the keywords of
``gradmagic.autograd``, read from the fields of ``gradmagic.analysis.options.Options``, where
each option is declared once.

``{benchmark-results}``: the tables of the committed benchmark results
(``benchmarks/results/*.json``, written by ``benchmarks/run.py --json``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _table(header: list[str], rows: list[list[str]], literal_first: bool = False) -> nodes.table:
    table = nodes.table(classes=["gradmagic-table"])
    group = nodes.tgroup(cols=len(header))
    table += group
    for _ in header:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    head += _row(header, header=True)
    body = nodes.tbody()
    group += body
    for cells in rows:
        body += _row(cells, literal_first=literal_first)
    return table


def _inline(text: str) -> list[nodes.Node]:
    """The Markdown a benchmark prints in a cell: **bold** and `code`, the rest as text."""
    out: list[nodes.Node] = []
    for part in re.split(r"(\*\*[^*]+\*\*|`[^`]+`)", text):
        if part.startswith("**") and part.endswith("**") and len(part) > 4:
            out.append(nodes.strong(text=part[2:-2]))
        elif part.startswith("`") and part.endswith("`") and len(part) > 2:
            out.append(nodes.literal(text=part[1:-1]))
        elif part:
            out.append(nodes.Text(part))
    return out


def _row(cells, header=False, literal_first=False) -> nodes.row:
    row = nodes.row()
    for k, text in enumerate(cells):
        entry = nodes.entry()
        para = nodes.paragraph()
        if literal_first and k == 0 and not header:
            para += nodes.literal(text=text)
        else:
            para.extend(_inline(text))
        entry += para
        row += entry
    return row


def option_rows() -> list[list[str]]:
    """(spelling, default, keyword of ``gradmagic.autograd``, meaning) of each option."""
    import inspect

    from gradmagic.analysis.options import option_specs
    from gradmagic.notebook.api import autograd

    keywords = inspect.signature(autograd).parameters
    rows = []
    for spec in option_specs():
        if spec.choices:
            argument = "|".join(spec.choices)
        else:
            argument = "" if spec.type is bool else spec.metavar or spec.name.upper()
        default = "" if spec.default in (None, False) else str(spec.default)
        if spec.name == "no_check":
            keyword = "check=False"
        else:
            keyword = f"{spec.name}=" if spec.name in keywords else ""
        spelling = f"{', '.join(spec.flags)} {argument}".strip()
        rows.append([spelling, default, keyword, spec.help])
    return rows


class AutogradOptions(Directive):
    has_content = False

    def run(self):
        header = ["option", "default", "gradmagic.autograd", "meaning"]
        return [_table(header, option_rows(), literal_first=True)]


def _results() -> list[dict]:
    return [json.loads(p.read_text("utf-8")) for p in sorted(RESULTS.glob("*.json"))]


class BenchmarkResults(Directive):
    has_content = False

    def run(self):
        out = []
        found = _results()
        if not found:
            para = nodes.paragraph(
                text="No results are committed yet: run python benchmarks/run.py --json."
            )
            return [para]
        for result in found:
            section = nodes.rubric(text=result["title"])
            out.append(section)
            env = result.get("environment", {})
            if env:
                facts = ", ".join(f"{k} {v}" for k, v in env.items())
                out.append(nodes.paragraph(text=f"Measured with {facts}."))
            for block in result["blocks"]:
                if block["kind"] == "table":
                    out.append(_table(block["header"], block["rows"]))
                elif block["text"].strip():
                    out.append(nodes.literal_block(text=block["text"], language="text"))
        return out


def setup(app):
    app.add_directive("autograd-options", AutogradOptions)
    app.add_directive("benchmark-results", BenchmarkResults)
    app.add_config_value("gradmagic_results", str(RESULTS), "env")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
