"""A container's stdout read through the real engine as the run layer reads it: looked at
while it runs (a harness's frames; a serving container's, batch after batch), it comes from
one stream the engine keeps sending, and once the container has exited it is all of what it
wrote, capped as before (docker_engine._Follower)."""

from __future__ import annotations

import time

import pytest

from grader.sandbox.spec import ContainerSpec, Limits, Role

pytestmark = pytest.mark.docker

PYTHON = "/opt/venv/bin/python3"
# Lines written a moment apart, the last one after the host has seen the first.
LATER = r"""
import sys, time
for i in range(3):
    sys.stdout.write(f"line {i}\n"); sys.stdout.flush()
    time.sleep(1.0)
sys.stdout.write("x" * 100000 + "\nlast\n")
"""


def _spec(image: str, session: str, code: str, stdout_bytes: int) -> ContainerSpec:
    lim = Limits(memory_bytes=512 << 20, pids=64, cpus=1.0, scratch_bytes=16 << 20,
                 output_bytes=8 << 20, log_bytes=64 << 10, wall_s=60.0)
    return ContainerSpec(image=image, command=[PYTHON, "-c", code], role=Role.PROBE,
                         session=session, limits=lim, stdout_bytes=stdout_bytes)


def _seen_while_running(running, want: bytes) -> bytes:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = running.stdout()
        if want in got:
            return bytes(got)
        time.sleep(0.05)
    raise AssertionError(f"{want!r} not seen in 30 s")


def test_stdout_looked_at_while_running_then_whole_after_exit(engine, runtime, session):  # type: ignore[no-untyped-def]
    with engine.start(_spec(runtime.tag, session, LATER, 1 << 20)) as running:
        first = _seen_while_running(running, b"line 0\n")
        assert first.startswith(b"line 0\n")
        state = running.wait()
        after = running.stdout()
        assert state.exit_code == 0
        assert after == state.stdout == running._read_whole()
        assert after.startswith(first)
        assert after.endswith(b"\nlast\n") and after.count(b"\n") == 5


def test_stdout_past_its_cap_is_cut_one_byte_over(engine, runtime, session):  # type: ignore[no-untyped-def]
    """The reader flags the extra byte as tampering, as it did with one read at the end."""
    cap = 50000
    with engine.start(_spec(runtime.tag, session, LATER, cap)) as running:
        _seen_while_running(running, b"line 1\n")
        state = running.wait()
        assert len(state.stdout) == len(running.stdout()) == cap + 1
        assert state.stdout == running._read_whole()


def test_stdout_of_an_exited_container_is_one_read(engine, runtime, session):  # type: ignore[no-untyped-def]
    code = "print('only')"
    with engine.start(_spec(runtime.tag, session, code, 1 << 20)) as running:
        deadline = time.monotonic() + 30
        while running.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running.stdout() == b"only\n"
        assert running._follower is None  # no stream for what a single read has whole
