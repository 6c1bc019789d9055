"""The tensor file codec (grader.harness.tensors): round trips, chunked moves, hostile files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

from grader.harness import tensors


def _roundtrip(tmp_path: Path, values: list[object], **load: object) -> list[object]:
    tensors.save(tmp_path / "v.in", values)
    return tensors.load(tmp_path / "v.in", **load)  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", list(tensors.CODES))
def test_every_dtype_round_trips_bit_for_bit(tmp_path: Path, dtype: torch.dtype) -> None:
    src = torch.arange(-40, 40, dtype=torch.float32).reshape(4, 20)
    t = src.to(dtype)
    (back,) = _roundtrip(tmp_path, [t])
    assert back.dtype == dtype and back.shape == t.shape
    assert torch.equal(back.view(torch.uint8), t.view(torch.uint8))


def test_scalars_empty_and_strided_tensors_keep_their_order(tmp_path: Path) -> None:
    strided = torch.arange(30.0).reshape(5, 6).t()  # not contiguous
    values = [1e-6, strided, None, torch.empty(0, 3), True, "mean", torch.tensor(7)]
    back = _roundtrip(tmp_path, values)
    assert back[0] == 1e-6 and back[2] is None and back[4] is True and back[5] == "mean"
    assert torch.equal(back[1], strided) and back[1].shape == (6, 5)
    assert back[3].shape == (0, 3) and back[6].shape == () and int(back[6]) == 7
    assert not list(tmp_path.glob("*.part"))


def test_tensors_larger_than_a_chunk_move_in_pieces(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensors, "CHUNK", 1000)  # not a multiple of any item size
    a = torch.randn(1234, dtype=torch.float64)
    b = torch.randint(0, 100, (3, 777), dtype=torch.int32)
    back = _roundtrip(tmp_path, [a, b])
    assert torch.equal(back[0], a) and torch.equal(back[1], b)
    # The path of a load to a device: through the host staging buffer, chunk by chunk.
    meta = tensors.load(tmp_path / "v.in", device="meta")
    assert [m.device.type for m in meta] == ["meta", "meta"]
    assert meta[1].shape == (3, 777) and meta[1].dtype == torch.int32


def test_unsupported_values_are_refused_on_save(tmp_path: Path) -> None:
    with pytest.raises(tensors.TensorFileError, match="not a tensor or scalar"):
        tensors.save(tmp_path / "x", [[1, 2]])
    with pytest.raises(tensors.TensorFileError, match="unsupported dtype"):
        tensors.save(tmp_path / "x", [torch.zeros(2, dtype=torch.complex64)])


def _file(header: dict[str, object], body: bytes, args: list[object] | None = None) -> bytes:
    header = dict(header, __metadata__={"args": json.dumps(
        args if args is not None else [{"tensor": "t0"}])})
    head = json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + body


@pytest.mark.parametrize(("raw", "message"), [
    (b"abc", "too short"),
    (struct.pack("<Q", 1 << 40) + b"{}", "bad header length"),
    (struct.pack("<Q", 2) + b"[]", "bad header"),
    (_file({"t0": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8),
     "out of range"),
    (_file({"t0": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, b"\0" * 16),
     "does not match"),
    (_file({"t0": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, b"\0" * 16),
     "out of range"),
    (_file({"t0": {"dtype": "C64", "shape": [2], "data_offsets": [0, 16]}}, b"\0" * 16),
     "bad tensor entry"),
    (_file({}, b"", args=[{"tensor": "t9"}]), "bad tensor entry"),
    (_file({}, b"", args=[{"value": [1]}]), "bad scalar"),
    (_file({}, b"", args=[{"value": 1, "tensor": "t0"}]), "bad argument entry"),
])
def test_malformed_files_are_refused_with_a_reason(tmp_path: Path, raw: bytes,
                                                   message: str) -> None:
    (tmp_path / "bad").write_bytes(raw)
    with pytest.raises(tensors.TensorFileError, match=message):
        tensors.load(tmp_path / "bad")


def test_size_limit_and_symlinks_are_enforced(tmp_path: Path) -> None:
    tensors.save(tmp_path / "v", [torch.zeros(1000)])
    with pytest.raises(tensors.TensorFileError, match="over the limit"):
        tensors.load(tmp_path / "v", max_bytes=1000)
    (tmp_path / "link").symlink_to(tmp_path / "v")
    with pytest.raises(OSError):
        tensors.load(tmp_path / "link")
