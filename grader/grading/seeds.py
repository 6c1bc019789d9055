"""The seeds a grading derives from its secret: each case's, and a module problem's."""

from __future__ import annotations

import hashlib
import hmac


def derive_seed(secret: bytes, problem: str, shape: str, k: int) -> int:
    """A per-case seed from the run's secret: unpredictable to entries, reproducible to us."""
    digest = hmac.new(secret, f"{problem}/{shape}/{k}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF


def derive_module_seed(secret: bytes, case_seed: int) -> int:
    """The seed a module problem's class is built under in both containers: from the case's
    seed, keyed by the secret, so that an entry learns nothing of its input seed from it."""
    digest = hmac.new(secret, f"module/{case_seed}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF
