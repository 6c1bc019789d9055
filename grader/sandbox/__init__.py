"""Running containers. Only this package imports `docker` (see docker_engine.py)."""
