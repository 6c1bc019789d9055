"""Write the hostile-bundle cases of `tests/cases/intake/`: one folder per case.

Each folder gets `bundle.tar` (crafted member by member with `tarfile`, never from a real
directory, so links, devices and lying headers are possible) and `case.toml` (what intake must
do with it). Run `python tests/cases/intake/make_cases.py` after changing a case and commit what
it writes; `tests/unit/test_intake.py` checks that a rerun reproduces the committed bytes, so
every header field that could vary (mtime, uid, uname, gzip timestamp) is fixed here.

A case can also be added by hand: a folder with `bundle.tar` and `case.toml` is all the test
collects. Absolute targets point into CANARY, a directory the test watches, so that a
regression that follows a link damages nothing on the machine running the tests.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import io
import lzma
import random
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CANARY = "/tmp/grader-intake-canary"
MTIME = 1_700_000_000
KiB = 1 << 10
MiB = 1 << 20

KERNEL = b'''import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def kernel(x, y):
    import torch

    out = torch.empty_like(x)
    _add[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
'''


def manifest(problems: dict[str, str] | None = None, *, extra: str = "",
             problems_toml: str | None = None) -> bytes:
    """A submission.toml; `problems` maps problem id -> kernel file."""
    if problems is None:
        problems = {"vector_add": "kernels/vector_add.py"}
    text = '[submission]\nname = "case"\nsuite = "demo"\ndsl = "triton"\n' + extra
    if problems_toml is not None:
        text += problems_toml
    for pid, file in problems.items():
        text += f'\n[problems.{pid}]\nfile = "{file}"\n'
    return text.encode()


@dataclass(frozen=True)
class M:
    """One tar member, described by hand."""

    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    linkname: str = ""
    mode: int = 0o644
    size: int | None = None  # the header's size when it should lie about the data
    pax: dict[str, str] = field(default_factory=dict)
    dev: tuple[int, int] = (0, 0)


def good(prefix: str = "") -> list[M]:
    return [M(prefix + "submission.toml", manifest()),
            M(prefix + "kernels/vector_add.py", KERNEL)]


def tar(members: Iterable[M], *, fmt: int = tarfile.GNU_FORMAT, encoding: str = "utf-8") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt, encoding=encoding) as out:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type = m.type
            info.mode = m.mode if m.type != tarfile.DIRTYPE or m.mode != 0o644 else 0o755
            info.mtime = MTIME
            info.uid = info.gid = 1000
            info.uname = info.gname = "agent"
            info.linkname = m.linkname
            info.devmajor, info.devminor = m.dev
            info.pax_headers = dict(m.pax)
            regular = m.type in (tarfile.REGTYPE, tarfile.AREGTYPE)
            info.size = m.size if m.size is not None else (len(m.data) if regular else 0)
            payload = io.BytesIO(m.data) if regular and m.size is None else None
            out.addfile(info, payload)
    return buf.getvalue()


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def xz(data: bytes) -> bytes:
    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=6)


def bz(data: bytes) -> bytes:
    return bz2.compress(data, 9)


def corrupt_middle(data: bytes, span: int = 64) -> bytes:
    """Overwrite `span` bytes in the middle of a compressed stream with fixed garbage."""
    mid = len(data) // 2
    garbage = bytes((i * 37 + 11) % 256 for i in range(span))
    return data[:mid] + garbage + data[mid + span:]


def noisy_kernel(size: int) -> bytes:
    """Valid Python that compresses poorly, so a stream corrupted in the middle fails while a
    member's data (not its header) is being read."""
    rng = random.Random(7)
    lines = [b"def kernel(x):\n    return x\n\n"]
    while sum(map(len, lines)) < size:
        lines.append(b"# " + rng.randbytes(30).hex().encode() + b"\n")
    return b"".join(lines)


def deep_toml(depth: int) -> bytes:
    return manifest() + b"\n[extra]\nx = " + b"[" * depth + b"]" * depth + b"\n"


@dataclass(frozen=True)
class Case:
    name: str
    description: str
    build: Callable[[], bytes]
    error: str | None = None  # the BundleError subclass expected, or None when accepted
    problems: tuple[str, ...] = ("vector_add",)
    message_contains: tuple[str, ...] = ()
    xfail: str | None = None  # a known intake bug: the test is expected to fail until fixed

    def toml(self) -> str:
        def s(v: str) -> str:
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

        def arr(vs: Iterable[str]) -> str:
            return "[" + ", ".join(s(v) for v in vs) + "]"

        lines = [f"description = {s(self.description)}"]
        if self.xfail:
            lines.append(f"xfail = {s(self.xfail)}")
        lines += ["", "[expect]"]
        if self.error:
            lines.append(f"error = {s(self.error)}")
        else:
            lines += ["accepted = true", f"problems = {arr(self.problems)}"]
        if self.message_contains:
            lines.append(f"message_contains = {arr(self.message_contains)}")
        return "\n".join(lines) + "\n"


def _cases() -> list[Case]:
    C = Case
    vk = "kernels/vector_add.py"
    three = {"vector_add": "kernels/vector_add.py", "rmsnorm": "kernels/rmsnorm.py",
             "matmul": "kernels/matmul.py"}
    return [
        # --- accepted -----------------------------------------------------------------------
        C("valid_minimal", "the manifest and one kernel file", lambda: tar(good())),
        C("valid_dot_slash_prefix", "every member name starts with ./ (as `tar -C dir .` writes)",
          lambda: tar([M("./", type=tarfile.DIRTYPE), *good("./")])),
        C("valid_explicit_dirs", "explicit directory members for . and kernels/",
          lambda: tar([M(".", type=tarfile.DIRTYPE), M("kernels", type=tarfile.DIRTYPE),
                       *good()])),
        C("valid_three_problems", "three problems, three kernel files",
          lambda: tar([M("submission.toml", manifest(three))]
                      + [M(f, KERNEL) for f in three.values()]),
          problems=("matmul", "rmsnorm", "vector_add")),
        C("valid_gzip", "a valid bundle compressed with gzip", lambda: gz(tar(good()))),
        C("valid_xz", "a valid bundle compressed with xz", lambda: xz(tar(good()))),
        C("valid_bz2", "a valid bundle compressed with bzip2", lambda: bz(tar(good()))),
        C("valid_pax_format", "a valid bundle in POSIX pax format", lambda: tar(good(),
          fmt=tarfile.PAX_FORMAT)),
        C("valid_ustar_format", "a valid bundle in plain ustar format", lambda: tar(good(),
          fmt=tarfile.USTAR_FORMAT)),
        C("kernel_named_torch",
          "kernels/torch.py: shadows a harness module by name, but it is only a file inside "
          "kernels/ that the harness never puts on sys.path, so intake accepts it (the "
          "sandbox must keep it off sys.path; see issue 7)",
          lambda: tar([M("submission.toml", manifest({"vector_add": "kernels/torch.py"})),
                       M("kernels/torch.py", KERNEL)])),
        C("unreferenced_extra_kernel",
          "a kernel file that the manifest does not name is unpacked but graded as nothing",
          lambda: tar([*good(), M("kernels/helper.py", b"X = 1\n")])),
        C("setuid_executable_mode", "a kernel file with mode 04777: accepted, written 0644",
          lambda: tar([M("submission.toml", manifest()), M(vk, KERNEL, mode=0o4777)])),
        C("at_member_limit", "exactly 256 members (the limit): accepted",
          lambda: gz(tar([*good()] + [M(f"kernels/k{i:03d}.py") for i in range(254)]))),
        C("at_member_size_limit", "a kernel of exactly 1 MiB (the per-member limit): accepted",
          lambda: gz(tar([M("submission.toml", manifest()),
                          M(vk, KERNEL + b"#" * (MiB - len(KERNEL) - 1) + b"\n")]))),
        # --- unsafe names -------------------------------------------------------------------
        C("absolute_path", "an absolute member path",
          lambda: tar([*good(), M(f"{CANARY}/abs.py", KERNEL)]),
          "UnsafeMember", message_contains=(f"{CANARY}/abs.py", "absolute")),
        C("dotdot_top", "../escape.py", lambda: tar([*good(), M("../escape.py", KERNEL)]),
          "UnsafeMember", message_contains=("../escape.py",)),
        C("dotdot_dot_slash", "./kernels/../../escape.py: looks like it starts inside",
          lambda: tar([*good(), M("./kernels/../../escape.py", KERNEL)]),
          "UnsafeMember", message_contains=("./kernels/../../escape.py",)),
        C("dotdot_deep_to_canary", "kernels/../../../../../..{CANARY}/x.py",
          lambda: tar([*good(), M(f"kernels/../../../../../..{CANARY}/x.py", KERNEL)]),
          "UnsafeMember", message_contains=("..",)),
        C("dotdot_inside_kernels", "kernels/../submission.toml: stays inside, still refused",
          lambda: tar([M(vk, KERNEL), M("kernels/../submission.toml", manifest())]),
          "UnsafeMember", message_contains=("kernels/../submission.toml",)),
        C("backslash_traversal", "kernels\\..\\..\\x.py (Windows separators)",
          lambda: tar([*good(), M("kernels\\..\\..\\x.py", KERNEL)]),
          "UnsafeMember", message_contains=("backslash",)),
        C("pax_path_traversal", "a pax header renames a harmless member to ../../escape.py",
          lambda: tar([*good(), M("kernels/ok.py", KERNEL, pax={"path": "../../escape.py"})],
                      fmt=tarfile.PAX_FORMAT),
          "UnsafeMember", message_contains=("../../escape.py",)),
        C("pax_nul_in_name", "a pax path holding a NUL byte",
          lambda: tar([*good(), M("kernels/ok.py", KERNEL, pax={"path": "kernels/a\0.py"})],
                      fmt=tarfile.PAX_FORMAT),
          "UnsafeMember", message_contains=("NUL",)),
        C("gnu_longname_traversal", "a GNU long name (over 100 bytes) that climbs out with ..",
          lambda: tar([*good(), M("kernels/" + "a" * 120 + "/../../../escape.py", KERNEL)]),
          "UnsafeMember", message_contains=("escape.py",)),
        # --- links and special files --------------------------------------------------------
        C("symlink_to_etc_passwd", "kernels/vector_add.py is a symlink to /etc/passwd",
          lambda: tar([M("submission.toml", manifest()),
                       M(vk, type=tarfile.SYMTYPE, linkname="/etc/passwd")]),
          "UnsafeMember", message_contains=(vk, "/etc/passwd")),
        C("symlink_then_write", "two-step trick: symlink kernels/vector_add.py -> a file "
          "outside, then a regular member of the same name that would write through it",
          lambda: tar([M("submission.toml", manifest()),
                       M(vk, type=tarfile.SYMTYPE, linkname=f"{CANARY}/target"),
                       M(vk, b"pwned\n")]),
          "UnsafeMember", message_contains=(vk,)),
        C("symlink_dir_then_write", "symlink kernels -> a directory outside, then kernels/x.py",
          lambda: tar([M("submission.toml", manifest()),
                       M("kernels", type=tarfile.SYMTYPE, linkname=CANARY),
                       M(vk, KERNEL)]),
          "UnsafeMember", message_contains=("kernels",)),
        C("symlink_relative_escape", "kernels/vector_add.py -> ../../../../outside (relative)",
          lambda: tar([M("submission.toml", manifest()),
                       M(vk, type=tarfile.SYMTYPE, linkname="../../../../outside")]),
          "UnsafeMember", message_contains=(vk,)),
        C("hardlink_then_write", "hardlink kernels/vector_add.py -> a file outside, then a "
          "regular member of the same name",
          lambda: tar([M("submission.toml", manifest()),
                       M(vk, type=tarfile.LNKTYPE, linkname=f"{CANARY}/target"),
                       M(vk, b"pwned\n")]),
          "UnsafeMember", message_contains=(vk,)),
        C("hardlink_internal", "kernels/b.py hard-linked to kernels/vector_add.py",
          lambda: tar([*good(), M("kernels/b.py", type=tarfile.LNKTYPE, linkname=vk)]),
          "UnsafeMember", message_contains=("kernels/b.py",)),
        C("char_device", "a character device kernels/null.py (1, 3)",
          lambda: tar([*good(), M("kernels/null.py", type=tarfile.CHRTYPE, dev=(1, 3))]),
          "UnsafeMember", message_contains=("kernels/null.py", "device")),
        C("block_device", "a block device kernels/sda.py (8, 0)",
          lambda: tar([*good(), M("kernels/sda.py", type=tarfile.BLKTYPE, dev=(8, 0))]),
          "UnsafeMember", message_contains=("kernels/sda.py", "device")),
        C("fifo", "a FIFO kernels/pipe.py (a reader of it would hang)",
          lambda: tar([*good(), M("kernels/pipe.py", type=tarfile.FIFOTYPE)]),
          "UnsafeMember", message_contains=("kernels/pipe.py", "FIFO")),
        C("unknown_member_type", "a member of type 'Z', unknown to tar",
          lambda: tar([*good(), M("kernels/z.py", type=b"Z")]),
          "UnsafeMember", message_contains=("kernels/z.py",)),
        # --- members outside kernels/ and the manifest --------------------------------------
        C("top_level_evil_sh", "evil.sh at the top level",
          lambda: tar([*good(), M("evil.sh", b"#!/bin/sh\nrm -rf /\n", mode=0o755)]),
          "UnexpectedMember", message_contains=("evil.sh",)),
        C("top_level_torch_py", "torch.py at the top level (shadow-module attack)",
          lambda: tar([*good(), M("torch.py", b"raise SystemExit\n")]),
          "UnexpectedMember", message_contains=("torch.py",)),
        C("top_level_grader_harness", "grader_harness.py at the top level",
          lambda: tar([*good(), M("grader_harness.py", b"PASS = True\n")]),
          "UnexpectedMember", message_contains=("grader_harness.py",)),
        C("kernel_subdirectory_file", "kernels/sub/x.py: kernels/ holds no subfolders",
          lambda: tar([*good(), M("kernels/sub/x.py", KERNEL)]),
          "UnexpectedMember", message_contains=("kernels/sub/x.py",)),
        C("kernel_subdirectory_dir", "an explicit directory member kernels/sub/",
          lambda: tar([*good(), M("kernels/sub", type=tarfile.DIRTYPE)]),
          "UnexpectedMember", message_contains=("kernels/sub",)),
        C("kernel_pth_file", "kernels/evil.pth (not a .py file)",
          lambda: tar([*good(), M("kernels/evil.pth", b"import os\n")]),
          "UnexpectedMember", message_contains=("kernels/evil.pth",)),
        C("kernel_hidden_name", "kernels/.hidden.py (name starting with a dot)",
          lambda: tar([*good(), M("kernels/.hidden.py", KERNEL)]),
          "UnexpectedMember", message_contains=("kernels/.hidden.py",)),
        C("kernels_as_regular_file", "kernels is a regular file, not a folder",
          lambda: tar([M("submission.toml", manifest()), M("kernels", b"x")]),
          "UnexpectedMember", message_contains=("kernels",)),
        C("manifest_as_directory", "submission.toml is a directory member",
          lambda: tar([M("submission.toml", type=tarfile.DIRTYPE), M(vk, KERNEL)]),
          "UnexpectedMember", message_contains=("submission.toml",)),
        C("trailing_newline_name", "kernels/vector_add.py\\n: a name ending in a newline",
          lambda: tar([*good(), M("kernels/vector_add.py\n", b"X = 1\n")]),
          "UnexpectedMember", message_contains=("vector_add.py",),),
        C("duplicate_kernel", "kernels/vector_add.py twice (second one would overwrite)",
          lambda: tar([*good(), M(vk, b"def kernel(*a):\n    return None\n")]),
          "UnexpectedMember", message_contains=(vk, "twice")),
        C("duplicate_after_normalisation", "kernels/vector_add.py then ./kernels//vector_add.py",
          lambda: tar([*good(), M("./kernels//vector_add.py", KERNEL)]),
          "UnexpectedMember", message_contains=(vk, "twice")),
        C("duplicate_manifest", "submission.toml twice, the second naming another suite",
          lambda: tar([*good(), M("submission.toml", manifest().replace(b"demo", b"other"))]),
          "UnexpectedMember", message_contains=("submission.toml", "twice")),
        C("non_utf8_name_gnu", "a member name in Latin-1 (byte 0xE9), not UTF-8",
          lambda: tar([*good(), M("kernels/caf\xe9.py", KERNEL)], encoding="latin-1"),
          "UnexpectedMember", message_contains=("kernels/caf",)),
        C("non_utf8_name_pax", "a pax path with hdrcharset=BINARY and raw non-UTF-8 bytes",
          lambda: tar([*good(), M("kernels/\udcff\udcfe.py", KERNEL)], fmt=tarfile.PAX_FORMAT),
          "UnexpectedMember", message_contains=("kernels/",)),
        C("ansi_escape_name", "a member name holding terminal escape sequences",
          lambda: tar([*good(), M("kernels/\x1b[2J\x1b]0;owned\x07.py", KERNEL)]),
          "UnexpectedMember", message_contains=("kernels/",)),
        C("non_utf8_kernel_content", "a kernel file whose bytes are not UTF-8",
          lambda: tar([M("submission.toml", manifest()), M(vk, b"def kernel(x):\n    \xff\xfe\n")]),
          "UnexpectedMember", message_contains=(vk, "UTF-8")),
        # --- tar bombs ----------------------------------------------------------------------
        C("too_many_members", "257 members (limit 256), gzip-compressed",
          lambda: gz(tar([*good()] + [M(f"kernels/k{i:03d}.py") for i in range(255)])),
          "BundleTooLarge", message_contains=("256",)),
        C("thousands_of_members", "5000 empty kernel files",
          lambda: gz(tar([*good()] + [M(f"kernels/k{i:04d}.py") for i in range(4998)])),
          "BundleTooLarge", message_contains=("256",)),
        C("member_over_1mib", "one kernel file of 1 MiB + 1 byte (gzip, tiny on disk)",
          lambda: gz(tar([M("submission.toml", manifest()), M(vk, b"#" * (MiB + 1))])),
          "BundleTooLarge", message_contains=(vk,)),
        C("header_claims_1gib", "a header that claims 1 GiB with no data behind it",
          lambda: tar([M("submission.toml", manifest()), M(vk, size=1 << 30)]),
          "BundleTooLarge", message_contains=(vk,)),
        C("pax_size_override", "a pax size=2000000000 record on a small member",
          lambda: tar([M("submission.toml", manifest()),
                       M(vk, KERNEL, pax={"size": "2000000000"})], fmt=tarfile.PAX_FORMAT),
          "BundleTooLarge", message_contains=(vk,)),
        C("gzip_bomb_total", "nine 1 MiB members (9 MiB over the 8 MiB total), gzip",
          lambda: gz(tar([M("submission.toml", manifest())]
                         + [M(f"kernels/k{i}.py", b"\0" * MiB) for i in range(9)])),
          "BundleTooLarge", message_contains=("8388608",)),
        C("bz2_bomb_total", "twelve 1 MiB members (12 MiB over the 8 MiB total), bzip2",
          lambda: bz(tar([M("submission.toml", manifest())]
                         + [M(f"kernels/k{i:02d}.py", b"\0" * MiB) for i in range(12)])),
          "BundleTooLarge", message_contains=("8388608",)),
        C("pax_header_bomb", "a 16 MiB pax comment record (gzip: about 16 KiB on disk)",
          lambda: gz(tar([M("submission.toml", manifest()),
                          M(vk, KERNEL, pax={"comment": "x" * (16 * MiB)})],
                         fmt=tarfile.PAX_FORMAT)),
          "BundleTooLarge",),
        # --- unreadable ---------------------------------------------------------------------
        C("not_a_tar", "a text file, not an archive",
          lambda: b"this is not a tar archive\n" * 40, "BundleUnreadable"),
        C("zero_bytes", "an empty file", lambda: b"", "BundleUnreadable"),
        C("truncated_tar", "a tar cut off in the middle of the kernel's data",
          lambda: tar(good())[:512 * 3 + 100], "BundleUnreadable",
          message_contains=("corrupt",)),
        C("truncated_gzip", "a gzip stream cut in half", lambda: gz(tar(good()))[:300],
          "BundleUnreadable"),
        C("corrupt_bz2", "a bzip2 stream with garbage in the middle",
          lambda: corrupt_middle(bz(tar(good()))), "BundleUnreadable"),
        C("corrupt_gzip_data", "a gzip stream with garbage in the middle of a kernel's data",
          lambda: corrupt_middle(gz(tar([M("submission.toml", manifest()),
                                         M(vk, noisy_kernel(48 * KiB))]))),
          "BundleUnreadable",),
        C("corrupt_xz", "an xz stream with garbage in the middle of a kernel's data",
          lambda: corrupt_middle(xz(tar([M("submission.toml", manifest()),
                                         M(vk, noisy_kernel(48 * KiB))]))),
          "BundleUnreadable",),
        C("pax_negative_size", "a pax size=-512 record (moves the next header backwards)",
          lambda: tar([M("submission.toml", manifest()),
                       M(vk, KERNEL, pax={"size": "-512"})], fmt=tarfile.PAX_FORMAT),
          "BundleUnreadable", message_contains=(vk,)),
        # --- the manifest -------------------------------------------------------------------
        C("manifest_missing", "kernels only, no submission.toml",
          lambda: tar([M(vk, KERNEL)]), "ManifestError", message_contains=("submission.toml",)),
        C("empty_archive", "a valid tar with no members (end-of-archive blocks only)",
          lambda: tar([]), "ManifestError", message_contains=("submission.toml",)),
        C("manifest_in_subfolder", "kernels/submission.toml instead of the top level",
          lambda: tar([M("kernels/submission.toml", manifest()), M(vk, KERNEL)]),
          "UnexpectedMember", message_contains=("kernels/submission.toml",)),
        C("manifest_not_toml", "submission.toml is not TOML",
          lambda: tar([M("submission.toml", b"[submission\nname = \n"), M(vk, KERNEL)]),
          "ManifestError", message_contains=("submission.toml", "TOML")),
        C("manifest_not_utf8", "submission.toml holds non-UTF-8 bytes",
          lambda: tar([M("submission.toml", manifest().replace(b"case", b"\xff\xfe")),
                       M(vk, KERNEL)]),
          "ManifestError", message_contains=("submission.toml", "UTF-8")),
        C("manifest_unknown_field", "an unknown field submission.colour",
          lambda: tar([M("submission.toml", manifest(extra='colour = "red"\n')), M(vk, KERNEL)]),
          "ManifestError", message_contains=("submission.colour",)),
        C("manifest_unknown_table", "an unknown top-level table [scores]",
          lambda: tar([M("submission.toml", manifest() + b"\n[scores]\nvector_add = 1e9\n"),
                       M(vk, KERNEL)]),
          "ManifestError", message_contains=("scores",)),
        C("manifest_wrong_type", "problems.vector_add.file is an integer",
          lambda: tar([M("submission.toml", manifest({}, problems_toml=(
              "\n[problems.vector_add]\nfile = 3\n"))), M(vk, KERNEL)]),
          "ManifestError", message_contains=("problems.vector_add.file",)),
        C("manifest_missing_field", "[submission] without suite",
          lambda: tar([M("submission.toml", manifest().replace(b'suite = "demo"\n', b"")),
                       M(vk, KERNEL)]),
          "ManifestError", message_contains=("submission.suite",)),
        C("manifest_nan_wall_s", "agent.wall_s = nan: a cost that is not a number",
          lambda: tar([M("submission.toml", manifest(extra="\n[submission.agent]\nwall_s = nan\n")),
                       M(vk, KERNEL)]),
          "ManifestError", message_contains=("submission.agent.wall_s",)),
        C("manifest_no_problems", "a manifest with an empty problems table",
          lambda: tar([M("submission.toml", manifest({}, problems_toml="\n[problems]\n")),
                       M(vk, KERNEL)]),
          "ManifestError", message_contains=("problems",)),
        C("manifest_names_missing_file", "the manifest names kernels/rmsnorm.py, not in the bundle",
          lambda: tar([M("submission.toml", manifest({"vector_add": vk,
                                                      "rmsnorm": "kernels/rmsnorm.py"})),
                       M(vk, KERNEL)]),
          "ManifestError", message_contains=("problems.rmsnorm.file", "kernels/rmsnorm.py")),
        C("manifest_file_dotdot", "the manifest names ../x.py",
          lambda: tar([M("submission.toml", manifest({"vector_add": "../x.py"})), M(vk, KERNEL)]),
          "ManifestError", message_contains=("problems.vector_add.file",)),
        C("manifest_file_kernels_dotdot", "the manifest names kernels/../submission.toml",
          lambda: tar([M("submission.toml",
                         manifest({"vector_add": "kernels/../submission.toml"})),
                       M(vk, KERNEL)]),
          "ManifestError", message_contains=("problems.vector_add.file",)),
        C("manifest_file_absolute", "the manifest names /abs.py",
          lambda: tar([M("submission.toml", manifest({"vector_add": "/abs.py"})), M(vk, KERNEL)]),
          "ManifestError", message_contains=("problems.vector_add.file",)),
        C("manifest_same_file_twice", "two problems name the same kernel file",
          lambda: tar([M("submission.toml", manifest({"vector_add": vk, "rmsnorm": vk})),
                       M(vk, KERNEL)]),
          "ManifestError", message_contains=("same kernel file",)),
        C("manifest_bad_problem_id", "a problem id with a slash in it",
          lambda: tar([M("submission.toml", manifest({'"../x"': vk})), M(vk, KERNEL)]),
          "ManifestError", message_contains=("problems",)),
        C("manifest_deep_nesting", "an array nested 5000 deep (blows the TOML parser's stack)",
          lambda: tar([M("submission.toml", deep_toml(5000)), M(vk, KERNEL)]),
          "ManifestError", message_contains=("submission.toml",),),
    ]


CASES = _cases()


def write_cases(out: Path, cases: Iterable[Case] = CASES) -> list[Path]:
    written = []
    for case in cases:
        folder = out / case.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "bundle.tar").write_bytes(case.build())
        (folder / "case.toml").write_text(case.toml(), encoding="utf-8")
        written.append(folder)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: here)")
    args = parser.parse_args()
    folders = write_cases(args.out)
    print(f"wrote {len(folders)} cases under {args.out}")


if __name__ == "__main__":
    main()
