"""The domain model every layer shares, below both the run layer and the judge, so that the
judge reads evidence and writes verdicts with no container type in sight.

results.py   a shape's and a problem's results, and the Report
findings.py  one finding of the static or dynamic analysis
scores.py    the score card the report embeds (grader/scoring/ computes it)
runs.py      what one container's run gave back (`Evidence`), and the cases a batch runs
evidence.py  an output folder, read without trusting it
channel.py   the entry's frames, read from its container's stdout without trusting them
timed.py     a shape's timed loop as the host plans it (fresh seeds, checked calls)
"""
