"""Assemble the corpus of honest public Triton code (issue 17, "And no false alarms on honest
code") from upstream checkouts. The tree keeps only what is ours: tests/cases/honest_public_src/
holds a manifest (manifest.toml: for each case the upstream repository, commit, files, the
top-level symbols kept from each, their order, and the exact edits) and each case's case.toml,
submission.toml and adapter (`kernel()`). The upstream code itself never enters a commit
(/work/.library/search/README.md): this script reads it from local copies and writes the
complete case folders, upstream text plus adapter, into a git-ignored folder.

    python bench/honest_corpus_assemble.py --liger DIR --triton DIR --vllm DIR
    python bench/honest_corpus_assemble.py ... --out build/honest_public --check OLD_TREE

Each DIR is one of: a git directory (a bare mirror, as the `fetch` tool brings; files are read
with `git show COMMIT:PATH`), a folder holding one checkout per commit (DIR/COMMIT/PATH), or a
single checkout (DIR/PATH). Every file read must have the git blob id the manifest names, so a
checkout at the wrong commit is refused, not silently assembled. The output is
OUT/<group>/<case>/{case.toml, submission/submission.toml, submission/kernels/<problem>.py},
the layout bench/honest_corpus.py, tests/gpu/test_honest_public.py and
tests/integration/test_cases.py read.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "cases" / "honest_public_src"
MANIFEST = SOURCE / "manifest.toml"
OUT = REPO / "build" / "honest_public"
STAMP = ".assembled"  # marks a folder this script wrote (and may replace)
ADAPTER_MARK = "# ==================== corpus adapter (ours) ===================="


class AssembleError(Exception):
    """The manifest and the upstream copies do not fit together (a clear error, no output)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Project(_Model):
    repo: str  # owner/name on GitHub
    option: str  # the command-line option naming its local copy
    licence: str  # its name, as the manifest records it for NOTICE.md
    # Where a case's header carries the licence text (cases with `licence_from`): the file,
    # the commit and blob id it is read at, and its layout in the header: "plain" puts each
    # line behind "# "; "c-block" reads a /* ... */ block whose "*" become "#", trailing
    # blanks dropped.
    licence_file: str | None = None
    licence_commit: str | None = None
    licence_blob: str | None = None
    licence_style: Literal["plain", "c-block"] = "plain"
    licence_intro: tuple[str, ...] = ()


class Drop(_Model):
    """Upstream lines first..last (1-based, inclusive) left out; `first_text`/`last_text` are
    those lines' exact text, checked, so a shifted file is refused."""

    lines: tuple[int, int]
    first_text: str
    last_text: str


class Replace(_Model):
    """Every line equal to `line` becomes the lines `with_` (at least one must match)."""

    line: str
    with_: tuple[str, ...] = Field(alias="with")


class Source(_Model):
    project: str
    commit: str
    path: str
    blob: str  # git blob id of the upstream file at that commit
    whole: bool = False  # the whole file is kept (then `symbols` is not checked)
    symbols: tuple[str, ...] = ()  # top-level names kept, in order (when not whole)
    drop: tuple[Drop, ...] = ()
    replace: tuple[Replace, ...] = ()
    comment_out: tuple[str, ...] = ()  # exact lines replaced by the project's comment


class Case(_Model):
    group: Literal["honest_public", "honest_public_gpu"]
    problem: str
    parts: tuple[str, ...]  # source ids, concatenated in this order
    licence_from: str | None = None  # the project whose licence the header carries
    header: str  # our words: the file's first lines
    adapter_gap: int = 1  # blank lines between the upstream text and the adapter block


class Manifest(_Model):
    comment_out_template: str  # "{line}" is the removed line
    projects: dict[str, Project]
    sources: dict[str, Source]
    cases: dict[str, Case]


def load_manifest(path: Path = MANIFEST) -> Manifest:
    manifest = Manifest.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    for sid, src in manifest.sources.items():
        if src.project not in manifest.projects:
            raise AssembleError(f"source {sid}: unknown project {src.project!r}")
        if not src.whole and not src.symbols:
            raise AssembleError(f"source {sid}: neither whole nor a list of symbols")
    for name, case in manifest.cases.items():
        for part in case.parts:
            if part not in manifest.sources:
                raise AssembleError(f"case {name}: unknown source {part!r}")
        if case.licence_from is None:
            continue
        proj = manifest.projects.get(case.licence_from)
        if proj is None or None in (proj.licence_file, proj.licence_commit, proj.licence_blob):
            raise AssembleError(f"case {name}: no licence file for {case.licence_from!r}")
    return manifest


def blob_id(data: bytes) -> str:
    """The git blob id of these bytes (what `git hash-object` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def read_upstream(root: Path, commit: str, path: str, blob: str) -> str:
    """The file at `path` of `commit` from a git directory, a folder of per-commit checkouts,
    or one checkout; refused unless its blob id is `blob`."""
    if (root / "HEAD").is_file() and (root / "objects").is_dir():
        got = subprocess.run(["git", f"--git-dir={root}", "show", f"{commit}:{path}"],
                             capture_output=True, check=False)
        if got.returncode:
            raise AssembleError(f"{root}: no {path} at {commit}: "
                                f"{got.stderr.decode(errors='replace').strip()}")
        data = got.stdout
    else:
        file = root / commit / path
        if not file.is_file():
            file = root / path
        if not file.is_file():
            raise AssembleError(f"{root}: no {path} (nor {commit}/{path})")
        data = file.read_bytes()
    if blob_id(data) != blob:
        raise AssembleError(f"{root}: {path} is not the file of {commit} "
                            f"(blob {blob_id(data)}, the manifest says {blob})")
    return data.decode("utf-8")


def licence_block(text: str, style: str) -> list[str]:
    if style == "plain":
        return [f"# {line}" for line in text.splitlines()]
    out = []
    for line in text.splitlines():
        line = line.rstrip()
        if line in ("/*", "*/"):
            continue
        out.append("#" + line[1:] if line.startswith("*") else f"# {line}")
    return out


def apply_edits(text: str, src: Source, template: str) -> str:
    """The upstream text with the source's drops, replacements and commented-out lines; every
    edit must apply where the manifest says."""
    lines = text.split("\n")
    keep = [True] * len(lines)
    for d in src.drop:
        first, last = d.lines
        if not 1 <= first <= last <= len(lines):
            raise AssembleError(f"{src.path}: drop {d.lines} is outside the file")
        if lines[first - 1] != d.first_text or lines[last - 1] != d.last_text:
            raise AssembleError(f"{src.path}: drop {d.lines} does not start with "
                                f"{d.first_text!r} and end with {d.last_text!r}")
        keep[first - 1:last] = [False] * (last - first + 1)
    subs: dict[str, tuple[str, ...]] = {r.line: r.with_ for r in src.replace}
    subs |= {line: (template.format(line=line),) for line in src.comment_out}
    used: set[str] = set()
    out: list[str] = []
    for line, kept in zip(lines, keep, strict=True):
        if not kept:
            continue
        if line in subs:
            used.add(line)
            out.extend(subs[line])
        else:
            out.append(line)
    missing = sorted(set(subs) - used)
    if missing:
        raise AssembleError(f"{src.path}: no line {missing[0]!r} to replace")
    return "\n".join(out)


def top_level_names(text: str) -> list[str]:
    """Names a module defines at top level, in order (functions, classes, assignments)."""
    names: list[str] = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def assemble_kernel(manifest: Manifest, name: str, adapter: str,
                    copies: Mapping[str, Path]) -> str:
    """One case's kernel file: our header (with the upstream licence, as upstream words it),
    each upstream part behind a marker line, then our adapter."""
    case = manifest.cases[name]
    lines = case.header.rstrip("\n").split("\n")
    if case.licence_from is not None:
        proj = manifest.projects[case.licence_from]
        assert proj.licence_file and proj.licence_commit and proj.licence_blob  # load_manifest
        text = read_upstream(_copy(copies, case.licence_from), proj.licence_commit,
                             proj.licence_file, proj.licence_blob)
        lines += [*proj.licence_intro, *licence_block(text, proj.licence_style)]
    chunks = ["\n".join(lines) + "\n"]
    for sid in case.parts:
        src = manifest.sources[sid]
        text = read_upstream(_copy(copies, src.project), src.commit, src.path, src.blob)
        body = apply_edits(text, src, manifest.comment_out_template).rstrip("\n")
        if not src.whole and tuple(top_level_names(body)) != src.symbols:
            raise AssembleError(f"{sid}: keeps {top_level_names(body)}, the manifest says "
                                f"{list(src.symbols)}")
        chunks.append(f"# ==================== upstream {src.path} ====================\n"
                      f"{body}\n")
    return ("\n".join(chunks) + "\n" * case.adapter_gap + ADAPTER_MARK + "\n\n\n"
            + adapter.lstrip("\n"))


def _copy(copies: Mapping[str, Path], project: str) -> Path:
    if project not in copies:
        raise AssembleError(f"no local copy of {project} (its option was not given)")
    return copies[project]


def assemble(copies: Mapping[str, Path], out: Path, manifest_path: Path = MANIFEST,
             names: Sequence[str] = ()) -> list[Path]:
    """Write every case folder (or those named) under out/<group>/<case>/; out is replaced
    whole, so no case of an older assembly is left behind. Returns the case folders."""
    manifest = load_manifest(manifest_path)
    source = manifest_path.parent
    picked = list(names) or sorted(manifest.cases)
    files: dict[Path, str] = {}
    for name in picked:
        if name not in manifest.cases:
            raise AssembleError(f"no case {name!r} in {manifest_path}")
        case, here = manifest.cases[name], source / name
        adapter = (here / "adapter.py").read_text(encoding="utf-8")
        dest = Path(case.group) / name
        files[dest / "case.toml"] = (here / "case.toml").read_text(encoding="utf-8")
        files[dest / "submission" / "submission.toml"] = (
            here / "submission.toml").read_text(encoding="utf-8")
        files[dest / "submission" / "kernels" / f"{case.problem}.py"] = assemble_kernel(
            manifest, name, adapter, copies)
    # Everything is built before anything is written: a failure leaves no half corpus. Only a
    # folder this script wrote (it holds STAMP) is replaced: a mistyped --out is not wiped.
    if out.exists() and any(out.iterdir()):
        if not (out / STAMP).is_file():
            raise AssembleError(f"{out} is not empty and was not written by this script")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / STAMP).write_text("written by bench/honest_corpus_assemble.py\n", encoding="utf-8")
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")
    return sorted(out / manifest.cases[n].group / n for n in picked)


def compare(out: Path, old: Path) -> list[str]:
    """Files that differ between two corpus folders (ignoring files only `old` has outside
    case folders, such as a licence folder): what `--check` prints."""
    diffs = []
    for file in sorted(p for p in out.rglob("*") if p.is_file() and p.name != STAMP):
        rel = file.relative_to(out)
        other = old / rel
        if not other.is_file():
            diffs.append(f"only assembled: {rel}")
        elif other.read_bytes() != file.read_bytes():
            diffs.append(f"differs: {rel}")
    cases = {p.parent.relative_to(old) for p in old.rglob("case.toml")}
    for rel in sorted(cases):
        if not (out / rel / "case.toml").is_file():
            diffs.append(f"only in {old}: {rel}")
    return diffs


def main(argv: Sequence[str] | None = None) -> int:
    manifest = load_manifest()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    for pid, proj in sorted(manifest.projects.items()):
        ap.add_argument(proj.option, dest=pid, type=Path, default=None,
                        help=f"local copy of {proj.repo} (git dir or checkout)")
    ap.add_argument("--out", type=Path, default=OUT, help="default: build/honest_public")
    ap.add_argument("--check", type=Path, default=None,
                    help="a corpus folder to compare the assembly with (exit 1 on a difference)")
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    args = ap.parse_args(argv)
    copies = {pid: getattr(args, pid) for pid in manifest.projects
              if getattr(args, pid) is not None}
    try:
        written = assemble(copies, args.out, names=args.cases)
    except (AssembleError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"assembled {len(written)} case(s) into {args.out}")
    if args.check is not None:
        diffs = compare(args.out, args.check)
        print("\n".join(diffs) if diffs else f"identical to {args.check}")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
