"""The tensor file codec (grader.harness.tensors): round trips, chunked moves, hostile files."""

from __future__ import annotations

import errno
import json
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from grader.harness import tensors
from grader.paths import REPO
from grader.sandbox import capped


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


def test_chunks_move_on_several_threads_in_any_order(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of WORKERS threads moves every WORKERS-th chunk (saving, loading, copying): the
    bytes land where they belong whichever thread gets there first."""
    monkeypatch.setattr(tensors, "CHUNK", 4096)
    shares: list[list[int]] = []
    real = tensors._save_share

    def save_share(dst: torch.Tensor, share: list[tensors._Piece]) -> None:
        assert threading.current_thread() is not threading.main_thread()
        shares.append([p.offset for p in share])
        real(dst, share)

    monkeypatch.setattr(tensors, "_save_share", save_share)
    a = torch.randn(50_000)  # 49 chunks
    b = torch.arange(3 * 4099, dtype=torch.int16).reshape(3, 4099)
    tensors.save(tmp_path / "v.in", [a, 2.5, b])
    assert len(shares) == tensors.WORKERS and sum(map(len, shares)) == 49 + 7
    assert len({o for share in shares for o in share}) == 49 + 7
    tensors.copy_file(tmp_path / "v.in", tmp_path / "w.in")
    assert (tmp_path / "w.in").read_bytes() == (tmp_path / "v.in").read_bytes()
    back = tensors.load(tmp_path / "w.in")
    assert torch.equal(back[0], a) and back[1] == 2.5 and torch.equal(back[2], b)


RECORDED = """
import json, sys
from pathlib import Path
import torch
from grader.harness import tensors
from grader.harness.record import OUTSIDE, Recorder

rec = Recorder("cpu")
rec.install()  # as in an entry's container: every later tensor export is counted
tensors.CHUNK = 4096  # many chunks: the threads of tensors._spread
folder = Path(sys.argv[1])
with rec.internal():  # as the harness loads and saves
    tensors.save(folder / "v.in", [torch.randn(50_000), torch.arange(9000)])
    tensors.copy_file(folder / "v.in", folder / "w.in")
    back = tensors.load(folder / "w.in")
quiet = rec.trace(OUTSIDE)
back[0].numpy()  # the entry's own doing: counted
print(json.dumps({"quiet": quiet, "loud": rec.trace(OUTSIDE)["array_exports"]}))
"""


def test_the_harness_threads_hand_no_tensor_memory_to_the_recorder(tmp_path: Path) -> None:
    """In an entry's process the recorder counts every tensor export (numpy, DLPack) not made
    by the harness's own thread; the chunks' threads read and write through addresses, so a
    file of many chunks moved under `internal()` leaves its record empty (on the H200,
    2026-12-03, `t.numpy()` on those threads made honest entries `fallback`)."""
    (tmp_path / "driver.py").write_text(RECORDED)
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["quiet"]["array_exports"] == {} and got["quiet"]["torch_ops"] == {}
    assert got["loud"] == {"numpy": 1}


def test_copying_an_empty_or_truncated_file(tmp_path: Path) -> None:
    (tmp_path / "e").write_bytes(b"")
    tensors.copy_file(tmp_path / "e", tmp_path / "f")
    assert (tmp_path / "f").read_bytes() == b""
    tensors.save(tmp_path / "v.in", [torch.ones(10)])
    raw = (tmp_path / "v.in").read_bytes()
    (tmp_path / "v.in").write_bytes(raw[:-8])
    with pytest.raises(tensors.TensorFileError, match="out of range"):
        tensors.load(tmp_path / "v.in")


@pytest.mark.skipif(not capped.can_mount(), reason="needs root to mount a tmpfs")
def test_a_full_tmpfs_is_an_error_not_a_signal(tmp_path: Path) -> None:
    """A mapped file past a tmpfs's size would raise SIGBUS on the first page beyond it:
    saving and copying check the room first and raise ENOSPC, as a write does, and leave
    the folder as it was (no .part)."""
    big = torch.zeros(3 << 18)  # 3 MiB
    with capped.capped_dir(1 << 20, owner=os.getuid()) as small:
        with pytest.raises(OSError) as saving:
            tensors.save(small / "x.in", [big])
        tensors.save(tmp_path / "x.in", [big])
        with pytest.raises(OSError) as copying:
            tensors.copy_file(tmp_path / "x.in", small / "x.in")
        assert saving.value.errno == copying.value.errno == errno.ENOSPC
        tensors.save(small / "y.in", [torch.ones(1000)])  # what fits still does
        assert torch.equal(tensors.load(small / "y.in")[0], torch.ones(1000))


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
