"""run/served.py's reading of a serving container's stdout: each worker's frames apart, as a
container of its own would have written them (issue 32). The serving container itself runs in
tests/integration/test_served.py."""

from __future__ import annotations

import base64
import json
import random

from grader.harness.protocol import GONE, READY, RESULT, STANDBY, TAMPERING, WORKER_KEY
from grader.harness.warden import encode_frame
from grader.model.channel import read_frames
from grader.run.served import FrameLog


def frames_of(raw: bytes, worker: int, *, untagged: bool) -> tuple[bytes, bool]:
    """Worker `worker`'s frames out of the stdout `raw` read at once, and its gone."""
    mine, gone, _result = FrameLog().update(raw).of(worker, untagged=untagged)
    return mine, gone


def _tagged(kind: str, worker: int | None, data: dict[str, object]) -> bytes:
    body: dict[str, object] = {"data": data}
    if worker is not None:
        body[WORKER_KEY] = worker
    return encode_frame(kind, body)


def test_each_worker_reads_its_own_frames_untagged() -> None:
    raw = (_tagged(STANDBY, 1, {"ok": True}) + _tagged(STANDBY, 2, {"ok": True})
           + _tagged(READY, 1, {"ok": True, "import_s": 0.5})
           + _tagged(RESULT, 1, {"cases": []}))
    one, gone = frames_of(raw, 1, untagged=False)
    two, _ = frames_of(raw, 2, untagged=False)
    assert not gone
    assert one == (encode_frame(STANDBY, {"data": {"ok": True}})
                   + encode_frame(READY, {"data": {"ok": True, "import_s": 0.5}})
                   + encode_frame(RESULT, {"data": {"cases": []}}))
    assert two == encode_frame(STANDBY, {"data": {"ok": True}})
    assert read_frames(two).standby is not None and read_frames(two).ready is None
    assert read_frames(one).ready is not None


def test_gone_is_the_workers_only() -> None:
    raw = _tagged(STANDBY, 1, {"ok": True}) + _tagged(GONE, 2, {"reason": "niced"})
    assert frames_of(raw, 2, untagged=False) == (b"", True)
    assert frames_of(raw, 1, untagged=False)[1] is False


def test_untagged_frames_and_stray_lines_go_to_the_running_worker_only() -> None:
    """The warden's last frame when it ends the container over the running batch carries no
    worker; a line that is not a frame is flagged where the running batch reads it."""
    raw = (_tagged(STANDBY, 3, {"ok": True}) + _tagged(TAMPERING, None, {"reason": "x"})
           + b"not base64!\n")
    running, _ = frames_of(raw, 3, untagged=True)
    waiting, _ = frames_of(raw, 4, untagged=False)
    frames = read_frames(running)
    assert frames.tampering == "x"
    assert any("not a frame" in a for a in frames.anomalies)
    assert waiting == b""


def test_a_frame_of_another_shape_is_kept_whole() -> None:
    """The worker's key is taken off and nothing else: the reader still sees every field."""
    frame = {"frame": RESULT, "data": {"cases": []}, "outputs": {"a.out": "0" * 64},
             WORKER_KEY: 5}
    line = base64.b64encode(json.dumps(frame).encode()) + b"\n"
    mine, _ = frames_of(line, 5, untagged=False)
    got = json.loads(base64.b64decode(mine.strip()))
    assert got == {k: v for k, v in frame.items() if k != WORKER_KEY}


def _stream() -> bytes:
    """Five batches' frames as a serving container writes them, with the warden's untagged
    last frame, a stray line and an empty one among them."""
    raw = b""
    for w in range(1, 6):
        raw += _tagged(STANDBY, w, {"ok": True}) + _tagged(READY, w, {"ok": True})
        if w == 3:
            raw += b"not base64!\n\n" + _tagged(TAMPERING, None, {"reason": "x"})
        raw += _tagged(RESULT, w, {"cases": {f"c{i}": {"ok": True} for i in range(50)}})
    return raw + _tagged(GONE, 6, {"reason": "niced"})


def test_the_frame_log_read_piece_by_piece_is_the_stream_read_whole() -> None:
    """The host looks at a serving container's stdout every poll while it grows, cut
    anywhere (mid-line, mid-frame): each line is parsed once, and every worker's frames,
    its gone and its result are what reading all of it at once gives."""
    raw = _stream()
    rng = random.Random(7)
    cuts = [*sorted(rng.sample(range(1, len(raw)), 40)), len(raw)]
    log = FrameLog()
    for cut in cuts:
        log.update(raw[:cut])
        for w in range(1, 7):
            for untagged in (False, True):
                mine, gone, result = log.of(w, untagged=untagged)
                whole = raw[:raw.rfind(b"\n", 0, cut) + 1]
                assert (mine, gone) == frames_of(whole, w, untagged=untagged)
                assert result == (read_frames(mine).result is not None)
    assert log.of(2, untagged=False)[2] and not log.of(6, untagged=False)[2]
    assert log.of(6, untagged=False)[1]


def test_the_frame_log_starts_again_on_a_shorter_stdout() -> None:
    """Not the stdout it parsed (it only grows): read from its start, not past its end."""
    raw = _stream()
    log = FrameLog().update(raw)
    short = _tagged(STANDBY, 1, {"ok": True})
    assert log.update(short).of(1, untagged=False) == (
        encode_frame(STANDBY, {"data": {"ok": True}}), False, False)
