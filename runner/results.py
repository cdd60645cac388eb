"""The results file: line schema, safe appends and tolerant reading.

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

from runner.config import ExperimentConfig, ModelConfig, RunSettings, fingerprint, fingerprint_of_line

log = logging.getLogger(__name__)

VERIFIER_CODES = (
    "PASS",
    "FAIL",
    "EAGER_FAILED",
    "EXCEPTION_RAISED",
    "NONDETERMINISTIC_EAGER_RUN",
    "VERIFIER_SKIPPED",
    "VERIFIER_DIDNT_RUN",
)

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"

MAX_ERROR_CHARS = 4000
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


def bounded(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Keep the head and the tail of a long text, marking what was cut."""
    if len(text) <= limit:
        return text
    keep = limit // 2 - 20
    return f"{text[:keep]}\n... [{len(text) - 2 * keep} characters cut] ...\n{text[-keep:]}"


def make_line(
    model: ModelConfig,
    experiment: ExperimentConfig,
    settings: RunSettings,
    *,
    metrics: dict[str, Any],
    status: str,
    verification_code: str,
    accelerator_model: Optional[str] = None,
    environment: Optional[dict[str, Any]] = None,
    extra: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """A results line in the shape of PyTorch/XLA's runner, plus our own keys."""
    experiment_dict = experiment.to_dict()
    experiment_dict["accelerator_model"] = accelerator_model
    line: dict[str, Any] = {
        "model": model.to_dict(),
        "experiment": experiment_dict,
        "repeat": settings.repeat,
        "iterations_per_run": settings.iterations_per_run,
        "metrics": metrics,
        "timestamp": time.time(),
        "verification_code": verification_code,
        "status": status,
        "fingerprint": fingerprint(model, experiment),
        "environment": environment or {},
    }
    if extra:
        line.update(extra)
    return line


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


def covers(line: dict[str, Any], settings: RunSettings) -> bool:
    """Whether a recorded line already holds what `settings` would measure.

    A failed or skipped line covers everything (rerun with --no-resume to retry); a timed
    line does not cover --verify, and a --verify-only line does not cover timing.
    """
    if line.get("status") in (STATUS_FAILED, STATUS_SKIPPED):
        return True
    verified = line.get("verification_code", "VERIFIER_SKIPPED") != "VERIFIER_SKIPPED"
    timed = bool((line.get("metrics") or {}).get("per_iter_time"))
    if settings.verify_only:
        return verified
    return timed and (verified or not settings.verify)


def recorded_fingerprints(lines: list[dict[str, Any]], settings: RunSettings) -> frozenset[str]:
    """Fingerprints of the experiments whose lines already hold what `settings` measures."""
    return frozenset(
        value for line in lines
        if covers(line, settings) and (value := fingerprint_of_line(line))
    )


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
