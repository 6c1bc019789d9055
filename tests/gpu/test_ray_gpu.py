"""A round on a one-node Ray cluster that holds the GPU (issue 22, "On the H200"): run with
--run-docker --run-gpu on the GPU host, where bench/gpu_session.sh's `ray` step unpacks the
Ray that bench/device_ray.sh packed (the host has none and reaches no index).

The node lives in a network namespace that holds only a loopback interface (as in CI,
tests/loopback_netns.py says why) and offers its one GPU and one `grader_docker` unit; the round's
two entries (the demo's Triton and PyTorch examples, two problems) are graded there, one after
the other, each in its own Ray task holding the GPU; the leaderboard equals the same round
graded without Ray on this host, and every socket listening in the node's namespace is on
loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.intake.tools import create_bundle
from grader.paths import REPO
from grader.round.store import RoundDir
from grader.verdicts import Verdict
from tests import loopback_netns

pytestmark = [pytest.mark.docker, pytest.mark.gpu]

PORT = "6393"
SECRET = bytes(range(32)).hex()
ENTRIES = {"triton": "triton", "fallback": "torch-fallback"}
COMMON = ("--suite", "demo", "--problem", "vector_add", "--problem", "matmul",
          "--shapes", "smoke", "--seed-secret", SECRET, "--device", "cuda", "--runtime", "host",
          "--python", sys.executable, "-q")
# The leaderboard's columns that do not depend on timing noise.
KEEP = ("rank", "entry", "status", "problems", "verdicts", "shapes", "correct_shapes")


def _ray_missing() -> str | None:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "ray is not importable (bench/device_ray.sh packs it for the GPU host)"
    return loopback_netns.missing()


@pytest.fixture(scope="module")
def entries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("entries")
    for name, example in ENTRIES.items():
        create_bundle(REPO / "examples" / example, folder / f"{name}.tar")
    return folder


@pytest.fixture()
def gpu_node(tmp_path: Path) -> Iterator[tuple[tuple[str, ...], subprocess.Popen[bytes]]]:
    """A head node in a loopback-only namespace, with this host's GPU 0 and one
    `grader_docker` unit; the prefix that runs a command in that namespace, and the node's
    `ray start --block` process. Teardown stops it and deletes the namespace."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "CUDA_VISIBLE_DEVICES": "0"}
    # The `ray` script is not installed where Ray is carried as a folder (bench/device_ray.sh).
    ray_cli = [sys.executable, "-c", "from ray.scripts.scripts import main; main()"]
    with loopback_netns.loopback_namespace() as prefix:
        node = subprocess.Popen(
            [*prefix, *ray_cli, "start", "--head", "--block", "--port", PORT,
             "--node-ip-address", "127.0.0.1", "--include-dashboard=false", "--num-cpus", "4",
             "--num-gpus", "1", "--object-store-memory", str(200 << 20),
             "--disable-usage-stats", "--resources", json.dumps({"grader_docker": 1})],
            env=env, start_new_session=True, stdout=(tmp_path / "node.log").open("wb"),
            stderr=subprocess.STDOUT)
        try:
            yield prefix, node
        finally:
            loopback_netns.stop_nodes([node])


NODES_PY = f"""
import json, time, ray
deadline = time.monotonic() + 60
while True:
    try:
        ray.init(address="127.0.0.1:{PORT}", log_to_driver=False, configure_logging=False)
        break
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(1)
print(json.dumps([{{"id": n["NodeID"], "address": n["NodeManagerAddress"],
                   "resources": n["Resources"]}} for n in ray.nodes() if n["Alive"]]))
"""


def _round(entries: Path, out: Path, *extra: str, prefix: tuple[str, ...] = ()
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "grader", "round", "grade", str(entries),
                           "-o", str(out), *COMMON, *extra], capture_output=True, text=True,
                          cwd=REPO, check=False, timeout=540)


@pytest.mark.skipif(_ray_missing() is not None, reason=str(_ray_missing()))
def test_round_on_a_one_node_ray_cluster_with_the_gpu(
        entries: Path, tmp_path: Path,
        gpu_node: tuple[tuple[str, ...], subprocess.Popen[bytes]]) -> None:
    prefix, head = gpu_node
    res = subprocess.run([*prefix, sys.executable, "-c", NODES_PY], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    (node,) = json.loads(res.stdout.strip().splitlines()[-1])
    assert node["address"] == "127.0.0.1"
    assert node["resources"].get("GPU") == 1 and node["resources"].get("grader_docker") == 1

    start = time.monotonic()
    on_ray = _round(entries, tmp_path / "ray-round", "--ray", f"127.0.0.1:{PORT}",
                    prefix=prefix)
    ray_s = time.monotonic() - start
    assert on_ray.returncode == 0, on_ray.stdout[-2000:] + on_ray.stderr[-3000:]
    # Every socket listening in the node's namespace (Ray's servers included) is on loopback.
    listening = loopback_netns.listening(head.pid)
    assert loopback_netns.only_loopback(listening), listening

    rd = RoundDir(tmp_path / "ray-round")
    for name in ENTRIES:
        outcome = rd.outcome(name)
        assert outcome is not None and outcome.status == "graded", outcome
        assert outcome.node == node["id"]
        rep = rd.report(name)
        assert rep is not None and rep.environment.is_performance
        assert "H" in rep.environment.device, rep.environment.device
    triton, fallback = rd.report("triton"), rd.report("fallback")
    assert triton is not None and fallback is not None
    assert all(s.verdict == Verdict.PASSED for p in triton.problems for s in p.shapes)
    assert {p.verdict for p in fallback.problems} == {Verdict.FALLBACK}

    start = time.monotonic()
    here = _round(entries, tmp_path / "local-round")
    local_s = time.monotonic() - start
    assert here.returncode == 0, here.stdout[-2000:] + here.stderr[-3000:]
    assert _board(tmp_path / "ray-round") == _board(tmp_path / "local-round")
    print(f"round of {len(ENTRIES)} entries on Ray: {ray_s:.1f} s; without Ray: {local_s:.1f} s")


def _board(round_dir: Path) -> list[dict[str, object]]:
    rows = json.loads((round_dir / "leaderboard.json").read_text())["rows"]
    return [{k: r[k] for k in KEEP} for r in rows]
