"""`grader release SUITE -o kit.tar`: the package agents get, and nothing hidden.

What an agent may see of a problem: its id, operator, description, dtypes, tolerances, the
signature and source of its reference, and its **public shapes**, which are its **smoke shapes**
(problem.toml has no other "public" mark, and smoke shapes are the small ones CI grades). Every
non-smoke shape is hidden: those are the shapes that are scored. Never in the kit: weights.toml,
the `flops`/`bytes` expressions or any roofline number, `[hidden]` provenance and notes, hidden
shape ids and params, seeds. problem.toml is never copied (its comments may talk about hidden
shapes): the spec is written anew from the public fields.

`build_kit` refuses (ProblemError) when a published text (a description, a reference.py)
mentions a hidden value, so a careless comment cannot leak a scored shape.
"""

from __future__ import annotations

import ast
import io
import re
import tarfile
from collections.abc import Mapping

import tomlkit

from grader.errors import ProblemError
from grader.formats.expr import work
from grader.formats.problem import Problem, Shape
from grader.formats.spec import PublicShape, Spec
from grader.formats.writer import spec_toml
from grader.suite.load import Suite, SuiteProblem

SPEC_NAME = "spec.toml"
SPEC_HEADER = ("Public specification of one problem. Your kernel is graded on these shapes and on\n"
               "further, larger hidden shapes of the same operator.")
# Integers this small appear in any text (loop bounds, list indices); they carry no secret.
_SMALL_INT = 100
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def public_shapes(problem: Problem) -> list[Shape]:
    return [s for s in problem.shapes if s.smoke]


def _parse(source: str, problem_id: str, name: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ProblemError(f"problem {problem_id}: {name} does not parse: {exc}") from None


def signature(reference_source: str, problem_id: str) -> str:
    """`kernel(...)` with the arguments of the reference's `reference(...)`, read with ast."""
    for node in _parse(reference_source, problem_id, "reference.py").body:
        if isinstance(node, ast.FunctionDef) and node.name == "reference":
            ret = f" -> {ast.unparse(node.returns)}" if node.returns else ""
            return f"kernel({ast.unparse(node.args)}){ret}"
    raise ProblemError(f"problem {problem_id}: reference.py has no def reference(...)")


def _model_methods(sources: Mapping[str, str], problem: Problem
                   ) -> dict[str, ast.arguments] | None:
    """The arguments of `__init__` and `forward` of the reference's `class Model` (in
    reference.py or the files it wraps); None when there is no such class."""
    for name, text in sources.items():
        for node in _parse(text, problem.id, name).body:
            if isinstance(node, ast.ClassDef) and node.name == "Model":
                return {f.name: f.args for f in node.body if isinstance(f, ast.FunctionDef)
                        and f.name in ("__init__", "forward")}
    return None


def module_signature(sources: Mapping[str, str], problem: Problem) -> str:
    """A module problem's entry: `class ModelNew(torch.nn.Module)` with the constructor and
    forward arguments of the reference's `class Model`."""
    head = f"class {problem.entry_names()[0]}(torch.nn.Module)"
    methods = _model_methods(sources, problem)
    if methods is None:
        return f"{head}: the constructor and forward() of the reference's Model"
    return f"{head}: " + "; ".join(f"{m}({ast.unparse(a)})" for m, a in methods.items())


def _plain(args: ast.arguments) -> str:
    """`args` without annotations, and with None for a default that is not a constant: the
    stub must import whatever names the reference's defaults and annotations use."""
    args = ast.arguments(**{f: getattr(args, f) for f in args._fields})
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if a is not None:
            a.annotation = None
    args.defaults = [d if isinstance(d, ast.Constant) else ast.Constant(None)
                     for d in args.defaults]
    args.kw_defaults = [d if d is None or isinstance(d, ast.Constant) else ast.Constant(None)
                        for d in args.kw_defaults]
    return ast.unparse(args)


def kernel_stub(sp: SuiteProblem, suite_id: str,
                extra_sources: Mapping[str, str] | None = None) -> str:
    """`kernels/<id>.py` for the kit: the entry point the harness calls, with the reference's
    arguments, raising until it is written (issue 34: entrants started from an empty file)."""
    problem = sp.problem
    source = (sp.directory / "reference.py").read_text(encoding="utf-8")
    def todo(indent: str) -> str:
        return (f"{indent}raise NotImplementedError(\n{indent}    \"{problem.id}: write it in "
                f"Triton; problems/{problem.id}/{SPEC_NAME} says what it computes\")\n")

    head = (f'"""{problem.id} ({problem.operator}): the entry point the grader calls, with the '
            f"arguments of\nproblems/{problem.id}/reference.py. Try it on the public shapes:\n\n"
            f"    grader run kernels/{problem.id}.py --problem {problem.id} --suite {suite_id} "
            '--practice\n"""\n\nfrom __future__ import annotations\n\nimport torch\n'
            "import triton\nimport triton.language as tl\n\n\n")
    if problem.interface == "module":
        methods = _model_methods({"reference.py": source, **(extra_sources or {})}, problem)
        init = _plain(methods["__init__"]) if methods and "__init__" in methods else "self"
        fwd = _plain(methods["forward"]) if methods and "forward" in methods else "self, *inputs"
        return (head + f"class {problem.entry_names()[0]}(torch.nn.Module):\n"
                f"    def __init__({init}):\n        super().__init__()\n\n"
                f"    def forward({fwd}):\n" + todo(" " * 8))
    for node in _parse(source, problem.id, "reference.py").body:
        if isinstance(node, ast.FunctionDef) and node.name == "reference":
            return head + f"def kernel({_plain(node.args)}):\n" + todo(" " * 4)
    raise ProblemError(f"problem {problem.id}: reference.py has no def reference(...)")


def spec_of(problem: Problem, reference_source: str,
            extra_sources: Mapping[str, str] | None = None) -> Spec:
    """The public part of `problem`: its smoke shapes, and the tolerance grading uses for each
    of its dtypes."""
    module = problem.interface == "module"
    sig = (module_signature({"reference.py": reference_source, **(extra_sources or {})}, problem)
           if module else signature(reference_source, problem.id))
    return Spec(id=problem.id, operator=problem.operator, signature=sig,
                description=problem.description.strip(), dtypes=problem.dtypes,
                interface=problem.interface,
                entry_classes=list(problem.entry_names()) if module else None,
                init_params=problem.init_params,
                tolerance={d: problem.tolerance_for(d) for d in problem.dtypes},
                shapes=[PublicShape(id=s.id, phase=s.phase, params=s.params)
                        for s in public_shapes(problem)])


def spec_text(problem: Problem, reference_source: str,
              extra_sources: Mapping[str, str] | None = None) -> str:
    """The public spec of one problem, as TOML."""
    return spec_toml(spec_of(problem, reference_source, extra_sources), SPEC_HEADER)


def submission_template(suite: Suite) -> str:
    """A submission.toml for entrants to fill in: one kernel file per problem of the suite."""
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Fill in and bundle with your kernels: "
                            "tar -cf submission.tar submission.toml kernels/"))
    agent = tomlkit.table()
    agent.comment("optional: what producing the entry cost")
    agent.add("model", "model-name")
    agent.add(tomlkit.comment("output_tokens = 0"))
    agent.add(tomlkit.comment("wall_s = 0.0"))
    submission = tomlkit.table()
    submission.update({"name": "your-team/your-entry", "suite": suite.id, "dsl": "triton"})
    submission.add("agent", agent)
    doc.add("submission", submission)
    problems = tomlkit.table(is_super_table=True)
    for pid in suite.problems:
        problems.add(pid, {"file": f"kernels/{pid}.py"})
    doc.add("problems", problems)
    return tomlkit.dumps(doc)


def _module_note(suite: Suite) -> str:
    if all(b.problem.interface == "function" for b in suite.problems.values()):
        return ""
    return """ Where `spec.toml` says `interface = "module"`, define instead the class
its `signature` names, with the constructor and `forward` arguments of the reference's `Model`:
it is built once per input set with the shape's `init_params`, under the seed the reference's
`Model` is built under (parameters created in the same order are equal), in eval mode, and
called as `model(*inputs)` under `torch.no_grad()`."""


def readme(suite: Suite) -> str:
    rows = "\n".join(f"| `{b.id}` | {b.problem.operator} | {', '.join(b.problem.dtypes)} | "
                     f"{len(public_shapes(b.problem))} |" for b in suite.problems.values())
    return f"""# Suite `{suite.id}` {suite.info.version}: kit for entrants

{suite.info.description.strip()}

## What to write

For each problem, `kernels/<problem>.py` defining `kernel(...)` with the arguments of the
problem's `reference(...)` (see `signature` in its `spec.toml`), returning the same tensors
(dtypes and shapes).{_module_note(suite)} Outputs must match the reference within the
tolerance of the output dtype: `|out - ref| <= atol + rtol * |ref|` element-wise; NaN or Inf
never passes.

Then fill in `submission.toml` and bundle: `tar -cf submission.tar submission.toml kernels/`.

## What is here

- `problems/<problem>/{SPEC_NAME}`: id, operator, signature, description, dtypes,
  tolerances and the public shapes (with their params, passed to `make_inputs`).
- `problems/<problem>/reference.py`: `reference(*inputs)`, the semantics to match, and
  `make_inputs(seed, device, **params)`, how inputs are built.
- `submission.toml`: a manifest template naming one kernel file per problem.
- `kernels/<problem>.py`: a stub of each, the entry point with the reference's arguments,
  raising `NotImplementedError` until written; `grader run kernels/<problem>.py --problem
  <problem> --suite {suite.id} --practice` grades one on the public shapes.

## How it is graded

The public shapes are small (CI runs them on a CPU, through Triton's interpreter). Your entry
is also graded on hidden shapes, with secret seeds. A shape passes when the output is correct
**and** the work ran in your own kernels (delegating to PyTorch or a vendor library is a
fallback). Passed shapes are scored against the hardware's roofline (the time the operator's
FLOPs and bytes need at peak); problems are weighted by their share of production GPU time.

| problem | operator | dtypes | public shapes |
|---|---|---|---:|
{rows}
"""


def _problem_files(sp: SuiteProblem) -> dict[str, bytes]:
    """spec.toml, reference.py and the problem's extra files (what reference.py imports)."""
    source = (sp.directory / "reference.py").read_bytes()
    extra = {name: (sp.directory / name).read_bytes() for name in sp.problem.extra_files}
    spec = spec_text(sp.problem, source.decode("utf-8"),
                     {n: b.decode("utf-8", errors="replace") for n, b in extra.items()})
    return {f"problems/{sp.id}/{SPEC_NAME}": spec.encode(),
            f"problems/{sp.id}/reference.py": source,
            **{f"problems/{sp.id}/{name}": data for name, data in extra.items()}}


def kit_files(suite: Suite) -> dict[str, bytes]:
    """Every member of the kit, by name relative to the kit's top folder."""
    files = {"README.md": readme(suite).encode(),
             "submission.toml": submission_template(suite).encode()}
    for sp in suite.problems.values():
        files.update(_problem_files(sp))
        extra = {name: (sp.directory / name).read_text(encoding="utf-8", errors="replace")
                 for name in sp.problem.extra_files}
        files[f"kernels/{sp.id}.py"] = kernel_stub(sp, suite.id, extra).encode()
    return files


def _numbers(text: str) -> set[float]:
    return {float(m) for m in _NUMBER.findall(text)}


def hidden_values(suite: Suite) -> tuple[set[str], set[float]]:
    """What must not appear in the kit: (strings, numbers). Numbers that public shapes also
    use, and small integers, are left out: their presence proves nothing."""
    strings = {suite.weights.source, suite.weights.version} - {suite.info.version}
    numbers = {w.weight for w in suite.weights.weights}
    public: set[float] = set()
    public_strings: set[str] = set()
    for b in suite.problems.values():
        p = b.problem
        strings |= {p.hidden.provenance, p.hidden.notes}
        # An expression that is a bare name (`flops = "n"`) is only a public param's name; one
        # that is a bare number (`flops = "0"`) is a number, checked as the others are.
        for x in (p.flops, p.bytes, p.output_bytes):
            if x is None or x.isidentifier():
                continue
            if _NUMBER.fullmatch(x.strip()):
                numbers.add(float(x))
            else:
                strings |= {x, "".join(x.split())}
        public_strings |= set(p.dtypes)
        for s in p.shapes:
            flat = [x for v in s.params.values() for x in (v if isinstance(v, list) else [v])]
            values = {float(v) for v in flat if isinstance(v, int | float)
                      and not isinstance(v, bool)}
            texts = {v for v in flat if isinstance(v, str)}
            numbers |= set(work(p, s))
            if s.smoke:
                public |= values
                public_strings |= texts
            else:
                strings |= {s.id, *texts}
                numbers |= values
    numbers = {n for n in numbers - public if not (n == int(n) and abs(n) < _SMALL_INT)}
    return {s for s in strings - public_strings if s.strip()}, numbers


def leaks(files: Mapping[str, bytes], hidden: tuple[set[str], set[float]]) -> list[str]:
    """`name: value` for every hidden string or number found in a member."""
    strings, numbers = hidden
    found = []
    for name, data in files.items():
        text = data.decode("utf-8", errors="replace")
        for s in sorted(strings):
            if re.search(rf"(?<![\w]){re.escape(s)}(?![\w])", text):
                found.append(f"{name}: {s!r}")
        found += [f"{name}: {n:g}" for n in sorted(_numbers(text) & numbers)]
    return found


def _tar(files: Mapping[str, bytes], top: str) -> bytes:
    """A deterministic tar: sorted regular files, relative names, no owner, no time."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(files[name]))
    return buf.getvalue()


def build_kit(suite: Suite) -> bytes:
    """The kit's tar bytes; ProblemError if a published text would leak a hidden value."""
    files = kit_files(suite)
    found = leaks(files, hidden_values(suite))
    if found:
        raise ProblemError(f"suite {suite.id}: the kit would leak hidden values: "
                           + "; ".join(found[:10]),
                           hint="remove them from the description or reference.py")
    return _tar(files, suite.id)


def release(suite: Suite, *, run: bool = True) -> tuple[int, bytes]:
    """What `grader release` ships: the self-check of every reference first (ReferenceFailed
    naming the first at fault; `run`: each also runs once on the CPU), then the kit. Returns
    how many references were checked and the kit's bytes. `grader suite check` says whether
    the kit would ship through this very function, so that the two never disagree (issue 34:
    suite check said "release kit ok" of a suite whose reference raised, which release
    refused)."""
    from grader.organiser.selfcheck import self_check

    checked = self_check(suite, run=run)
    return len(checked), build_kit(suite)
