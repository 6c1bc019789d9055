"""Files the grader writes on the host (reports, checkpoints, a round's records): each one
whole or not at all, so that a full disk or a kill never leaves half of one behind."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `path` whole or not at all; the file has `mode` from its first byte."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise


def regular_files(folder: Path) -> dict[Path, int]:
    """The regular files directly in `folder` (no links followed), with their sizes."""
    with os.scandir(folder) as it:
        return {Path(e.path): st.st_size for e in it
                if stat.S_ISREG((st := e.stat(follow_symlinks=False)).st_mode)}
