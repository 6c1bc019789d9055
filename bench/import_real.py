"""Import real checkouts of Atrex-Bench and KernelBench, grade every imported problem with its
own reference as the entry, and print the tables of docs/import.md (issue 20).

    python bench/import_real.py --atrex ~/atrex-bench --kernelbench ~/KernelBench \\
        --work /tmp/import-real [--grade atrex,kernelbench] [--levels 1,2,3,4] [--limit N]

For each source: `grader import ... --skip-bad` (per KernelBench level: imported, refused and
each refusal's reason), then a submission whose kernel for each problem is the source's own
reference file (its `class Model`), graded by `grader run` on this host's default shapes (the
smoke shapes on a CPU). The expected verdict is `fallback` for every problem (exact outputs, the
work done by PyTorch); `infra_error` or `missing` is the importer's failure. Runs on a CPU;
the grading takes minutes per dozen problems (two containers a problem).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader.intake.tools import create_bundle  # noqa: E402
from grader.suite.load import load_suite  # noqa: E402

SOURCE_FILE = {"atrex": "source_reference.py", "kernelbench": "source_problem.py"}


def _grader(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=REPO, check=False)


def import_one(kind: str, source: Path, out: Path) -> tuple[int, list[str], float]:
    """Import `source` into `out`: (problems imported, refusals, seconds)."""
    t0 = time.monotonic()
    res = _grader("import", kind, str(source), "-o", str(out), "--skip-bad")
    took = time.monotonic() - t0
    skipped = [line.removeprefix("skipped: ") for line in res.stdout.splitlines()
               if line.startswith("skipped: ")]
    if res.returncode != 0:  # nothing imported: the reasons are in the error
        return 0, [line.strip() for line in res.stderr.splitlines()[1:] if line.strip()], took
    return len(load_suite(out).problems), skipped, took


def grade(kind: str, suite_dir: Path, work: Path, limit: int | None) -> dict[str, dict[str, str]]:
    """Grade every problem of the suite with its own reference as the entry."""
    suite = load_suite(suite_dir)
    ids = list(suite.problems)[:limit] if limit else list(suite.problems)
    entry = work / f"entry-{suite.id}"
    shutil.rmtree(entry, ignore_errors=True)
    (entry / "kernels").mkdir(parents=True)
    lines = ["[submission]", f'name = "reference-as-entry-{suite.id}"', f'suite = "{suite.id}"',
             'dsl = "triton"']
    for pid in ids:
        shutil.copy(suite.problems[pid].directory / SOURCE_FILE[kind],
                    entry / "kernels" / f"{pid}.py")
        lines += ["", f"[problems.{pid}]", f'file = "kernels/{pid}.py"']
    (entry / "submission.toml").write_text("\n".join(lines) + "\n")
    bundle = work / f"{suite.id}.tar"
    create_bundle(entry, bundle)
    out = work / f"report-{suite.id}"
    shutil.rmtree(out, ignore_errors=True)
    only = [x for pid in ids for x in ("--problem", pid)] if limit else []
    res = _grader("run", str(bundle), "--suites", str(suite_dir.parent), "-o", str(out),
                  "--format", "json", *only)
    if not (out / "report.json").is_file():
        raise SystemExit(f"grader run failed ({res.returncode}):\n{res.stderr[-3000:]}")
    rep = json.loads((out / "report.json").read_text())
    rows = {}
    for p in rep["problems"]:
        shapes = p["shapes"]
        rows[p["id"]] = {"verdict": p["verdict"],
                         "shapes": ", ".join(f"{s['id']} {s['verdict']}" for s in shapes),
                         "params": json.dumps(shapes[0]["params"]) if shapes else "",
                         "detail": p.get("detail", "") if p["verdict"] != "fallback" else "",
                         "wall_s": f"{p.get('wall_s') or 0:.0f}"}
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--atrex", type=Path, help="an Atrex-Bench checkout")
    ap.add_argument("--kernelbench", type=Path, help="a KernelBench checkout")
    ap.add_argument("--work", type=Path, default=Path("/tmp/import-real"))
    ap.add_argument("--levels", default="1,2,3,4", help="KernelBench levels to import")
    ap.add_argument("--grade", default="atrex", help="which imports to grade: atrex, "
                    "kernelbench (its first level imported), both comma-separated, or none")
    ap.add_argument("--limit", type=int, help="grade only the first N problems of each")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    suites = a.work / "suites"
    suites.mkdir(exist_ok=True)
    graded: dict[str, Path] = {}
    print("| source | imported | refused | import time |\n| --- | --- | --- | --- |")
    refusals: list[str] = []
    if a.atrex:
        out = suites / "atrex-bench"
        shutil.rmtree(out, ignore_errors=True)
        n, skipped, took = import_one("atrex", a.atrex, out)
        print(f"| Atrex-Bench | {n} | {len(skipped)} | {took:.0f} s |")
        refusals += skipped
        graded["atrex"] = out
    if a.kernelbench:
        root = a.kernelbench / "KernelBench" if (a.kernelbench / "KernelBench").is_dir() \
            else a.kernelbench
        for level in a.levels.split(","):
            out = suites / f"kernelbench-level{level}"
            shutil.rmtree(out, ignore_errors=True)
            n, skipped, took = import_one("kernelbench", root / f"level{level}", out)
            print(f"| KernelBench level {level} | {n} | {len(skipped)} | {took:.0f} s |")
            refusals += skipped
            if n and "kernelbench" not in graded:
                graded["kernelbench"] = out
    if refusals:
        print("\nRefused, with the importer's reason:\n")
        print("\n".join(f"- {r[:300]}" for r in refusals))
    for kind in [k for k in a.grade.split(",") if k in graded]:
        t0 = time.monotonic()
        rows = grade(kind, graded[kind], a.work, a.limit)
        counts = Counter(r["verdict"] for r in rows.values())
        print(f"\n{kind}: {len(rows)} problems graded with their reference as the entry in "
              f"{time.monotonic() - t0:.0f} s: "
              + ", ".join(f"{v} {n}" for v, n in counts.most_common()) + "\n")
        print("| problem | verdict | smoke params | wall s | detail |\n"
              "| --- | --- | --- | --- | --- |")
        for pid, r in rows.items():
            print(f"| {pid} | {r['verdict']} | `{r['params'][:80]}` | {r['wall_s']} | "
                  f"{r['detail'][:120]} |")


if __name__ == "__main__":
    main()
