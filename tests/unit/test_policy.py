"""Policies load, validate with useful errors, and `triton-strict` is stricter than `triton`."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.detect.policy import expand_patterns, list_policies, load_policy, policy_text
from grader.errors import ProblemError
from grader.model.findings import Severity

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_policies_load() -> None:
    assert {"triton", "triton-strict"} <= set(list_policies())
    for name in list_policies():
        policy = load_policy(name)
        assert policy.name == name and policy.dsl == "triton"


def test_strict_is_stricter() -> None:
    base, strict = load_policy("triton"), load_policy("triton-strict")
    assert strict.allowed_calls < base.allowed_calls
    assert strict.allowed_aten < base.allowed_aten
    assert strict.native_share_threshold > base.native_share_threshold
    assert "copy" in base.share_ignores and not strict.share_ignores
    order = list(Severity)
    for rule in ("DK001", "PR001"):
        assert order.index(strict.severity_of(rule)) > order.index(base.severity_of(rule))
    for rule in ("DS001", "DS003"):  # refused by both since the hostile suite's evasive cases
        assert strict.severity_of(rule) == base.severity_of(rule) == Severity.VIOLATION
    # what strict inherits unchanged
    assert strict.names == base.names and strict.protected_modules == base.protected_modules


@pytest.mark.parametrize("call", ["empty", "empty_like", "view", "stride", "is_contiguous",
                                  "transpose", "permute", "expand", "unsqueeze", "select"])
def test_allocation_and_views_allowed_everywhere(call: str) -> None:
    assert call in load_policy("triton-strict").allowed_calls


@pytest.mark.parametrize("call", ["contiguous", "clone", "to", "zeros", "reshape", "item"])
def test_copies_allowed_only_by_triton(call: str) -> None:
    assert call in load_policy("triton").allowed_calls
    assert call not in load_policy("triton-strict").allowed_calls


@pytest.mark.parametrize("call", ["matmul", "mm", "softmax", "sum", "add", "exp", "where"])
def test_compute_is_never_allowed(call: str) -> None:
    for name in list_policies():
        assert call not in load_policy(name).allowed_calls


def test_allows_aten_forms() -> None:
    p = load_policy("triton")
    assert p.allows_aten("aten.empty_like") and p.allows_aten("aten.view.default")
    assert p.allows_aten("empty") and p.allows_aten("aten._to_copy")
    assert not p.allows_aten("aten.mm") and not p.allows_aten("aten.mm.default")
    assert not p.allows_aten("flash_attn.fwd") and not p.allows_aten("prims.view_of")
    assert not load_policy("triton-strict").allows_aten("aten.clone")


def test_name_rules() -> None:
    p = load_policy("triton")
    assert p.name_rule("flash_attn.flash_attn_func") == "VL001"
    assert p.name_rule("flash_attnx") is None  # a prefix, not a substring
    assert p.name_rule("os.execvp") == "SB001" and p.name_rule("os.path.join") is None
    assert p.name_rule("torch.cuda.Stream") == "SB004"
    assert p.is_torch_utility("torch.cuda.synchronize")


def test_load_by_path(tmp_path: Path) -> None:
    src = (ROOT / "policies" / "triton.toml").read_text()
    path = tmp_path / "mine.toml"
    path.write_text(src.replace('name = "triton"', 'name = "mine"'))
    assert load_policy(str(path)).name == "mine"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_extends_from_another_root(tmp_path: Path) -> None:
    _write(tmp_path, "lenient", 'extends = "triton"\nname = "lenient"\n'
           'native_share_threshold = 0.5\n[severity]\nPR001 = "info"\n')
    policy = load_policy("lenient", roots=[tmp_path, ROOT / "policies"])
    assert policy.native_share_threshold == 0.5
    assert policy.severity_of("PR001") is Severity.INFO
    assert policy.names == load_policy("triton").names


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('extends = "triton"\nname = "bad"\nnative_share_threshold = 1.5\n',
         "field native_share_threshold"),
        ('extends = "triton"\nname = "bad"\nnative_share_threshold = "0.9"\n',
         "field native_share_threshold"),
        ('extends = "triton"\nname = "bad"\n[severity]\nXX999 = "fallback"\n', "XX999"),
        ('extends = "triton"\nname = "bad"\n[severity]\nFB001 = "fatal"\n', "field severity.FB001"),
        ('extends = "triton"\nname = "bad"\nallowed_groups = ["views", "magic"]\n', "magic"),
        ('extends = "triton"\nname = "bad"\ncolour = "red"\n', "field colour"),
        ('extends = "nowhere"\nname = "bad"\n', "no policy named 'nowhere'"),
        ("name = [unclosed\n", "not valid TOML"),
        ('name = "bad"\n', "field dsl"),
    ],
)
def test_bad_policies_name_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    _write(tmp_path, "bad", text)
    with pytest.raises(ProblemError) as err:
        load_policy("bad", roots=[tmp_path, ROOT / "policies"])
    assert expected in str(err.value)
    assert "bad.toml" in str(err.value) or "nowhere" in str(err.value)


def test_extends_cycle(tmp_path: Path) -> None:
    _write(tmp_path, "a", 'extends = "b"\n')
    _write(tmp_path, "b", 'extends = "a"\n')
    with pytest.raises(ProblemError, match="circular"):
        load_policy("a", roots=[tmp_path])


def test_unknown_name_lists_known() -> None:
    with pytest.raises(ProblemError) as err:
        load_policy("cuda")
    assert "triton-strict" in str(err.value)
    with pytest.raises(ProblemError):
        load_policy("/no/such/policy.toml")


def test_policy_text() -> None:
    text = policy_text(load_policy("triton-strict"))
    assert text.startswith("policy triton-strict (dsl: triton)")
    assert "99%" in text and "copies [NOT allowed]" in text and "views [allowed]" in text
    assert "aten.empty_like" in text and "flash_attn" in text
    assert "DK001 fallback" in text and "(policy)" in text


def test_braces_spell_several_patterns() -> None:
    assert expand_patterns(["torch.{cuda,xpu}.{device,synchronize}", "os.exec*"]) == [
        "torch.cuda.device", "torch.cuda.synchronize", "torch.xpu.device",
        "torch.xpu.synchronize", "os.exec*"]
    policy = load_policy("triton")
    assert policy.is_torch_utility("torch.npu.get_device_properties")
    assert policy.is_value("numpy.float32") and not policy.is_value("numpy.matmul")


@pytest.mark.parametrize("name, rule", [
    # torch.cuda is no utility namespace as a whole (issue 17): its compute is compute.
    ("torch.cuda.comm.broadcast", None), ("torch.cuda.synchronize", None),
    ("triton.knobs.runtime.launch_enter_hook", "TM004"),
    ("torch.utils._python_dispatch._get_current_dispatch_mode", "TM004"),
    ("torch.autograd.profiler.record_function", "TM004"), ("torch.cuda._sleep", "TM004"),
    ("weakref.finalize", "SB005"), ("atexit.register", "SB005"), ("signal.signal", "SB005"),
    ("subprocess.run", "SB001"), ("numpy.matmul", "FB006"), ("numpy.random.rand", "TM003"),
    ("numpy.load", "SB003"), ("torch.utils.dlpack.to_dlpack", "FB006"),
])
def test_name_rules_of_issue_17(name: str, rule: str | None) -> None:
    policy = load_policy("triton")
    assert policy.name_rule(name) == rule
    assert not policy.is_torch_utility("torch.cuda.comm.broadcast")
    assert policy.is_torch_utility("torch.cuda.synchronize")
