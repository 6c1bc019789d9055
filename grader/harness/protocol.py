"""The handshake between the host and the harness in a container: every fixed path, file
name, frame kind and environment variable both sides use, in one place.

Imported by the harness inside containers (as `grader_harness.protocol`) and by the host
(as `grader.harness.protocol`: grader/run/jobs.py, batch.py, evidence.py, channel.py,
grader/images.py, ...). The harness runs beside entry code with the standard library, torch
and triton alone, so this module imports nothing at all. No other module spells one of these
names as a literal (tests/unit/test_protocol.py checks the package's source).

The order of the handshake itself is told in harness/main.py (files and frames) and
harness/warden.py (the frame channel).
"""

from __future__ import annotations

# -- paths inside every container -------------------------------------------------------------
# Not under /opt or /usr: the host-runtime mode binds those from the host.
LIB = "/grader/lib"  # on the harness's sys.path
HARNESS_PACKAGE = "grader_harness"  # the harness's package name inside containers
HARNESS = f"{LIB}/{HARNESS_PACKAGE}"
BOOT = f"{HARNESS}/boot.py"  # every container's command: `python3 -I BOOT MODE ...`
PROBLEM = "/grader/problem"  # the problem's trusted files (masked in an entry's container)
ENTRY = "/grader/entry"  # the entry's code folder (read-only)
IN = "/grader/in"  # what the host hands the container (read-only)
OUT = "/grader/out"  # what the container hands back (a size-capped host tmpfs)
KERNEL_FILE = "kernel.py"  # the entry's file, in ENTRY
REFERENCE_FILE = "reference.py"  # the problem's reference, in PROBLEM
ENTRY_FILE = f"{ENTRY}/{KERNEL_FILE}"  # the path entries' tracebacks name

# -- the harness's first argument (spec.Role's values) ------------------------------------------
REFERENCE_MODE = "reference"
ENTRY_MODE = "entry"
# An entry's serving container (issue 32): its warden runs one fresh worker process per batch
# of the entry, each a standby at its gate until the host releases it (harness/serve.py).
SERVE_MODE = "serve"
# Its warden's zygote (harness/zygote.py): imports torch and the harness once, then forks each
# worker. Started by the warden only, never an entry container's command.
ZYGOTE_MODE = "zygote"

# -- files the host places in IN (each written whole, then renamed into place) ----------------
JOB_FILE = "job.json"  # the cases and knobs; an entry's only once its module is imported
START_FILE = "start.json"  # the release of a standby container at its gate
GO_FILE = "go.json"  # the release of a held timed loop
# A serving container's requests, in IN/SERVE_DIR: spawn_file(w) asks its warden for worker w
# ({"args": the harness's arguments after the mode, "log_bytes": its log budget}), numbered
# 1, 2, ... in order; start_file(w) releases worker w at its gate (in place of START_FILE).
SERVE_DIR = ".serve"


def spawn_file(worker: int) -> str:
    return f"spawn-{worker}.json"


def start_file(worker: int) -> str:
    return f"start-{worker}.json"


def gate_file(worker: str | None) -> str:
    """A standby's release, in IN: a served worker's own (WORKER_ENV's value), else START_FILE."""
    return f"{SERVE_DIR}/{start_file(int(worker))}" if worker else START_FILE


# Where a batch can leave state in its container besides OUT: a serving container's warden
# empties them after each batch (harness/sweep.py).
SCRATCH = ("/tmp", "/dev/shm", "/dev/mqueue")

# -- files the harness writes in OUT ----------------------------------------------------------
# Names with a dot first are not output files (evidence.read_out_dir passes them over).
ARMED_FILE = ".armed.json"  # the entry's harness is set up, no entry code run: its clock starts
READY_FILE = "ready.json"  # the entry's module is imported (a frame under the warden)
RESULT_FILE = "result.json"  # the run's record (a frame under the warden)
CASES_FILE = ".cases.json"  # a held reference's case results, before its timed loop
GATE_FILE = ".standby.json"  # imported, waiting at the gate for START_FILE
TRACED_FILE = ".traced.json"  # a held entry's traced calls are done, its timed loops wait
# The problem's public files (reference.py and what it imports, never problem.toml), which
# the reference packs for the entry's harness to draw each timed call's inputs with
# (harness/fresh.py); the host unpacks them into the entry's IN as RECIPE_DIR.
RECIPE_FILE = ".recipe.tar"
RECIPE_DIR = "recipe"
PROBLEM_TOML = "problem.toml"  # the problem's own file in PROBLEM: hidden parts, never packed
# The case files: <case id>.<kind>. The reference writes expected outputs, the entry its
# outputs. No inputs: each side draws them from the case's seed with the problem's recipe
# where it runs (issue 32).
EXPECTED, OUTPUTS = "ref", "out"
CASE_KINDS = (EXPECTED, OUTPUTS)


def case_file(case_id: str, kind: str) -> str:
    """The file name of one case's expected outputs or outputs."""
    return f"{case_id}.{kind}"


# -- environment the host sets --------------------------------------------------------------
DEVICE_ENV = "GRADER_DEVICE"  # "cpu" or "cuda"
STANDBY_ENV = "GRADER_STANDBY"  # "1": a standby container, gated (harness.main._standby)
LOG_BYTES_ENV = "GRADER_LOG_BYTES"  # an entry's log budget (spec.Limits.log_bytes)
WORKER_ENV = "GRADER_WORKER"  # a served worker's number (its gate is IN/SERVE_DIR/start_file)

# -- the evidence channel (an entry's container: warden.py on stdout, channel.py on the host) --
CHANNEL_ENV = "GRADER_CHANNEL"  # in the harness's environment: the frame pipe's fd
FRAME_FD = 3  # the frame pipe's write end in the harness's process
TOKEN_FD = 4  # a pipe holding the warden's token, read and closed before entry code runs
# Frame kinds: the harness sends the first five (with the token), the warden relays them or
# sends TAMPERING instead. ARMED: the harness's set-up (the container's start, `import torch`,
# the recorder) is done and no entry code has run: the host counts the entry's wall-clock
# limit from it (issue 34: --timeout counted the set-up).
STANDBY, ARMED, READY, TRACED, RESULT, TAMPERING = (
    "standby", "armed", "ready", "traced", "result", "tampering")
# A serving container's warden tags every frame it relays with the worker's number (this key),
# and sends GONE for a worker that ended, or that it ended, before its release.
WORKER_KEY = "worker"
GONE = "gone"
# The files that travel as frames when the warden runs the harness.
FRAMES = {GATE_FILE: STANDBY, ARMED_FILE: ARMED, READY_FILE: READY, TRACED_FILE: TRACED,
          RESULT_FILE: RESULT}
# Raw JSON bytes per frame as the harness writes it (envelope and token included). The host
# caps a result at evidence.MAX_JSON (4 MiB); the envelope adds the outputs' hashes.
FRAME_MAX = {STANDBY: 4 << 10, ARMED: 4 << 10, READY: 256 << 10, TRACED: 4 << 10,
             RESULT: 8 << 20}
# The signal the host sends an entry's container at its deadline, a moment before the kill:
# the warden passes it to the harness, whose faulthandler writes every thread's stack to the
# logs (evidence of where a hung entry was, never a verdict).
STACK_SIGNAL = "SIGUSR1"
# What the host reads of the stdout stream at most: every frame once, base64 (4/3), plus the
# log driver's per-line cost. The engine sizes the log file from it (spec.ContainerSpec).
STDOUT_BYTES = 12 << 20

# -- the timed loop's defaults (the job's knobs) ----------------------------------------------
# The host sends each with a timed job (run/jobs.py's TimingKnobs takes them from here); the
# harness falls back on the same where a job or a caller names none (harness/timing.py's
# time_kernel, harness/entry.py's clock). Issue 33: the budget was 5 s on one side, 10 s on
# the other, and the flush size written in three places.
MIN_SAMPLES = 10  # timed calls per shape, at least (unless the budget ends the loop first)
MAX_SAMPLES = 500  # and at most
L2_FLUSH_BYTES = 256 << 20  # the least L2 flush; twice the device's own L2 where larger
RSE_TARGET = 0.01  # the loop stops once the median's relative standard error is below it
BUDGET_S = 5.0  # seconds an entry's timed loop may take for one shape
