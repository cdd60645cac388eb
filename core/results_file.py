"""The results file: safe appends and tolerant reading (the line itself: core/schema.py).

The parent is the single writer. An append is one line, written under a file lock, flushed
and fsynced, so concurrent runners never interleave and a crash never leaves half a line
in front of a new one. Reading skips (and reports) lines that are not valid JSON objects.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import jsonlines
from filelock import FileLock

log = logging.getLogger(__name__)

MAX_BAD_LINES_LOGGED = 20


class ResultsFileError(RuntimeError):
    """A results file that cannot be used at all (not a problem of single lines)."""


@dataclass
class BadLine:
    """A line of a results file that could not be read."""

    path: str
    lineno: int
    reason: str


@dataclass
class ResultsRead:
    """The lines of a results file that parsed, and those that did not."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)


def append_line(path: Path, line: dict[str, Any]) -> None:
    """Append one line atomically with respect to other writers of the same file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        with open(path, "ab") as raw:
            if raw.tell() > 0 and not _ends_with_newline(path):
                # A previous writer died mid-line: end that line so ours stays whole.
                raw.write(b"\n")
            with jsonlines.Writer(raw, compact=True, flush=True) as writer:
                writer.write(line)
            raw.flush()
            os.fsync(raw.fileno())


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as existing:
        existing.seek(-1, os.SEEK_END)
        return existing.read(1) == b"\n"


def read_results(path: Path) -> ResultsRead:
    """Every valid line of a results file; invalid ones are listed, never fatal."""
    read = ResultsRead()
    if not path.exists():
        return read
    if path.is_dir():
        raise ResultsFileError(f"results path {str(path)!r} is a folder, not a file")
    with open(path, "rb") as raw:
        numbered = _NonBlankLines(raw)
        reader = jsonlines.Reader(numbered)
        while True:
            try:
                value = reader.read()
            except EOFError:
                break
            except jsonlines.InvalidLineError as error:
                read.bad_lines.append(BadLine(str(path), numbered.lineno, _short_reason(error)))
                continue
            if not isinstance(value, dict):
                read.bad_lines.append(BadLine(str(path), numbered.lineno, "not a JSON object"))
                continue
            read.lines.append(value)
    for bad in read.bad_lines[:MAX_BAD_LINES_LOGGED]:
        log.warning("%s line %d skipped: %s", bad.path, bad.lineno, bad.reason)
    if len(read.bad_lines) > MAX_BAD_LINES_LOGGED:
        log.warning("%s: %d more unreadable lines skipped", path,
                    len(read.bad_lines) - MAX_BAD_LINES_LOGGED)
    return read


class _NonBlankLines:
    """Iterates the non-blank lines of a file, remembering the current line number."""

    def __init__(self, raw) -> None:
        self._raw = raw
        self.lineno = 0

    def __iter__(self) -> "_NonBlankLines":
        return self

    def __next__(self) -> bytes:
        while True:
            line = next(self._raw)
            self.lineno += 1
            if line.strip():
                return line


def _short_reason(error: jsonlines.InvalidLineError) -> str:
    message = str(error).split(":", 1)[-1].strip()
    return re.sub(r"\s*\(line \d+\)$", "", message)[:200] or "invalid JSON"


def backup_existing(path: Path) -> Optional[Path]:
    """Move an existing results file aside (never delete it); return where it went."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.{stamp}.bak")
    counter = 1
    while backup.exists():
        backup = path.with_name(f"{path.name}.{stamp}-{counter}.bak")
        counter += 1
    with FileLock(str(path) + ".lock"):
        shutil.move(str(path), str(backup))
    return backup
