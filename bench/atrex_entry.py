"""Write an entry for an imported Atrex-Bench suite: our own Triton `class Model` where we have
one (bench/atrex_solutions/<operator>.py), the operator's own reference everywhere else.

    python bench/atrex_entry.py SUITE_DIR -o ENTRY_DIR [--solutions DIR]

SUITE_DIR is what `grader import atrex` made (build/atrex-bench imported, docs/import.md).
Issue 32 asks for all of Atrex-Bench graded for a later entry in 10 minutes; a round needs an
entry for every operator. We have honest kernels for all 30 operators of eb8697d (they grade
`passed`); an operator we have none for (a later Atrex-Bench) gets its own reference as its
entry, `fallback` (exact, and done by PyTorch), so the round still exercises every operator
and shape. The kernels stay under bench/, never in the suite: an imported suite is
third-party material in a git-ignored folder.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader.suite.load import load_suite  # noqa: E402

SOLUTIONS = REPO / "bench" / "atrex_solutions"
SOURCE_REFERENCE = "source_reference.py"  # the importer's copy of the operator's reference.py


def write_entry(suite_dir: Path, out: Path, solutions: Path = SOLUTIONS) -> dict[str, str]:
    """The submission folder `out` for the suite in `suite_dir`: each problem's kernel file,
    and whether it is ours ("triton") or the problem's reference ("reference"). A solution
    for an operator the suite lacks (a suite imported from part of Atrex-Bench) is listed
    as "unused"."""
    suite = load_suite(suite_dir)
    ours = {p.stem: p for p in solutions.glob("*.py")}
    if out.exists():
        shutil.rmtree(out)
    (out / "kernels").mkdir(parents=True)
    kinds: dict[str, str] = {}
    lines = ["# Written by bench/atrex_entry.py: our Triton kernels for a few operators, each",
             "# other operator's own reference as its entry (verdict fallback).",
             "[submission]", f'name = "atrex-triton-and-references-{suite.id}"',
             f'suite = "{suite.id}"', 'dsl = "triton"']
    for pid, problem in suite.problems.items():
        source = ours.get(pid) or problem.directory / SOURCE_REFERENCE
        if not source.is_file():
            raise SystemExit(f"{problem.directory}: no {SOURCE_REFERENCE} (not an Atrex import?)")
        shutil.copyfile(source, out / "kernels" / f"{pid}.py")
        kinds[pid] = "triton" if pid in ours else "reference"
        lines += ["", f"[problems.{pid}]", f'file = "kernels/{pid}.py"']
    (out / "submission.toml").write_text("\n".join(lines) + "\n")
    kinds.update({name: "unused" for name in ours if name not in suite.problems})
    return kinds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path, help="an imported Atrex-Bench suite folder")
    ap.add_argument("-o", "--out", type=Path, required=True, help="the submission folder")
    ap.add_argument("--solutions", type=Path, default=SOLUTIONS,
                    help="folder of <operator>.py Triton entries (default: %(default)s)")
    args = ap.parse_args(argv)
    kinds = write_entry(args.suite, args.out, args.solutions)
    triton = sorted(p for p, k in kinds.items() if k == "triton")
    refs = sum(1 for k in kinds.values() if k == "reference")
    unused = sorted(p for p, k in kinds.items() if k == "unused")
    # Named, so that a misspelt solution file is seen: it would grade its operator's reference.
    print(f"{args.out}: {len(triton) + refs} operators, {len(triton)} in Triton "
          f"({', '.join(triton)}), {refs} their own reference"
          + (f"; solutions for no operator of this suite: {', '.join(unused)}" if unused
             else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
