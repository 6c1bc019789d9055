"""`grader release`: the kit agents get holds the public part of a suite and nothing hidden.

The proof collects every hidden value of the suite on its own (it does not trust release.py's
list): provenance and notes, the weights (source, version, every weight), the flops and bytes
expressions and their values for every shape, and the id and params of every hidden shape;
then it searches the bytes of every member of the kit for each of them.
"""

from __future__ import annotations

import io
import re
import shutil
import tarfile
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.scoring import release as release_cmd
from grader.errors import ProblemError
from grader.formats.expr import work
from grader.organiser.release_kit import build_kit, signature
from grader.paths import PROBLEM_BUNDLES
from grader.suite.load import Suite, load_suite

DEMO_DIR = PROBLEM_BUNDLES / "demo"
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def members(kit: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(kit), mode="r:") as tar:
        out = {}
        for m in tar.getmembers():
            f = tar.extractfile(m)
            out[m.name] = f.read() if f else b""
        return out


def hidden_of(suite: Suite) -> tuple[set[str], set[float]]:
    """Every hidden string and number of `suite`, less what its public shapes show anyway."""
    strings = {suite.weights.source, *(w.problem + "/" + w.shape for w in suite.weights.weights
                                       if w.shape)}
    if suite.weights.version != suite.info.version:  # equal in the demo: published as such
        strings.add(suite.weights.version)
    numbers = {w.weight for w in suite.weights.weights}
    public: set[float] = set()
    for b in suite.problems.values():
        p = b.problem
        strings |= {p.hidden.provenance, p.hidden.notes}
        # `flops = "n"` is only the name of a public param, `flops = "0"` a number (the
        # evaluated numbers below hold it); every other expression is hidden.
        strings |= {x for e in (p.flops, p.bytes) if e is not None and not e.isidentifier()
                    and not NUMBER.fullmatch(e) for x in (e, e.replace(" ", ""))}
        for s in p.shapes:
            numbers |= set(work(p, s))  # its own numbers, or the expressions evaluated
            values = {float(v) for v in s.params.values() if not isinstance(v, str | bool)}
            if s.smoke:
                public |= values
            else:
                strings.add(s.id)
                strings |= {v for v in s.params.values() if isinstance(v, str)}
                numbers |= values
    return {s for s in strings if s}, numbers - public


def assert_nothing_hidden(kit: bytes, suite: Suite, small_ints_public: bool = False) -> None:
    """`small_ints_public`: integers below 100 (a top-k of 8, a block of 16) prove nothing."""
    strings, numbers = hidden_of(suite)
    if small_ints_public:
        numbers = {n for n in numbers if not (n == int(n) and abs(n) < 100)}
    files = members(kit)
    for name, data in files.items():
        text = data.decode("utf-8")
        for s in strings:
            assert s.lower() not in text.lower(), f"{name} leaks {s!r}"
        found = {float(tok) for tok in NUMBER.findall(text)} & numbers
        assert not found, f"{name} leaks {found}"
        for n in numbers:  # and in raw bytes, in the usual spellings
            for spelling in {f"{n:g}", repr(n), str(int(n)) if n == int(n) else repr(n)}:
                assert not re.search(rf"(?<![\w.]){re.escape(spelling)}(?![\w.])", text), (
                    f"{name} leaks {spelling}")
    for name in files:
        assert not name.endswith("weights.toml") and not name.endswith("/problem.toml")


def test_demo_kit_hides_every_hidden_value() -> None:
    suite = load_suite(DEMO_DIR)
    strings, numbers = hidden_of(suite)
    # The proof is not vacuous: the scored shapes and roofline numbers are in the lists.
    assert {"llama3_8b_oproj_prefill", "2*M*N*K", "residual_decode"} <= strings
    assert {4096.0, 14336.0, 8388608.0, 2 * 4096.0**3, 0.45} <= numbers
    assert_nothing_hidden(build_kit(suite), suite)


def test_llm_inference_kit_hides_every_hidden_value() -> None:
    suite = load_suite(PROBLEM_BUNDLES / "llm-inference")
    strings, numbers = hidden_of(suite)
    assert {"llama3_1_8b_prefill", "deepseek_v3_prefill"} <= strings
    assert {128256.0, 7168.0, 14336.0} <= numbers
    assert_nothing_hidden(build_kit(suite), suite, small_ints_public=True)


def test_kit_contents() -> None:
    files = members(build_kit(load_suite(DEMO_DIR)))
    assert sorted(files) == sorted(
        ["demo/README.md", "demo/submission.toml"]
        + [f"demo/problems/{p}/{f}" for p in ("vector_add", "rmsnorm", "matmul")
           for f in ("spec.toml", "reference.py")]
        + [f"demo/kernels/{p}.py" for p in ("vector_add", "rmsnorm", "matmul")])
    spec = tomllib.loads(files["demo/problems/matmul/spec.toml"].decode())
    assert set(spec) == {"id", "operator", "signature", "description", "dtypes", "tolerance",
                         "shapes"}
    assert spec["signature"] == "kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor"
    assert spec["tolerance"] == {"bfloat16": {"atol": 1e-2, "rtol": 1.6e-2}}
    assert [s["id"] for s in spec["shapes"]] == ["smoke_64x48x80", "smoke_decode_5x96x64"]
    assert spec["shapes"][0]["params"] == {"M": 64, "N": 48, "K": 80}
    rms = tomllib.loads(files["demo/problems/rmsnorm/spec.toml"].decode())
    assert rms["shapes"][0]["params"]["eps"] == 1e-5
    reference = files["demo/problems/matmul/reference.py"]
    assert reference == (DEMO_DIR / "matmul" / "reference.py").read_bytes()
    assert b"def make_inputs" in reference and b"def reference" in reference
    manifest = tomllib.loads(files["demo/submission.toml"].decode())
    assert manifest["submission"]["suite"] == "demo"
    assert manifest["problems"]["rmsnorm"] == {"file": "kernels/rmsnorm.py"}
    readme = files["demo/README.md"].decode()
    assert "kernel(" in readme and "hidden shapes" in readme


def test_kit_tar_is_safe_and_deterministic(tmp_path: Path) -> None:
    kit = build_kit(load_suite(DEMO_DIR))
    # The same bytes from a copy made at another time, somewhere else.
    copy = tmp_path / "elsewhere" / "demo"
    shutil.copytree(DEMO_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert build_kit(load_suite(copy)) == kit
    with tarfile.open(fileobj=io.BytesIO(kit), mode="r:") as tar:
        for m in tar.getmembers():
            assert m.isreg(), m.name
            assert not m.name.startswith("/") and ".." not in m.name.split("/")
            assert m.name.startswith("demo/")
            assert (m.mode, m.mtime, m.uid, m.gid, m.uname, m.gname) == (0o644, 0, 0, 0, "", "")


def _marked_suite(tmp_path: Path) -> Path:
    """The demo suite with a unique marker in every hidden place."""
    root = tmp_path / "demo"
    shutil.copytree(DEMO_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    toml = root / "vector_add" / "problem.toml"
    text = toml.read_text()
    text = text.replace('flops = "n"', 'flops = "n + 0*7777777"')
    text = re.sub(r'provenance = ".*"', 'provenance = "PROVENANCE-MARKER-q1"', text)
    text = re.sub(r'notes = ".*"', 'notes = "NOTES-MARKER-q2"', text)
    text = text.replace("[hidden]", '[[shapes]]\nid = "zz_secret_shape_q3"\n'
                        'params = { n = 987654321 }\nphase = "prefill"\n\n[hidden]')
    toml.write_text(text)
    weights = root / "weights.toml"
    weights.write_text(weights.read_text()
                       .replace('version = "0.1.0"', 'version = "WEIGHTS-VERSION-q4"')
                       .replace("source = ", 'source = "WEIGHTS-SOURCE-q5" # ')
                       + '\n[[weights]]\nproblem = "vector_add"\nshape = "zz_secret_shape_q3"\n'
                         "weight = 0.3131\n")
    return root


def test_markers_in_hidden_places_never_reach_the_kit(tmp_path: Path) -> None:
    suite = load_suite(_marked_suite(tmp_path))
    kit = build_kit(suite)
    blob = b"".join(members(kit).values()) + kit
    for marker in (b"MARKER", b"q1", b"q2", b"zz_secret_shape", b"WEIGHTS-", b"987654321",
                   b"7777777", b"0.3131", b"n + 0*"):
        assert marker not in blob, marker
    assert_nothing_hidden(kit, suite)


def test_release_refuses_a_reference_that_mentions_a_hidden_shape(tmp_path: Path) -> None:
    root = _marked_suite(tmp_path)
    ref = root / "matmul" / "reference.py"
    ref.write_text(ref.read_text() + "\n# tuned for llama3_8b_up_decode\n")
    with pytest.raises(ProblemError, match="llama3_8b_up_decode"):
        build_kit(load_suite(root))
    ref.write_text(ref.read_text().replace("# tuned for llama3_8b_up_decode", "# N = 14336"))
    with pytest.raises(ProblemError, match="14336"):
        build_kit(load_suite(root))


def test_release_refuses_a_description_with_a_hidden_size(tmp_path: Path) -> None:
    root = _marked_suite(tmp_path)
    toml = root / "rmsnorm" / "problem.toml"
    toml.write_text(toml.read_text().replace("RMSNorm over", "RMSNorm (hidden 4096) over"))
    with pytest.raises(ProblemError, match="4096"):
        build_kit(load_suite(root))


def test_signature_is_read_without_running_the_reference() -> None:
    assert signature("import os\nos.system('x')\ndef reference(x, *, k: int = 2): ...", "p") \
        == "kernel(x, *, k: int=2)"
    with pytest.raises(ProblemError, match="no def reference"):
        signature("def ref(x): ...", "p")
    with pytest.raises(ProblemError, match="does not parse"):
        signature("def (", "p")


def test_release_command(tmp_path: Path) -> None:
    out = tmp_path / "kit.tar"
    res = CliRunner().invoke(release_cmd, ["demo", "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == build_kit(load_suite(DEMO_DIR))
