"""What a fresh process pays before it can run an entry on the GPU: the steps of a standby's
set-up (harness.main._standby and _prepare_cuda), each timed, in fresh processes one after
another and then several at once (the round starts standbys beside each other).

    python bench/setup_cost.py [--runs 3] [--together 3] [--json FILE]

Prints, per step, the median over the runs: `import torch`, `import triton`, `torch.cuda.init()`
(the CUDA context), the first device-profiler session (CUPTI's one-time set-up) and a second
one. A bare process on the host, not a container: what the container adds is the round's
`entry_start` (bench/round_speed.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

CHILD = r"""
import json, time
t = {}
s = time.perf_counter(); import torch; t["import_torch"] = time.perf_counter() - s
s = time.perf_counter()
try:
    import triton
except ImportError:
    pass
t["import_triton"] = time.perf_counter() - s
s = time.perf_counter(); torch.cuda.init(); torch.ones(1, device="cuda"); torch.cuda.synchronize()
t["cuda_init"] = time.perf_counter() - s
for name in ("profiler_first", "profiler_second"):
    s = time.perf_counter()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
    t[name] = time.perf_counter() - s
print(json.dumps(t))
"""


def one() -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--together", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    alone = [one() for _ in range(a.runs)]
    with ThreadPoolExecutor(a.together) as pool:
        together = list(pool.map(lambda _: one(), range(a.together)))
    figures = {"alone": medians(alone), "together": medians(together),
               "runs": {"alone": alone, "together": together}}
    for label in ("alone", "together"):
        print(f"{label:9}" + "  ".join(f"{k} {v:.3f} s" for k, v in figures[label].items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
