"""`grader verify REPORT --secret HEX`: grade a report's bundle again under its revealed
secret and confirm that the report's results reproduce.

The secret is checked against the report's seed commitment before anything else: only the
secret the report was graded under reproduces its inputs. The bundle is the round's copy
when REPORT is a round's `entries/<name>/report.json` (the manifest names it), or `--bundle`
(a tar or a submission folder, packed as `grader bundle create` packs it): one with the
report's bundle sha256, or, in a round, one holding the same files as the round's copy
(which is then graded: issue 34, the bundle a participant submitted was refused). The
grading settings are the round's (its manifest) or, for a report of `grader run`, read from
the report itself: its policy, device, problems, shape selection (the one of `--shapes` that
gives the report's shapes) and seeds per shape (its most comparisons on one shape).

Then every problem's and shape's verdict must be the report's. Timings are compared only
when both gradings ran on the same kind of GPU (the same hardware profile and device name):
each shape's median within the noise the two gradings measured (the larger of their
inter-quartile ranges) or within what two gradings drift apart on one GPU (DRIFT_REL of the
median, DRIFT_FLOOR_US at least), whichever is larger, times `noise_scale`; and its score S
within what that band allows.
On the CPU, Triton's interpreter times nothing: verdicts only, and the output says so. A
re-grade that the grader itself failed (infra_error) is this host's failure: an InfraError,
never a mismatch held against the report.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from grader.errors import InfraError, UsageError
from grader.grading.checkpoint import commitment
from grader.grading.config import GradingOptions, Scheduling
from grader.grading.progress import Progress
from grader.grading.selection import select_shapes
from grader.grading.settings import Device, GradingSettings, ShapeSelection
from grader.intake.bundle import open_bundle
from grader.intake.tools import create_bundle
from grader.model.results import Report, ShapeResult
from grader.model.scores import ShapeScore
from grader.round.entries import sha256_file
from grader.round.entry import run_grader
from grader.round.model import Settings
from grader.round.store import RoundDir
from grader.round.suite import of_round
from grader.sandbox.runtimes import default_runtime
from grader.suite.load import Suite, find_suite
from grader.suite.roots import suite_roots
from grader.verdicts import Verdict

SELECTIONS: tuple[ShapeSelection, ...] = ("auto", "smoke", "scored", "all")


# How far two gradings of one entry drift apart on one GPU, beyond each grading's own spread:
# clocks, temperature, where the inputs landed. Measured on the H200 (docs/benchmarks.md,
# "Stability"): medians of 20 µs and more 0.2-0.6% apart in CV across gradings (230.27 and
# 233.33 µs, 1.3%, at most), launch-bound ones up to 0.22 µs (3.62 and 3.84 µs); and on
# 2026-12-03 a re-grade 0.29% off on a 363 µs GEMM whose IQR was 0.23%, 0.26 µs off on a
# 7.8 µs RoPE whose IQR was 0.17 µs. Either is a drift no grading's IQR shows.
DRIFT_REL = 0.02
DRIFT_FLOOR_US = 0.3


@dataclass(frozen=True, kw_only=True)
class VerifyRequest:
    report: Path
    secret_hex: str
    bundle: Path | None = None  # default: the round's copy, when REPORT is in a round
    suite_roots: tuple[Path, ...] = ()
    runtime: str | None = None  # default: the round's; cpu on the CPU, host on a GPU
    python: str | None = None
    cuda_base: str | None = None
    gpus: tuple[int, ...] = (0,)
    timeout: float | None = None  # default: the round's (a report of `grader run`: none)
    noise_scale: float = 1.0
    keep: Path | None = None  # keep the re-grade's report.json here


@dataclass(frozen=True, kw_only=True)
class Line:
    status: Literal["ok", "MISMATCH"]
    where: str  # problem, or problem/shape
    text: str


@dataclass(kw_only=True)
class Reproduction:
    lines: list[Line] = field(default_factory=list)
    timings: str = ""  # what was compared besides verdicts, and why not more
    notes: list[str] = field(default_factory=list)

    @property
    def mismatches(self) -> list[Line]:
        return [ln for ln in self.lines if ln.status != "ok"]


def load_report(path: Path) -> Report:
    try:
        return Report.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except ValidationError as exc:
        raise UsageError(f"{path}: not a report: {exc.error_count()} error(s), the first: "
                         f"{exc.errors()[0]['msg']}") from None


def check_secret(report: Report, secret_hex: str) -> bytes:
    """The secret, if it is the one behind the report's seed commitment; refused otherwise."""
    try:
        secret = bytes.fromhex(secret_hex)
    except ValueError:
        raise UsageError("--secret: not hexadecimal") from None
    if commitment(secret) != report.environment.seed_commitment:
        raise UsageError("refused: the secret does not match the report's seed commitment "
                         "(its sha256 differs); it is not the secret this report was graded "
                         "under", hint="pass the secret revealed for this round or run")
    return secret


def round_of(report_path: Path) -> tuple[RoundDir, str] | None:
    """The round folder and entry name of a round's `entries/<name>/report.json`."""
    entry = report_path.resolve().parent
    root = entry.parent.parent
    if entry.parent.name != "entries" or not (root / "manifest.json").is_file():
        return None
    return RoundDir(root), entry.name


def _digest(path: Path) -> str:
    try:
        return sha256_file(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def _files(bundle: Path, work: Path) -> dict[str, bytes]:
    """What `bundle` holds once unpacked by the intake: each file's bytes by its path."""
    sub = open_bundle(bundle, work)
    return {p.relative_to(sub.root).as_posix(): p.read_bytes()
            for p in sorted(sub.root.rglob("*")) if p.is_file()}


def round_copy(in_round: tuple[RoundDir, str]) -> Path:
    rd, name = in_round
    entry = next((e for e in rd.load_manifest().entries if e.name == name), None)
    if entry is None or entry.bundle is None:
        raise UsageError(f"{rd.manifest_file} lists no bundle for entry {name!r}",
                         hint="pass --bundle PATH")
    return rd.root / entry.bundle


def find_bundle(req: VerifyRequest, report: Report, in_round: tuple[RoundDir, str] | None,
                work: Path) -> tuple[Path, str | None]:
    """The bundle to grade again (a folder given as --bundle packed into `work`), and a
    note when it is the round's copy of the one given."""
    want = report.submission.bundle_sha256
    if req.bundle is None:
        if in_round is None:
            raise UsageError(f"{req.report} is not in a round folder: which bundle was graded?",
                             hint="pass --bundle PATH (the bundle or folder the report graded)")
        path = round_copy(in_round)
        if _digest(path) != want:
            raise UsageError(f"{path} is not the bundle the report graded (its sha256 "
                             "differs from the report's)")
        return path, None
    path = req.bundle
    work.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        path = work / "given.tar"
        create_bundle(req.bundle, path)
    digest = _digest(path)
    if digest == want:
        return path, None
    if in_round is not None:
        copy = round_copy(in_round)
        if (_digest(copy) == want
                and _files(path, work / "given") == _files(copy, work / "copy")):
            return copy, (f"{req.bundle} holds the files of the round's copy {copy}, which "
                          "is graded again")
    raise UsageError(f"{req.bundle} is not the bundle the report graded (sha256 {digest[:16]}, "
                     f"the report's {want[:16]})" + (", and its files differ from the round's "
                                                      "copy" if in_round else ""),
                     hint="pass the bundle or folder that was submitted"
                     + ("; or leave --bundle out: the round's copy is graded" if in_round
                        else ""))


def shape_selection(report: Report, suite: Suite, device: Device) -> ShapeSelection:
    """The `--shapes` selection that gives exactly the report's shapes of each problem."""
    for sel in SELECTIONS:
        settings = GradingSettings(device=device, shapes=sel, runtime=default_runtime(device))
        if all(p.id in suite.problems and [s.id for s in p.shapes]
               == [s.id for s in select_shapes(suite.problems[p.id], settings)]
               for p in report.problems if p.shapes):
            return sel
    raise UsageError("the report's shapes are no --shapes selection of the suite at hand",
                     hint="verify with the suite version the report was graded on")


def settings_of_report(report: Report, suite: Suite) -> Settings:
    """What a report of `grader run` was graded under, read from the report."""
    device: Device = "cuda" if report.environment.is_performance else "cpu"
    ids = [p.id for p in report.problems]
    seeds = max((len(s.comparisons) for p in report.problems for s in p.shapes), default=0)
    return Settings(policy=report.environment.policy, device=device,
                    runtime=default_runtime(device),
                    hardware="auto", shapes=shape_selection(report, suite, device),
                    problems=() if sorted(ids) == sorted(suite.problems) else tuple(ids),
                    seeds_per_shape=seeds or None)


def regrade_request(req: VerifyRequest, settings: Settings, bundle: Path, out_dir: Path
                    ) -> GradingOptions:
    """The re-grade's options: the round's (or the report's) grading settings, with this
    host's --runtime and --timeout where given."""
    grading = GradingSettings.model_validate({
        **settings.model_dump(include=set(GradingSettings.model_fields)),
        **({"timeout_s": req.timeout} if req.timeout is not None else {}),
        **({"runtime": req.runtime} if req.runtime else {})})
    return GradingOptions(bundle=bundle, out_dir=out_dir, suite_roots=req.suite_roots,
                          settings=grading, seed_secret=req.secret_hex, python=req.python,
                          cuda_base=req.cuda_base, scheduling=Scheduling(gpus=req.gpus))


def verify_report(req: VerifyRequest, progress: Progress) -> tuple[Report, Report,
                                                                   Reproduction]:
    """Grade the report's bundle again under its secret; the report, the re-grade and how
    they compare."""
    old = load_report(req.report)
    check_secret(old, req.secret_hex)
    in_round = round_of(req.report)
    work = Path(tempfile.mkdtemp(prefix="grader-verify-"))
    try:
        return _verify(req, old, in_round, work, progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _verify(req: VerifyRequest, old: Report, in_round: tuple[RoundDir, str] | None,
            work: Path, progress: Progress) -> tuple[Report, Report, Reproduction]:
    bundle, note = find_bundle(req, old, in_round, work)
    suite = (of_round(in_round[0], old.suite.id, req.suite_roots) if in_round is not None
             else find_suite(old.suite.id, list(suite_roots(req.suite_roots))))
    if suite.info.version != old.suite.version:
        raise UsageError(f"suite {suite.id} at hand is version {suite.info.version}, the "
                         f"report's {old.suite.version}",
                         hint="verify with the suite the report was graded on (--suites)")
    # The re-grade finds the suite by its id: where it was found here comes first.
    req = replace(req, suite_roots=(suite.directory.resolve().parent, *req.suite_roots))
    settings = (in_round[0].load_manifest().settings if in_round is not None
                else settings_of_report(old, suite))
    new = run_grader(regrade_request(req, settings, bundle, work / "out"), None, progress)
    if req.keep is not None:
        req.keep.mkdir(parents=True, exist_ok=True)
        (req.keep / "report.json").write_text(new.model_dump_json(indent=1) + "\n",
                                             encoding="utf-8")
    failed = [f"{p.id}/{s.id}" for p in new.problems for s in p.shapes
              if s.verdict == Verdict.INFRA_ERROR] + [
        p.id for p in new.problems if not p.shapes and p.verdict == Verdict.INFRA_ERROR]
    if failed:  # the grader's failure here says nothing of the report: no verdict on it
        raise InfraError(f"the re-grade failed on this host for {', '.join(failed[:5])}"
                         f"{' ...' if len(failed) > 5 else ''}: nothing is confirmed or "
                         "refuted", hint="fix the host (grader doctor), then verify again")
    got = compare(old, new, noise_scale=req.noise_scale)
    if note is not None:
        got.notes.insert(0, note)
    return old, new, got


def _scores(rep: Report) -> dict[tuple[str, str], ShapeScore]:
    return {(s.problem, s.shape): s for s in rep.scores.shapes} if rep.scores else {}


def compare(old: Report, new: Report, *, noise_scale: float = 1.0) -> Reproduction:
    """How the re-grade `new` reproduces `old` (pure): a line per problem and per shape."""
    eo, en = old.environment, new.environment
    timed = (eo.is_performance and en.is_performance and eo.hardware == en.hardware
             and eo.device == en.device)
    got = Reproduction()
    if not eo.is_performance:
        got.timings = ("verdicts only: the report was graded on the CPU, where Triton's "
                       "interpreter times nothing")
    elif not timed:
        got.timings = (f"verdicts only: timings are compared on the same kind of GPU, and "
                       f"the report was graded on {eo.device} ({eo.hardware}), this re-grade "
                       f"on {en.device} ({en.hardware})")
    else:
        got.timings = (f"verdicts, and timings and scores on {en.device} ({en.hardware}): each "
                       "median within the larger of the two gradings' inter-quartile ranges "
                       f"and of what gradings drift apart ({DRIFT_REL:.0%} of the median, "
                       f"{DRIFT_FLOOR_US} µs at least)"
                       + (f", x {noise_scale:g}" if noise_scale != 1 else ""))
    s_old, s_new = _scores(old), _scores(new)
    again = {p.id: p for p in new.problems}
    for p in old.problems:
        q = again.pop(p.id, None)
        if q is None:
            got.lines.append(Line(status="MISMATCH", where=p.id,
                                  text=f"{p.verdict}; not graded again"))
            continue
        same = p.verdict == q.verdict
        got.lines.append(Line(status="ok" if same else "MISMATCH", where=p.id,
                              text=str(p.verdict) if same else
                              f"the report says {p.verdict}, graded again {q.verdict}"))
        shapes = {s.id: s for s in q.shapes}
        for s in p.shapes:
            where = f"{p.id}/{s.id}"
            t = shapes.pop(s.id, None)
            if t is None:
                got.lines.append(Line(status="MISMATCH", where=where,
                                      text=f"{s.verdict}; not graded again"))
                continue
            got.lines.append(_shape(where, s, t, s_old.get((p.id, s.id)),
                                    s_new.get((p.id, s.id)), timed, noise_scale))
        got.lines += [Line(status="MISMATCH", where=f"{p.id}/{sid}",
                           text=f"graded again ({t.verdict}), not in the report")
                      for sid, t in shapes.items()]
    got.lines += [Line(status="MISMATCH", where=pid, text="graded again, not in the report")
                  for pid in again]
    if timed and old.scores and new.scores:
        got.notes.append(f"S_agg: the report {_num(old.scores.s_agg)}, graded again "
                         f"{_num(new.scores.s_agg)} (each shape checked above)")
    return got


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def _shape(where: str, s: ShapeResult, t: ShapeResult, so: ShapeScore | None,
           sn: ShapeScore | None, timed: bool, noise_scale: float) -> Line:
    if s.verdict != t.verdict:
        return Line(status="MISMATCH", where=where,
                    text=f"the report says {s.verdict}, graded again {t.verdict}")
    parts, ok = [str(s.verdict)], True
    if timed and (s.timing is None) != (t.timing is None):
        ok = False
        parts.append("timed in " + ("the report only" if s.timing else "the re-grade only"))
    elif timed and s.timing is not None and t.timing is not None:
        band = noise_scale * max(s.timing.iqr_us, t.timing.iqr_us,
                                 DRIFT_REL * max(s.timing.median_us, t.timing.median_us),
                                 DRIFT_FLOOR_US)
        within = abs(t.timing.median_us - s.timing.median_us) <= band
        ok = ok and within
        parts.append(f"median {s.timing.median_us:.2f} µs, again {t.timing.median_us:.2f} µs "
                     f"(band ±{band:.2f} µs{'' if within else ': outside'})")
        if so is not None and sn is not None:
            fits = _score_fits(so, sn, band * 1e-6)
            ok = ok and fits
            parts.append(f"S {so.s:.4f}, again {sn.s:.4f}" + ("" if fits else
                                                              ": outside the band"))
    return Line(status="ok" if ok else "MISMATCH", where=where, text="; ".join(parts))


def _score_fits(so: ShapeScore, sn: ShapeScore, band_s: float) -> bool:
    """S = T_roofline / T_measured: the re-grade's S within what the report's time, moved by
    the noise band, gives; a shape that scores nothing (not counted, no roofline) must score
    nothing again."""
    if so.s == 0 or sn.s == 0 or so.t_roofline_s is None or so.measured_s is None:
        return so.s == sn.s
    if sn.t_roofline_s is None or not math.isclose(so.t_roofline_s, sn.t_roofline_s,
                                                   rel_tol=1e-9):
        return False
    lo = so.t_roofline_s / (so.measured_s + band_s)
    hi = (so.t_roofline_s / (so.measured_s - band_s) if so.measured_s > band_s
          else math.inf)
    return lo * (1 - 1e-9) <= sn.s <= hi * (1 + 1e-9)
