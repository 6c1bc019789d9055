"""The command line: `main.py` parses and dispatches; `progress.py` is the sink that shows a
run's progress and prints what it says (the only package that prints, issue 33); each other
module is a command group.
"""
