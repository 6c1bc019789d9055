"""Issue 19: what the host reads from a container is read under limits fixed before reading
(grader/harness/tensors.ReadLimits, grader/model/evidence.py), and odd folders are reported once per
kind with counts, never once per file."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import pytest
import torch

from grader.harness import tensors
from grader.judge.problem import _anomaly_findings
from grader.model.evidence import MAX_NUMBER, ReadyFile, ResultFile, read_out_dir


def _raw(header: dict[str, object], args: list[object], body_len: int, path: Path) -> Path:
    """A tensor file with `header`, `args` and a sparse body of `body_len` zero bytes."""
    head = json.dumps(dict(header, __metadata__={"args": json.dumps(args)})).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        f.truncate(8 + len(head) + body_len)  # sparse: costs no disk
    return path


def _entry(start: int, end: int) -> dict[str, object]:
    return {"dtype": "U8", "shape": [end - start], "data_offsets": [start, end]}


def test_one_block_named_many_times_is_refused_before_any_allocation(tmp_path: Path) -> None:
    # The attack of issue 19: a 1 GiB sparse block named 64 times asked for 64 GiB.
    size = 1 << 30
    names = {f"t{i}": _entry(0, size) for i in range(64)}
    path = _raw(names, [{"tensor": n} for n in names], size, tmp_path / "alias.out")
    t0 = time.monotonic()
    with pytest.raises(tensors.TensorFileError, match="overlap"):
        tensors.load(path)
    assert time.monotonic() - t0 < 1.0  # refused from the header: nothing was read


@pytest.mark.parametrize(("header", "args", "message"), [
    ({"a": _entry(0, 64), "b": _entry(32, 96)}, ["a", "b"], "overlap"),  # partly aliased
    ({"a": _entry(0, 64)}, ["a", "a"], "more than one argument"),  # one name, two values
    ({"a": _entry(0, 64), "b": _entry(64, 128)}, ["a"], "no argument names"),
    ({"a": {"dtype": "U8", "shape": [1] * 17, "data_offsets": [0, 1]}}, ["a"], "out of range"),
    ({"a": {"dtype": "U8", "shape": [0, 1 << 60], "data_offsets": [0, 0]}}, ["a"],
     "out of range"),
    ({"a": {"dtype": "U8", "shape": [2.0], "data_offsets": [0, 2]}}, ["a"], "bad tensor entry"),
    ({"a": {"dtype": "U8", "shape": [True], "data_offsets": [0, 1]}}, ["a"], "bad tensor entry"),
    ({"x" * 65: _entry(0, 8)}, ["x" * 65], "name of 65"),
])
def test_aliases_reuse_and_odd_entries_are_refused(tmp_path: Path, header: dict[str, object],
                                                   args: list[str], message: str) -> None:
    path = _raw(header, [{"tensor": a} for a in args], 128, tmp_path / "bad.out")
    with pytest.raises(tensors.TensorFileError, match=message):
        tensors.load(path)


def test_counts_and_numbers_have_limits(tmp_path: Path) -> None:
    many = {f"t{i}": _entry(i, i + 1) for i in range(5000)}
    path = _raw(many, [{"tensor": n} for n in many], 5000, tmp_path / "many.out")
    with pytest.raises(tensors.TensorFileError, match="over the limit of 4096"):
        tensors.load(path)
    assert len(tensors.load(path, limits=tensors.ReadLimits(max_tensors=5000))) == 5000
    for bad in ("NaN", "Infinity", "-Infinity"):
        args = json.dumps(json.dumps([{"value": 0}]).replace("0", bad))
        head = ('{"__metadata__": {"args": ' + args + "}}").encode()
        (tmp_path / "nan.out").write_bytes(struct.pack("<Q", len(head)) + head)
        with pytest.raises(tensors.TensorFileError, match="bad header"):
            tensors.load(tmp_path / "nan.out")


def test_honest_files_still_load_within_their_own_size(tmp_path: Path) -> None:
    values = [torch.arange(10.0), torch.zeros(0, 5), 1e-6, torch.ones(3, 4, dtype=torch.int8)]
    tensors.save(tmp_path / "ok.out", values)
    size = os.path.getsize(tmp_path / "ok.out")
    back = tensors.load(tmp_path / "ok.out", limits=tensors.ReadLimits(max_bytes=size))
    assert torch.equal(back[0], values[0]) and back[1].shape == (0, 5) and back[2] == 1e-6
    with pytest.raises(tensors.TensorFileError, match="over the limit"):
        tensors.load(tmp_path / "ok.out", limits=tensors.ReadLimits(max_bytes=size - 1))


def test_many_files_are_one_anomaly_with_a_count(tmp_path: Path) -> None:
    for i in range(9000):  # past MAX_ENTRIES (8192): the rest is not even listed
        (tmp_path / f"junk{i}").touch()
    out = read_out_dir(tmp_path)
    assert len(out.anomalies) <= 2
    assert any(a.tampering and "more than 8192 entries" in a.text for a in out.anomalies)
    findings = _anomaly_findings(out)
    assert len(findings) == len(out.anomalies)
    assert sum(len(f.message) for f in findings) < 1000


def test_odd_entries_are_counted_per_kind(tmp_path: Path) -> None:
    for i in range(50):
        (tmp_path / f"extra{i}.txt").touch()
        (tmp_path / f"link{i}").symlink_to("/etc/passwd")
    for i in range(5):
        (tmp_path / f"dir{i}").mkdir()
    out = read_out_dir(tmp_path)
    texts = sorted(a.text for a in out.anomalies)
    assert len(texts) == 3, texts
    assert any(t.startswith("50 unexpected file(s)") for t in texts)
    assert any(t.startswith("50 symlink(s)") for t in texts)
    assert any(t.startswith("5 non-regular file(s)") for t in texts)
    assert [a.tampering for a in out.anomalies if "unexpected" in a.text] == [False]


@pytest.mark.parametrize("text", [
    '{"ok": true, "import_s": NaN}', '{"ok": true, "import_s": Infinity}',
    '{"ok": true, "import_s": 1e300}',
])
def test_non_finite_or_huge_numbers_are_not_valid_evidence(tmp_path: Path, text: str) -> None:
    (tmp_path / "ready.json").write_text(text)
    out = read_out_dir(tmp_path)
    assert out.ready is None
    assert [a.tampering for a in out.anomalies] == [True]
    assert "not valid" in out.anomalies[0].text


def test_numbers_are_checked_inside_lists_and_maps() -> None:
    ok = {"cases": {}, "timings": {"s": {"ok": True, "device_us": [1.0, 2.0]}},
          "phases_s": {"import": 1.0}}
    ResultFile.model_validate(ok)
    for bad in ({"timings": {"s": {"ok": True, "device_us": [1.0, MAX_NUMBER * 10]}}},
                {"phases_s": {"import": -MAX_NUMBER * 10}},
                {"timings": {"s": {"ok": True, "loop_s": float("nan")}}}):
        with pytest.raises(ValueError):
            ResultFile.model_validate({**ok, **bad})
    assert ReadyFile(ok=True, import_s=3.5).import_s == 3.5


def test_an_output_file_the_reader_refuses_is_tampering_once(tmp_path: Path) -> None:
    size = 1 << 20
    for i in range(5):
        names = {f"t{k}": _entry(0, size) for k in range(8)}
        _raw(names, [{"tensor": n} for n in names], size, tmp_path / f"s.{i}.out")
    tensors.save(tmp_path / "s.9.out", [torch.ones(3)])
    out = read_out_dir(tmp_path)
    assert [(a.tampering, a.text.split(" (")[0]) for a in out.anomalies] == [
        (True, "5 output file(s) the tensor reader refuses in the output directory")]
    assert "overlap" in out.anomalies[0].text
    assert list(out.tensor_files) == [("s.9", "out")]  # the refused are never read
