"""Grade the corpus of honest public Triton code (issue 17 "And no false alarms on honest code")
on this host and print one row per case and problem: the verdict and every static or dynamic
finding that is not `info`. Each case is an upstream kernel from Liger-Kernel, Triton's
tutorials or vLLM behind a thin `kernel()` adapter; every one must get the verdict its case
expects (`passed`, or for honest code that fails on its own, the `runtime_error` its case.toml
explains). The upstream code is never committed: bench/honest_corpus_assemble.py builds the
case folders from local copies into build/honest_public/
(tests/cases/honest_public_src/NOTICE.md), which this grades.

    python bench/honest_corpus.py                           # CPU: the cases the interpreter runs
    python bench/honest_corpus.py --device cuda             # GPU 0, host runtime: all cases
    python bench/honest_corpus.py --device cuda --runtime cuda liger_rms_norm
    python bench/honest_corpus.py --corpus DIR              # an assembly elsewhere

Exits 1 when any graded problem's verdict is not the one its case expects (`passed`, or for
honest code that fails on its own, `runtime_error` with the cause in its case.toml; a case's
`xfail` reason, if it has one, is shown beside it: a known open false alarm), 0 otherwise.
Results: docs/security.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere in the checkout
    sys.path.insert(0, str(REPO))

from grader.model.findings import Finding, Severity  # noqa: E402
from grader.model.results import ProblemResult  # noqa: E402
from grader.verdicts import Verdict  # noqa: E402

CORPUS = REPO / "build" / "honest_public"  # where bench/honest_corpus_assemble.py writes
CPU_GROUP = "honest_public"  # cases the CPU interpreter can run
GPU_GROUP = "honest_public_gpu"  # cases that only a GPU runs (docs/architecture.md, limits)


@dataclass(frozen=True, kw_only=True)
class Row:
    case: str
    problem: str
    verdict: str
    findings: tuple[str, ...]  # "RULE severity line N" for each finding above info
    known: str | None  # the case's xfail reason: a known open false alarm
    why: str | None = None  # the first shape not passed: its detail and error excerpt
    expected: str = Verdict.PASSED  # the case's [expect]: passed, or the code's own failure

    @property
    def ok(self) -> bool:
        return self.verdict == self.expected


def groups_for(device: str) -> tuple[str, ...]:
    return (CPU_GROUP, GPU_GROUP) if device == "cuda" else (CPU_GROUP,)


def discover(groups: Iterable[str], names: Sequence[str] = (),
             root: Path = CORPUS) -> list[Path]:
    """The case folders of these groups under root (those with a case.toml), sorted; only
    those named when names are given (a folder name, or a path to a case folder). An unknown
    name is an error, not a silently shorter table."""
    found = sorted(p for g in groups if (root / g).is_dir() for p in (root / g).iterdir()
                   if (p / "case.toml").is_file())
    if not names:
        return found
    by_name = {p.name: p for p in found}
    picked: list[Path] = []
    for name in names:
        path = Path(name)
        if (path / "case.toml").is_file():
            picked.append(path.resolve())
        elif name in by_name:
            picked.append(by_name[name])
        else:
            raise SystemExit(f"error: no case {name!r} in {', '.join(groups)} "
                             f"(known: {', '.join(sorted(by_name))})")
    return picked


def _shown(findings: Iterable[Finding]) -> tuple[str, ...]:
    """Findings that are shown to the entry's author (above info), once each."""
    out: dict[str, None] = {}
    for f in findings:
        if f.severity != Severity.INFO:
            where = f" line {f.line}" if f.line else ""
            out[f"{f.rule} {f.severity}{where}"] = None
    return tuple(out)


def rows_from_problems(case: str, problems: Iterable[ProblemResult], known: str | None,
                       expected: Mapping[str, str] | None = None) -> list[Row]:
    """One row per graded problem: its static findings and its shapes' dynamic ones, against
    the verdict the case expects (passed where it says nothing)."""
    rows = []
    for p in problems:
        dynamic = [f for s in p.shapes for f in s.findings]
        rows.append(Row(case=case, problem=p.id, verdict=str(p.verdict),
                        findings=_shown([*p.findings, *dynamic]), known=known,
                        why=_why(p), expected=str((expected or {}).get(p.id, Verdict.PASSED))))
    return rows


def _why(p: ProblemResult) -> str | None:
    """What the first shape that did not pass says: its detail and the tail of its error
    excerpt (the traceback's last lines name the cause), on one line."""
    for s in p.shapes:
        if s.verdict != Verdict.PASSED:
            tail = (s.error_excerpt or "").strip().splitlines()[-6:]
            return " | ".join([f"{s.id}: {s.detail}", *tail])[:WHY_CHARS]
    return None


WHY_CHARS = 800


def render(rows: Sequence[Row]) -> str:
    """A plain-text table (the project has no table library): case, problem, verdict,
    findings; a known open false alarm says so under its row."""
    head = ("case", "problem", "verdict", "findings")
    body = [(r.case, r.problem, r.verdict, ", ".join(r.findings) or "-") for r in rows]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(3)]
    lines = []
    for i, line in enumerate([head, *body]):
        lines.append("  ".join(c.ljust(w) for c, w in zip(line[:3], widths, strict=True))
                     + "  " + line[3])
        row = rows[i - 1] if i else None
        if row is not None and row.expected != Verdict.PASSED:
            lines.append(" " * (sum(widths) + 6) + f"expected: {row.expected} (case.toml)")
        if row is not None and not row.ok:
            pad = " " * (sum(widths) + 6)
            if row.known:
                lines.append(f"{pad}known: {row.known}")
            if row.why:
                lines.append(f"{pad}why: {row.why}")
    as_expected = sum(r.ok for r in rows)
    lines.append(f"{as_expected}/{len(rows)} as expected")
    return "\n".join(lines)


def grade(cases: Sequence[Path], device: str, runtime: str,
          python: str | None) -> list[Row]:
    from grader.cli.selftest import Target, grade_case
    from grader.sandbox.docker_engine import get_engine

    engine = get_engine()
    target = Target(device=device, runtime=runtime, python=python)
    rows: list[Row] = []
    for case in cases:
        known = tomllib.loads((case / "case.toml").read_text()).get("xfail")
        work = Path(tempfile.mkdtemp(prefix="honest-corpus-"))
        try:
            result = grade_case(engine, case, work, target)
            rows += rows_from_problems(result.case, result.report.problems, known,
                                       {pid: str(v) for pid, v in result.expected.items()})
        finally:
            shutil.rmtree(work, ignore_errors=True)
        got = ", ".join(f"{pid}={v}" for pid, v in result.got.items())
        print(f"graded {result.case}: {got}", file=sys.stderr, flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", help="case names or folders (default: all of the "
                    "device's groups)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--runtime", choices=("cpu", "cuda", "host"), default=None,
                    help="default: cpu for --device cpu, host for --device cuda")
    ap.add_argument("--python", default=None,
                    help="interpreter in the container (default: this one, for --runtime host)")
    ap.add_argument("--corpus", type=Path, default=CORPUS,
                    help="the assembled corpus (default: build/honest_public)")
    args = ap.parse_args(argv)
    if not (args.corpus / CPU_GROUP).is_dir():
        print(f"error: no assembled corpus in {args.corpus}: run bench/honest_corpus_assemble.py "
              "with local copies of the upstream repositories first", file=sys.stderr)
        return 2
    runtime = args.runtime or ("host" if args.device == "cuda" else "cpu")
    python = args.python or (sys.executable if runtime == "host" else None)
    # Named cases may come from either group: a GPU case asked for on the CPU is graded
    # (and shows what the interpreter does with it).
    groups = (CPU_GROUP, GPU_GROUP) if args.cases else groups_for(args.device)
    rows = grade(discover(groups, args.cases, args.corpus), args.device, runtime, python)
    print(render(rows))
    return 0 if rows and all(r.ok for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
