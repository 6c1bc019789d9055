"""The judge: evidence in, verdicts out, on the host (pure: no container, no file written).

problem.py       per-shape verdicts from the evidence (grader/model/runs.py), detection and timing
outputs.py       the trusted comparison of an entry's outputs with the reference's
timing.py        the timed loop's samples: a shape's Timing and its findings
entry_import.py  why an entry's import failed, in its verdict's words
interpreter.py   the limits of Triton's CPU interpreter that fail honest code
"""
