"""Container entry point: `python3 -I /grader/lib/grader_harness/boot.py MODE`.

Isolated mode (-I) keeps PYTHONPATH, the user site and the working directory off sys.path;
only the harness's own folder is added, under its package name.
"""

import sys

sys.path.insert(0, "/grader/lib")

from grader_harness.main import main

sys.exit(main())
