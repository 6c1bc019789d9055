"""Container entry point: `python3 -I /grader/lib/grader_harness/boot.py MODE`.

Isolated mode (-I) keeps PYTHONPATH, the user site and the working directory off sys.path;
only the harness's own folder is added, under its package name (the folder above this
file's: protocol.LIB).

An entry's container starts here as pid 1: the warden (warden.py), which runs this same file
again as its worker with the frame channel set up (CHANNEL_ENV in the environment); the
worker runs the harness. The reference runs the harness directly.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from grader_harness.protocol import CHANNEL_ENV, ENTRY_MODE, REFERENCE_MODE

args = sys.argv[1:]
if args[:1] == [ENTRY_MODE] and CHANNEL_ENV not in os.environ:
    from grader_harness.warden import main as warden

    sys.exit(warden([sys.executable, "-I", os.path.abspath(__file__), *args]))
if args == [REFERENCE_MODE]:
    from grader_harness.main import run_reference

    sys.exit(run_reference())
if args[:1] == [ENTRY_MODE]:
    from grader_harness.entry import run_entry

    sys.exit(run_entry(args[1:] or None))
print("usage: boot.py reference | entry [CLASS ...]", file=sys.stderr)
sys.exit(2)
