"""Issue 23: `--json` on `grader check`, `grader bundle check` and `grader run`: one object on
stdout, valid against the schema in docs/schemas/ (generated from report/summaries.py), also
when the command fails; the human lines go to stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from grader.intake.tools import create_bundle
from grader.paths import REPO
from grader.report.summaries import SCHEMAS, schema

EXAMPLE = REPO / "examples" / "triton"
SCHEMA_DIR = REPO / "docs" / "schemas"


def _grader(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=REPO, check=False, timeout=300)


def _valid(name: str, stdout: str) -> dict[str, Any]:
    data = json.loads(stdout)  # the whole of stdout is one object
    jsonschema.validate(data, json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text()))
    assert data["command"] == name
    return data  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_the_documented_schemas_are_generated_from_the_models(name: str) -> None:
    assert json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text()) == schema(name), (
        f"regenerate: python3 -m grader schema {name} > docs/schemas/{name}.schema.json")
    res = _grader("schema", name)
    assert res.returncode == 0 and json.loads(res.stdout) == schema(name)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("b") / "example.tar"
    create_bundle(EXAMPLE, out)
    return out


def test_check_json(bundle: Path) -> None:
    res = _grader("check", str(bundle), "--json")
    assert res.returncode == 0, res.stderr
    data = _valid("check", res.stdout)
    assert data["ok"] and data["exit_code"] == 0 and data["error"] is None
    assert {f["file"] for f in data["files"]} == {"kernels/vector_add.py", "kernels/rmsnorm.py",
                                                   "kernels/matmul.py"}
    assert "finding(s) in 3 file(s)" in res.stderr  # the human line, on stderr


def test_check_json_on_a_refused_bundle(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tar at all")
    res = _grader("check", str(bad), "--json")
    assert res.returncode == 11
    data = _valid("check", res.stdout)
    assert not data["ok"] and data["exit_code"] == 11
    assert data["error"]["kind"] == "BundleUnreadable" and data["error"]["hint"]


def test_bundle_check_json(bundle: Path) -> None:
    res = _grader("bundle", "check", str(bundle), "--json")
    assert res.returncode == 0, res.stderr
    data = _valid("bundle-check", res.stdout)
    assert data["ok"] and data["suite_found"] and not data["missing"]
    assert [k["problem"] for k in data["kernels"]] == ["vector_add", "rmsnorm", "matmul"]
    assert "ok: the grader would accept this bundle" in res.stderr


def test_bundle_check_json_on_a_kernel_that_does_not_parse(tmp_path: Path) -> None:
    d = tmp_path / "sub"
    (d / "kernels").mkdir(parents=True)
    (d / "submission.toml").write_text('[submission]\nname = "t"\nsuite = "demo"\n\n'
                                       '[problems.vector_add]\nfile = "kernels/v.py"\n')
    (d / "kernels" / "v.py").write_text("def kernel(:\n")
    create_bundle(d, tmp_path / "b.tar")
    res = _grader("bundle", "check", str(tmp_path / "b.tar"), "--json")
    assert res.returncode == 16
    data = _valid("bundle-check", res.stdout)
    assert not data["ok"] and data["error"]["kind"] == "KernelSourceError"
    assert data["kernel_errors"] and data["missing"] == ["rmsnorm", "matmul"]


def test_run_json_on_a_failure_before_grading(tmp_path: Path) -> None:
    res = _grader("run", str(tmp_path / "nothing-here"), "--json", "-o", str(tmp_path / "o"))
    assert res.returncode == 2
    data = _valid("run", res.stdout)
    assert not data["ok"] and data["error"]["kind"] == "UsageError" and not data["problems"]
    assert "error:" in res.stderr


def test_run_json_refuses_hidden_shapes_in_practice(tmp_path: Path) -> None:
    res = _grader("run", str(EXAMPLE), "--practice", "--shapes", "all", "--json", "-o",
                  str(tmp_path / "o"))
    assert res.returncode == 2
    data = _valid("run", res.stdout)
    assert data["practice"] and "--practice" in data["error"]["message"]
