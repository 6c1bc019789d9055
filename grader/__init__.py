"""grader: a sandboxed, container-based grader for GPU kernels written by AI agents."""

__version__ = "0.1.0"
