"""The runner's guard: a small process that outlives the runner just long enough to kill
everything the runner started and remove its scratch folders.

A child of an experiment may start processes of its own (compile workers, the `hang` fault
model's grandchild, a daemon that leaves its process group), and the runner may end in a
way it cannot clean up after (SIGKILL, the kernel's OOM killer). The worker dies with the
runner (PR_SET_PDEATHSIG), but its own children would be left to init. So the runner
starts one guard, in a session of its own (terminal signals never reach it), and tells it
on a pipe which process groups it starts and which folders are scratch. When the pipe
closes (the runner ended, however it ended), the guard kills:

- every watched process group, with every descendant of its leader still known;
- every watched process (named by pid and start time, so that a reused pid is spared: the
  processes of a local Ray instance the runner started, whose agents rewrite their
  environment), with its descendants;
- every process whose environment carries the runner's token (`TOKEN_VARIABLE`), which
  every child and each of their descendants inherit, even those that left the group;

then removes the scratch folders and exits. A guard's own environment does not carry its
runner's token: a guard started inside something another guard cleans up (an experiment's
Ray task) is spared by that guard and cleans up its own. Run as `python -m runner.run.process.guard TOKEN`.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import IO, Optional

import psutil

from runner.plan.project import PROJECT_ROOT

log = logging.getLogger(__name__)

#: Set in every child's environment; the guard kills whatever carries its value.
TOKEN_VARIABLE = "EXPERIMENT_TREE_TOKEN"


class ProcessGuard:
    """The runner's side: start the guard, tell it what to clean up, close it at the end."""

    def __init__(self, token: Optional[str] = None) -> None:
        self.token = token or uuid.uuid4().hex
        self._process: Optional[subprocess.Popen] = None
        self._pipe: Optional[IO[bytes]] = None
        self._telling = threading.Lock()

    def __enter__(self) -> "ProcessGuard":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def pid(self) -> Optional[int]:
        return self._process.pid if self._process else None

    def environment(self) -> dict[str, str]:
        """What each child's environment must hold for the guard to find its processes."""
        return {TOKEN_VARIABLE: self.token}

    def start(self) -> None:
        environment = dict(os.environ)
        environment.pop(TOKEN_VARIABLE, None)  # an outer guard must not kill this one
        environment["PYTHONPATH"] = os.pathsep.join(
            [str(PROJECT_ROOT)] + ([environment["PYTHONPATH"]] if environment.get("PYTHONPATH") else []))
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "runner.run.process.guard", self.token],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=str(PROJECT_ROOT), env=environment, start_new_session=True)
        except OSError as error:
            log.warning("no guard process (%s): processes of a killed runner may outlive it",
                        error.strerror or error)
            return
        self._pipe = self._process.stdin

    def watch(self, pid: int) -> None:
        """Kill this process group (a child started in a session of its own) if the runner dies."""
        self._tell(f"watch {pid}")

    def watch_process(self, pid: int) -> None:
        """Kill this process and its descendants if the runner dies (unless its pid was
        reused meanwhile: its start time is told too)."""
        try:
            started = psutil.Process(pid).create_time()
        except psutil.Error:
            return
        self._tell(f"process {pid} {started!r}")

    def forget(self, pid: int) -> None:
        """The group ended normally; never kill a later group that reuses its number."""
        self._tell(f"forget {pid}")

    def remove_on_exit(self, folder: Path) -> None:
        self._tell(f"scratch {folder}")

    def close(self, timeout: float = 15.0) -> None:
        """End the guard: it kills what is left and removes the scratch folders."""
        if self._pipe is not None:
            try:
                self._pipe.close()
            except OSError:
                pass
            self._pipe = None
        if self._process is not None:
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("the guard process %d did not finish its clean-up in %g s",
                            self._process.pid, timeout)
            self._process = None

    def _tell(self, message: str) -> None:
        with self._telling:  # children are started and watched from several threads
            self._tell_locked(message)

    def _tell_locked(self, message: str) -> None:
        if self._pipe is None:
            return
        try:
            self._pipe.write(message.encode("utf-8") + b"\n")
            self._pipe.flush()
        except OSError as error:
            log.warning("the guard process is gone (%s): processes of a killed runner may "
                        "outlive it", error.strerror or error)
            self._pipe = None


# The guard's side.

#: How close a pid's start time must be to the one told to be the same process.
START_TIME_TOLERANCE_SECONDS = 0.5


def kill_everything(token: str, groups: set[int],
                    processes: Optional[dict[int, float]] = None) -> int:
    """Kill the watched groups, their leaders' descendants, the watched processes still the
    ones told (pid and start time) with their descendants, and every process carrying
    `token`; return how many processes were found."""
    victims: dict[int, psutil.Process] = {}
    for pid, started in (processes or {}).items():
        try:
            process = psutil.Process(pid)
            if abs(process.create_time() - started) < START_TIME_TOLERANCE_SECONDS:
                for found in [process] + process.children(recursive=True):
                    victims[found.pid] = found
        except psutil.Error:
            pass
    for pid in groups:
        try:
            leader = psutil.Process(pid)
            for process in [leader] + leader.children(recursive=True):
                victims[process.pid] = process
        except psutil.Error:
            pass
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    me = os.getpid()
    for process in psutil.process_iter():
        if process.pid == me or process.pid in victims:
            continue
        try:
            if process.environ().get(TOKEN_VARIABLE) == token:
                victims[process.pid] = process
        except (psutil.Error, OSError):
            continue
    for process in victims.values():
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(list(victims.values()), timeout=5)
    return len(victims)


def main(argv: list[str]) -> int:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    token = argv[0]
    groups: set[int] = set()
    processes: dict[int, float] = {}
    folders: list[str] = []
    for raw in sys.stdin.buffer:
        command, _, value = raw.decode("utf-8", "replace").rstrip("\n").partition(" ")
        try:
            if command == "watch":
                groups.add(int(value))
            elif command == "forget":
                groups.discard(int(value))
            elif command == "scratch":
                folders.append(value)
            elif command == "process":
                pid, _, started = value.partition(" ")
                processes[int(pid)] = float(started)
        except ValueError:
            continue
    kill_everything(token, groups, processes)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
