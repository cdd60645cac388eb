"""Starting, watching and killing the child processes of experiments.

A child runs in a process session of its own; a timeout, a memory limit or a stopped sweep
kills its whole process tree, grandchildren included (if the runner itself is killed, its
guard, runner/run/guard.py, does). The child's output is copied to its log by a pump that
never lets the child block on a full pipe.

A write the parent cannot make (the child's log: a full disk, a file-size limit) raises
OSError naming the file; so does a child that could not write its result
(`CHILD_OUTPUT_FAILED`).
"""

from __future__ import annotations

import collections
import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable, Optional

import psutil

from core.contract import LOG_FILE, RESULT_FILE, ChildResult, read_message
from runner.run.guard import ProcessGuard

if TYPE_CHECKING:
    from runner.run.forkserver_client import ForkedChild

OUTPUT_TAIL_CHARS = 2500
POLL_SECONDS = 0.1
EXIT_GRACE_SECONDS = 60.0
#: The worker's exit status when it cannot write its result (sysexits' EX_IOERR).
CHILD_OUTPUT_FAILED = 74


@dataclass
class ChildOutcome:
    """What the parent saw of one child."""

    folder: Path
    returncode: Optional[int] = None
    result: Optional[ChildResult] = None
    timed_out: bool = False
    memory_exceeded: bool = False
    peak_tree_rss_bytes: int = 0
    wall_seconds: float = 0.0
    output_tail: str = ""
    notes: list[str] = field(default_factory=list)


class ExperimentCancelled(KeyboardInterrupt):
    """The sweep was stopped (Ctrl-C, a fatal error) while this child ran; it was killed."""


def kill_tree(pid: int) -> None:
    """Kill a process, its process group and every descendant still known."""
    try:
        root = psutil.Process(pid)
        processes = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        processes = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(processes, timeout=5)


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants."""
    try:
        root = psutil.Process(pid)
        processes = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def describe_exit(returncode: Optional[int]) -> str:
    if returncode is None:
        return "the child did not exit"
    if returncode >= 0:
        return f"the child exited with status {returncode} without a result"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    text = f"the child was killed by {name}"
    if name == "SIGSEGV":
        text += " (segmentation fault)"
    elif name == "SIGKILL":
        text += " (the kernel's out-of-memory killer sends this)"
    return text


class OutputPump:
    """Copies the child's output to its log; a failed write (full disk) is kept, and the
    output is still drained so the child never blocks on a full pipe."""

    def __init__(self, stream: IO[bytes], log_file: IO[bytes], echo: bool) -> None:
        self.stream, self.log_file, self.echo = stream, log_file, echo
        self.error: Optional[OSError] = None
        self.tail: collections.deque[bytes] = collections.deque(maxlen=40)

    def run(self) -> None:
        for chunk in iter(self.stream.readline, b""):
            self.tail.append(chunk[-OUTPUT_TAIL_CHARS:])
            if self.error is None:
                try:
                    self.log_file.write(chunk)
                except OSError as error:
                    self.error = error
            if self.echo:
                sys.stderr.write(chunk.decode("utf-8", "replace"))
                sys.stderr.flush()

    def last_line(self) -> str:
        lines = b"".join(self.tail).decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""


def read_tail(path: Path, limit: int = OUTPUT_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def spawn_worker(folder: Path, environment: dict[str, str]) -> subprocess.Popen:
    """Start `runner.child.worker` for `folder` as a fresh interpreter in a session of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "runner.child.worker", str(folder)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=environment,
        cwd=str(folder),
        start_new_session=True,
    )


class Supervisor:
    """Runs a child to its end: its log, its limits, its kill, its result."""

    def __init__(self, timeout_seconds: float, memory_limit_bytes: Optional[int], echo: bool,
                 guard: Optional[ProcessGuard], cancelled: threading.Event) -> None:
        self.timeout_seconds = timeout_seconds
        self.memory_limit_bytes = memory_limit_bytes
        self.echo = echo
        self.guard = guard
        self.cancelled = cancelled

    def run(self, folder: Path, scratch: Path,
            start_child: Callable[[], "subprocess.Popen | ForkedChild"],
            keep_scratch: bool = False) -> ChildOutcome:
        """Start the child with `start_child()`, watch it, kill its tree, remove its
        `scratch` folder (unless `keep_scratch`: a later process reuses its compile caches),
        and collect its result and output."""
        result_path = folder / RESULT_FILE
        outcome = ChildOutcome(folder)
        start = time.monotonic()
        try:
            # Unbuffered: a failed write (full disk) shows in the pump, never at close.
            with open(folder / LOG_FILE, "wb", buffering=0) as log_file:
                process = start_child()
                if self.guard is not None:
                    self.guard.watch(process.pid)
                pump = OutputPump(process.stdout, log_file, self.echo)
                pumping = threading.Thread(target=pump.run, daemon=True)
                pumping.start()
                try:
                    self.watch(process, result_path, outcome, start)
                finally:
                    kill_tree(process.pid)
                    process.wait()
                    pumping.join(timeout=5)
                    if self.guard is not None:
                        self.guard.forget(process.pid)
        finally:
            if not keep_scratch:
                shutil.rmtree(scratch, ignore_errors=True)
        if pump.error is not None:
            raise OSError(pump.error.errno, pump.error.strerror, str(folder / LOG_FILE))
        outcome.returncode = process.returncode
        outcome.wall_seconds = time.monotonic() - start
        outcome.output_tail = read_tail(folder / LOG_FILE)
        if result_path.exists():
            try:
                outcome.result = read_message(result_path, ChildResult)
            except ValueError as error:
                outcome.notes.append(f"the child's result could not be read: {error}")
        elif process.returncode == CHILD_OUTPUT_FAILED:
            raise OSError(errno.EIO, f"the child could not write its result ({pump.last_line()})",
                          str(result_path))
        return outcome

    def watch(self, process: "subprocess.Popen | ForkedChild", result_path: Path,
              outcome: ChildOutcome, start: float) -> None:
        """Poll the child until it exits, or kill-worthy: past the timeout, over the memory
        limit, or lingering after its result; raise ExperimentCancelled when the sweep stops."""
        result_seen_at: Optional[float] = None
        while process.poll() is None:
            if self.cancelled.is_set():
                raise ExperimentCancelled("the sweep was stopped")
            now = time.monotonic()
            rss = tree_rss_bytes(process.pid)
            outcome.peak_tree_rss_bytes = max(outcome.peak_tree_rss_bytes, rss)
            limit = self.memory_limit_bytes
            if limit and rss > limit:
                outcome.memory_exceeded = True
                outcome.notes.append(
                    f"the child's process tree used {rss / 2**20:.0f} MiB, over the memory "
                    f"limit of {limit / 2**20:.0f} MiB, and was killed"
                )
                return
            if now - start > self.timeout_seconds:
                outcome.timed_out = True
                outcome.notes.append(
                    f"the child ran past the timeout of {self.timeout_seconds:g} s; "
                    "its whole process tree was killed"
                )
                return
            if result_seen_at is None and result_path.exists():
                result_seen_at = now
            elif result_seen_at is not None and now - result_seen_at > EXIT_GRACE_SECONDS:
                outcome.notes.append(
                    f"the child wrote its result but did not exit within "
                    f"{EXIT_GRACE_SECONDS:g} s; it was killed"
                )
                return
            try:  # wakes as soon as the child exits
                process.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                pass
