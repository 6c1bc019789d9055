"""Scoring against the hardware: profiles, rooflines, derivation, scores and leaderboards.

hardware.py     hardware profiles (hardware/<name>.toml), every number with its source
roofline.py     T_roofline, arithmetic intensity, ridge point and regime of one shape
derive.py       `grader roofline derive`: FLOPs and bytes counted by running the reference
scores.py       S per shape, S_i per problem, S_agg per suite and phase: the ScoreCard
metrics.py      speed-up, fast_p, the gate funnel, regimes, cost per solved problem
apply.py        a finished run scored: the physical floor, then the card
leaderboard.py  ranking comparable score cards
from_report.py  score inputs from a saved report (re-scoring without re-running)
rescore.py      `grader rescore`: new weights or hardware over a saved report
across.py       `grader compare`: one entry on several machines, portability per problem
calibrate.py    `grader hardware calibrate`: the local GPU's achievable ceilings

The card's types are grader/model/scores.py's; the expressions grader/formats/expr.py's.
See docs/scoring.md.
"""
