"""harness/digest.py: the digest the harness sends for each output file and the host checks
the file against (model/channel.check_outputs). It must be what the harness and the host both
compute whatever their threads, and change with any byte or length of the file."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from grader.harness import digest
from grader.harness.digest import file_digest


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(digest, "CHUNK", 1000)
    monkeypatch.setattr(digest, "READ", 64)


def _expected(data: bytes, chunk: int = 1000) -> str:
    top = hashlib.sha256(f"chunked-sha256 {chunk} {len(data)}\n".encode())
    for at in range(0, len(data), chunk):
        top.update(hashlib.sha256(data[at:at + chunk]).digest())
    return top.hexdigest()


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 4500])
def test_the_digest_is_the_sha256_of_the_chunks_sha256s_whatever_the_threads(
        tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "c.0.out"
    path.write_bytes(data)
    assert {file_digest(path, threads=n) for n in (1, 2, 4, 8)} == {_expected(data)}


def test_any_byte_or_length_changes_it(tmp_path: Path) -> None:
    data = bytearray(os.urandom(3500))
    path = tmp_path / "c.0.out"
    path.write_bytes(data)
    first = file_digest(path)
    data[2100] ^= 1
    path.write_bytes(data)
    second = file_digest(path)
    path.write_bytes(bytes(data) + b"\0")
    third = file_digest(path)
    path.write_bytes(bytes(data[:1000]))  # a whole chunk fewer: its digest alone
    fourth = file_digest(path)
    assert len({first, second, third, fourth}) == 4
    assert fourth != hashlib.sha256(bytes(data[:1000])).hexdigest()


def test_a_link_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"x")
    (tmp_path / "c.0.out").symlink_to(tmp_path / "target")
    with pytest.raises(OSError):
        file_digest(tmp_path / "c.0.out")
