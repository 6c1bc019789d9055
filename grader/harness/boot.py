"""Container entry point: `python3 -I /grader/lib/grader_harness/boot.py MODE`.

Isolated mode (-I) keeps PYTHONPATH, the user site and the working directory off sys.path;
only the harness's own folder is added, under its package name (the folder above this
file's: protocol.LIB).

An entry's container starts here as pid 1: the warden (warden.py), which runs this same file
again as its worker with the frame channel set up (CHANNEL_ENV in the environment); the
worker runs the harness. An entry's serving container (`serve`, issue 32) starts its warden
in serve mode (serve.py), which runs this file as its zygote (zygote.py) and as its workers.
The reference runs the harness directly.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from grader_harness.protocol import (
    CHANNEL_ENV,
    ENTRY_MODE,
    REFERENCE_MODE,
    SERVE_MODE,
    WORKER_ENV,
    ZYGOTE_MODE,
)

args = sys.argv[1:]
warden = CHANNEL_ENV not in os.environ
if args[:1] == [ENTRY_MODE] and warden:
    from grader_harness.warden import main as warden_main

    sys.exit(warden_main([sys.executable, "-I", os.path.abspath(__file__), *args]))
if args == [SERVE_MODE] and warden:
    from grader_harness.serve import main as serve

    sys.exit(serve([sys.executable, "-I", os.path.abspath(__file__)]))
if args == [ZYGOTE_MODE] and warden:
    from grader_harness.zygote import main as zygote

    sys.exit(zygote(os.path.abspath(__file__)))
if args == [REFERENCE_MODE]:
    from grader_harness.main import run_reference

    sys.exit(run_reference())
if args[:1] == [ENTRY_MODE]:
    if os.environ.get(WORKER_ENV):  # served: out of the running batch's reach until released
        from grader_harness.sweep import set_dumpable

        set_dumpable(False)
    from grader_harness.entry import run_entry

    sys.exit(run_entry(args[1:] or None))
print("usage: boot.py reference | entry [CLASS ...] | serve", file=sys.stderr)
sys.exit(2)
