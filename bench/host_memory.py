"""Peak resident memory of the host while it reads what an entry wrote, per problem, against
the worst files an entry can write into its output folder (issue 19).

    python bench/host_memory.py [--suite demo] [--rev 4369f62] [--dir /dev/shm] [--aliases 64]

For each problem of the suite, L is the entry's output cap for its largest shape's batch (what
the run gives it: batching.entry_limits_from_count over the suite's seeds, at least the fixed
cap) and T the problem's largest call by its own count (inputs and outputs of one call). Each
scenario runs in a fresh process that reads an output folder the way the judge does
(evidence.read_out_dir, then OutDir.load_tensors on every case file, at most L bytes each):
- honest: one output file of L bytes (the most an entry may write: read whole);
- alias: a header naming one sparse block of L bytes `--aliases` times (issue 19's attack);
- reuse: one tensor of L bytes named by `--aliases` arguments;
- files: 300,000 empty files (issue 19: 130 MB of report);
- json: a result.json at its 4 MiB cap of `[[],[],...]`, the densest Python objects per byte.
Printed: the peak resident memory beyond the process's own after imports, in MiB and as a
multiple of L. The target: no scenario past BOUND x L + SLACK_MIB (the judge holds one entry
file and one reference file at a time, each at most L). `--rev` adds the alias and reuse rows
for the tensor reader at that git revision (4369f62: before issue 19), with fewer aliases
(its memory grows by L per alias: 64 of 256 MiB would be 16 GiB).
Results: docs/security.md ("Reading what a container wrote").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BOUND = 2
SLACK_MIB = 128
SCENARIOS = ("honest", "alias", "reuse", "files", "json")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _sparse_file(path: Path, header: dict[str, Any], args: list[Any], body: int) -> None:
    head = json.dumps(dict(header, __metadata__={"args": json.dumps(args)})).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        f.truncate(8 + len(head) + body)


def _write(scenario: str, folder: Path, cap: int, aliases: int) -> None:
    """The entry's side: the worst folder of `scenario` an entry can leave in L bytes."""
    body = cap - (64 << 10)  # the header's room within the cap
    entry = {"dtype": "U8", "shape": [body], "data_offsets": [0, body]}
    if scenario == "honest":
        _sparse_file(folder / "s.0.out", {"t0": entry}, [{"tensor": "t0"}], body)
    elif scenario == "alias":
        names = {f"t{i}": entry for i in range(aliases)}
        _sparse_file(folder / "s.0.out", names, [{"tensor": n} for n in names], body)
    elif scenario == "reuse":
        _sparse_file(folder / "s.0.out", {"t0": entry}, [{"tensor": "t0"}] * aliases, body)
    elif scenario == "files":
        for i in range(300_000):
            os.close(os.open(folder / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
    elif scenario == "json":
        (folder / "result.json").write_bytes(b"[" + b"[]," * ((4 << 20) // 3 - 2) + b"[]]")


def _read(folder: Path, cap: int, tensors_source: str | None) -> dict[str, float]:
    """The host's side, in a fresh process: what the judge reads of the folder."""
    import torch  # noqa: F401  (imported before the baseline, as in the grader)

    from grader.judge import problem as judge
    from grader.model import evidence

    load = None
    if tensors_source:
        import importlib.util

        spec = importlib.util.spec_from_file_location("old_tensors", tensors_source)
        assert spec is not None and spec.loader is not None
        old = importlib.util.module_from_spec(spec)
        sys.modules["old_tensors"] = old
        spec.loader.exec_module(old)
        load = old.load
    base = _peak_mib()
    out = evidence.read_out_dir(folder)
    findings = judge._anomaly_findings(out)
    kept = 0
    for (_case, _kind), path in out.tensor_files.items():
        try:
            values = (load(path, max_bytes=cap) if load is not None
                      else out.load_tensors(_case, _kind, cap))
        except Exception as exc:  # the old reader raises what it raises
            values = str(exc)
        kept += 0 if isinstance(values, str) else len(values)
        del values
    return {"extra_mib": _peak_mib() - base, "findings": len(findings),
            "finding_chars": sum(len(f.message) for f in findings), "values": kept}


def _measure(scenario: str, cap: int, aliases: int, folder: str,
             tensors_source: str | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        _write(scenario, Path(tmp), cap, aliases)
        res = subprocess.run([sys.executable, __file__, "--child", tmp, str(cap),
                              tensors_source or ""], capture_output=True, text=True,
                             check=True, cwd=REPO,
                             env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    result: dict[str, float] = json.loads(res.stdout.strip().splitlines()[-1])
    return result


def _problem_sizes(suite_name: str) -> list[tuple[str, int, int]]:
    """(problem, L, T) per problem of the suite."""
    from grader.grading.config import GradingOptions
    from grader.paths import PROBLEM_BUNDLES
    from grader.run import plan as batching
    from grader.suite.load import load_suite

    suite = load_suite(PROBLEM_BUNDLES / suite_name)
    base = GradingOptions(bundle=Path("-"), out_dir=Path("-")).base_entry_limits
    rows = []
    for pid, sp in suite.problems.items():
        shapes = sp.problem.shapes
        largest = max(shapes, key=lambda s: batching.shape_bytes(sp.problem, s))
        cases = {largest.id: suite.info.seeds_per_shape}
        cap = batching.entry_limits_from_count(base, sp.problem, [largest],
                                               cases).output_bytes
        rows.append((pid, cap, batching.shape_bytes(sp.problem, largest)))
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        folder, cap, source = sys.argv[2], int(sys.argv[3]), sys.argv[4] or None
        print(json.dumps(_read(Path(folder), cap, source)))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="demo")
    ap.add_argument("--rev", default=None, help="also the tensor reader at this git revision")
    ap.add_argument("--dir", default=tempfile.gettempdir(),
                    help="where the folders go (sparse files: no disk is used)")
    ap.add_argument("--aliases", type=int, default=64)
    ap.add_argument("--rev-aliases", type=int, default=8)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = ap.parse_args()
    old_source = None
    if args.rev:
        old_source = str(Path(tempfile.gettempdir()) / f"tensors_{args.rev}.py")
        Path(old_source).write_text(subprocess.run(
            ["git", "-C", str(REPO), "show", f"{args.rev}:grader/harness/tensors.py"],
            capture_output=True, text=True, check=True).stdout)
    scenarios = args.scenarios.split(",")
    print(f"suite {args.suite}; target: peak <= {BOUND} x L + {SLACK_MIB} MiB")
    print("| problem | L MiB | T MiB | scenario | code | peak beyond imports MiB | x L "
          "| findings (chars) | within |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    for pid, cap, largest in _problem_sizes(args.suite):
        for scenario in scenarios:
            runs = [("this checkout", args.aliases, None)]
            if old_source and scenario in ("alias", "reuse"):
                runs.append((args.rev, args.rev_aliases, old_source))
            for code, aliases, source in runs:
                r = _measure(scenario, cap, aliases, args.dir, source)
                ok = r["extra_mib"] <= BOUND * cap / 2**20 + SLACK_MIB
                if source is None:
                    worst = max(worst, r["extra_mib"] / (cap / 2**20))
                label = f"{scenario} x{aliases}" if scenario in ("alias", "reuse") else scenario
                print(f"| {pid} | {cap / 2**20:.0f} | {largest / 2**20:.1f} | {label} | {code} "
                      f"| {r['extra_mib']:.0f} | {r['extra_mib'] / (cap / 2**20):.2f} "
                      f"| {r['findings']:.0f} ({r['finding_chars']:.0f}) | {ok} |")
        scenarios = [s for s in scenarios if s != "files" and s != "json"]  # not size-bound
    print(f"\nworst of this checkout: {worst:.2f} x L")


if __name__ == "__main__":
    main()
