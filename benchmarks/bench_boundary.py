"""What a cell's start and end cost: lifting the data it reads, settling what it reaches.

Each row times one cell, plainly and under ``%%autograd -q --no-check``, in the same
shell, beside the data named in the row; the budget is what a user would feel: a
small cell stays within a few tens of milliseconds whatever else the namespace holds.
"""

from __future__ import annotations

from timing import best

CELL = "y = x * 3.0\ny"
ROWS = [
    ("a small cell, empty namespace", "", CELL),
    ("beside a dict of 10^5 lists", "big = {i: [float(i), i] for i in range(10**5)}", CELL),
    (
        "beside 10^4 notebook objects",
        "class P:\n    def __init__(s, v):\n        s.v, s.w = v, [v]\n"
        "objs = [P(float(i)) for i in range(10**4)]",
        CELL,
    ),
    (
        "reading one float of a 10^5 list",
        "data = [float(i) for i in range(10**5)]",
        "y = x * data[3]\ny",
    ),
    (
        "reading a 10^3-float list (lifted)",
        "small = [float(i) for i in range(1000)]",
        "y = x * sum(small)\ny",
    ),
    (
        "a dict of 10^4 lists changed by the cell",
        "table = {i: [float(i)] for i in range(10**4)}",
        "table[3].append(x * 2.0)\ny = x * table[3][0]\ny",
    ),
]
BUDGET_MS = 50.0


def main() -> bool:
    from IPython.testing import globalipapp

    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "gradmagic")
    ok = True
    initial = dict(shell.user_ns)  # the shell's own names (_oh, _ih...) stay for later benchmarks
    print(f"{'cell':45} {'plain ms':>9} {'magic ms':>9} {'extra ms':>9}")
    for title, setup, cell in ROWS:
        shell.user_ns.clear()
        shell.user_ns.update(initial)
        shell.run_cell(f"x = 2.0\n{setup}")
        times = best(
            {
                "plain": lambda: shell.run_cell(cell, silent=True),
                "magic": lambda: shell.run_cell(f"%%autograd -q --no-check\n{cell}", silent=True),
            },
            repeat=5,
        )
        plain, magic = times["plain"] * 1e3, times["magic"] * 1e3
        extra = magic - plain
        mark = "" if extra <= BUDGET_MS else f"  over the {BUDGET_MS:.0f} ms budget"
        ok &= extra <= BUDGET_MS
        print(f"{title:45} {plain:9.2f} {magic:9.2f} {extra:9.2f}{mark}")
    shell.user_ns.clear()
    shell.user_ns.update(initial)
    shell.run_line_magic("unload_ext", "gradmagic")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
