"""The one table of detection rules: id, title, default severity and what each catches.

Static analysis, the trace judge, SARIF export and docs/detection.md all read this table; a
policy may change a rule's severity (`[severity]` in policies/*.toml) but never its meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.model.findings import Severity


@dataclass(frozen=True, kw_only=True)
class RuleInfo:
    title: str
    severity: Severity
    layer: str  # "static" or "dynamic": which analysis emits it
    description: str


_S, _D = "static", "dynamic"
_I, _W, _F = Severity.INFO, Severity.WARNING, Severity.FALLBACK
_V, _T = Severity.VIOLATION, Severity.TAMPERING

RULES: dict[str, RuleInfo] = {
    # -- the analysis itself ------------------------------------------------------------
    "ST000": RuleInfo(title="source does not parse", severity=_I, layer=_S, description=(
        "The file is not valid Python. The run decides the verdict (compile_error); static "
        "analysis has nothing to say about it.")),
    "ST001": RuleInfo(title="source too deeply nested to analyse", severity=_V, layer=_S,
        description=(
        "The syntax tree is deeper than the analyser's recursion allows. No honest kernel "
        "needs this, and it would hide everything else from static analysis.")),
    "ST002": RuleInfo(title="no kernel() function", severity=_I, layer=_S, description=(
        "No module-level `def kernel`. Reachability then starts from all module-level code; "
        "the run decides whether the entry can be called at all.")),
    "ST003": RuleInfo(title="source the analyser cannot analyse", severity=_V, layer=_S,
        description=(
        "The analyser failed on this file (an exception inside static analysis, caught). A "
        "file that cannot be checked is not graded as if it had been: policy_violation, "
        "never the grader's infra_error.")),
    # -- fallback delegation ------------------------------------------------------------
    "FB001": RuleInfo(title="PyTorch compute function", severity=_F, layer=_S, description=(
        "A torch function that computes (torch.matmul, torch.nn.functional.*, torch.linalg.*, "
        "nn layers, ...) is used outside @triton.jit code, directly or through an alias, a "
        "`from` import, getattr or a dynamic import. Anything not in the policy's allowed op "
        "groups or torch utilities is compute.")),
    "FB002": RuleInfo(title="Tensor compute method", severity=_F, layer=_S, description=(
        "A Tensor method that computes (x.sum(), x.softmax(), x.matmul(), x.cpu().numpy() "
        "...) is called outside @triton.jit code. Names shared with Python containers "
        "(add, sort, index, ...) are only flagged on receivers known to be tensors.")),
    "FB003": RuleInfo(title="Tensor operator", severity=_F, layer=_S, description=(
        "`a @ b` anywhere outside @triton.jit code, or arithmetic/comparison where one "
        "operand is known to be a tensor: PyTorch computes it, not the entry's kernel.")),
    "FB004": RuleInfo(title="try/except fallback to PyTorch", severity=_F, layer=_S,
        description=(
        "A try block launches Triton and its except handler computes with PyTorch: when the "
        "launch fails the entry silently delegates (and the run may never show it).")),
    "FB005": RuleInfo(title="no Triton kernel in the file", severity=_F, layer=_S,
        description="The file defines no @triton.jit function: no kernel in the target DSL."),
    "FB006": RuleInfo(title="array library or raw view of tensor memory", severity=_F,
        layer=_S, description=(
        "numpy (but its dtypes and constants), DLPack (torch.utils.dlpack, from_dlpack), "
        "memoryview, the array module, or the `__array_interface__`, "
        "`__cuda_array_interface__`, `__dlpack__` and `__array__` protocols: another library "
        "computing on zero-copy views of the tensors, which no PyTorch trace records. "
        "(cupy, numba, jax are VL001.)")),
    # -- decoys -------------------------------------------------------------------------
    "DK001": RuleInfo(title="decoy Triton kernel", severity=_W, layer=_S, description=(
        "A @triton.jit function that nothing reachable from kernel() launches or calls. The "
        "run decides whether any Triton kernel actually ran.")),
    "DK002": RuleInfo(title="returned buffer no launch wrote", severity=_W, layer=_S,
        description=(
        "kernel() returns a buffer it allocated but never passed to any call, so no Triton "
        "launch can have written it.")),
    # -- policy violations --------------------------------------------------------------
    "VL001": RuleInfo(title="banned kernel library", severity=_V, layer=_S, description=(
        "Imports or uses a vendor or framework kernel library (flash_attn, xformers, vllm, "
        "cupy, ...): see the policy's `names.vendor_kernels`.")),
    "VL002": RuleInfo(title="PyTorch compiler", severity=_V, layer=_S, description=(
        "torch.compile (an nn.Module's own .compile() too), dynamo, inductor, TorchScript, "
        "export or C++/CUDA extension building: generated kernels, not the entry's own.")),
    "VL003": RuleInfo(title="PyTorch internals", severity=_V, layer=_S, description=(
        "torch.ops, torch._C, torch.library, dispatch-mode machinery or any private torch "
        "name (torch._scaled_mm ...): direct access to native kernels, bypassing the op "
        "policy.")),
    "VL004": RuleInfo(title="native library loading", severity=_V, layer=_S, description=(
        "ctypes or cffi: loads libcublas/libcudnn or any native code behind the analysis.")),
    # -- disguise -----------------------------------------------------------------------
    "DS001": RuleInfo(title="dynamic import of a computed name", severity=_W, layer=_S,
        description=(
        "__import__/importlib with a module name the analyser cannot compute, or import "
        "machinery (importlib.util, sys.path, pkgutil).")),
    "DS002": RuleInfo(title="code from text", severity=_V, layer=_S, description=(
        "eval, exec, compile, marshal, pickle loads or code objects: code the analyser "
        "cannot see.")),
    "DS003": RuleInfo(title="name looked up at run time", severity=_W, layer=_S, description=(
        "getattr with a name the analyser cannot compute, globals()/vars()/locals(), "
        "__dict__ or __builtins__ lookups: a way to reach a function without naming it.")),
    # -- tampering with the grader's evidence -------------------------------------------
    "TM001": RuleInfo(title="monkeypatching", severity=_T, layer=_S, description=(
        "Assigns, sets or deletes attributes of torch, triton, time, the harness or other "
        "protected modules, patches with unittest.mock, assigns dunder attributes or "
        "defines __torch_function__/__torch_dispatch__ (seen in public harness exploits: "
        "patched timers and torch.allclose).")),
    "TM004": RuleInfo(title="looks at the grader's instruments", severity=_V, layer=_S,
        description=(
        "Reads or sets what the grader watches with: Triton's hook knobs "
        "(triton.knobs.runtime, launch_enter_hook/launch_exit_hook, jit_post_compile_hook, "
        "...), the dispatch-mode stack (_get_current_dispatch_mode, "
        "_len_torch_dispatch_stack, torch._C._get_dispatch_mode ...), the profiler's state "
        "(torch.profiler, torch.autograd.profiler, _profiler_enabled, torch._C._autograd, "
        "kineto), tracing hooks (sys.gettrace), the process's CUDA memory statistics, a "
        "stream or event `.query()` (is the device busy?) or torch.cuda._sleep. A kernel has "
        "no honest reason to look; an entry that does can tell watched calls from timed "
        "ones (issue 17).")),
    "TM002": RuleInfo(title="frame or heap introspection", severity=_T, layer=_S,
        description=(
        "gc.get_objects/get_referrers, inspect, sys._getframe, sys.modules, tracing hooks, "
        "f_back/f_globals/__globals__/__subclasses__: the way entries have read expected "
        "outputs and the harness's state.")),
    "TM003": RuleInfo(title="RNG state", severity=_V, layer=_S, description=(
        "Seeds or reads the random generators (manual_seed, get/set_rng_state): a kernel has "
        "no need to, and it is how input prediction starts.")),
    # -- sandbox --------------------------------------------------------------------------
    "SB001": RuleInfo(title="processes and signals", severity=_V, layer=_S, description=(
        "subprocess, os.system/fork/exec*, multiprocessing, signal, os._exit.")),
    "SB002": RuleInfo(title="threads", severity=_V, layer=_S, description=(
        "threading, concurrent.futures, asyncio: torch ops in another thread are invisible "
        "to the dispatch trace.")),
    "SB003": RuleInfo(title="files, network or environment", severity=_V, layer=_S,
        description=(
        "open, pathlib, os.environ/getenv, sockets, HTTP clients, torch.load/save.")),
    "SB004": RuleInfo(title="extra CUDA stream or graph", severity=_V, layer=_S, description=(
        "torch.cuda.Stream/stream/set_stream, CUDA graphs, a `stream=` argument: work off "
        "the timed stream escapes the timer.")),
    "SB005": RuleInfo(title="finaliser or exit hook", severity=_V, layer=_S, description=(
        "Code that runs when the harness is done or the interpreter exits: atexit, "
        "weakref.finalize or a weakref callback, a `__del__` method, sys.excepthook/"
        "unraisablehook, threading.excepthook/_register_atexit, os.register_at_fork, "
        "signal.signal. Such code ran after the harness wrote its evidence and rewrote it "
        "(issue 17). sys.settrace/setprofile/addaudithook are TM002.")),
    "PR001": RuleInfo(title="precision downgrade", severity=_W, layer=_S, description=(
        "Host code converts to float16/bfloat16/float8 or lowers float32 matmul precision. "
        "Correctness at the problem's tolerance decides; shown as a warning.")),
    # -- dynamic (the trace of what ran) ----------------------------------------------
    "DY001": RuleInfo(title="PyTorch computed during kernel()", severity=_F, layer=_D,
        description=(
        "The dispatch trace recorded aten ops outside the policy's allowed groups while "
        "kernel() ran.")),
    "DY002": RuleInfo(title="no Triton kernel ran", severity=_F, layer=_D, description=(
        "No Triton launch was recorded during kernel(): no kernel in the target DSL ran.")),
    "DY003": RuleInfo(title="DSL share of device time below threshold", severity=_F,
        layer=_D, description=(
        "On the GPU, the entry's own Triton kernels took less than the policy's "
        "native_share_threshold of device time; vendor, PyTorch-native and unknown kernels "
        "took the rest.")),
    "DY004": RuleInfo(title="launches without device kernels", severity=_W, layer=_D,
        description=(
        "Triton launches were reported but the profiler saw none of the entry's own Triton "
        "kernels on the device: the evidence does not agree.")),
    "DY005": RuleInfo(title="launch argument that can compute", severity=_V, layer=_D,
        description=(
        "A Triton launch got an argument that is not exactly a torch.Tensor, a Python scalar "
        "or one of Triton's own types (a tensor subclass, an object with a data_ptr): its "
        "attributes can compute while Triton reads them, where nothing is recorded.")),
    "DY006": RuleInfo(title="tensor memory handed to another array library", severity=_F,
        layer=_D, description=(
        "A tensor's memory was exported (.numpy(), __array__, __dlpack__) by entry code: "
        "numpy, BLAS or any library computing on that view is invisible to the trace.")),
    "DY007": RuleInfo(title="element-wise Python loop", severity=_F, layer=_D, description=(
        "A call read or wrote single elements (select, item, fill_, copy_ ...) in proportion "
        "to the problem's output size: plain Python did the work, one element at a time.")),
    "DY008": RuleInfo(title="PyTorch computed outside the entry's calls", severity=_W,
        layer=_D, description=(
        "Compute ops ran outside every call of the entry (at import, or between calls on the "
        "harness's thread): nothing of it is in a call's record, shown for a person to "
        "weigh.")),
    # Evidence checks of the host (grader/judge/problem.py, grader/scoring/apply.py).
    "TM900": RuleInfo(title="forged output folder", severity=_T, layer=_D, description=(
        "The entry's output folder held a symlink, FIFO or other non-regular file, or a result "
        "file that is oversized or does not match its schema.")),
    "TM901": RuleInfo(title="unexpected output file", severity=_W, layer=_D, description=(
        "The entry's output folder held a regular file the harness never writes.")),
    "TM910": RuleInfo(title="invalid timing samples", severity=_T, layer=_D, description=(
        "Timing samples were missing, negative or NaN.")),
    "TM911": RuleInfo(title="timing beyond the wall clock", severity=_T, layer=_D, description=(
        "The timed samples sum to more than the container ran by the host's clock.")),
    "TM912": RuleInfo(title="time outside the timed stream", severity=_W, layer=_D,
        description=(
        "The time to a device-wide synchronisation far exceeds the event-timed kernel: work "
        "hidden on another stream, or heavy host-side launch overhead.")),
    "TM913": RuleInfo(title="faster than the roofline", severity=_T, layer=_D, description=(
        "The measured time is below the shape's roofline on the datasheet's peaks: physically "
        "impossible, so the measurement was tampered with.")),
    "TM915": RuleInfo(title="timed device time no kernel explains", severity=_F, layer=_D,
        description=(
        "In the timed calls, a large part of the event-timed device time passed with no "
        "recorded kernel running: work the record cannot see (host-side compute the call "
        "waited for) is a finding, not a score.")),
    "TM916": RuleInfo(title="timed calls without their record", severity=_T, layer=_D,
        description=(
        "On the GPU, the timed calls came back without the device record of what they ran, "
        "or with one whose call brackets do not match the calls made.")),
    "TM917": RuleInfo(title="kernels beyond the timed window", severity=_T, layer=_D,
        description=(
        "A timed call's recorded kernels ran far longer than its events measured: work on a "
        "stream the events do not wait for, so the time understates the work.")),
}


def rules_markdown() -> str:
    """The rule table of docs/detection.md (a test keeps the doc equal to this)."""
    rows = ["| rule | default severity | layer | title | what it catches |",
            "|------|------------------|-------|-------|-----------------|"]
    for rule_id, info in RULES.items():
        text = info.description.replace("|", "\\|")
        rows.append(f"| {rule_id} | {info.severity} | {info.layer} | {info.title} | {text} |")
    return "\n".join(rows) + "\n"
