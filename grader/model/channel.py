"""The entry's evidence channel, host side: frames read from the container's stdout.

An entry's container runs the warden as pid 1 (grader/harness/warden.py); it alone writes
the container's stdout, one base64 line per protocol frame it accepted from the harness
(standby gate, armed, ready, traced, result) or one `tampering` frame. This module parses that
stream without trusting it (it still comes out of the entry's container) and merges it with the
output folder: the ready and result records come only from frames, and ready.json or
result.json files in the folder are tampering (evidence that arrived another way). The result
frame lists the sha256 of each output file as the harness left it; a file that differs, or
that it does not list, is tampering too.

Every anomaly found here starts with CHANNEL, which the judge reads as tampering.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grader.harness.digest import file_digest
from grader.harness.protocol import (
    ARMED,
    FRAME_MAX,
    OUTPUTS,
    READY,
    RESULT,
    STANDBY,
    STDOUT_BYTES,
    TAMPERING,
    TRACED,
)
from grader.model.evidence import (
    JSON_FILES,
    MAX_JSON,
    Anomaly,
    OutDir,
    ReadyFile,
    ResultFile,
    read_out_dir,
)

CHANNEL = "channel:"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class GateFrame(BaseModel):
    """A standby's gate: where its harness stopped (evidence for tests/gpu, nothing more)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ok: bool
    cuda_initialized: bool = False
    prepared: bool = False


class TracedFrame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    ok: bool


class ArmedFrame(BaseModel):
    """The entry's harness is set up and has run no entry code (its wall clock starts)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ok: bool


class TamperingFrame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    reason: str = Field(max_length=4000)


@dataclass(kw_only=True)
class Frames:
    """What came over one container's channel, checked."""

    standby: GateFrame | None = None
    armed: bool = False
    ready: ReadyFile | None = None
    traced: bool = False
    result: ResultFile | None = None
    outputs: dict[str, str] = field(default_factory=dict)  # <case>.out -> sha256
    tampering: str | None = None  # the warden's reason
    anomalies: list[str] = field(default_factory=list)


def read_frames(raw: bytes) -> Frames:
    """Parse a container's stdout. A trailing line without its newline is a frame still being
    written (read while the container runs), left for the next read."""
    frames = Frames()
    if len(raw) > STDOUT_BYTES:
        frames.anomalies.append(f"{CHANNEL} more than {STDOUT_BYTES} bytes on stdout")
        raw = raw[:STDOUT_BYTES]
    lines = raw.split(b"\n")[:-1]
    for n, line in enumerate(lines):
        if n >= len(FRAME_MAX) + 1:
            frames.anomalies.append(f"{CHANNEL} more frames than the protocol has")
            break
        _take(frames, line)
    return frames


def _take(frames: Frames, line: bytes) -> None:
    try:
        raw = base64.b64decode(line, validate=True)
        frame = json.loads(raw) if len(raw) <= max(FRAME_MAX.values()) else None
    except (binascii.Error, ValueError, RecursionError):
        frame = None
    if not isinstance(frame, dict) or not isinstance(frame.get("data"), dict):
        frames.anomalies.append(f"{CHANNEL} a line on stdout that is not a frame")
        return
    kind, data = frame.get("frame"), frame["data"]
    try:
        if kind == TAMPERING:
            frames.tampering = TamperingFrame.model_validate(data).reason
            frames.anomalies.append(f"{CHANNEL} tampering: {frames.tampering}")
        elif kind == STANDBY and frames.standby is None:
            frames.standby = GateFrame.model_validate(data)
        elif kind == ARMED and not frames.armed:
            frames.armed = ArmedFrame.model_validate(data).ok
        elif kind == READY and frames.ready is None:
            frames.ready = ReadyFile.model_validate(data)
        elif kind == TRACED and not frames.traced:
            frames.traced = TracedFrame.model_validate(data).ok
        elif kind == RESULT and frames.result is None:
            if len(raw) > MAX_JSON:
                frames.anomalies.append(f"{CHANNEL} the result is larger than {MAX_JSON} bytes")
                return
            frames.result = ResultFile.model_validate(data)
            frames.outputs = _outputs(frame.get("outputs"))
        else:
            frames.anomalies.append(f"{CHANNEL} a {str(kind)[:40]!r} frame out of place")
    except (ValidationError, ValueError) as exc:
        frames.anomalies.append(f"{CHANNEL} a {kind} frame is not valid "
                                f"({type(exc).__name__}: {str(exc)[:300]})")


def _outputs(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and _HEX64.match(v)
            for k, v in value.items()):
        raise ValueError("the result's outputs are not file names and sha256 digests")
    return value


def _digest(path: Path) -> str | None:
    try:
        return file_digest(path)
    except OSError:
        return None


def read_entry_out(path: Path, stdout: bytes) -> tuple[OutDir, Frames]:
    """An entry's output folder and channel together: the records from the frames, and the
    files to be checked against the digests the result frame sent (`check_outputs`, where
    the outputs are judged)."""
    out = read_out_dir(path)
    frames = read_frames(stdout)
    problems = list(frames.anomalies)
    # The harness under the warden writes no JSON file: one there was written by the entry.
    problems += [f"{CHANNEL} {name} in the output directory (the harness sends it over the "
                 "channel; a file of that name was written by the entry)"
                 for name in JSON_FILES if os.path.lexists(path / name)]
    out.ready, out.result = frames.ready, frames.result
    if frames.result is not None and frames.tampering is None:
        out.unchecked = (path, frames.outputs)
    out.anomalies.extend(Anomaly(text, True) for text in problems)
    return out, frames


def check_outputs(out: OutDir) -> None:
    """The output files against the digests the harness sent with its result, left by
    read_entry_out: a difference is tampering. Nothing can write them any more (the entry's
    container has exited, or its serving container's batch is over and its outputs moved
    out of its view), so they are read where they are judged, on the judging thread beside
    the GPU's next work: at Atrex-Bench's sizes (11.5 GB a batch) reading them is seconds,
    which were on the batch's path."""
    if out.unchecked is None:
        return
    (path, outputs), out.unchecked = out.unchecked, None
    out.anomalies.extend(Anomaly(text, True) for text in _check_outputs(path, out, outputs))


def _check_outputs(path: Path, out: OutDir, outputs: dict[str, str]) -> list[str]:
    problems = []
    for (_case, kind), file in sorted(out.tensor_files.items()):
        if kind != OUTPUTS:
            continue
        want = outputs.get(file.name)
        if want is None:
            problems.append(f"{CHANNEL} {file.name[:100]!r} is not among the outputs the "
                            "harness sent")
        elif _digest(file) != want:
            problems.append(f"{CHANNEL} {file.name[:100]!r} changed after the harness sent "
                            "its result")
    for name in outputs:
        if os.path.basename(name) != name or not os.path.lexists(path / name):
            problems.append(f"{CHANNEL} {name[:100]!r}, sent by the harness, is gone")
    return problems[:20]  # the first few say enough; a count would add nothing


