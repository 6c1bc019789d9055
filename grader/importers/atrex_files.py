"""Atrex-Bench's JSON files as shipped (alibaba/atrex-bench at eb8697d, `data/`), read with
clear errors: metadata.json, roofline.json and operator_importance.json.

The forms the importer accepted before the real benchmark was at hand (a list of shapes, flat
`{"flops", "bytes"}` roofline entries, plain importance numbers) are still read: they are
documented in docs/import.md and cost little. Unknown fields are kept by name in the notes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from grader.errors import ProblemError
from grader.importers.common import ShapeDraft, read_json, validated

IMPORTANCE = "operator_importance.json"


class Loose(BaseModel):
    """A foreign file's object: known fields typed, unknown ones kept (and reported)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def unknown(self) -> list[str]:
        return sorted((self.model_extra or {}).keys())


class AtrexTolerance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    atol: float | None = Field(default=None, ge=0)
    rtol: float | None = Field(default=None, ge=0)


class AtrexOrigin(Loose):
    framework: str | None = None
    symbol: str | None = None
    module: str | None = None


class AtrexMetadata(Loose):
    id: str | None = None  # "atrex_027"
    status: str | None = None  # "trace_reference", "curated"
    description: str | None = None
    operator: str | None = None
    category: str | None = None
    dtype: str | list[str] | None = None  # the dominant dtype ("bf16", "fp8_e4m3")
    dtypes: list[str] | None = None
    input_dtypes: dict[str, str] = Field(default_factory=dict)  # by forward() argument
    output_dtypes: dict[str, str] = Field(default_factory=dict)  # by output name
    origin: AtrexOrigin | None = None
    importance_score: float | None = Field(default=None, ge=0)
    # Per shape id: description, production_performance, call_count, ... (kept in notes).
    shapes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # one pair for every dtype, or pairs by dtype, or one number for both atol and rtol
    tolerance: float | AtrexTolerance | dict[str, AtrexTolerance] | None = None
    atol: float | None = Field(default=None, ge=0)
    rtol: float | None = Field(default=None, ge=0)
    flops: str | float | None = None  # an expression of the shape's params, or a number
    bytes: str | float | None = None
    phase: str | None = None  # "prefill", "decode" or "prefill/decode"
    source: str | None = None
    provenance: str | None = None


class AtrexWork(Loose):
    """One shape's roofline.json entry: the shipped one (semantic_*), or flops/bytes."""

    semantic_W_flops: dict[str, float | None] | float | None = None  # by dtype
    semantic_Q_read_bytes: float | None = Field(default=None, ge=0)
    semantic_Q_write_bytes: float | None = Field(default=None, ge=0)
    SOL_time_ms: dict[str, float | None] | None = None  # by device: upstream's budget
    flops: float | None = Field(default=None, ge=0)
    bytes: float | None = Field(default=None, gt=0)

    def numbers(self) -> tuple[float | None, float | None]:
        flops = self.flops
        w = self.semantic_W_flops
        if flops is None and w is not None:
            # by dtype; `{}` is upstream's "no arithmetic" (integer routing ops): 0
            parts = list(w.values()) if isinstance(w, dict) else [w]
            if not parts or any(v is not None for v in parts):
                flops = float(sum(v for v in parts if v is not None))
        nbytes = self.bytes
        if nbytes is None and self.semantic_Q_read_bytes is not None \
                and self.semantic_Q_write_bytes is not None:
            nbytes = self.semantic_Q_read_bytes + self.semantic_Q_write_bytes
        if flops is not None and flops < 0:
            flops = None
        return flops, (nbytes if nbytes else None)


def read_roofline(op: Path, shapes: list[ShapeDraft], notes: list[str]
                  ) -> dict[str, AtrexWork]:
    """roofline.json's entries by our shape id: `{"shapes": {id: entry}}` as shipped, an
    object keyed by shape name/id/index, or a list in the order of shapes.json."""
    path = op / "roofline.json"
    if not path.exists():
        return {}
    raw = read_json(path)
    if isinstance(raw, dict) and isinstance(raw.get("shapes"), dict):
        raw = raw["shapes"]
    if isinstance(raw, list):
        if len(raw) != len(shapes):
            raise ProblemError(f"{path}: lists {len(raw)} entries for {len(shapes)} shapes",
                               hint="a list must follow shapes.json; or key entries by id")
        found = {s.id: raw[i] for i, s in enumerate(shapes)}
    elif isinstance(raw, dict):
        found = {}
        for s in shapes:
            key = next((k for k in s.keys if k in raw), None)
            if key is not None:
                found[s.id] = raw[key]
        extra = set(raw) - {k for s in shapes for k in s.keys}
        if extra:
            notes.append(f"roofline.json: entries for no shape: {', '.join(sorted(extra))}")
    else:
        raise ProblemError(f"{path}: is a JSON {type(raw).__name__}, expected an object by "
                           "shape or a list")
    out: dict[str, AtrexWork] = {}
    for sid, entry in found.items():
        w: AtrexWork = validated(AtrexWork, entry, f"{path}: shape {sid}")
        out[sid] = w
    sol = sorted({d for w in out.values() for d in (w.SOL_time_ms or {})})
    if sol:
        notes.append(f"roofline.json: upstream SOL_time_ms for {', '.join(sol)} not imported "
                     "(scores use our hardware profiles)")
    return out


def read_importance(root: Path, notes: list[str]
                    ) -> tuple[list[tuple[str, str | None, Any]], str] | None:
    """operator_importance.json as (operator, shape key or None, weight) entries, and what it
    said beside them; None when there is no file.

    As shipped: `{"metadata": {...}, "operators": {op: {"importance_score": x, "phase": ..,
    "num_profiles": n}}}`. Also `{op: n}`, `{op: {"weight", "shapes"}}`, `{op: {shape: n}}`
    and a list of `{"operator", "weight", "shape"}` (docs/import.md)."""
    path = root / IMPORTANCE
    if not path.exists():
        return None
    raw = read_json(path)
    about = ""
    if isinstance(raw, dict) and "operators" in raw:
        meta = raw.get("metadata")
        if isinstance(meta, dict) and meta:
            about = ", ".join(f"{k} {v}" for k, v in meta.items())[:200]
        others = sorted(set(raw) - {"operators", "metadata"})
        if others:
            notes.append(f"{IMPORTANCE}: fields not imported: {', '.join(others)}")
        raw = raw["operators"]
    elif isinstance(raw, dict) and len(raw) == 1 and next(iter(raw)) == "weights":
        raw = raw["weights"]
    entries: list[tuple[str, str | None, Any]] = []
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or "operator" not in item or "weight" not in item:
                raise ProblemError(f"{path}: entry {i}: expected an object with operator and "
                                   "weight (and optionally shape)")
            shape = item.get("shape")
            entries.append((str(item["operator"]), None if shape is None else str(shape),
                            item["weight"]))
    elif isinstance(raw, dict):
        for op, value in raw.items():
            if isinstance(value, dict) and "importance_score" in value:
                entries.append((op, None, value["importance_score"]))
            elif isinstance(value, dict) and ({"weight", "shapes"} & value.keys()):
                if "weight" in value:
                    entries.append((op, None, value["weight"]))
                shapes = value.get("shapes", {})
                if not isinstance(shapes, dict):
                    raise ProblemError(f"{path}: {op}.shapes: expected an object by shape")
                entries += [(op, str(k), v) for k, v in shapes.items()]
            elif isinstance(value, dict):
                entries += [(op, str(k), v) for k, v in value.items()]
            else:
                entries.append((op, None, value))
    else:
        raise ProblemError(f"{path}: is a JSON {type(raw).__name__}, expected an object by "
                           "operator or a list")
    return entries, about
