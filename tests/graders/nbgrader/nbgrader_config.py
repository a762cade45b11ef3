# nbgrader's configuration for the test course (tests/test_graders.py fills in the root).
c = get_config()  # noqa: F821 - nbgrader provides it
c.CourseDirectory.root = "COURSE_ROOT"
c.CourseDirectory.course_id = "gradmagic-test"
c.ExecutePreprocessor.timeout = 120

# autograde reads the submitted notebooks as text and grades the declared checks in
# gradmagic's sandbox: no kernel runs the student's notebook
from gradmagic.grade.nbgrader import AUTOGRADE  # noqa: E402

c.Autograde.autograde_preprocessors = AUTOGRADE
