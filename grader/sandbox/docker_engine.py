"""The Docker engine: the only module that imports `docker`.

`DockerEngine` implements engine.ContainerEngine, `RunningContainer` engine.Container (the run
layer knows only those protocols). Everything that starts a container labels it with the
session and removes it in `finally`; `reap()` finds what a crashed grader left behind by those
labels.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.types import DeviceRequest, LogConfig, Mount, Ulimit

from grader.errors import DockerUnavailable, ImageBuildError, InfraError
from grader.model.runs import ExitState
from grader.sandbox.engine import POLL_S, poll_to_exit
from grader.sandbox.spec import ROLE_LABEL, SESSION_LABEL, ContainerSpec

IMAGE_LABEL = "grader.image"
# What the SDK raises when the engine fails or stops answering mid-run (APIError is both).
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
ENGINE_HINT = ("check the engine (`grader doctor`), then run the same command with --resume: "
               "problems already graded are kept")
# From a container's stack_signal to its kill: faulthandler writes at once and the warden
# relays within its 0.2 s select (harness/warden.py).
STACK_GRACE_S = 1.0
# From an exited container's last look to the end of its stdout's stream: the engine ends the
# stream once its logger has the container's last bytes (a moment); past this, the stdout is
# read whole again.
STREAM_END_S = 10.0


@contextmanager
def engine_errors(what: str) -> Iterator[None]:
    """An engine that fails or vanishes is the grader's failure: an InfraError, never a
    traceback. Narrower handlers inside (ImageNotFound, NotFound) run first."""
    try:
        yield
    except ENGINE_ERRORS as exc:
        raise InfraError(f"the Docker engine failed while {what}: {exc}",
                         hint=ENGINE_HINT) from None


@dataclass(frozen=True, kw_only=True)
class ImageInfo:
    tag: str
    id: str
    size_bytes: int  # with the layers it shares with other images (`docker images`' SIZE)
    kind: str
    created: str
    # The layers no other image holds: what removing it frees (`docker system df -v`'s
    # UNIQUE SIZE). None when the engine did not say. Issue 34: every image of a suite read
    # 2080 MB, the runtime they are all built on.
    unique_bytes: int | None = None


def to_create_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    """The SDK arguments for `spec`: every hardening flag in one place, testable without Docker."""
    lim = spec.limits
    # Owned by the container's user outright: on the H200 host (2026-11-29) a mode=1777 /tmp
    # still refused uid 65534 (Triton's cache: "Permission denied: '/tmp/triton'").
    uid, _, gid = spec.user.partition(":")
    tmpfs = {"/tmp": f"rw,exec,nosuid,nodev,size={lim.scratch_bytes},mode=0700,"
                     f"uid={uid},gid={gid or uid}"}
    for path in spec.masks:
        tmpfs[path] = "ro,noexec,nosuid,nodev,size=4k,mode=0555"
    kwargs: dict[str, Any] = {
        "image": spec.image,
        "command": spec.command,
        "user": spec.user,
        "environment": dict(spec.env),
        "working_dir": spec.workdir,
        "network_mode": "none",
        "network_disabled": True,
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ipc_mode": "private",
        "pids_limit": lim.pids,
        "mem_limit": lim.memory_bytes,
        "memswap_limit": lim.memory_bytes,
        "nano_cpus": int(lim.cpus * 1e9),
        "ulimits": [Ulimit(name="nofile", soft=lim.nofile, hard=lim.nofile),
                    Ulimit(name="core", soft=0, hard=0)],
        "tmpfs": tmpfs,
        "mounts": [Mount(target=b.container, source=b.host, type="bind", read_only=b.read_only)
                   for b in spec.binds],
        "labels": {SESSION_LABEL: spec.session, ROLE_LABEL: str(spec.role)},
        # The frames' room on top of the logs': the warden keeps both within their shares
        # (counting the driver's own escapes), so rotation never drops a frame.
        "log_config": LogConfig(type=LogConfig.types.JSON, config={
            "max-size": str(lim.log_bytes + (spec.stdout_bytes + (64 << 10)
                                             if spec.stdout_bytes else 0)),
            "max-file": "1"}),
        "detach": True,
        "stdin_open": False,
        "tty": False,
    }
    if spec.gpu is not None:
        if spec.gpu.mode == "toolkit":
            kwargs["device_requests"] = [
                DeviceRequest(device_ids=[str(spec.gpu.index)], capabilities=[["gpu"]])
            ]
        else:
            kwargs["devices"] = [f"{n}:{n}:rwm" for n in spec.gpu.device_nodes]
    return kwargs


def get_engine() -> DockerEngine:
    """The engine the grader runs on, from the environment (DOCKER_HOST or the local socket),
    answering, else DockerUnavailable: the one place an engine is made (issue 33: twelve
    before), as repo2docker's get_engine (one backend here, so no name to choose by)."""
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise DockerUnavailable(
            f"no Docker engine answers: {exc}",
            hint="start one (as root: `bash scripts/setup.sh`), or set DOCKER_HOST",
        ) from None
    return DockerEngine(client)


class DockerEngine:
    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client

    def clone(self) -> DockerEngine:
        """A client of its own, for another worker thread (from the environment, as the
        first)."""
        return get_engine()

    # -- facts ---------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        with engine_errors("reading its info"):
            info: dict[str, Any] = self.client.info()
        return info

    def version(self) -> str:
        with engine_errors("reading its version"):
            return str(self.client.version().get("Version", "unknown"))

    # -- images --------------------------------------------------------------------------
    def image_id(self, tag: str) -> str | None:
        with engine_errors(f"looking up image {tag}"):
            try:
                return str(self.client.images.get(tag).id)
            except docker.errors.ImageNotFound:
                return None

    def build(self, context: Path, tag: str, kind: str) -> str:
        """Build `context/Dockerfile` as `tag`; the log's tail goes into the error on failure."""
        tail: list[str] = []
        try:
            for chunk in self.client.api.build(path=str(context), tag=tag, rm=True, forcerm=True,
                                               labels={IMAGE_LABEL: kind}, decode=True,
                                               network_mode="none"):
                if "stream" in chunk:
                    tail = ([*tail, chunk["stream"]])[-40:]
                if "error" in chunk:
                    raise ImageBuildError(f"building {tag} failed: {chunk['error'].strip()}",
                                          hint="".join(tail)[-3000:] or None)
        except ENGINE_ERRORS as exc:
            raise ImageBuildError(f"building {tag} failed: {exc}") from None
        image_id = self.image_id(tag)
        if image_id is None:
            raise ImageBuildError(f"building {tag} produced no image", hint="".join(tail)[-3000:])
        return image_id

    def import_rootfs(self, tarball: Path, tag: str, kind: str) -> str:
        repo, _, version = tag.partition(":")
        with tarball.open("rb") as f, engine_errors(f"importing {tarball}"):
            self.client.api.import_image_from_data(
                f, repository=repo, tag=version, changes=[f"LABEL {IMAGE_LABEL}={kind}"]
            )
        image_id = self.image_id(tag)
        if image_id is None:
            raise ImageBuildError(f"importing {tarball} as {tag} produced no image")
        return image_id

    def images(self) -> list[ImageInfo]:
        out = []
        with engine_errors("listing images"):
            found = self.client.images.list(filters={"label": IMAGE_LABEL})
        unique = self.unique_sizes()
        for img in found:
            for tag in img.tags or ["<none>"]:
                out.append(ImageInfo(tag=tag, id=img.id, size_bytes=int(img.attrs.get("Size", 0)),
                                     kind=img.labels.get(IMAGE_LABEL, "?"),
                                     created=str(img.attrs.get("Created", ""))[:19],
                                     unique_bytes=unique.get(img.id)))
        return sorted(out, key=lambda i: (i.kind, i.tag))

    def unique_sizes(self) -> dict[str, int]:
        """Each image's bytes in layers no other image holds, by id (the engine's disk usage
        report); empty when the engine does not give it."""
        try:
            images = self.client.df().get("Images") or []
        except ENGINE_ERRORS:
            return {}
        return {str(i["Id"]): int(i["Size"]) - int(i["SharedSize"]) for i in images
                if i.get("SharedSize") is not None and int(i["SharedSize"]) >= 0}

    def remove_image(self, tag: str) -> None:
        try:
            self.client.images.remove(tag, noprune=False)
        except docker.errors.ImageNotFound:
            pass
        except ENGINE_ERRORS as exc:
            raise InfraError(f"cannot remove image {tag}: {exc}") from None

    # -- containers ------------------------------------------------------------------------
    @contextmanager
    def start(self, spec: ContainerSpec) -> Iterator[RunningContainer]:
        try:
            container = self.client.containers.run(**to_create_kwargs(spec))
        except docker.errors.ImageNotFound:
            raise InfraError(f"image {spec.image} is missing",
                             hint="run `grader images build`") from None
        except ENGINE_ERRORS as exc:
            raise InfraError(f"cannot start a {spec.role} container: {exc}",
                             hint=ENGINE_HINT) from None
        running = RunningContainer(container, spec)
        try:
            yield running
        finally:
            running.remove()

    def run(self, spec: ContainerSpec, on_poll: Callable[[], None] | None = None) -> ExitState:
        with self.start(spec) as running:
            return running.wait(on_poll=on_poll)

    def reap(self, session: str | None = None) -> int:
        """Remove containers left by grader sessions (all of them, or one session's)."""
        label = SESSION_LABEL if session is None else f"{SESSION_LABEL}={session}"
        gone = 0
        with engine_errors("removing leftover containers"):
            for c in self.client.containers.list(all=True, filters={"label": label}):
                try:
                    c.remove(force=True)
                    gone += 1
                except docker.errors.NotFound:
                    pass
        return gone


class RunningContainer:
    def __init__(self, container: Any, spec: ContainerSpec) -> None:
        self.container = container
        self.spec = spec
        self.started = time.monotonic()
        # Until its clock is started (rebase), its set-up is allowed too (Limits.setup_s).
        self.deadline = self.started + spec.limits.setup_s + spec.limits.wall_s
        self.held_s = 0.0
        self._follower: _Follower | None = None

    @property
    def id(self) -> str:
        return str(self.container.id)

    def attrs(self) -> dict[str, Any]:
        """`docker inspect` of the container."""
        try:
            self.container.reload()
        except docker.errors.NotFound:
            # Only the grader removes its containers; the entry cannot reach the engine.
            raise InfraError(f"the {self.spec.role} container {self.id[:12]} vanished "
                             "(removed from outside the grader)", hint=ENGINE_HINT) from None
        except ENGINE_ERRORS as exc:
            raise InfraError(f"the Docker engine failed while watching the {self.spec.role} "
                             f"container: {exc}", hint=ENGINE_HINT) from None
        attrs: dict[str, Any] = self.container.attrs
        return attrs

    def exec(self, cmd: list[str]) -> tuple[int, str]:
        with engine_errors(f"running a command in the {self.spec.role} container"):
            res = self.container.exec_run(cmd, user=self.spec.user, demux=False)
        return int(res.exit_code), (res.output or b"").decode("utf-8", "replace")

    def running(self) -> bool:
        return bool(self.attrs()["State"]["Running"])

    def extend(self, seconds: float) -> None:
        """Move the wall-clock deadline later: time the container spent held, waiting on the
        grader (for its job, or for the other container of its problem), is not its own."""
        self.held_s += seconds
        self.deadline += seconds

    def rebase(self) -> None:
        """Count the wall-clock limit and the wall time from now: a standby container's wait
        for its release (run.ahead.Standby), and an entry's set-up before its harness armed
        its clock (run.batch), are not its own."""
        self.started = time.monotonic()
        self.deadline = self.started + self.spec.limits.wall_s

    def poll(self) -> ExitState | None:
        """None while it runs within its deadline; else its exit state (killed when the
        deadline has passed)."""
        running = bool(self.attrs()["State"]["Running"])
        if running and time.monotonic() < self.deadline:
            return None
        stopped = time.monotonic()  # its wall time ends at the deadline, not after the kill
        if running:
            self.last_words()
            self.kill()
        return self._exit_state(timed_out=running, at=stopped if running else None)

    def last_words(self) -> None:
        """At the deadline: the spec's stack_signal, and a moment for what it makes the
        container write (an entry's stacks) to reach the logs, before the kill."""
        if self.spec.stack_signal is None:
            return
        try:
            self.container.kill(signal=self.spec.stack_signal)
        except ENGINE_ERRORS:
            return  # exited meanwhile, or the engine failed: the kill says which
        time.sleep(STACK_GRACE_S)

    def wait(self, on_poll: Callable[[], None] | None = None,
             wall_s: float | None = None) -> ExitState:
        """Wait for exit, killing the container when the wall-clock limit passes."""
        if wall_s is not None:
            self.deadline = self.started + wall_s
        return poll_to_exit(self.poll, on_poll)

    def _exit_state(self, timed_out: bool, at: float | None = None) -> ExitState:
        wall = (time.monotonic() if at is None else at) - self.started - self.held_s
        state = self.attrs()["State"]
        logs, truncated = self.logs()
        return ExitState(
            stdout=self.stdout() if self.spec.stdout_bytes else b"",
            exit_code=None if timed_out else int(state.get("ExitCode", -1)),
            timed_out=timed_out,
            oom_killed=bool(state.get("OOMKilled", False)),
            wall_s=wall,
            held_s=self.held_s,
            logs=logs,
            logs_truncated=truncated,
        )

    def kill(self) -> None:
        try:
            self.container.kill()
        except docker.errors.APIError:
            pass  # already gone
        except requests.exceptions.RequestException as exc:
            raise InfraError(f"the Docker engine failed while killing the {self.spec.role} "
                             f"container: {exc}", hint=ENGINE_HINT) from None
        for _ in range(100):
            if not self.attrs()["State"]["Running"]:
                return
            time.sleep(POLL_S)

    def stdout(self) -> bytes:
        """What the container wrote on stdout so far (a channel's frames), at most
        spec.stdout_bytes and one byte (the reader flags more as tampering). Looked at while
        it runs (a harness's frames; a serving container's, batch after batch), it comes from
        one stream the engine keeps sending (_Follower), not read whole at each look; once the
        container has exited, that stream has ended with its last byte."""
        if self._follower is None:
            if not self.running():  # its only look, after its exit: one read
                return self._read_whole()
            self._follower = _Follower(self.container, self.spec.stdout_bytes)
        follower = self._follower
        if not follower.ended(0.0):
            if self.running():
                return follower.read()
            follower.ended(STREAM_END_S)  # exited: its stream ends with its last bytes
        # A stream that failed, did not end, or ended while the container still runs (the
        # engine's doing, not the container's) may be short of what it wrote.
        if follower.failed or not follower.ended(0.0) or self.running():
            return self._read_whole()
        return follower.read()

    def _read_whole(self) -> bytes:
        cap = self.spec.stdout_bytes
        buf = bytearray()
        with engine_errors(f"reading the {self.spec.role} container's output"):
            for chunk in self.container.logs(stdout=True, stderr=False, stream=True,
                                             follow=False):
                buf.extend(chunk)
                if len(buf) > cap:
                    del buf[cap + 1:]
                    break
        return bytes(buf)

    def logs(self) -> tuple[str, bool]:
        return self.logs_since(0.0)

    def logs_since(self, since: float) -> tuple[str, bool]:
        cap = self.spec.limits.log_bytes
        buf = bytearray()
        truncated = False
        try:
            # since=None: from the start (the SDK takes only a positive number as a time)
            for chunk in self.container.logs(stdout=not self.spec.stdout_bytes, stderr=True,
                                             stream=True, follow=False,
                                             since=since if since > 0 else None):
                buf.extend(chunk)
                if len(buf) > cap:
                    truncated = True
                    del buf[cap:]
                    break
        except ENGINE_ERRORS:
            pass  # the logs are evidence for people, not for the verdict
        return buf.decode("utf-8", "replace"), truncated

    def set_memory(self, memory_bytes: int) -> None:
        with engine_errors(f"changing the {self.spec.role} container's memory limit"):
            self.container.update(mem_limit=memory_bytes, memswap_limit=memory_bytes)

    def remove(self) -> None:
        if self._follower is not None:
            self._follower.close()
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except ENGINE_ERRORS as exc:
            raise InfraError(f"cannot remove container {self.id[:12]}: {exc}",
                             hint=ENGINE_HINT) from None


class _Follower:
    """A running container's stdout as the engine sends it: one stream (`docker logs
    --follow`) read on a thread of its own into a buffer capped as `stdout()` caps it. A
    serving container is looked at every POLL_S for hours while its stdout grows by each
    batch's frames (megabytes of records); reading it whole at each look made every look
    cost as much as all of it (bench/serve_poll.py)."""

    def __init__(self, container: Any, cap: int) -> None:
        self._cap = cap
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._stream: Any = None
        self.failed = False
        try:
            self._stream = container.logs(stdout=True, stderr=False, stream=True, follow=True)
        except ENGINE_ERRORS:
            self.failed = True
            self._ended.set()
            return
        threading.Thread(target=self._run, name="stdout-follower", daemon=True).start()

    def _run(self) -> None:
        try:
            for chunk in self._stream:
                with self._lock:
                    self._buf.extend(chunk)
                    if len(self._buf) > self._cap:
                        del self._buf[self._cap + 1:]
                        break
        except Exception:  # the engine's, or the stream closed under it (close)
            self.failed = len(self._buf) <= self._cap
        finally:
            self._ended.set()
            self.close()

    def ended(self, wait_s: float) -> bool:
        """Whether the stream has ended, waiting up to `wait_s` for it. When `failed`, what
        it read may be short of what the container wrote."""
        return self._ended.wait(wait_s)

    def read(self) -> bytes:
        with self._lock:
            return bytes(self._buf)

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None and hasattr(stream, "close"):
            try:
                stream.close()
            except Exception:  # closing is best effort: the container goes next anyway
                pass
