"""docker_engine.RunningContainer.stdout's choice between the engine's followed stream and a
whole read, on a stand-in for the SDK's container object (the engine's own behaviour is
tests/integration/test_engine_stdout.py's): the stream while the container runs, all of it
once it has exited, and a whole read wherever the stream may be short of what it wrote."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

from grader.sandbox.docker_engine import RunningContainer, _Follower
from grader.sandbox.spec import ContainerSpec, Limits, Role

END = object()


class _SdkContainer:
    """What RunningContainer uses of docker's Container: reload/attrs, and logs either whole
    (follow=False) or as a stream fed by the test (follow=True)."""

    def __init__(self) -> None:
        self.id = "c0ffee"
        self.written = b""
        self.running = True
        self.feed: queue.Queue[object] = queue.Queue()
        self.whole_reads = 0
        self.attrs = {"State": {"Running": True}}

    def reload(self) -> None:
        self.attrs = {"State": {"Running": self.running}}

    def write(self, data: bytes, *, to_stream: bool = True) -> None:
        self.written += data
        if to_stream:
            self.feed.put(data)

    def logs(self, *, stdout: bool, stderr: bool, stream: bool, follow: bool) -> Iterator[bytes]:
        if not follow:
            self.whole_reads += 1
            return iter([self.written])
        return self._stream()

    def _stream(self) -> Iterator[bytes]:
        while (item := self.feed.get()) is not END:
            if isinstance(item, Exception):
                raise item
            assert isinstance(item, bytes)
            yield item


def _running(cap: int = 1 << 20) -> tuple[RunningContainer, _SdkContainer]:
    sdk = _SdkContainer()
    spec = ContainerSpec(image="x", command=["true"], role=Role.ENTRY, session="s",
                         limits=Limits(memory_bytes=1 << 30, pids=64, cpus=1.0,
                                       scratch_bytes=1 << 20, output_bytes=1 << 20,
                                       log_bytes=1 << 16, wall_s=60.0),
                         stdout_bytes=cap)
    return RunningContainer(sdk, spec), sdk


def _followed() -> tuple[RunningContainer, _SdkContainer]:
    """A running container whose first line, "a", a look has had from its stream."""
    running, sdk = _running()
    sdk.write(b"a\n")
    _soon(running, b"a\n")
    return running, sdk


def _soon(running: RunningContainer, want: bytes) -> bytes:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (got := running.stdout()) == want:
            return got
        time.sleep(0.01)
    raise AssertionError(f"never {want!r}")


def test_a_running_container_is_followed_and_whole_after_its_exit() -> None:
    running, sdk = _running()
    sdk.write(b"ready\n")
    assert _soon(running, b"ready\n") == b"ready\n"
    sdk.write(b"result\n")
    assert _soon(running, b"ready\nresult\n")
    assert sdk.whole_reads == 0  # every look was the stream's
    sdk.running = False
    sdk.feed.put(END)  # the engine ends the stream with the container
    assert running.stdout() == b"ready\nresult\n"
    assert sdk.whole_reads == 0


def test_an_exited_container_waits_for_its_stream_to_end() -> None:
    """The last bytes may still be on their way when the container is seen exited."""
    running, sdk = _followed()
    sdk.running = False
    sdk.written += b"b\n"  # written, not yet sent

    def send_late() -> None:
        time.sleep(0.3)
        sdk.feed.put(b"b\n")
        sdk.feed.put(END)

    threading.Thread(target=send_late).start()
    assert running.stdout() == b"a\nb\n"
    assert sdk.whole_reads == 0


def test_a_stream_that_ends_while_the_container_runs_is_not_trusted() -> None:
    """Ended by the engine, not by the container's exit: what it read may be short."""
    running, sdk = _followed()
    sdk.feed.put(END)
    sdk.write(b"b\n", to_stream=False)
    deadline = time.monotonic() + 10
    while running.stdout() != b"a\nb\n" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running.stdout() == b"a\nb\n" and sdk.whole_reads >= 1


def test_a_stream_that_fails_falls_back_to_whole_reads() -> None:
    running, sdk = _followed()
    sdk.feed.put(ConnectionError("the engine went away"))
    sdk.write(b"b\n", to_stream=False)
    sdk.running = False
    assert running.stdout() == b"a\nb\n" and sdk.whole_reads >= 1


def test_the_stream_is_cut_one_byte_past_its_cap() -> None:
    running, sdk = _running(cap=8)
    sdk.write(b"12345")
    _soon(running, b"12345")
    sdk.write(b"6789abcdef")
    sdk.running = False
    assert running.stdout() == b"123456789"  # the reader flags the extra byte


def test_an_exited_container_never_looked_at_is_read_once() -> None:
    running, sdk = _running()
    sdk.write(b"all\n", to_stream=False)
    sdk.running = False
    assert running.stdout() == b"all\n"
    assert running._follower is None and sdk.whole_reads == 1


def test_closing_ends_the_follower() -> None:
    sdk = _SdkContainer()
    follower = _Follower(sdk, 1 << 20)
    sdk.feed.put(b"x")
    sdk.feed.put(END)
    assert follower.ended(5.0) and follower.read() == b"x" and not follower.failed
    follower.close()
