"""Issue 23, items 1 and 7: `grader bundle check` refuses what `grader run` would only grade
compile_error or ignore, and every intake refusal carries its `hint:` line."""

from __future__ import annotations

import tarfile
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import cli
from grader.cli.tools import register
from grader.errors import EXIT_CODES, BundleError, ManifestError
from grader.intake.bundle import open_bundle
from grader.intake.kernel_check import kernel_problem
from grader.intake.tools import check_bundle, create_bundle, gate
from grader.paths import PROBLEM_BUNDLES, REPO

register(cli)
EXAMPLE = REPO / "examples" / "triton"
INTAKE_CASES = REPO / "tests" / "cases" / "intake"


def _folder(tmp: Path, kernels: dict[str, str], suite: str = "demo") -> Path:
    d = tmp / "sub"
    (d / "kernels").mkdir(parents=True)
    problems = "".join(f'[problems.{pid}]\nfile = "kernels/{pid}.py"\n' for pid in kernels)
    (d / "submission.toml").write_text(
        f'[submission]\nname = "t"\nsuite = "{suite}"\n\n{problems}')
    for pid, src in kernels.items():
        (d / "kernels" / f"{pid}.py").write_text(src)
    return d


def _bundle_check(tmp: Path, kernels: dict[str, str]) -> tuple[int, str]:
    out = tmp / "b.tar"
    create_bundle(_folder(tmp, kernels), out)
    res = CliRunner().invoke(cli, ["bundle", "check", str(out), "--suites",
                                   str(PROBLEM_BUNDLES)], standalone_mode=False)
    from grader.errors import GraderError

    exc = res.exception
    if isinstance(exc, GraderError):
        return exc.exit_code, res.output + str(exc)
    assert exc is None, exc
    return 0, res.output


GOOD = (EXAMPLE / "kernels" / "vector_add.py").read_text()


def test_a_good_kernel_is_accepted(tmp_path: Path) -> None:
    code, out = _bundle_check(tmp_path, {"vector_add": GOOD})
    assert code == 0 and "ok: the grader would accept" in out


@pytest.mark.parametrize(("source", "says"), [
    ("def kernel(x, y:\n    return x\n", "does not parse"),
    ("import torch\n\ndef helper(x):\n    return x\n", "defines no function kernel()"),
])
def test_a_kernel_that_would_not_import_is_refused(tmp_path: Path, source: str,
                                                    says: str) -> None:
    code, out = _bundle_check(tmp_path, {"vector_add": source})
    assert code == EXIT_CODES["KernelSourceError"] == 16
    assert says in out and "kernels/vector_add.py" in out and "hint:" in out
    assert "ok: the grader would accept" not in out


def test_a_problem_not_in_the_suite_is_refused(tmp_path: Path) -> None:
    code, out = _bundle_check(tmp_path, {"vector_add": GOOD, "vector_sub": GOOD})
    assert code == EXIT_CODES["ManifestError"]
    assert "vector_sub" in out and "not in suite demo" in out and "hint:" in out


def test_entry_names_follow_the_problem_interface() -> None:
    module_src = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"
    assert kernel_problem(module_src, "k.py", ("ModelNew", "Model")) is None
    assert kernel_problem(module_src, "k.py", ("kernel",)) is not None
    # Generous: bindings inside a top-level try, by import, by assignment all count.
    assert kernel_problem("try:\n    from m import kernel\nexcept ImportError:\n    pass\n",
                          "k.py", ("kernel",)) is None
    assert kernel_problem("def _k(x):\n    return x\nkernel = _k\n", "k.py", ("kernel",)) is None
    assert kernel_problem("x = 1\x00", "k.py", ("kernel",)) is not None


def test_without_the_suite_any_known_entry_point_is_accepted(tmp_path: Path) -> None:
    out = tmp_path / "b.tar"
    create_bundle(_folder(tmp_path, {"vector_add": GOOD}, suite="elsewhere"), out)
    result = check_bundle(out, "triton", suite_roots=[tmp_path])
    assert not result.suite_found and not result.kernel_errors
    gate(result)


# --- item 7 ----------------------------------------------------------------------------------

def _refused_cases() -> list[Path]:
    return sorted(p for p in INTAKE_CASES.iterdir() if (p / "case.toml").is_file()
                  and "error" in tomllib.loads((p / "case.toml").read_text())["expect"])


@pytest.mark.parametrize("case", _refused_cases(), ids=lambda p: p.name)
def test_every_intake_refusal_has_a_hint(case: Path, tmp_path: Path) -> None:
    with pytest.raises(BundleError) as info:
        open_bundle(case / "bundle.tar", tmp_path / "w")
    assert info.value.hint, f"{case.name}: {info.value.message} has no hint"


def test_bundle_create_names_the_folder_not_a_temp_file(tmp_path: Path) -> None:
    d = _folder(tmp_path, {"vector_add": GOOD})
    text = (d / "submission.toml").read_text()
    (d / "submission.toml").write_text(text.replace('file = "kernels/vector_add.py"',
                                                    'file = "kernels/nope.py"'))
    with pytest.raises(ManifestError) as info:
        create_bundle(d, tmp_path / "out" / "b.tar")
    msg = str(info.value)
    assert str(d) in msg and ".bundle-" not in msg and "hint:" in msg
    assert not list((tmp_path / "out").iterdir())  # nothing left behind


def test_bundles_are_readable_by_others(tmp_path: Path) -> None:
    out = tmp_path / "b.tar"
    create_bundle(EXAMPLE, out)
    assert out.stat().st_mode & 0o777 == 0o644
    with tarfile.open(out) as tar:
        assert "submission.toml" in tar.getnames()
