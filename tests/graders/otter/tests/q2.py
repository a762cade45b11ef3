# Otter test: the student's %%autograd cell, graded in gradmagic's sandbox.
OK_FORMAT = True

test = {
    "name": "q2",
    "points": 1,
    "suites": [
        {
            "cases": [
                {
                    "code": r""">>> from gradmagic.grade import check_cell
>>> check_cell("autograd", {"w": -4.0, "b": -2.0, "L.data": 1.0})
""",
                    "hidden": True,
                    "locked": False,
                }
            ],
            "scored": True,
            "setup": "",
            "teardown": "",
            "type": "doctest",
        }
    ],
}
