# Otter test: the student's %%autograd cell, run in a separate process by grade().
OK_FORMAT = True

test = {
    "name": "q2",
    "points": 1,
    "suites": [
        {
            "cases": [
                {
                    "code": r""">>> import gradmagic
>>> from gradmagic import grade
>>> grade(gradmagic.last.source, {"w": -4.0, "b": -2.0, "L.data": 1.0}).assert_passed()
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
