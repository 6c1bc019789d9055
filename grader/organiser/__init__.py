"""What an organiser does with a suite before entries meet it.

check.py        `grader suite check`: every reference in containers, twice, and the kit
release_kit.py  `grader release`: the kit agents get, with nothing hidden in it
selfcheck.py    a quick check of the references before `grader release` ships them
"""
