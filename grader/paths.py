"""Where things live: the checkout's folders on the host. Fixed paths inside containers are
the harness's protocol (grader/harness/protocol.py)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGES_DIR = REPO / "images"
PROBLEM_BUNDLES = REPO / "problem_bundles"
POLICIES_DIR = REPO / "policies"
HARNESS_DIR = Path(__file__).resolve().parent / "harness"


def cache_dir() -> Path:
    """Host cache (wheelhouse, root filesystems): $GRADER_CACHE or ~/.cache/grader."""
    root = os.environ.get("GRADER_CACHE") or Path.home() / ".cache" / "grader"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path

