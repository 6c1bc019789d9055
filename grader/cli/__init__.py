"""The command line: `main.py` parses and dispatches; each other module is a command
group.
"""
