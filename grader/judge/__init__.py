"""The judge: what came back from the containers turned into verdicts, on the host.

outputs.py  the trusted comparison of an entry's outputs with the reference's
problem.py  per-shape verdicts from the containers' evidence, detection and timing
"""
