"""Participants' side of bundles: pack a folder, check a bundle statically."""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from pathlib import Path

from grader.detect.findings import Finding
from grader.errors import UsageError
from grader.intake import MANIFEST, Submission, open_bundle


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0  # reproducible bundles: the same folder gives the same bytes
    tar.addfile(info, io.BytesIO(data))


def create_bundle(directory: Path, output: Path) -> Submission:
    """Pack the manifest and the kernels it names, then read the result back through intake."""
    manifest = directory / MANIFEST
    if not manifest.is_file():
        raise UsageError(f"{manifest}: missing", hint="see docs/formats.md")
    kernels = sorted((directory / "kernels").glob("*.py"))
    with tarfile.open(output, "w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, MANIFEST, manifest.read_bytes())
        for k in kernels:
            _add(tar, f"kernels/{k.name}", k.read_bytes())
    with tempfile.TemporaryDirectory() as tmp:
        return open_bundle(output, Path(tmp) / "check")


def static_check(bundle: Path, policy_name: str) -> dict[str, list[Finding]]:
    from grader.detect.policy import load_policy
    from grader.detect.static import analyze

    pol = load_policy(policy_name)
    tmp = Path(tempfile.mkdtemp(prefix="grader-check-"))
    try:
        sub = open_bundle(bundle, tmp / "b")
        return {sub.manifest.problems[pid].file: analyze(src, sub.manifest.problems[pid].file, pol)
                for pid, src in sub.kernel_sources().items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
