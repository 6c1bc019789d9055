"""`grader round` end to end with the real engine, on the CPU demo suite (vector_add only):
a round of two entries killed after its first entry and resumed, its verdicts equal to
grading each entry alone, the references run once, `grader round verify`, `grader verify`
re-grading a report under its secret, a round graded under its published commitment, the
leaderboard page in a real headless Chromium, and the same round on a real two-node Ray cluster that
loses a node mid-round.

The Ray cluster lives in a network namespace of its own with only a loopback interface
(tests/loopback_netns.py; only the network namespace changes, so the grader's tmpfs mounts
stay visible to the Docker engine): every node binds and talks on 127.0.0.1 and cannot reach
any other address, the machine's own included.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import psutil
import pytest

from grader.intake.tools import create_bundle
from grader.model.results import Report
from grader.paths import REPO
from grader.round.board import build_board
from grader.round.render import board_html
from grader.round.store import RoundDir
from tests import loopback_netns

pytestmark = pytest.mark.docker

SECRET = bytes(range(32)).hex()
COMMON = ["--suite", "demo", "--problem", "vector_add", "--seed-secret", SECRET]
ENTRIES = ("triton", "fallback")


def _grader(*args: str, prefix: tuple[str, ...] = (), timeout: float = 300
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=REPO, check=False, timeout=timeout)


@pytest.fixture(scope="module")
def entries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("entries")
    create_bundle(REPO / "examples" / "triton", folder / "triton.tar")
    create_bundle(REPO / "examples" / "torch-fallback", folder / "fallback.tar")
    return folder


@pytest.fixture(scope="module")
def local_round(engine, runtime, entries: Path,  # type: ignore[no-untyped-def]
                tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A round killed (SIGKILL, the whole process group) once its first entry is recorded,
    then finished with --resume."""
    out = tmp_path_factory.mktemp("round") / "r"
    proc = subprocess.Popen([sys.executable, "-m", "grader", "round", str(entries), "-o",
                             str(out), *COMMON], cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = out / ".round" / "fallback.json"  # the folder's entries in name order
    deadline = time.monotonic() + 240
    while not first.is_file() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert first.is_file(), "the first entry was not recorded"
    assert not (out / ".round" / "triton.json").exists(), "killed too late to test resume"
    sha = RoundDir(out).report_sha256("fallback")
    res = _grader("round", "--resume", "-o", str(out), *COMMON[:4])
    assert res.returncode == 0, res.stderr[-3000:]
    assert RoundDir(out).report_sha256("fallback") == sha  # kept, not graded again
    return out


def _essence(rep: Report) -> list[Any]:
    """What must not depend on grading alone or in a round: verdicts and their evidence."""
    return [(p.id, p.verdict, p.detail, [(s.id, s.verdict, s.detail, s.comparisons,
                                          s.error_excerpt) for s in p.shapes])
            for p in rep.problems]


def test_round_equals_grading_each_entry_alone(local_round: Path, entries: Path,
                                               tmp_path: Path) -> None:
    rd = RoundDir(local_round)
    outcomes = {n: rd.outcome(n) for n in ENTRIES}
    # The references ran once: by the entry graded first; the other took them from the cache.
    assert [u.computed for u in outcomes["fallback"].references] == [True]  # type: ignore[union-attr]
    assert [u.computed for u in outcomes["triton"].references] == [False]  # type: ignore[union-attr]
    board = json.loads((local_round / "leaderboard.json").read_text())
    [ref] = board["references"]
    assert ref["computed_by"] == ["fallback"] and ref["reused_by"] == 1
    # kept on the judging thread, its seconds apart from the comparing's; the later entry
    # keeps nothing
    first, later = rd.report("fallback"), rd.report("triton")
    assert first is not None and later is not None
    assert [p.phases_s["reference_keep"] >= 0 for p in first.problems] == [True]
    assert all("reference_keep" not in p.phases_s and p.phases_s["judge"] >= 0
               for p in later.problems)
    assert [(r["rank"], r["entry"], r["verdicts"]) for r in board["rows"]] == [
        (1, "triton", {"passed": 1}), (2, "fallback", {"fallback": 1})]
    for name in ENTRIES:
        res = _grader("run", str(entries / f"{name}.tar"), "-o", str(tmp_path / name),
                      "--problem", "vector_add", "--seed-secret", SECRET)
        assert res.returncode == 0, res.stderr[-3000:]
        alone = Report.model_validate_json((tmp_path / name / "report.json").read_bytes())
        in_round = rd.report(name)
        assert in_round is not None
        assert _essence(in_round) == _essence(alone)
        assert in_round.summary == alone.summary
        assert in_round.environment.seed_commitment == alone.environment.seed_commitment
    res = _grader("round", "verify", str(local_round))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "WRONG" not in res.stdout and "suite digest matches" in res.stdout


def test_a_later_entry_starts_its_containers_ahead(entries: Path, tmp_path: Path) -> None:
    """With --start-ahead on, a later entry's batches (the round has their references) start
    their entry containers ahead, alone (run.ahead.EntryStandby): the second problem's
    container made its imports at its gate while the first problem's ran; its verdicts are
    those of grading it alone."""
    two = ["--problem", "vector_add", "--problem", "rmsnorm", "--seed-secret", SECRET]
    out = tmp_path / "ahead"
    res = _grader("round", str(entries), "-o", str(out), "--suite", "demo", *two,
                  "--start-ahead", "on")
    assert res.returncode == 0, res.stderr[-3000:]
    rd = RoundDir(out)
    later = rd.outcome("triton")
    assert later is not None and later.references
    assert not any(u.computed for u in later.references)
    rep = rd.report("triton")
    assert rep is not None
    ahead = [p.id for p in rep.problems if "entry.standby" in p.phases_s]
    assert ahead == ["rmsnorm"], {p.id: sorted(p.phases_s) for p in rep.problems}
    res = _grader("run", str(entries / "triton.tar"), "-o", str(tmp_path / "alone"), *two)
    assert res.returncode == 0, res.stderr[-3000:]
    alone = Report.model_validate_json((tmp_path / "alone" / "report.json").read_bytes())
    assert _essence(rep) == _essence(alone)


def test_verify_regrades_a_report_under_its_secret(local_round: Path, tmp_path: Path) -> None:
    """`grader verify`: the round's report reproduces; the same report with a verdict changed
    does not (exit 6, the shape named); a secret other than the report's is refused before
    any grading (exit 2)."""
    report = local_round / "entries" / "triton" / "report.json"
    res = _grader("verify", str(report), "--secret", SECRET, "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok        vector_add/smoke_4099: passed" in res.stdout
    assert "verdicts only" in res.stdout and "reproduced" in res.stdout
    tampered = tmp_path / "report.json"
    doc = json.loads(report.read_text())
    doc["problems"][0]["shapes"][0]["verdict"] = "incorrect"
    doc["problems"][0]["verdict"] = "incorrect"
    tampered.write_text(json.dumps(doc))
    res = _grader("verify", str(tampered), "--secret", SECRET, "-q", "--bundle",
                  str(local_round / "bundles" / "triton.tar"))
    assert res.returncode == 6, res.stdout + res.stderr
    assert ("MISMATCH  vector_add/smoke_4099: the report says incorrect, graded again passed"
            in res.stdout)
    res = _grader("verify", str(report), "--secret", bytes(32).hex())
    assert res.returncode == 2 and "does not match the report's seed commitment" in res.stderr


def test_a_committed_round_grades_only_as_committed(entries: Path, tmp_path: Path) -> None:
    """`grader round commit`, then the round in that folder: other options are refused
    before any entry is staged; the committed ones grade, and `round verify` checks the
    report's images against the published commitment."""
    out = tmp_path / "committed"
    res = _grader("round", "commit", "-o", str(out), *COMMON[:4])
    assert res.returncode == 0, res.stderr[-3000:]
    published = tmp_path / "published.json"
    published.write_bytes((out / "commitment.json").read_bytes())
    assert (out / "seed.secret").stat().st_mode & 0o077 == 0
    res = _grader("round", str(entries / "triton.tar"), "-o", str(out), *COMMON[:4],
                  "--seeds", "2")
    assert res.returncode == 6 and "setting seeds_per_shape: 2, committed None" in res.stderr
    assert not (out / "manifest.json").exists() and not (out / "bundles").exists()
    res = _grader("round", str(entries / "triton.tar"), "-o", str(out), *COMMON[:4],
                  "--seed-secret", SECRET)
    assert res.returncode == 6 and "not the committed secret" in res.stderr
    res = _grader("round", str(entries / "triton.tar"), "-o", str(out), *COMMON[:4])
    assert res.returncode == 0, res.stderr[-3000:]
    assert not list(out.glob("entries/*/seed.secret"))  # the round's own copy only
    res = _grader("round", "verify", str(out), "--commitment", str(published))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok        triton: images are the committed ones" in res.stdout
    assert "commitment matches the manifest" in res.stdout


CHROMIUM = shutil.which("chromium")
PWN = "<script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">"


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_leaderboard_page_renders_and_runs_no_entry_text(local_round: Path,
                                                          tmp_path: Path) -> None:
    rd = RoundDir(local_round)
    manifest = rd.load_manifest()
    manifest = manifest.model_copy(update={"entries": [
        e.model_copy(update={"declared_name": f"{PWN}{e.declared_name}"})
        for e in manifest.entries]})
    outcomes = {n: o for n in ENTRIES if (o := rd.outcome(n)) is not None}
    reports = {n: r for n in ENTRIES if (r := rd.report(n)) is not None}
    page = tmp_path / "leaderboard.html"
    page.write_text(board_html(build_board(manifest, outcomes, reports)), encoding="utf-8")
    assert CHROMIUM is not None
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          page.as_uri()], capture_output=True, timeout=120, check=False)
    dom = res.stdout.decode("utf-8", errors="replace")
    assert "</html>" in dom, res.stderr.decode(errors="replace")[-2000:]
    title = re.search(r"<title>(.*?)</title>", dom, flags=re.S)
    assert title is not None and "PWNED" not in title.group(1)
    assert "<script" not in dom.lower() and "<img" not in dom.lower()
    table = dom.split('id="board"', 1)[1].split("</table>", 1)[0]
    assert "triton" in table and "fallback" in table and unescape(table).count(PWN) == 2


# -- the same round on a real two-node Ray cluster --------------------------------------------

RAY_PORT = "6391"  # free: nothing else lives in the test's own network namespace


def _ray_missing() -> str | None:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "ray is not installed (pip install 'grader[ray]'; scripts/setup.sh does)"
    return loopback_netns.missing()


@pytest.fixture()
def ray_cluster(tmp_path: Path) -> Iterator[tuple[tuple[str, ...], list[subprocess.Popen[bytes]]]]:
    """Two Ray nodes (head, and one joined to it), each with one `grader_docker` unit and a
    label of its own, in a fresh network namespace holding only `lo`; the prefix that runs a
    command in it, and the nodes' `ray start --block` processes (head first). Teardown stops
    both nodes (those processes) and deletes the namespace."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    nodes: list[subprocess.Popen[bytes]] = []
    with loopback_netns.loopback_namespace() as prefix:
        try:
            common = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1",
                      "--num-gpus", "0", "--object-store-memory", str(100 << 20),
                      "--disable-usage-stats"]
            for i, where in enumerate((["--head", "--port", RAY_PORT,
                                        "--include-dashboard=false"],
                                       ["--address", f"127.0.0.1:{RAY_PORT}"])):
                resources = json.dumps({"grader_docker": 1, f"grader_test_node_{i}": 1})
                nodes.append(subprocess.Popen(
                    [*prefix, "ray", "start", *where, *common, "--resources", resources],
                    env=env, start_new_session=True,
                    stdout=(tmp_path / f"node{i}.log").open("wb"), stderr=subprocess.STDOUT))
                if i == 0:
                    time.sleep(3)  # the head's GCS first
            yield prefix, nodes
        finally:
            loopback_netns.stop_nodes(nodes)


NODES_PY = f"""
import json, time, ray
ray.init(address="127.0.0.1:{RAY_PORT}", log_to_driver=False, configure_logging=False)
deadline = time.monotonic() + 90
while len([n for n in ray.nodes() if n["Alive"]]) < 2 and time.monotonic() < deadline:
    time.sleep(0.5)
print(json.dumps([{{"id": n["NodeID"], "address": n["NodeManagerAddress"],
                   "resources": n["Resources"]}} for n in ray.nodes() if n["Alive"]]))
"""


@pytest.mark.skipif(_ray_missing() is not None, reason=str(_ray_missing()))
def test_round_on_a_two_node_ray_cluster_that_loses_a_node(
        local_round: Path, entries: Path, tmp_path: Path,
        ray_cluster: tuple[tuple[str, ...], list[subprocess.Popen[bytes]]]) -> None:
    """Both entries start, one on each node (each node offers one `grader_docker` unit); the
    second node is then stopped. Ray runs its task again on the first node, and the round
    ends with both entries graded and the local round's leaderboard."""
    prefix, nodes = ray_cluster
    res = subprocess.run([*prefix, sys.executable, "-c", NODES_PY], capture_output=True,
                         text=True, timeout=150, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    found = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(found) == 2 and {n["address"] for n in found} == {"127.0.0.1"}
    assert all(n["resources"].get("grader_docker") == 1 for n in found)
    head = next(n["id"] for n in found if "grader_test_node_0" in n["resources"])
    listening = subprocess.run([*prefix, "ss", "-ltnH"], capture_output=True, text=True,
                               check=True).stdout.split("\n")
    local = [line.split()[3] for line in listening if line.strip()]
    assert local and all(re.match(r"(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]|\[::1\]):", a)
                         for a in local), local
    out = tmp_path / "ray-round"
    driver = subprocess.Popen(
        [*prefix, sys.executable, "-m", "grader", "round", str(entries), "-o", str(out),
         *COMMON, "--ray", f"127.0.0.1:{RAY_PORT}"], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        # Each task's grading checkpoints first thing: both started means both nodes hold
        # one, since each node grades one entry at a time.
        deadline = time.monotonic() + 120
        started: list[Path] = []
        work = Path(tempfile.gettempdir()) / "grader-round" / "none-yet"
        while len(started) < 2 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            if (out / "manifest.json").is_file():
                work = Path(tempfile.gettempdir()) / "grader-round" / RoundDir(
                    out).load_manifest().round_id
                started = list(work.glob("*/out/.checkpoint/run.json"))
        assert len(started) == 2, "the two entries did not run at once on the two nodes"
        assert not list((out / ".round").glob("*.json"))  # neither finished yet
        # The second node crashes: its processes (all started by this test, found as the
        # descendants of its `ray start`) killed at once, the task it runs with them.
        for proc in psutil.Process(nodes[1].pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):  # one that ended since the listing
                proc.kill()
        nodes[1].kill()
        _, stderr = driver.communicate(timeout=240)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0, stderr[-3000:]
    rd = RoundDir(out)
    assert {rd.outcome(n).node for n in ENTRIES} == {head}  # type: ignore[union-attr]
    keep = ("rank", "entry", "status", "s_agg", "problems", "verdicts", "shapes",
            "correct_shapes")
    on_ray, here = (json.loads((d / "leaderboard.json").read_text())["rows"]
                    for d in (out, local_round))
    assert [{k: r[k] for k in keep} for r in on_ray] == [{k: r[k] for k in keep} for r in here]
    res = _grader("round", "verify", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    shutil.rmtree(work, ignore_errors=True)  # the nodes' folders of this round
