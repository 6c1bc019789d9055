"""What comes back from a container, read without trusting it.

The output directory of an entry container was writable by entry code: every name, type and
size is checked (lstat, no links followed) and every JSON file validated against a schema
before anything else looks at it. Anything odd is recorded as an anomaly for the judge.

Every limit is fixed before reading (issue 19): entries of the folder, bytes of a JSON file,
numbers that must be finite and of a sane size, and (harness/tensors.ReadLimits) what a tensor
file may allocate. Anomalies are counted per kind, never listed per file: 300,000 empty files
once made a 130 MB report.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from grader.harness import tensors
from grader.harness.protocol import CASE_KINDS, OUTPUTS, READY_FILE, RESULT_FILE

MAX_JSON = 4 << 20
CASE_FILE = re.compile(r"^(?P<case>[A-Za-z0-9_.-]{1,160})\.(?P<kind>" + "|".join(CASE_KINDS)
                       + ")$")
JSON_FILES = (READY_FILE, RESULT_FILE)
# Names in one output folder: a batch's case files (an input, an output, an expected output
# per case: a few hundred) and a handful of JSON files, with room to spare. Past it, the rest
# is never listed.
MAX_ENTRIES = 8192
# The largest magnitude of any number in the evidence: 1e12 µs is eleven days. Sums and
# squares of 10,000 such samples stay finite (judge/timing.py), so no report gets an inf or NaN.
MAX_NUMBER = 1e12
EXAMPLES = 3  # names quoted in an anomaly of many files


def _numbers(value: Any) -> Iterable[float]:
    if isinstance(value, float):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)


class _Model(BaseModel):
    # NaN and Infinity parse as JSON in Python; allowed through, one reached report.json as
    # null and the report could no longer be read (issue 19).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @model_validator(mode="after")
    def _sane_numbers(self) -> _Model:
        for name in type(self).model_fields:
            for x in _numbers(getattr(self, name)):
                if not abs(x) <= MAX_NUMBER:
                    raise ValueError(f"{name}: a number of magnitude over {MAX_NUMBER:g}")
        return self


class ReadyFile(_Model):
    ok: bool
    error: str | None = Field(default=None, max_length=20000)
    import_s: float | None = None
    jit_functions: list[str] = Field(default_factory=list, max_length=1000)


class KernelRecord(_Model):
    name: str = Field(max_length=2000)
    device_us: float = Field(ge=0)
    calls: int = Field(ge=1)


class TraceRecord(_Model):
    torch_ops: dict[str, int] = Field(default_factory=dict, max_length=5000)
    triton_launches: dict[str, int] = Field(default_factory=dict, max_length=5000)
    # Launches that came through no Triton function of the entry's own file (record.py).
    foreign_triton: dict[str, int] = Field(default_factory=dict, max_length=5000)
    device_kernels: list[KernelRecord] = Field(default_factory=list, max_length=20000)
    # Type names of Triton launch arguments that were not plain tensors, scalars or Triton's
    # own types, and tensor methods that handed memory to another array library (record.py).
    launch_arg_types: dict[str, int] = Field(default_factory=dict, max_length=1000)
    array_exports: dict[str, int] = Field(default_factory=dict, max_length=100)
    # Ops Triton's CPU interpreter computed on bf16 operands (wrong there: trace.py).
    interpreter_bf16: dict[str, int] = Field(default_factory=dict, max_length=100)


class DeviceRecord(_Model):
    """Whether the device record's brackets matched the harness's calls (record.DeviceCalls)."""

    consistent: bool
    problem: str = Field(default="", max_length=500)


class CaseRecord(_Model):
    ok: bool
    error: str | None = Field(default=None, max_length=20000)
    wall_s: float | None = None
    trace: TraceRecord | None = None
    # The reference's: the bytes its inputs held (the entry's memory is sized from them), and
    # in suite check their sha256 (a recipe must draw the same bits from a seed every time).
    input_bytes: int | None = Field(default=None, ge=0)
    input_digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class TimingRecord(_Model):
    ok: bool
    error: str | None = Field(default=None, max_length=20000)
    device_us: list[float] = Field(default_factory=list, max_length=10000)
    host_us: list[float] = Field(default_factory=list, max_length=10000)
    method: str = Field(default="", max_length=100)
    loop_s: float | None = None
    flush_bytes: int | None = Field(default=None, ge=0)  # the L2 flush buffer the loop wrote
    # What the timed calls themselves ran (summed over them), and per timed call the µs of its
    # event-timed device time during which some recorded kernel ran (CUDA).
    trace: TraceRecord | None = None
    covered_us: list[float] = Field(default_factory=list, max_length=10000)
    # ... and the µs its recorded kernels ran in all, inside its events or not (CUDA).
    busy_us: list[float] = Field(default_factory=list, max_length=10000)


class ResultFile(_Model):
    cases: dict[str, CaseRecord] = Field(max_length=10000)
    timings: dict[str, TimingRecord] = Field(default_factory=dict, max_length=1000)
    device_name: str | None = Field(default=None, max_length=200)  # from the reference run
    # Seconds per phase as the process itself counted them (harness.main.Phases): for the
    # overhead benchmark only, never for a verdict.
    phases_s: dict[str, float] = Field(default_factory=dict, max_length=32)
    # The entry's activity outside its calls (import time, between calls), and on CUDA whether
    # its device record could be split into calls.
    outside: TraceRecord | None = None
    device_record: DeviceRecord | None = None


@dataclass(frozen=True)
class Anomaly:
    """Something odd in an output folder, once per kind, with its count."""

    text: str
    tampering: bool  # the folder was written past what the harness writes: a verdict


@dataclass(kw_only=True)
class OutDir:
    """The checked content of one output directory."""

    ready: ReadyFile | None = None
    result: ResultFile | None = None
    tensor_files: dict[tuple[str, str], Path] = field(default_factory=dict)  # (case, kind) -> path
    anomalies: list[Anomaly] = field(default_factory=list)
    # An entry's folder and the digests its harness sent for its output files, until
    # channel.check_outputs has checked them (on the judging thread)
    unchecked: tuple[Path, dict[str, str]] | None = None

    def load_tensors(self, case: str, kind: str, max_bytes: int,
                     shared_from: int | None = None) -> list[Any] | str:
        """The values of a case file, or a string saying why they cannot be read (tensors of
        `shared_from` elements or more in shared memory: tensors.load)."""
        path = self.tensor_files.get((case, kind))
        if path is None:
            return f"no {kind} file for case {case}"
        try:
            return tensors.load(path, limits=tensors.ReadLimits(max_bytes=max_bytes),
                                shared_from=shared_from)
        except (tensors.TensorFileError, OSError, RuntimeError, TypeError, ValueError,
                RecursionError) as exc:
            return f"unreadable {kind} file for case {case}: {exc}"


def _read_json(path: Path, model: type[_Model], out: OutDir) -> Any:
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_JSON + 1)
        if len(raw) > MAX_JSON:
            out.anomalies.append(Anomaly(f"{path.name}: larger than {MAX_JSON} bytes", True))
            return None
        return model.model_validate(json.loads(raw))
    except (OSError, ValueError, ValidationError, RecursionError) as exc:
        out.anomalies.append(Anomaly(
            f"{path.name}: not valid ({type(exc).__name__}: {str(exc)[:300]})", True))
        return None


def read_result(path: Path) -> ResultFile | None:
    """One result file on its own (a held reference's case results), validated."""
    result: ResultFile | None = _read_json(path, ResultFile, OutDir())
    return result


@dataclass
class _Tally:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, name: str, why: str = "") -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(repr(name[:60]) + (f": {why[:120]}" if why else ""))


# Kinds of odd entries: what the message says, and whether it is tampering.
_KINDS = {"symlink": ("symlink(s)", True), "other": ("non-regular file(s)", True),
          "unexpected": ("unexpected file(s)", False),
          # The harness writes outputs whole (tensors.save): one the reader refuses (aliased
          # extents, a name used twice, past a count) was written by the entry.
          "refused": ("output file(s) the tensor reader refuses", True)}


def read_out_dir(path: Path, *, max_entries: int = MAX_ENTRIES) -> OutDir:
    """What the folder holds, reading at most `max_entries` names of it (more is tampering)."""
    out = OutDir()
    tallies = {k: _Tally() for k in _KINDS}
    seen = 0
    try:
        with os.scandir(path) as it:
            for entry in it:
                seen += 1
                if seen > max_entries:
                    out.anomalies.append(Anomaly(
                        f"more than {max_entries} entries in the output directory "
                        "(the rest were not read)", True))
                    break
                _entry(entry, out, tallies)
    except OSError as exc:
        out.anomalies.append(Anomaly(f"cannot list the output directory: {exc}", False))
    for kind, tally in tallies.items():
        if tally.count:
            what, tamper = _KINDS[kind]
            out.anomalies.append(Anomaly(
                f"{tally.count} {what} in the output directory "
                f"(e.g. {', '.join(tally.examples)})", tamper))
    return out


def _entry(entry: os.DirEntry[str], out: OutDir, tallies: dict[str, _Tally]) -> None:
    name = entry.name
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        tallies["symlink" if stat.S_ISLNK(st.st_mode) else "other"].add(name)
    elif name == READY_FILE:
        out.ready = _read_json(Path(entry.path), ReadyFile, out)
    elif name == RESULT_FILE:
        out.result = _read_json(Path(entry.path), ResultFile, out)
    elif m := CASE_FILE.match(name):
        if m["kind"] == OUTPUTS:  # the header alone, before the judge reads any body
            try:
                tensors.check(Path(entry.path))
            except (tensors.TensorFileError, OSError) as exc:
                tallies["refused"].add(name, str(exc).removeprefix(f"{name}: "))
                return
        out.tensor_files[(m["case"], m["kind"])] = Path(entry.path)
    elif not name.startswith("."):
        tallies["unexpected"].add(name)
