"""Small JSON files kept in the cache folder (the probe's answer, the reference readings)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomically(path: Path, data: Any) -> None:
    """Write `data` to `path` as JSON, atomically (`write_atomically`)."""
    write_atomically(path, json.dumps(data).encode("utf-8"))


def write_atomically(path: Path, payload: bytes) -> None:
    """Write `payload` to `path` through a temporary file beside it, so that a reader sees
    the old file or the new one, never a part; OSError when it cannot be written. The
    temporary file is a new one (mkstemp, O_EXCL: never a FIFO or a link found in its
    place), and whatever stood at `path` (a FIFO, a link that loops) is replaced, not
    followed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
    try:
        os.fchmod(handle, 0o644)  # as open() makes it, for other runners of the file
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
