"""Open a submission bundle without trusting it.

Members are read from the tar stream by hand (never `extractall`) and written with
`O_EXCL|O_NOFOLLOW` into a fresh directory, so no member can land outside it, replace a file,
or go through a link. Every refusal is a `BundleError` subclass with its own exit code.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from grader.errors import (
    BundleTooLarge,
    BundleUnreadable,
    ManifestError,
    UnexpectedMember,
    UnsafeMember,
)
from grader.formats._base import parse_toml
from grader.formats.submission import Manifest

MANIFEST = "submission.toml"
# The `hint:` lines of intake's refusals (docs/cli.md promises one on every error).
REPACK = "pack the submission folder with `grader bundle create DIR -o bundle.tar`"
SMALLER = ("a bundle holds submission.toml and kernels/*.py within the limits that `grader "
           "bundle check` prints; remove what the kernels do not need")
KERNEL_NAME = re.compile(r"kernels/[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\.py")  # use fullmatch


@dataclass(frozen=True, kw_only=True)
class IntakeLimits:
    max_members: int = 256
    max_member_bytes: int = 1 << 20
    max_total_bytes: int = 8 << 20


# Tar headers (pax records, GNU long names) are read before any member limit applies, so the
# decompressed stream as a whole is capped: they cannot balloon in memory.
HEADER_ALLOWANCE = 2048
CORRUPT = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError, ValueError)


class _CappedReader(io.RawIOBase):
    """A read-only stream that refuses to deliver more than `limit` bytes."""

    def __init__(self, inner: io.IOBase, limit: int, bundle: Path) -> None:
        self.inner, self.limit, self.seen, self.bundle = inner, limit, 0, bundle

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(b))
        self.seen += len(data)
        if self.seen > self.limit:
            raise BundleTooLarge(f"{self.bundle}: the archive unpacks to more than "
                                 f"{self.limit} bytes (headers included)", hint=SMALLER)
        b[: len(data)] = data
        return len(data)


class _Hashing(io.RawIOBase):
    """The file's bytes, hashed as they are read."""

    def __init__(self, inner: io.RawIOBase) -> None:
        self.inner, self.hash = inner, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        n = self.inner.readinto(b) or 0
        self.hash.update(memoryview(b)[:n])
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


def _decompressed(raw: io.BufferedReader[Any]) -> io.IOBase:
    magic = raw.peek(6)[:6]
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw)
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return raw


@dataclass(frozen=True, kw_only=True)
class Submission:
    manifest: Manifest
    root: Path  # the fresh directory holding submission.toml and kernels/
    # The bundle file's sha256, over the bytes intake read (the report's bundle_sha256, the
    # checkpoint's key): hashed as it is opened, once (issue 33: opened and hashed thrice).
    sha256: str

    def kernel_path(self, problem_id: str) -> Path | None:
        entry = self.manifest.problems.get(problem_id)
        return None if entry is None else self.root / entry.file

    def kernel_sources(self) -> dict[str, str]:
        """Problem id -> kernel source text, for the static analysis."""
        return {
            pid: (self.root / e.file).read_text(encoding="utf-8", errors="replace")
            for pid, e in self.manifest.problems.items()
        }


def _check_name(member: tarfile.TarInfo) -> str:
    raw = member.name
    if "\\" in raw or "\0" in raw:
        raise UnsafeMember(f"member {raw!r}: backslash or NUL in its name", hint=REPACK)
    path = PurePosixPath(raw)
    if path.is_absolute():
        raise UnsafeMember(f"member {raw!r}: absolute path",
                           hint="create the bundle with relative paths (grader bundle create)")
    if ".." in path.parts:
        raise UnsafeMember(f"member {raw!r}: '..' in its path would escape the bundle",
                           hint=REPACK)
    parts = [p for p in path.parts if p not in ("", ".")]
    return "/".join(parts)


def _check_type(member: tarfile.TarInfo) -> None:
    if member.issym() or member.islnk():
        raise UnsafeMember(f"member {member.name!r}: links are not accepted "
                           f"(points to {member.linkname!r})",
                           hint="replace the link with a copy of the file, then " + REPACK)
    if member.ischr() or member.isblk() or member.isfifo() or member.isdev():
        raise UnsafeMember(f"member {member.name!r}: device or FIFO members are not accepted",
                           hint=REPACK)
    if not (member.isfile() or member.isdir()):
        raise UnsafeMember(f"member {member.name!r}: unsupported member type {member.type!r}",
                           hint=REPACK)


def _write_new(root: Path, name: str, data: bytes) -> None:
    # `name` already matched MANIFEST or KERNEL_NAME, so it has no `..` and at most one folder;
    # O_EXCL|O_NOFOLLOW still refuses to write through anything already there.
    target = root.joinpath(*name.split("/"))
    target.parent.mkdir(exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _read_members(tar: tarfile.TarFile, bundle: Path, limits: IntakeLimits) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    seen: set[str] = set()
    total = 0
    for count, member in enumerate(tar, start=1):
        if count > limits.max_members:
            raise BundleTooLarge(f"{bundle}: more than {limits.max_members} members",
                                 hint=SMALLER)
        try:
            name = _check_name(member)
        except UnicodeError:
            raise UnsafeMember("a member name is not valid UTF-8", hint=REPACK) from None
        _check_type(member)
        if name in seen:
            raise UnexpectedMember(f"member {name!r}: appears twice in the bundle", hint=REPACK)
        if name:
            seen.add(name)
        if member.isdir():
            if name not in ("", "kernels"):
                raise UnexpectedMember(f"member {name!r}: unexpected directory",
                                       hint="a bundle holds submission.toml and kernels/*.py")
            continue
        if name != MANIFEST and not KERNEL_NAME.fullmatch(name):
            raise UnexpectedMember(
                f"member {name!r}: outside kernels/ and the manifest",
                hint="a bundle holds submission.toml and kernels/<problem>.py only",
            )
        if member.size > limits.max_member_bytes:
            raise BundleTooLarge(f"member {name!r}: {member.size} bytes, over the "
                                 f"limit of {limits.max_member_bytes}", hint=SMALLER)
        total += member.size
        if total > limits.max_total_bytes:
            raise BundleTooLarge(f"{bundle}: more than {limits.max_total_bytes} bytes unpacked",
                                 hint=SMALLER)
        fobj = tar.extractfile(member)
        if fobj is None:
            raise BundleUnreadable(f"member {name!r}: cannot be read", hint=REPACK)
        data = fobj.read(limits.max_member_bytes + 1)
        if len(data) != member.size:
            raise BundleUnreadable(f"member {name!r}: truncated or size mismatch", hint=REPACK)
        files[name] = data
    return files


def open_bundle(bundle: Path, workdir: Path, limits: IntakeLimits | None = None, *,
                shown_as: Path | None = None) -> Submission:
    """Validate `bundle` and unpack it into `workdir`, which must not exist yet.

    `shown_as`: the name messages give the bundle (`bundle create` reads back a temp file,
    and its errors must name the participant's folder, not that file: issue 23).
    """
    limits = limits or IntakeLimits()
    path, bundle = bundle, shown_as or bundle
    try:
        workdir.mkdir(mode=0o755)
    except FileExistsError:
        raise BundleUnreadable(f"{workdir}: must be a fresh directory",
                               hint="a grader bug: report it") from None
    try:
        hashing = _Hashing(open(path, "rb", buffering=0))
    except OSError as exc:
        raise BundleUnreadable(f"{bundle}: cannot open: {exc.strerror or exc}",
                               hint="check the path and that it is readable") from None
    raw = io.BufferedReader(hashing)
    cap = limits.max_total_bytes + (limits.max_members + 2) * HEADER_ALLOWANCE
    try:
        stream = io.BufferedReader(_CappedReader(_decompressed(raw), cap, bundle))
        try:
            tar = tarfile.open(fileobj=stream, mode="r|")
        except CORRUPT as exc:
            raise BundleUnreadable(f"{bundle}: not a readable tar archive: {exc}",
                                   hint="make one with `grader bundle create DIR -o bundle.tar`"
                                   ) from None
        with tar:
            files = _read_members(tar, bundle, limits)
        while raw.read(1 << 20):  # the rest of the file (the tar's padding) counts in its hash
            pass
    except CORRUPT as exc:
        raise BundleUnreadable(f"{bundle}: corrupt archive: {exc}", hint=REPACK) from None
    except RecursionError:
        raise BundleUnreadable(f"{bundle}: archive structure too deeply nested",
                               hint=REPACK) from None
    finally:
        raw.close()
    # Everything is checked before anything is written.
    if MANIFEST not in files:
        raise ManifestError(f"{bundle}: no {MANIFEST} at the top of the bundle",
                            hint="see docs/formats.md for the manifest's fields")
    try:
        text = files[MANIFEST].decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(f"{bundle}: {MANIFEST} is not UTF-8 text",
                            hint="save submission.toml as UTF-8") from None
    try:
        manifest = parse_toml(text, Manifest, f"{bundle}:{MANIFEST}", ManifestError)
    except ManifestError as exc:
        if exc.hint:
            raise
        raise ManifestError(exc.message, hint="fix the TOML syntax of submission.toml; its "
                            "fields: docs/formats.md (Submission bundle)") from None
    for pid, entry in manifest.problems.items():
        if entry.file not in files:
            raise ManifestError(f"{bundle}:{MANIFEST}: field problems.{pid}.file: "
                                f"{entry.file!r} is not in the bundle",
                                hint=f"add {entry.file} to the folder, or fix the path in "
                                f"{MANIFEST}")
    for name, data in files.items():
        if name != MANIFEST:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                raise UnexpectedMember(f"member {name!r}: not UTF-8 Python source",
                                       hint="save the kernel file as UTF-8 text") from None
    for name, data in files.items():
        _write_new(workdir, name, data)
    return Submission(manifest=manifest, root=workdir, sha256=hashing.hash.hexdigest())
