"""Policies: what an entry written in a target DSL may call, and what makes a shape native.

A policy is a TOML file in the repository's `policies/` folder (or any path). It may start
from another with `extends = "NAME"`: tables merge key by key, everything else is replaced,
so `triton-strict` states only how it differs from `triton`. docs/detection.md explains
every field and the choices of the shipped policies.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from grader.detect.rules import RULES
from grader.errors import ProblemError
from grader.formats._base import Ident, Strict, describe_validation
from grader.model.findings import Severity

POLICIES_DIR = Path(__file__).resolve().parents[2] / "policies"

# Literals, not the enums: policies are parsed strictly and TOML only has strings.
SeverityName = Literal["info", "warning", "fallback", "violation", "tampering"]
DeviceKind = Literal["own_triton", "other_triton", "vendor", "torch_native", "copy", "unknown"]


class OpGroup(Strict):
    """PyTorch ops that may run in the kernel path, under the two names they go by."""

    description: str
    # torch.<name>(...) and Tensor.<name>(...) as written in source
    calls: list[str] = Field(default_factory=list)
    # overload packets as the dispatch trace names them, without "aten."
    aten: list[str] = Field(default_factory=list)


class Names(Strict):
    """Qualified-name patterns, each list tied to one rule (see NAME_RULES).

    A pattern matches a dotted name equal to it or under it (`subprocess` matches
    `subprocess.run`); a trailing `*` matches any continuation (`os.exec*`); `{a,b}` spells
    several patterns at once (`torch.{xpu,npu}.is_available`).
    """

    instruments: list[str]
    exit_hooks: list[str]
    vendor_kernels: list[str]
    compilers: list[str]
    torch_internals: list[str]
    native_loaders: list[str]
    processes: list[str]
    threads: list[str]
    io: list[str]
    streams: list[str]
    rng: list[str]
    introspection: list[str]
    dynamic_code: list[str]
    dynamic_import: list[str]
    precision: list[str]
    array_libraries: list[str]

    @field_validator("*")
    @classmethod
    def _expand(cls, value: list[str]) -> list[str]:
        return expand_patterns(value)


# Checked in this order: the first list a name matches decides its rule. Instruments and exit
# hooks come first: `torch.utils._python_dispatch._get_current_dispatch_mode` is a private
# torch name too, and `signal.signal` a process API, but what they do is the finding.
NAME_RULES: dict[str, str] = {
    "instruments": "TM004",
    "exit_hooks": "SB005",
    "vendor_kernels": "VL001",
    "compilers": "VL002",
    "torch_internals": "VL003",
    "native_loaders": "VL004",
    "processes": "SB001",
    "threads": "SB002",
    "io": "SB003",
    "streams": "SB004",
    "rng": "TM003",
    "introspection": "TM002",
    "dynamic_code": "DS002",
    "dynamic_import": "DS001",
    "precision": "PR001",
    "array_libraries": "FB006",
}


class Policy(Strict):
    name: Ident
    description: str
    dsl: Literal["triton"]
    # Share of the kernel path's device time that must be the entry's own DSL kernels.
    native_share_threshold: float = Field(gt=0, le=1)
    # Device-kernel kinds left out of that share entirely (neither for nor against).
    share_ignores: list[DeviceKind] = Field(default_factory=list)
    op_groups: dict[str, OpGroup]
    allowed_groups: list[str]
    # Qualified torch names that are not tensor ops (devices, dtypes, torch.cuda queries...).
    torch_utilities: list[str]
    # Qualified names outside torch that are plain values although a `names` list covers
    # their module (numpy.float32, numpy.pi): naming one computes nothing.
    values: list[str] = Field(default_factory=list)
    # Modules whose attributes an entry must never assign, set or delete (TM001).
    protected_modules: list[str]
    names: Names
    # Rule id -> severity, overriding the default in grader.detect.rules.RULES.
    severity: dict[str, SeverityName] = Field(default_factory=dict)

    @field_validator("torch_utilities", "values")
    @classmethod
    def _expand(cls, value: list[str]) -> list[str]:
        return expand_patterns(value)

    @field_validator("severity")
    @classmethod
    def _known_rules(cls, value: dict[str, SeverityName]) -> dict[str, SeverityName]:
        unknown = sorted(set(value) - set(RULES))
        if unknown:
            raise ValueError(f"unknown rule ids {unknown}; known: {', '.join(RULES)}")
        return value

    @model_validator(mode="after")
    def _groups_exist(self) -> Policy:
        missing = [g for g in self.allowed_groups if g not in self.op_groups]
        if missing:
            raise ValueError(f"allowed_groups names undefined op_groups {missing}")
        return self

    # -- queries used by the analyses ---------------------------------------------------
    @property
    def allowed_calls(self) -> frozenset[str]:
        return frozenset(c for g in self.allowed_groups for c in self.op_groups[g].calls)

    @property
    def allowed_aten(self) -> frozenset[str]:
        return frozenset(a for g in self.allowed_groups for a in self.op_groups[g].aten)

    def severity_of(self, rule: str) -> Severity:
        override = self.severity.get(rule)
        return Severity(override) if override else RULES[rule].severity

    def allows_aten(self, op: str) -> bool:
        """`aten.mm`, `aten.mm.default` or `mm`: is this op allowed in the kernel path?"""
        parts = op.split(".")
        if len(parts) > 1 and parts[0] != "aten":
            return False  # custom or prims namespaces: never in an allowed group
        packet = parts[1] if len(parts) > 1 else parts[0]
        return packet in self.allowed_aten

    def name_rule(self, qualname: str) -> str | None:
        """The rule a dotted name falls under by the `names` lists, if any."""
        for field, rule in NAME_RULES.items():
            if any(matches(qualname, p) for p in getattr(self.names, field)):
                return rule
        return None

    def is_torch_utility(self, qualname: str) -> bool:
        return any(matches(qualname, p) for p in self.torch_utilities)

    def names_torch_utility(self, qualname: str) -> bool:
        """Is `qualname` itself an entry of torch_utilities (not just under one)? Such an
        entry wins over the `names` lists: torch.jit.is_scripting is no compiler."""
        return qualname in self.torch_utilities and not qualname.endswith("*")

    def is_value(self, qualname: str) -> bool:
        return any(matches(qualname, p) for p in self.values)

    def is_protected(self, qualname: str) -> bool:
        return any(matches(qualname, p) for p in self.protected_modules)


def expand_patterns(patterns: list[str]) -> list[str]:
    """`torch.{cuda,xpu}.{device,synchronize}` -> the four names it spells, in order."""
    out: list[str] = []
    todo = list(reversed(patterns))
    while todo:
        p = todo.pop()
        start = p.find("{")
        end = p.find("}", start)
        if start < 0 or end < 0:
            out.append(p)
            continue
        alternatives = p[start + 1:end].split(",")
        todo.extend(reversed([p[:start] + a.strip() + p[end + 1:] for a in alternatives]))
    return out


def matches(qualname: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return qualname.startswith(pattern[:-1])
    return qualname == pattern or qualname.startswith(pattern + ".")


# -- loading ------------------------------------------------------------------------------
def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path}: cannot read policy: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProblemError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ProblemError(f"{path}: nested too deeply to be a policy") from None


def _find(name: str, roots: list[Path]) -> Path:
    for root in roots:
        candidate = root / f"{name}.toml"
        if candidate.is_file():
            return candidate
    known = ", ".join(list_policies(roots)) or "none"
    raise ProblemError(
        f"no policy named {name!r} in {', '.join(str(r) for r in roots)}",
        hint=f"known policies: {known}; or pass a path to a .toml file",
    )


def _raw(path: Path, roots: list[Path], seen: tuple[Path, ...]) -> dict[str, Any]:
    if path in seen:
        chain = " -> ".join(str(p) for p in (*seen, path))
        raise ProblemError(f"{path}: field extends: circular ({chain})")
    data = _read(path)
    base = data.pop("extends", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ProblemError(f"{path}: field extends: expected a policy name, got {base!r}")
    parent = _find(base, [path.parent, *roots])
    return _merge(_raw(parent.resolve(), roots, (*seen, path)), data)


def load_policy(name_or_path: str, roots: list[Path] | None = None) -> Policy:
    """A policy by name (looked up in `roots`, default the repo's policies/) or by path."""
    roots = list(roots) if roots is not None else [POLICIES_DIR]
    as_path = Path(name_or_path)
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        if not as_path.is_file():
            raise ProblemError(f"{name_or_path}: no such policy file")
        path = as_path
    else:
        path = _find(name_or_path, roots)
    path = path.resolve()
    data = _raw(path, roots, ())
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        raise ProblemError(
            f"{path}: invalid policy:\n{describe_validation(exc)}",
            hint="see docs/detection.md for the policy fields",
        ) from None


def list_policies(roots: list[Path] | None = None) -> list[str]:
    roots = list(roots) if roots is not None else [POLICIES_DIR]
    return sorted({p.stem for r in roots if r.is_dir() for p in r.glob("*.toml")})


def policy_text(policy: Policy) -> str:
    """What `grader policy show NAME` prints: the policy as people read it."""
    lines = [
        f"policy {policy.name} (dsl: {policy.dsl})",
        f"  {policy.description}",
        "",
        f"native when the entry's own {policy.dsl} kernels take >= "
        f"{policy.native_share_threshold:.0%} of device time"
        + (f" (ignoring {', '.join(policy.share_ignores)} kernels)" if policy.share_ignores
           else ""),
        "",
        "PyTorch ops allowed in the kernel path (everything else is compute, a fallback):",
    ]
    for gname, group in policy.op_groups.items():
        mark = "allowed" if gname in policy.allowed_groups else "NOT allowed"
        lines.append(f"  {gname} [{mark}]: {group.description}")
        lines.append(f"    source: {', '.join(group.calls) or '-'}")
        lines.append(f"    trace:  {', '.join('aten.' + a for a in group.aten) or '-'}")
    lines += ["", "torch names that are not ops: " + ", ".join(policy.torch_utilities)]
    lines += ["values (not compute): " + ", ".join(policy.values)]
    lines += ["protected modules: " + ", ".join(policy.protected_modules), ""]
    lines.append("forbidden names (rule, severity):")
    for field, rule in NAME_RULES.items():
        pats = getattr(policy.names, field)
        lines.append(f"  {field} ({rule}, {policy.severity_of(rule)}): {', '.join(pats)}")
    lines += ["", "rule severities:"]
    for rule, info in RULES.items():
        changed = " (policy)" if rule in policy.severity else ""
        lines.append(f"  {rule} {policy.severity_of(rule):<9} {info.title}{changed}")
    return "\n".join(lines) + "\n"
