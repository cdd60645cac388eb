"""Small JSON files kept in the cache folder (the probe's answer, the reference readings)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomically(path: Path, data: Any) -> None:
    """Write `data` to `path` through a temporary file beside it, so that a reader sees the
    old file or the new one, never a part; OSError when it cannot be written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
