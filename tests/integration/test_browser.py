"""The HTML report in a real headless Chromium (Debian's `chromium`), fed hostile strings.

Skipped where no `chromium` is installed (scripts/setup.sh installs it). The report is built
by hand: a submission whose name, kernel names and stderr carry script tags and event-handler
markup that would set `document.title` if any of it ever ran.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from datetime import UTC, datetime
from html import unescape
from pathlib import Path

import pytest

from grader.grading.grader import summarize
from grader.model.findings import Finding, Layer, Severity
from grader.model.results import (
    Comparison,
    Environment,
    KernelTime,
    ProblemResult,
    Report,
    ShapeResult,
    SubmissionSummary,
    SuiteSummary,
    Timing,
    Trace,
)
from grader.report.html import render_html
from grader.verdicts import Verdict, worst

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")

PWN = "document.title='PWNED'"
NAME = f"<script>{PWN}</script>team"
KERNEL = f'k<img src=x onerror="{PWN}"><script>{PWN}</script>'
STDERR = f"Traceback:\n</pre><script>{PWN}</script><svg onload=\"{PWN}\">\n" * 50
WIDTH, HEIGHT = 1280, 2000


def _shape(sid: str, verdict: Verdict, *, us: float | None = None,
           error: str | None = None) -> ShapeResult:
    ok = verdict in (Verdict.PASSED, Verdict.FALLBACK)
    return ShapeResult(
        id=sid, phase="decode", smoke=sid.startswith("smoke"), params={"n": 4096},
        verdict=verdict, detail=f"detail of {sid}", error_excerpt=error,
        comparisons=[Comparison(max_abs_err=1e-7 if ok else 0.3, mismatched=0 if ok else 9,
                                total=4096, atol=1e-6, rtol=1e-6)],
        timing=None if us is None else Timing(median_us=us, iqr_us=us / 20, cv=0.02,
                                              samples=30, method="wall-clock (cpu)"),
        trace=Trace(triton_launches={KERNEL: 2},
                    device_kernels=[KernelTime(name=KERNEL, kind="own_triton", device_us=5.0,
                                               calls=2)], dsl_share=1.0))


def hostile_report() -> Report:
    finding = Finding(rule="FB001", severity=Severity.FALLBACK, layer=Layer.STATIC,
                      message=f"calls torch.matmul {KERNEL}", file="kernels/matmul.py", line=3,
                      snippet=f"    return torch.matmul(a, b)  # {NAME}")
    problems = []
    for pid, verdicts in (("vector_add", [Verdict.PASSED, Verdict.PASSED]),
                          ("matmul", [Verdict.FALLBACK, Verdict.INCORRECT])):
        shapes = [_shape(f"smoke_{i}" if i == 0 else f"shape_{i}", v, us=100.0 * (i + 1),
                         error=STDERR if v is Verdict.INCORRECT else None)
                  for i, v in enumerate(verdicts)]
        problems.append(ProblemResult(
            id=pid, operator="op", verdict=worst(verdicts), shapes=shapes,
            detail=worst(verdicts).message, kernel_file=f"kernels/{pid}.py",
            findings=[finding] if pid == "matmul" else [], stderr_excerpt=STDERR, wall_s=3.0))
    return Report(
        created_at=datetime(2026, 1, 5, 10, 0, tzinfo=UTC),
        submission=SubmissionSummary(name=NAME, suite="demo", dsl="triton",
                                     bundle_sha256="b" * 64),
        suite=SuiteSummary(id="demo", version="0.1.0", weights_version="0.1.0"),
        environment=Environment(grader_version="0.1.0", hardware="cpu-interpreter",
                                device="cpu (Triton interpreter)", is_performance=False,
                                policy="triton", images={"runtime": "sha256:" + "c" * 64},
                                seed_commitment="e" * 64, docker="28.2.2"),
        problems=problems, summary=summarize(problems))


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[bytes]:
    """Headless Chromium, offline and quiet: no GPU, no first-run, no background traffic."""
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, timeout=120, check=False)


def png_rows(data: bytes, max_rows: int) -> tuple[int, int, list[bytes]]:
    """Width, height and the first `max_rows` unfiltered rows of an 8-bit RGB(A) PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    bpp = 3 if color == 2 else 4
    stride = width * bpp
    raw = zlib.decompressobj().decompress(idat, (stride + 1) * max_rows)
    rows: list[bytes] = []
    prior = bytearray(stride)
    for y in range(min(max_rows, height)):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (
            stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prior[x]
            c = prior[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[x] = (line[x] + pred) & 0xFF
        rows.append(bytes(line))
        prior = line
    return width, height, [bytes(r) for r in rows]


def colours(rows: list[bytes], bpp: int = 4) -> set[bytes]:
    return {row[i:i + 3] for row in rows for i in range(0, len(row), bpp * 4)}


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser") / "report.html"
    out.write_text(render_html(hostile_report()), encoding="utf-8")
    return out


def test_screenshot_is_a_rendered_page(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    res = chromium(f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
                   page.as_uri(), profile=tmp_path / "profile")
    assert shot.is_file(), res.stderr.decode(errors="replace")[-2000:]
    data = shot.read_bytes()
    width, height, rows = png_rows(data, max_rows=240)
    assert (width, height) == (WIDTH, HEIGHT)
    bpp = len(rows[0]) // width
    seen = colours(rows, bpp)
    # A blank page is one colour; the header, banner and summary give many (text antialiasing).
    assert len(seen) > 8, f"{len(seen)} colours in the top of the page: blank?"
    assert len(data) > 20_000


def test_dom_has_the_key_elements_and_no_script_ran(page: Path, tmp_path: Path) -> None:
    res = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile")
    dom = res.stdout.decode("utf-8", errors="replace")
    assert "</html>" in dom, res.stderr.decode(errors="replace")[-2000:]
    title = re.search(r"<title>(.*?)</title>", dom, flags=re.S)
    assert title is not None
    # Had any hostile script or handler run, document.title would now be PWNED.
    assert unescape(title.group(1)).strip() == f"Grading report: {NAME}"
    assert "<script" not in dom.lower() and "<img" not in dom.lower()
    assert not re.search(r"<[a-z]+[^<>]*\son(error|load)=", dom, flags=re.I)
    for key in ('id="summary"', 'id="problems"', 'id="environment"'):
        assert key in dom
    table = dom.split('id="problems"', 1)[1].split("</table>", 1)[0]
    assert "vector_add" in table and "matmul" in table
    assert unescape(dom).count(PWN) >= 3  # the hostile text is shown, as text
