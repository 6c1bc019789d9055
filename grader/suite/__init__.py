"""Suites: where they are found (roots.py), loading `problem_bundles/<suite>/` (load.py),
what a suite's own files leave unfinished (lint.py), and scaffolding new problems
(scaffold.py). Checking and releasing a suite is grader/organiser/'s.
"""
