"""Starting, watching and killing the child processes of experiments.

A child runs in a process session of its own; a timeout (which leaves out the child's waits
for its turn on a shared GPU), a memory limit or a stopped sweep kills its whole process
tree, grandchildren included (if the runner itself is killed, its
guard, runner/run/process/guard.py, does). The child's output is copied to its log by a pump that
reads it in blocks and never lets the child block on a full pipe; the log keeps its head
and its tail.

A write the parent cannot make (the child's log: a full disk, a file-size limit) raises
OSError naming the file; so does a child that could not write its result
(`CHILD_OUTPUT_FAILED`).
"""

from __future__ import annotations

import collections
import contextlib
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

from core.contract import GATE_WAITS_FILE, LOG_FILE, RESULT_FILE, ChildResult, read_message
from runner.run.process.guard import ProcessGuard
from runner.run.process.oom import MemoryWatch

if TYPE_CHECKING:
    from runner.run.process.forkserver_client import ForkedChild

OUTPUT_TAIL_CHARS = 2500
#: What a child's log keeps of its output: the first and the last bytes.
LOG_HEAD_BYTES = 4 * 2**20
LOG_TAIL_BYTES = 4 * 2**20
#: The pump reads up to this much at a time.
BLOCK_BYTES = 2**20
#: The room asked for in the pipe of the child's output (Linux caps it for unprivileged
#: users at /proc/sys/fs/pipe-max-size, 1 MiB by default).
PIPE_BYTES = 2**20
POLL_SECONDS = 0.1
EXIT_GRACE_SECONDS = 60.0
#: The worker's exit status when it cannot write its result (sysexits' EX_IOERR).
CHILD_OUTPUT_FAILED = 74
#: How much of the child's last output the pump keeps for its last line.
RECENT_BYTES = 4096


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
    #: How long the child took to exit once its result was written (its runtime's shutdown);
    #: None when it wrote none or was killed first.
    exit_seconds: Optional[float] = None
    output_tail: str = ""
    notes: list[str] = field(default_factory=list)
    #: Set when the child ended because of the infrastructure, not the experiment (its fork
    #: server was lost): why. Such a line is one that resume retries.
    infrastructure_failure: Optional[str] = None
    #: What says the child ran out of memory, when it was killed by SIGKILL and something
    #: does (the kernel's log, the memory watch); None otherwise.
    out_of_memory: Optional[str] = None


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


def _task_children(pid: int) -> Optional[list[int]]:
    """The children of `pid`, read from its threads' `/proc/<pid>/task/<tid>/children`
    (Linux 3.5 and later): [] where it is gone, None where the kernel keeps no such file."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as file:
                children.extend(int(child) for child in file.read().split())
        except FileNotFoundError:
            if os.path.isdir(f"/proc/{pid}/task/{tid}"):
                return None  # the thread is there, the file is not
        except (OSError, ValueError):
            continue
    return children


def tree_pids(pid: int) -> list[int]:
    """`pid` and its descendants. The kernel's list of each thread's children is read, so
    only the tree's own entries of /proc are looked at: psutil's `children()` reads every
    process of the host, which the memory poll would do ten times a second while the child
    times (issue: the runner's own work beside the timed process). Where the kernel keeps no
    such list, psutil's is taken."""
    if not os.path.isdir(f"/proc/{pid}/task"):
        return [] if os.path.isdir("/proc/self/task") else _psutil_tree(pid)
    found, pending = [pid], [pid]
    while pending:
        children = _task_children(pending.pop())
        if children is None:
            return _psutil_tree(pid)
        fresh = [child for child in children if child not in found]
        found.extend(fresh)
        pending.extend(fresh)
    return found


def _psutil_tree(pid: int) -> list[int]:
    try:
        return [pid] + [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants (only the tree's own /proc
    entries are read: `tree_pids`)."""
    total = 0
    for member in tree_pids(pid):
        try:
            total += psutil.Process(member).memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def describe_exit(returncode: Optional[int], out_of_memory: Optional[str] = None) -> str:
    """What the exit status says, and no more: a SIGKILL is named as such, and called the
    out-of-memory killer's only where `out_of_memory` says what showed it."""
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
    elif name == "SIGKILL" and out_of_memory:
        text += f": out of memory ({out_of_memory})"
    return text


class OutputPump:
    """Copies the child's output to its log, in blocks, keeping at most the head and the tail.

    The child must never wait on its output: the pump reads whatever the pipe holds, up to
    `BLOCK_BYTES` at a time (never a line or a byte at a time), and enlarges the pipe where
    Linux lets it. The log keeps the first `head_bytes` as they come and the last
    `tail_bytes` (written when the output ends), with a line saying how many bytes were
    dropped between them. A failed write (full disk) is kept, and the output is still
    drained so the child never blocks on a full pipe. With `echo`, everything is echoed.
    """

    def __init__(self, stream: IO[bytes], log_file: IO[bytes], echo: bool,
                 head_bytes: int = LOG_HEAD_BYTES, tail_bytes: int = LOG_TAIL_BYTES) -> None:
        self.stream, self.log_file, self.echo = stream, log_file, echo
        self.head_bytes, self.tail_bytes = head_bytes, tail_bytes
        self.error: Optional[OSError] = None
        self.total = 0
        self.dropped = 0
        self._head_left = head_bytes
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_size = 0
        #: The output's last bytes, whether the log keeps them in its head or its tail.
        self._recent = b""
        #: Set once the output has ended and the log holds all of it.
        self.ended = threading.Event()

    def run(self) -> None:
        fd = self.stream.fileno()
        _enlarge_pipe(fd)
        while True:
            try:
                chunk = os.read(fd, BLOCK_BYTES)
            except InterruptedError:
                continue
            except OSError:
                break
            if not chunk:
                break
            self.total += len(chunk)
            self._recent = (self._recent + chunk)[-RECENT_BYTES:]
            self._keep(chunk)
            if self.echo:
                sys.stderr.write(chunk.decode("utf-8", "replace"))
                sys.stderr.flush()
        self._finish()
        self.ended.set()

    def _keep(self, chunk: bytes) -> None:
        if self._head_left > 0:
            head, chunk = chunk[:self._head_left], chunk[self._head_left:]
            self._head_left -= len(head)
            self._write(head)
        if not chunk:
            return
        self._tail.append(chunk)
        self._tail_size += len(chunk)
        while self._tail_size - len(self._tail[0]) >= self.tail_bytes:
            self.dropped += len(self._tail[0])
            self._tail_size -= len(self._tail.popleft())

    def _finish(self) -> None:
        tail = b"".join(self._tail)
        if len(tail) > self.tail_bytes:
            self.dropped += len(tail) - self.tail_bytes
            tail = tail[-self.tail_bytes:]
        self._tail.clear()
        self._tail.append(tail)
        self._tail_size = len(tail)
        if self.dropped:
            self._write(f"\n[experiment-runner: {self.dropped} bytes of the child's output "
                        f"dropped here; the log keeps the first {self.head_bytes} and the last "
                        f"{self.tail_bytes} bytes of {self.total}]\n".encode())
        self._write(tail)

    def _write(self, data: bytes) -> None:
        if self.error is not None or not data:
            return
        try:
            self.log_file.write(data)
        except OSError as error:
            self.error = error

    def last_line(self) -> str:
        """The last line the child printed (an output short enough for the log's head
        included: it read as nothing, and a full disk's message lost its reason)."""
        lines = self._recent.decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""


def _enlarge_pipe(fd: int) -> None:
    """Give the child's pipe room for PIPE_BYTES (Linux's F_SETPIPE_SZ; best effort)."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (OSError, ImportError, ValueError):
        pass


def write_failure_reason(last_line: str, result_path: Path) -> str:
    """Why a child could not write its result, from the line it printed then ("cannot
    write <path>: No space left on device", child/worker.py): the reason alone."""
    said = f"cannot write {result_path}: "
    if last_line.startswith(said):
        return last_line[len(said):].strip() or "no reason given"
    return last_line.strip() or "the child gave no reason"


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
    """Start `child.worker` for `folder` as a fresh interpreter in a session of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "child.worker", str(folder)],
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
        self._exits: list[threading.Thread] = []
        self._exits_lock = threading.Lock()

    def wait_for_exits(self, timeout: float = 10.0) -> None:
        """Wait for the children that were done but still exiting when the runner went on
        (before their fork servers end: an orphan's exit would wait on another reaper)."""
        with self._exits_lock:
            exits, self._exits = self._exits, []
        deadline = time.monotonic() + timeout
        for thread in exits:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _release_later(self, process: "subprocess.Popen | ForkedChild") -> None:
        thread = threading.Thread(target=release, args=(process, self.guard, True), daemon=True)
        with self._exits_lock:
            self._exits = [running for running in self._exits if running.is_alive()]
            self._exits.append(thread)
        thread.start()

    def run(self, folder: Path, scratch: Path,
            start_child: Callable[[], "subprocess.Popen | ForkedChild"],
            keep_scratch: bool = False, done_at_output_end: bool = False) -> ChildOutcome:
        """Start the child with `start_child()`, watch it, kill its tree, remove its
        `scratch` folder (unless `keep_scratch`: a later process reuses its compile caches),
        and collect its result and output. `done_at_output_end`: the child holds no device
        that the next child may need (a CPU experiment's), so it is done once it has written
        its result and ended its output, which a forked child does just before its exit:
        its exit (the kernel's teardown of a process that loaded torch, 10 ms and more) is
        then waited for in the background, not before the next child starts. A child that
        holds a device is done at its exit, which frees the device."""
        result_path = folder / RESULT_FILE
        outcome = ChildOutcome(folder)
        start = time.monotonic()
        memory = MemoryWatch.start(start)
        try:
            # Unbuffered: a failed write (full disk) shows in the pump, never at close.
            with open(folder / LOG_FILE, "wb", buffering=0) as log_file:
                process = start_child()
                if self.guard is not None:
                    self.guard.watch(process.pid)
                pump = OutputPump(process.stdout, log_file, self.echo)
                pumping = threading.Thread(target=pump.run, daemon=True)
                pumping.start()
                done = False
                try:
                    done = self.watch(process, result_path, outcome, start, memory,
                                      pump.ended if done_at_output_end else None)
                finally:
                    if done:
                        self._release_later(process)
                    else:
                        release(process, self.guard)
                        pumping.join(timeout=5)
        finally:
            if not keep_scratch:
                shutil.rmtree(scratch, ignore_errors=True)
        if pump.error is not None:
            raise OSError(pump.error.errno, pump.error.strerror, str(folder / LOG_FILE))
        outcome.returncode = process.returncode
        outcome.wall_seconds = time.monotonic() - start
        outcome.infrastructure_failure = getattr(process, "lost_reason", None)
        if process.returncode == -signal.SIGKILL and not outcome.infrastructure_failure \
                and not outcome.memory_exceeded and not outcome.timed_out:
            outcome.out_of_memory = memory.out_of_memory(process.pid)
        outcome.output_tail = read_tail(folder / LOG_FILE)
        if result_path.exists():
            try:
                outcome.result = read_message(result_path, ChildResult)
            except ValueError as error:
                outcome.notes.append(f"the child's result could not be read: {error}")
        elif process.returncode == CHILD_OUTPUT_FAILED:
            raise OSError(errno.EIO, "the child could not write its result "
                          f"({write_failure_reason(pump.last_line(), result_path)})",
                          str(result_path))
        return outcome

    def watch(self, process: "subprocess.Popen | ForkedChild", result_path: Path,
              outcome: ChildOutcome, start: float, memory: Optional[MemoryWatch] = None,
              output_ended: Optional[threading.Event] = None) -> bool:
        """Poll the child until it exits, or kill-worthy: past the timeout, over the memory
        limit, or lingering after its result; raise ExperimentCancelled when the sweep stops,
        also when the child ended meanwhile without a result (whatever ended it then, a
        stopped runner's clean-up included, is no outcome of the experiment). With
        `output_ended` (the end of the child's output), True where the child is done but may
        not have exited yet: it wrote its result and ended its output."""
        result_seen_at: Optional[float] = None
        while process.poll() is None:
            if self.cancelled.is_set():
                raise ExperimentCancelled("the sweep was stopped")
            now = time.monotonic()
            if memory is not None:
                memory.look()
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
            if (now - start > self.timeout_seconds
                    and now - start - gpu_waits(result_path.parent) > self.timeout_seconds):
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
            if output_ended is not None and not output_ended.is_set():
                # Wakes as soon as the output ends: at the child's exit, or just before.
                output_ended.wait(timeout=POLL_SECONDS)
                continue
            if output_ended is not None and result_seen_at is not None:
                outcome.exit_seconds = time.monotonic() - result_seen_at
                return True
            try:  # wakes as soon as the child exits
                process.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        if result_seen_at is None and result_path.exists():  # written as it exited
            result_seen_at = time.monotonic()
        if result_seen_at is not None:
            outcome.exit_seconds = time.monotonic() - result_seen_at
        if self.cancelled.is_set() and not result_path.exists():
            raise ExperimentCancelled("the sweep was stopped")
        return False


def release(process: "subprocess.Popen | ForkedChild", guard: Optional[ProcessGuard],
            exiting: bool = False) -> None:
    """Kill what is left of a child's process tree, wait for its exit, and stop guarding it.
    `exiting`: the child is on its way out by itself (it ended its output after its result);
    its exit comes first, then what is left of its tree is killed."""
    if exiting:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=EXIT_GRACE_SECONDS)
    kill_tree(process.pid)
    process.wait()
    if guard is not None:
        guard.forget(process.pid)


def gpu_waits(folder: Path) -> float:
    """The seconds a child has waited for its turn on a shared GPU, as it keeps them in
    GATE_WAITS_FILE (child/device_gate.py), its current wait included; 0 without."""
    try:
        waited, since = (folder / GATE_WAITS_FILE).read_text().split()[:2]
        return float(waited) + (max(0.0, time.time() - float(since)) if since != "-" else 0.0)
    except (OSError, ValueError):
        return 0.0
