"""Scratch folders (fresh compile caches) of one runner, under a root folder it owns.

The root's name carries the runner's pid and start time:
`<tmp>/experiment-runner-<pid>-<start>-XXXX`. The runner removes it when it ends, its guard
(runner/run/process/guard.py) when the runner is killed, and any runner starting on the same machine
removes the roots whose runner no longer runs, so no scratch folder outlives its runner.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import psutil

log = logging.getLogger(__name__)

PREFIX = "experiment-runner-"
_ROOT_NAME = re.compile(rf"^{re.escape(PREFIX)}(\d+)-(\d+)-")


def _start_stamp(process: psutil.Process) -> int:
    return int(process.create_time())


def owner_runs(pid: int, stamp: int) -> bool:
    """Whether the process that made a root (pid, start time in whole seconds) still runs."""
    try:
        return abs(_start_stamp(psutil.Process(pid)) - stamp) <= 1
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def sweep_stale(base: Path) -> list[Path]:
    """Remove the scratch roots under `base` whose runner is gone; return them."""
    removed = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _ROOT_NAME.match(entry.name)
        if match and entry.is_dir() and not owner_runs(int(match[1]), int(match[2])):
            shutil.rmtree(entry, ignore_errors=True)
            if not entry.exists():
                removed.append(entry)
    if removed:
        log.debug("removed %d scratch folder(s) of runners that are gone", len(removed))
    return removed


class ScratchRoot:
    """The runner's scratch root; one fresh folder under it per child."""

    def __init__(self, base: Optional[Path] = None) -> None:
        self.base = Path(base or tempfile.gettempdir())
        self.path: Optional[Path] = None

    def create(self) -> Path:
        sweep_stale(self.base)
        stamp = _start_stamp(psutil.Process())
        self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{stamp}-",
                                          dir=self.base))
        return self.path

    def new_folder(self) -> Path:
        """A fresh folder for one child (the root is made first if need be)."""
        root = self.path if self.path is not None and self.path.is_dir() else self.create()
        return Path(tempfile.mkdtemp(dir=root))

    def remove(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
