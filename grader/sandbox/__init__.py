"""Running containers, and the runtimes they run on (runtimes.py: one object per kind).
Only this package imports `docker` (see docker_engine.py)."""
