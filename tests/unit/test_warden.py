"""The evidence channel without Docker: the warden's protocol checks (harness/warden.py), the
warden running a real worker process (outside a container it kills the worker's session, not
every process), and the host's reading of its stdout (grader/model/channel.py)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.harness.digest import file_digest
from grader.harness.protocol import ARMED, LOG_BYTES_ENV, READY, RESULT, STANDBY, TRACED
from grader.harness.warden import Protocol, Tampering, encode_frame, log_cost
from grader.model.channel import CHANNEL, check_outputs, read_entry_out, read_frames

REPO = Path(__file__).resolve().parents[2]
TOKEN = "ab" * 16


def _line(kind: str, data: object = None, token: str = TOKEN, **extra: object) -> bytes:
    return json.dumps({"frame": kind, "token": token, "data": data if data is not None
                       else {"ok": True}, **extra}).encode()


def _run(proto: Protocol, *kinds: str) -> list[str]:
    return [proto.check(_line(k))[0] for k in kinds]


def test_the_harness_order_is_accepted() -> None:
    assert _run(Protocol(TOKEN, standby=False), READY, TRACED, RESULT) == [READY, TRACED, RESULT]
    assert _run(Protocol(TOKEN, standby=True), STANDBY, READY, RESULT) == [STANDBY, READY, RESULT]
    assert _run(Protocol(TOKEN, standby=True), STANDBY, ARMED, READY) == [STANDBY, ARMED, READY]
    assert _run(Protocol(TOKEN, standby=False), ARMED, READY) == [ARMED, READY]
    kind, body = Protocol(TOKEN, standby=False).check(_line(READY, {"ok": False, "error": "x"}))
    assert (kind, body) == (READY, {"data": {"ok": False, "error": "x"}})  # no token relayed


@pytest.mark.parametrize(("standby", "kinds", "why"), [
    (False, [READY, READY], "a second ready frame"),
    (False, [TRACED], "traced frame before the ready"),
    (False, [RESULT], "result frame before the ready"),
    (False, [READY, TRACED, TRACED], "a second traced"),
    (False, [READY, RESULT, TRACED], "after the result"),
    (False, [READY, RESULT, RESULT], "after the result"),
    (False, [STANDBY], "standby frame out of order"),
    (True, [READY], "before the standby gate"),
    (True, [STANDBY, STANDBY], "a second standby"),
    (True, [ARMED], "before the standby gate"),
    (False, [ARMED, ARMED], "a second armed"),
    (False, [READY, ARMED], "armed frame after the ready"),  # entry code arms nothing
])
def test_frames_out_of_order_are_tampering(standby: bool, kinds: list[str], why: str) -> None:
    proto = Protocol(TOKEN, standby=standby)
    with pytest.raises(Tampering, match=why):
        _run(proto, *kinds)


@pytest.mark.parametrize(("line", "why"), [
    (b"not json", "malformed"),
    (b"[" * 100000, "malformed"),
    (b"[1, 2]", "not a JSON object"),
    (_line("hello"), "unknown frame"),
    (_line(READY, token="cd" * 16), "without the harness's token"),
    (_line(READY, token=None), "without the harness's token"),  # type: ignore[arg-type]
    (_line(READY, data=[1]), "wrong shape"),
    (_line(READY, extra=1), "wrong shape"),
    (_line(READY, outputs={}), "wrong shape"),
    (_line(READY, {"ok": True, "error": "x" * (300 << 10)}), "ready frame of"),
])
def test_malformed_frames_are_tampering(line: bytes, why: str) -> None:
    with pytest.raises(Tampering, match=why):
        Protocol(TOKEN, standby=False).check(line)


def test_result_outputs_must_be_names_and_hashes() -> None:
    proto = Protocol(TOKEN, standby=False)
    proto.check(_line(READY))
    with pytest.raises(Tampering, match="outputs"):
        proto.check(_line(RESULT, {"cases": {}}, outputs={"a.out": 3}))


def test_log_cost_bounds_what_the_json_file_driver_writes() -> None:
    import random

    rng = random.Random(7)
    for _ in range(200):
        alphabet = b'ab<>&"\\\n\x01\t\xe2\x80\xa8z'
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        text = data.decode("utf-8", "replace")
        entries = [json.dumps({"log": line + "\n", "stream": "stderr",
                               "time": "2026-12-01T12:34:56.123456789Z"}).replace(
            "<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            for line in text.split("\n")]
        assert sum(len(e) + 1 for e in entries) <= log_cost(text.encode())


def test_frames_round_trip_and_garbage_is_flagged() -> None:
    lines = (encode_frame(STANDBY, {"data": {"ok": True, "cuda_initialized": False}})
             + encode_frame(READY, {"data": {"ok": True, "import_s": 1.5}})
             + encode_frame(TRACED, {"data": {"ok": True}})
             + encode_frame(RESULT, {"data": {"cases": {}}, "outputs": {}}))
    frames = read_frames(lines + b"eyJmcmFtZSI6")  # a frame still being written: left alone
    assert frames.standby is not None and frames.ready is not None and frames.traced
    assert frames.result is not None and frames.anomalies == []
    assert frames.ready.import_s == 1.5
    assert read_frames(b"").ready is None
    bad = read_frames(b"not base64 !\n" + base64.b64encode(b'{"frame":"ready","data":{"x":1}}')
                      + b"\n" + encode_frame("tampering", {"data": {"reason": "forged"}}))
    assert bad.ready is None and bad.tampering == "forged"
    assert [a.split(" ")[1] for a in bad.anomalies] == ["a", "a", "tampering:"]
    assert all(a.startswith(CHANNEL) for a in bad.anomalies)
    many = read_frames(encode_frame(TRACED, {"data": {"ok": True}}) * 8)
    assert any("more frames" in a for a in many.anomalies)


def test_files_beside_the_channel_are_tampering(tmp_path: Path) -> None:
    import torch

    from grader.harness import tensors

    tensors.save(tmp_path / "a.0.out", (torch.zeros(3),))
    tensors.save(tmp_path / "a.1.out", (torch.ones(3),))  # not what the harness sent
    (tmp_path / "ready.json").write_text('{"ok": true}')
    good = file_digest(tmp_path / "a.0.out")
    stdout = (encode_frame(READY, {"data": {"ok": True}})
              + encode_frame(RESULT, {"data": {"cases": {}}, "outputs": {
                  "a.0.out": good, "a.1.out": good, "a.2.out": good}}))
    out, frames = read_entry_out(tmp_path, stdout)
    assert out.ready == frames.ready and out.result == frames.result
    # the files are read where they are judged (check_outputs, on the judging thread)
    assert ["ready.json" in a.text for a in out.anomalies] == [True]
    check_outputs(out)
    check_outputs(out)  # once
    texts = sorted(a.text for a in out.anomalies if a.tampering)
    assert len(texts) == 3, texts
    assert "'a.1.out' changed after" in " ".join(texts)
    assert "'a.2.out', sent by the harness, is gone" in " ".join(texts)
    assert "ready.json in the output directory" in " ".join(texts)


WORKER = """
import os, sys, threading, time, weakref
sys.path.insert(0, {repo!r})
from pathlib import Path
from grader.harness import main as h
h.OUT = Path(sys.argv[1])
mode = sys.argv[2]
print("worker says hello", flush=True)
if mode == "forge":  # the entry, at import: a ready of its own, before the harness's
    os.write(3, b'{{"frame":"ready","token":"x","data":{{"ok":true}}}}\\n')
    time.sleep(5)
if mode == "close":
    os.close(3)
    time.sleep(30)
if mode == "flood":
    sys.stderr.write("<&>" * 400000)
if mode == "hang":  # as harness/entry.py registers it; the entry then spins in its kernel
    import faulthandler, signal
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    h._signal_host("ready.json", {{"ok": True}})
    def spin_in_the_kernel():
        end = time.monotonic() + 3
        while time.monotonic() < end:
            pass
    spin_in_the_kernel()
h._signal_host("ready.json", {{"ok": True}})
(h.OUT / "c.0.out").write_bytes(b"honest")
def rewrite():
    (h.OUT / "c.0.out").write_bytes(b"forged")
    with open(h.OUT / "c.0.out", "wb") as f:
        f.write(b"forged")
if mode == "after":  # what entry code would do once the harness is done
    weakref.finalize(h, rewrite)
    import atexit; atexit.register(rewrite)
    threading.Thread(target=lambda: (time.sleep(0.3), rewrite())).start()
    if os.fork() == 0:  # its session's (a setsid daemon needs pid 1's kill(-1): Docker tests)
        time.sleep(0.3)
        rewrite()
        os._exit(0)
h._signal_host("result.json", {{"cases": {{}}}})
time.sleep(2)  # as if the harness lingered: the warden must not wait for it
sys.exit(0)
"""


def _warden_command(tmp_path: Path, mode: str) -> list[str]:
    """The warden running WORKER in `mode`, its output folder tmp_path/out."""
    (tmp_path / "worker.py").write_text(WORKER.format(repo=str(REPO)))
    out = tmp_path / "out"
    out.mkdir()
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from grader.harness.warden import main
        sys.exit(main([sys.executable, {str(tmp_path / "worker.py")!r}, {str(out)!r},
                       {mode!r}]))
    """)
    return [sys.executable, "-c", code]


def _warden(tmp_path: Path, mode: str, log_bytes: int = 1 << 20
            ) -> tuple[int, list[dict[str, object]], str]:
    env = {"PATH": "/usr/bin:/bin", LOG_BYTES_ENV: str(log_bytes)}
    res = subprocess.run(_warden_command(tmp_path, mode), capture_output=True, timeout=60,
                         env=env, check=False)
    frames = [json.loads(base64.b64decode(line)) for line in res.stdout.splitlines()]
    return res.returncode, frames, res.stderr.decode()


def test_warden_relays_the_harness_and_ends_the_process_on_result(tmp_path: Path) -> None:
    rc, frames, logs = _warden(tmp_path, "after")
    assert rc == 0
    assert [f["frame"] for f in frames] == [READY, RESULT]
    assert frames[1]["outputs"] == {"c.0.out": file_digest(tmp_path / "out" / "c.0.out")}
    assert "worker says hello" in logs
    import time

    time.sleep(1.0)  # the forked child's 0.3 s has passed: it died with the worker
    assert (tmp_path / "out" / "c.0.out").read_bytes() == b"honest"


def test_warden_turns_a_frame_written_at_import_into_tampering(tmp_path: Path) -> None:
    rc, frames, _ = _warden(tmp_path, "forge")
    assert rc == 0
    assert [f["frame"] for f in frames] == ["tampering"]
    assert "without the harness's token" in str(frames[0]["data"])


def test_warden_closed_channel_is_tampering(tmp_path: Path) -> None:
    rc, frames, _ = _warden(tmp_path, "close")
    assert rc == 0
    assert [f["frame"] for f in frames] == ["tampering"]
    assert "closed" in str(frames[0]["data"])


def test_warden_caps_the_logs_by_what_they_cost(tmp_path: Path) -> None:
    rc, frames, logs = _warden(tmp_path, "flood", log_bytes=64 << 10)
    assert rc == 0
    assert [f["frame"] for f in frames] == [READY, RESULT]
    assert "beyond the log cap is dropped" in logs
    assert log_cost(logs.encode()) <= 64 << 10


def test_the_warden_passes_the_hosts_stack_signal_to_the_harness(tmp_path: Path) -> None:
    """Issue 34: a timeout said nothing of where the entry was. The host sends STACK_SIGNAL to
    pid 1 before the kill; the warden passes it on and the harness's faulthandler writes every
    thread's stack into the logs (evidence, relayed like any output)."""
    import os
    import signal
    import time

    from grader.harness.protocol import STACK_SIGNAL

    warden = subprocess.Popen(_warden_command(tmp_path, "hang"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})
    assert warden.stdout is not None
    first = warden.stdout.readline()  # the ready frame: the worker spins now
    assert json.loads(base64.b64decode(first))["frame"] == READY
    time.sleep(0.3)
    os.kill(warden.pid, signal.Signals[STACK_SIGNAL])
    _out, err = warden.communicate(timeout=60)
    logs = err.decode()
    assert "most recent call first" in logs and "in spin_in_the_kernel" in logs, logs
