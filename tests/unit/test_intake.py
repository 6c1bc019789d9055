"""Safe bundle intake (issue 2, item 3; issue 7, "Bundles"): hostile bundles are data.

Every folder under tests/cases/intake/ is a case: `bundle.tar` and `case.toml` saying which
`BundleError` subclass intake must raise, or that it accepts the bundle. Whatever the case, the
bundle may write only inside the fresh working directory, leave no link there, and raise nothing
but a `BundleError`. Adding an attack is adding a folder (or a line in make_cases.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType

import pytest

from grader import errors
from grader.errors import BundleError, BundleTooLarge, BundleUnreadable, GraderError
from grader.intake.bundle import IntakeLimits, Submission, open_bundle

CASES_DIR = Path(__file__).resolve().parents[1] / "cases" / "intake"


def _load_make_cases() -> ModuleType:
    name = "intake_make_cases"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, CASES_DIR / "make_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    keep, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ among cases
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = keep
    return module


make_cases = _load_make_cases()
CANARY = Path(make_cases.CANARY)


@dataclass(frozen=True)
class IntakeCase:
    name: str
    folder: Path
    description: str
    error: str | None
    problems: tuple[str, ...]
    message_contains: tuple[str, ...]
    xfail: str | None

    @classmethod
    def load(cls, folder: Path) -> IntakeCase:
        data = tomllib.loads((folder / "case.toml").read_text(encoding="utf-8"))
        expect = data["expect"]
        assert ("error" in expect) != bool(expect.get("accepted")), (
            f"{folder}/case.toml: [expect] needs exactly one of error or accepted = true")
        return cls(
            name=folder.name,
            folder=folder,
            description=data["description"],
            error=expect.get("error"),
            problems=tuple(expect.get("problems", ())),
            message_contains=tuple(expect.get("message_contains", ())),
            xfail=data.get("xfail"),
        )


def _case_folders() -> list[Path]:
    return sorted(p for p in CASES_DIR.iterdir()
                  if p.is_dir() and not p.name.startswith(("_", ".")))


CASES = [IntakeCase.load(p) for p in _case_folders()]


def _params() -> list[object]:
    return [
        pytest.param(c, id=c.name,
                     marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [])
        for c in CASES
    ]


# --- helpers ---------------------------------------------------------------------------------

Signature = tuple[object, ...]


def snapshot(root: Path, *, skip: Path | None = None) -> dict[str, Signature]:
    """Everything under `root` (links not followed): kind, mode and content hash per path."""
    out: dict[str, Signature] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if skip is not None:
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                sig: Signature = ("file", st.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
            elif stat.S_ISLNK(st.st_mode):
                sig = ("link", os.readlink(path))
            else:
                sig = ("other", st.st_mode)
            out[str(path.relative_to(root))] = sig
    return out


def special_files(root: Path) -> list[str]:
    """Anything under `root` that is neither a plain file nor a real directory."""
    bad = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            mode = Path(dirpath, name).lstat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                bad.append(str(Path(dirpath, name).relative_to(root)))
    return bad


@pytest.fixture
def canary() -> Path:
    """A directory outside the test's tmp folder that absolute link targets in cases name."""
    CANARY.mkdir(exist_ok=True)
    target = CANARY / "target"
    if not target.exists():
        target.write_bytes(b"canary\n")
    return CANARY


@dataclass
class Box:
    """A tmp tree with the bundle, a cwd and a deeply nested fresh workdir, so that a relative
    escape of a few `..` still lands somewhere the test snapshots."""

    root: Path
    bundle: Path
    workdir: Path


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Box:
    root = tmp_path / "box"
    (root / "in").mkdir(parents=True)
    (root / "cwd").mkdir()
    parent = root / "a" / "b" / "c" / "d"
    parent.mkdir(parents=True)
    monkeypatch.chdir(root / "cwd")
    return Box(root=root, bundle=root / "in" / "bundle.tar", workdir=parent / "work")


def expected_files(bundle: Path) -> dict[str, bytes]:
    """What an accepted bundle should unpack to: its regular members, names normalised."""
    files = {}
    with tarfile.open(bundle, "r:*") as tar:
        for member in tar:
            if member.isfile():
                name = "/".join(p for p in PurePosixPath(member.name).parts if p != ".")
                fobj = tar.extractfile(member)
                assert fobj is not None
                files[name] = fobj.read()
    return files


def unpacked_files(workdir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(workdir)): p.read_bytes()
            for p in workdir.rglob("*") if p.is_file()}


# --- the cases -------------------------------------------------------------------------------


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 30
    for case in CASES:
        assert (case.folder / "bundle.tar").is_file(), case.name
        assert case.description.strip(), case.name


@pytest.mark.parametrize("case", _params())
def test_intake_case(case: IntakeCase, box: Box, canary: Path) -> None:
    box.bundle.write_bytes((case.folder / "bundle.tar").read_bytes())
    before = snapshot(box.root)
    canary_before = snapshot(canary)

    result: Submission | BundleError | None = None
    crash: Exception | None = None
    try:
        result = open_bundle(box.bundle, box.workdir)
    except BundleError as exc:
        result = exc
    except Exception as exc:  # the point of the test: nothing else may escape intake
        crash = exc

    # Safety first, whatever the outcome: nothing outside the workdir, no links inside it.
    assert snapshot(box.root, skip=box.workdir) == before, "intake wrote outside the workdir"
    assert snapshot(canary) == canary_before, f"intake touched {canary}"
    if box.workdir.exists():
        assert not box.workdir.is_symlink()
        assert special_files(box.workdir) == [], "links or special files in the workdir"
    if crash is not None:
        pytest.fail(f"{case.name}: intake raised {type(crash).__name__}: {crash} "
                    "(only BundleError subclasses may escape)")

    if case.error is None:
        assert isinstance(result, Submission), f"{case.name}: refused: {result}"
        check_accepted(case, result, box.bundle)
    else:
        assert isinstance(result, BundleError), f"{case.name}: accepted, expected {case.error}"
        check_refused(case, result, box.bundle)


def check_accepted(case: IntakeCase, sub: Submission, bundle: Path) -> None:
    assert sorted(sub.manifest.problems) == sorted(case.problems)
    assert sub.root == bundle.parent.parent / "a" / "b" / "c" / "d" / "work"
    assert unpacked_files(sub.root) == expected_files(bundle)
    for pid in case.problems:
        path = sub.kernel_path(pid)
        assert path is not None and path.is_file()
        assert path.resolve().is_relative_to(sub.root.resolve())
    for path in sub.root.rglob("*"):
        if path.is_file():
            # whatever mode the member claimed, nothing is executable or set-id once unpacked
            assert path.stat().st_mode & 0o7111 == 0, f"{path}: mode {path.stat().st_mode:o}"
    assert set(sub.kernel_sources()) == set(case.problems)


def check_refused(case: IntakeCase, exc: BundleError, bundle: Path) -> None:
    expected = getattr(errors, case.error or "", None)
    assert isinstance(expected, type) and issubclass(expected, BundleError), (
        f"{case.name}: case.toml names {case.error!r}, not a BundleError subclass")
    assert type(exc) is expected, f"{case.name}: got {type(exc).__name__}: {exc}"
    assert exc.exit_code == expected.exit_code != 0
    text = str(exc)
    assert exc.message.strip()
    for needle in case.message_contains:
        assert needle in text, f"{case.name}: {needle!r} not in message {text!r}"
    # The message names what was refused: a member, the manifest, or the bundle itself.
    assert "member " in text or "submission.toml" in text or str(bundle) in text, text
    # Hostile names reach a terminal only escaped, and the message can always be printed.
    assert not [ch for ch in text if (ord(ch) < 0x20 and ch != "\n") or ord(ch) == 0x7F], text
    text.encode("utf-8")


# --- error classes and the workdir ----------------------------------------------------------


def _bundle_error_classes() -> list[type[BundleError]]:
    return [c for c in vars(errors).values()
            if isinstance(c, type) and issubclass(c, BundleError) and c is not BundleError]


def test_bundle_errors_have_distinct_nonzero_exit_codes() -> None:
    classes = _bundle_error_classes()
    assert {c.__name__ for c in classes} >= {"BundleUnreadable", "UnsafeMember",
                                             "BundleTooLarge", "UnexpectedMember",
                                             "ManifestError"}
    codes = [c.exit_code for c in classes]
    assert all(code != 0 for code in codes)
    assert len(set(codes)) == len(codes), dict(zip([c.__name__ for c in classes], codes,
                                                   strict=True))
    others = {c.exit_code for c in vars(errors).values()
              if isinstance(c, type) and issubclass(c, GraderError)
              and not issubclass(c, BundleError)}
    assert not set(codes) & others
    assert errors.EXIT_CODES[BundleError.__name__] not in codes


def test_every_case_error_is_a_bundle_error() -> None:
    names = {c.__name__ for c in _bundle_error_classes()}
    assert {c.error for c in CASES if c.error} <= names
    # every refusal class is exercised by at least one case
    assert names <= {c.error for c in CASES if c.error}


def test_workdir_must_be_fresh(box: Box) -> None:
    box.bundle.write_bytes((CASES_DIR / "valid_minimal" / "bundle.tar").read_bytes())
    box.workdir.mkdir()
    (box.workdir / "keep").write_text("x")
    with pytest.raises(BundleUnreadable, match="fresh"):
        open_bundle(box.bundle, box.workdir)
    assert [p.name for p in box.workdir.iterdir()] == ["keep"]


def test_workdir_that_is_a_symlink_is_refused(box: Box, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    box.bundle.write_bytes((CASES_DIR / "valid_minimal" / "bundle.tar").read_bytes())
    box.workdir.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(BundleUnreadable):
        open_bundle(box.bundle, box.workdir)
    assert list(elsewhere.iterdir()) == []


def test_limits_are_configurable(box: Box) -> None:
    box.bundle.write_bytes((CASES_DIR / "valid_three_problems" / "bundle.tar").read_bytes())
    with pytest.raises(BundleTooLarge, match="more than 2 members"):
        open_bundle(box.bundle, box.workdir, IntakeLimits(max_members=2))


def test_missing_bundle_is_unreadable(box: Box) -> None:
    with pytest.raises(BundleUnreadable, match="cannot open"):
        open_bundle(box.bundle, box.workdir)


# --- the generator ---------------------------------------------------------------------------


def test_make_cases_is_deterministic(tmp_path: Path) -> None:
    """A rerun of make_cases.py reproduces the committed bytes (fixed mtimes, owners, gzip
    timestamps), so regenerating never shows up as a change."""
    written = make_cases.write_cases(tmp_path)
    committed = {p.name for p in _case_folders()}
    assert {p.name for p in written} <= committed, "run make_cases.py and commit its output"
    for folder in written:
        for name in ("bundle.tar", "case.toml"):
            fresh = (folder / name).read_bytes()
            kept = (CASES_DIR / folder.name / name).read_bytes()
            assert fresh == kept, f"{folder.name}/{name} differs from a fresh make_cases.py run"
