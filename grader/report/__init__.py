"""The report (its schema is grader/model/results.py's `Report`) and its renderings.

render.py   the formats asked for written, and report.json read back
html.py, markdown.py, junit.py, sarif.py   one rendering each
summaries.py  what `--json` prints for agents and CI
failures.py   what did not pass, on the terminal, as pytest shows it
leaderboard.py, not_graded.py, public.py, inert.py, entry_paths.py   boards outside a round,
              reports of a run that graded nothing, `--public`, inert entry text, the
              participant's file names in tracebacks
"""
