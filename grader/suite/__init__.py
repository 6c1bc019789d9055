"""Suites: loading `problem_bundles/<suite>/`, checking their references, scaffolding
new problems, and the release kit that publishes a suite's public part.
"""
