# Otter test: the student's hand-derived answers, graded against the teacher's code.
OK_FORMAT = True

test = {
    "name": "q1",
    "points": 1,
    "suites": [
        {
            "cases": [
                {
                    "code": r""">>> from gradmagic.grade import check_answers
>>> QUESTION = "w = 0.5\nb = -1.0\nx = 2.0\ny = 1.0\nL = (w*x + b - y)**2\nL"
>>> check_answers("answers", QUESTION)
""",
                    "hidden": False,
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
