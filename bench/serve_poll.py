"""What one look at a serving container's frames costs the host, by how much it has written.

    python bench/serve_poll.py [--mb 1 4 16] [--looks 20]

A serving container (run/served.py) runs up to SERVE_BATCHES batches, and every batch's frames
stay on its stdout (megabytes of records by the last). The host looks at it every POLL_S while
a batch runs, from every slot. This starts a real container (the CPU runtime image, the Docker
engine) that writes MB megabytes of result frames for eight workers and stays running, then
times a look the two ways:
- whole: the stdout read whole from the engine, and every line decoded (what each look did
  before the stdout follower and the frame log);
- followed: the engine's stream kept by the follower (docker_engine._Follower) and only the
  lines new since the last look decoded (served.FrameLog), one new batch's frames a look.
It prints the milliseconds a look for each, and the host CPU seconds that a 60 s batch's
looks would take at POLL_S. Needs a running Docker engine (`make setup`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader.harness.protocol import RESULT, WORKER_KEY  # noqa: E402
from grader.harness.warden import encode_frame  # noqa: E402
from grader.run.served import FrameLog  # noqa: E402
from grader.sandbox.docker_engine import get_engine  # noqa: E402
from grader.sandbox.engine import POLL_S  # noqa: E402
from grader.sandbox.runtimes import RuntimeConfig, runtime_for  # noqa: E402
from grader.sandbox.spec import Bind, ContainerSpec, Limits, Role  # noqa: E402

WORKERS = 8


def frames(mb: float) -> bytes:
    """Result frames of WORKERS workers, about `mb` megabytes in all: a record a case."""
    per = int(mb * (1 << 20) / WORKERS)
    out = b""
    for w in range(1, WORKERS + 1):
        cases: dict[str, object] = {}
        frame = b""
        while len(frame) < per:
            for _ in range(50):
                cases[f"case{len(cases)}"] = {"ok": True, "wall_s": 0.001, "trace": {
                    "ops": {"aten.empty": 1}, "kernels": [{"name": "_kernel", "calls": 1}]}}
            frame = encode_frame(RESULT, {"data": {"cases": cases}, WORKER_KEY: w})
        out += frame
    return out


def look_whole(running, worker: int) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    FrameLog().update(running._read_whole()).of(worker, untagged=True)
    return time.perf_counter() - t0


def look_followed(running, log: FrameLog, worker: int) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    log.update(running.stdout()).of(worker, untagged=True)
    return time.perf_counter() - t0


def measure(engine, image: str, mb: float, looks: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    data = frames(mb)
    # The container writes the frames from a file bound into it, then stays up as a serving
    # container does between batches.
    path = Path("/tmp/serve_poll_frames.bin")
    path.write_bytes(data)
    code = ("import sys, time\nsys.stdout.buffer.write(open('/frames.bin','rb').read())\n"
            "sys.stdout.flush()\ntime.sleep(600)\n")
    lim = Limits(memory_bytes=1 << 30, pids=64, cpus=1.0, scratch_bytes=16 << 20,
                 output_bytes=8 << 20, log_bytes=64 << 10, wall_s=600.0)
    spec = ContainerSpec(image=image, command=["/opt/venv/bin/python3", "-c", code],
                         role=Role.PROBE, session="bench-serve-poll", limits=lim,
                         binds=(Bind(host=str(path), container="/frames.bin"),),
                         stdout_bytes=len(data) + 1)
    try:
        with engine.start(spec) as running:
            deadline = time.monotonic() + 60
            while len(running._read_whole()) < len(data) and time.monotonic() < deadline:
                time.sleep(0.2)
            whole = [look_whole(running, WORKERS) for _ in range(looks)]
            log = FrameLog()
            log.update(running.stdout())  # the earlier batches' looks parsed the rest
            followed = [look_followed(running, log, WORKERS) for _ in range(looks)]
            running.kill()
    finally:
        path.unlink(missing_ok=True)
        engine.reap("bench-serve-poll")
    return statistics.median(whole), statistics.median(followed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[1.0, 4.0, 16.0],
                    help="megabytes of frames on the container's stdout (default: 1 4 16)")
    ap.add_argument("--looks", type=int, default=20, help="looks timed each way")
    args = ap.parse_args(argv)
    engine = get_engine()
    image = runtime_for(RuntimeConfig()).ensure_image(engine).tag
    print(f"{'stdout MB':>9} | {'whole ms/look':>13} | {'followed ms/look':>16} | "
          f"{'whole CPU s / 60 s batch':>24} | {'followed':>8}")
    polls = 60 / POLL_S
    for mb in args.mb:
        whole, followed = measure(engine, image, mb, args.looks)
        print(f"{mb:9.1f} | {whole * 1e3:13.1f} | {followed * 1e3:16.2f} | "
              f"{min(whole * polls, 60):24.1f} | {followed * polls:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
