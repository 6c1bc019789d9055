"""The report: its schema (model.py) and its renderings (json, html, ...)."""
