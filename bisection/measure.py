"""Measure points with the runner: one sweep a point, as a child process of its own run by
the point's interpreter with the point's folders first on its path, its lines appended to
the bisection's results file with the point in their identity (--point). Points measured at
once each take a slot of their own where the bisection has them (bisection/placement.py): the
slot's GPU in the sweep's CUDA_VISIBLE_DEVICES, its cores as the sweep's CPU affinity, which
the runner takes as its cores (it has no flag for them)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence

from bisection.driver import BisectError, Point
from bisection.judge import point_of
from bisection.points import PointPlace, SetupFailed
from reports.read.load import Record, load
from runner.plan.slots import Slot

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: In a sweep flag, replaced by the point's worktree (say --torchbench-dir={tree}).
TREE_TOKEN = "{tree}"
#: The runner's exit statuses that end a sweep normally (0) or on bad input (2).
EXIT_BAD_INPUT = 2
#: How long a stopped sweep may take to record what it finished.
STOP_GRACE_SECONDS = 120


def pinning(slot: Optional[Slot]) -> Optional[Callable[[], None]]:
    """What pins a sweep to its slot's cores as it starts (None: no cores of its own)."""
    if slot is None or not slot.cpu_set:
        return None
    cores = frozenset(slot.cpu_set)
    return lambda: os.sched_setaffinity(0, cores)


class Places(Protocol):
    def place(self, point: Point, log_file: Path) -> PointPlace: ...


@dataclass
class RunnerMeasurer:
    """Sweeps of the runner, up to `jobs` points at once, into `output_dir`."""

    output_dir: Path
    sweep_args: Sequence[str]
    places: Places
    jobs: int = 1
    results_name: str = "results.jsonl"
    #: Slot i for the i-th point of a measurement (bisection/placement.py); none: every
    #: sweep has this process's cores and view of the GPUs.
    slots: Sequence[Slot] = ()
    _running: set = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _slot_locks: dict = field(default_factory=dict)

    @property
    def results_path(self) -> Path:
        return self.output_dir / self.results_name

    def point_log(self, point: Point) -> Path:
        folder = self.output_dir / "bisect-points"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{point.label}.log"

    def command(self, point: Point, place: PointPlace, processes: Optional[int],
                attempt: int) -> list[str]:
        args = []
        for arg in self.sweep_args:
            if TREE_TOKEN in arg:
                if place.tree is None:
                    raise BisectError(f"sweep flag {arg!r} names {TREE_TOKEN}, which only "
                                      "commits have (bisecting versions has no tree)")
                arg = arg.replace(TREE_TOKEN, str(place.tree))
            args.append(arg)
        command = [place.python, str(PROJECT_ROOT / "experiment_runner.py"), *args,
                   "--point", point.label, "--output-dirname", str(self.output_dir),
                   "--output-basename", self.results_file(attempt).name, "--no-progress"]
        if processes is not None:
            command.append(f"--processes={processes}")
        return command

    def results_file(self, attempt: int) -> Path:
        """Where a measurement's lines go: the results file, and for each measurement again
        a file of its own beside it (results.again-1.jsonl), so that the runner resumes
        each without measuring anything twice and no line is ever replaced."""
        if attempt == 0:
            return self.results_path
        return self.results_path.with_name(f"{self.results_path.stem}.again-{attempt}"
                                           f"{self.results_path.suffix}")

    def environment(self, place: PointPlace, slot: Optional[Slot] = None) -> dict[str, str]:
        """The sweep's environment: this one, the point's folders first on PYTHONPATH, and
        the slot's GPU as CUDA_VISIBLE_DEVICES."""
        environment = dict(os.environ)
        path = [*place.path, *[p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]]
        if path:
            environment["PYTHONPATH"] = os.pathsep.join(path)
        if slot is not None:
            environment.update(slot.environment())
        return environment

    def slot_of(self, index: int) -> Optional[Slot]:
        """The slot of the index-th point of a measurement (None: no slots)."""
        return self.slots[index % len(self.slots)] if self.slots else None

    def _slot_lock(self, slot: Slot) -> threading.Lock:
        with self._lock:
            return self._slot_locks.setdefault(slot.index, threading.Lock())

    def _measure_one(self, point: Point, processes: Optional[int], attempt: int,
                     slot: Optional[Slot] = None) -> Optional[str]:
        if slot is None:
            return self._sweep(point, processes, attempt, None)
        with self._slot_lock(slot):  # a slot's cores and GPU hold one sweep at a time
            return self._sweep(point, processes, attempt, slot)

    def _sweep(self, point: Point, processes: Optional[int], attempt: int,
               slot: Optional[Slot]) -> Optional[str]:
        log_file = self.point_log(point)
        try:
            place = self.places.place(point, log_file)
        except SetupFailed as failure:
            return str(failure)
        if self._stopping.is_set():
            raise KeyboardInterrupt
        command = self.command(point, place, processes, attempt)
        with open(log_file, "a", encoding="utf-8") as out:
            out.write("$ " + " ".join(command) + "\n")
            out.flush()
            if slot is not None:
                out.write(f"(on {slot.describe()})\n")
                out.flush()
            child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                     env=self.environment(place, slot),
                                     cwd=str(place.tree or self.output_dir),
                                     start_new_session=True, preexec_fn=pinning(slot))
            with self._lock:
                self._running.add(child)
            try:
                status = child.wait()
            finally:
                with self._lock:
                    self._running.discard(child)
        if self._stopping.is_set():
            raise KeyboardInterrupt
        if status == EXIT_BAD_INPUT:
            tail = log_file.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
            return "the runner refused the sweep: " + " ".join(tail)
        if status != 0:
            log.warning("the sweep of %s ended with status %s (its log: %s)", point.label,
                        status, log_file)
        return None

    def stop(self) -> None:
        """Stop the running sweeps as Ctrl-C stops one (each records what it finished)."""
        self._stopping.set()
        with self._lock:
            children = list(self._running)
        for child in children:
            try:
                os.killpg(child.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        for child in children:
            try:
                child.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()

    def measure(self, points: Sequence[Point], processes: Optional[int],
                attempt: int) -> dict[str, str]:
        return self._measure_batch([(point, processes, attempt) for point in points],
                                   max(1, self.jobs))

    def measure_at_once(self, batch: Sequence[tuple[Point, Optional[int], int]]
                        ) -> dict[str, str]:
        return self._measure_batch(batch, max(1, len(batch)))

    def _measure_batch(self, batch: Sequence[tuple[Point, Optional[int], int]],
                       width: int) -> dict[str, str]:
        failed: dict[str, str] = {}
        pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="bisect")
        try:
            futures = {point.label: pool.submit(self._measure_one, point, processes, attempt,
                                                self.slot_of(index))
                       for index, (point, processes, attempt) in enumerate(batch)}
            for label, future in futures.items():
                reason = future.result()
                if reason is not None:
                    failed[label] = reason
        except KeyboardInterrupt:
            self.stop()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return failed

    def records(self) -> dict[str, list[Record]]:
        files = [self.results_path, *sorted(self.output_dir.glob(
            f"{self.results_path.stem}.again-*{self.results_path.suffix}"))]
        files = [path for path in files if path.exists()]
        if not files:
            return {}
        try:
            loaded = load(files)
        except RuntimeError as error:
            # DuckDB turns Ctrl-C during a query into its own error: a stop all the same.
            if "interrupted" in str(error).lower():
                raise KeyboardInterrupt from error
            raise
        by_point: dict[str, list[Record]] = {}
        for record in loaded.records:  # each experiment's latest line
            label = point_of(record)
            if label is not None:
                by_point.setdefault(label, []).append(record)
        return by_point
