"""Dispatchers: where the sweep sends a claimed experiment to be run.

The sweep (runner/run/sweep.py) claims, skips and records in its own thread; a dispatcher only
runs experiments and hands back their lines as futures. `LocalDispatcher` runs one
experiment per slot (runner/plan/slots.py) on this machine; the Ray dispatcher
(runner/run/ray_dispatch.py) runs them as tasks of a Ray cluster.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Iterator, Protocol, Sequence

from core.schema import ResultLine, error_headline
from runner.run.executor import ExperimentExecutor
from runner.plan.matrix import PlannedExperiment
from runner.plan.slots import Slot
from runner.run.oom import gpu_memory_ran_out

log = logging.getLogger(__name__)


class Dispatcher(Protocol):
    """Runs experiments, at most `capacity` at a time; each future gives a line (a dict)."""

    capacity: int

    def submit(self, planned: PlannedExperiment) -> "Future[dict[str, Any]]": ...

    def skipped_line(self, planned: PlannedExperiment, reason: str) -> dict[str, Any]:
        """The line of an experiment its suite says cannot run (made without a child)."""

    def cancel(self) -> None:
        """Stop what runs now (Ctrl-C, a fatal error): its children are killed."""

    def close(self) -> None:
        """Wait for what runs to end and free the workers."""


class GpuTurns:
    """Which GPUs shared by several slots have one experiment running alone on them.

    An experiment that ran out of GPU memory while its GPU was shared runs again alone: it
    waits until the other slots of its GPU have ended their experiments, and they start no
    new one until it has ended. (The slots are threads of one dispatcher, so a condition
    variable is all it takes; a scheduler library would not know the GPUs' slots.)"""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running: Counter[str] = Counter()
        self._alone: set[str] = set()

    @contextmanager
    def shared(self, gpu: str) -> Iterator[None]:
        """Run an experiment on `gpu` with the others of its slots (waits while one runs
        alone on it)."""
        with self._changed:
            self._changed.wait_for(lambda: gpu not in self._alone)
            self._running[gpu] += 1
        try:
            yield
        finally:
            with self._changed:
                self._running[gpu] -= 1
                self._changed.notify_all()

    @contextmanager
    def alone(self, gpu: str) -> Iterator[None]:
        """Run an experiment on `gpu` with nothing else running on it."""
        with self._changed:
            self._changed.wait_for(lambda: gpu not in self._alone)
            self._alone.add(gpu)
            self._changed.wait_for(lambda: self._running[gpu] == 0)
        try:
            yield
        finally:
            with self._changed:
                self._alone.discard(gpu)
                self._changed.notify_all()


class LocalDispatcher:
    """One experiment per slot at a time, each in the isolated children of the executor.

    An experiment that runs out of GPU memory on a GPU it shares with other slots runs
    again alone on it (`GpuTurns`), and its line says so in its notes: sharing a GPU must
    never fail an experiment that would run on the GPU alone."""

    def __init__(self, executor: ExperimentExecutor, slots: Sequence[Slot]) -> None:
        if not slots:
            raise ValueError("a dispatcher needs at least one slot")
        self.executor = executor
        self.slots = list(slots)
        self.capacity = len(self.slots)
        self._free: "queue.SimpleQueue[Slot]" = queue.SimpleQueue()
        for slot in self.slots:
            self._free.put(slot)
        self._turns = GpuTurns()
        self._pool = ThreadPoolExecutor(max_workers=self.capacity, thread_name_prefix="experiment")

    def submit(self, planned: PlannedExperiment) -> "Future[dict[str, Any]]":
        return self._pool.submit(self._run, planned)

    def _run(self, planned: PlannedExperiment) -> dict[str, Any]:
        slot = self._free.get()
        try:
            log.debug("%s runs on slot %d (%s)", planned.experiment_id, slot.index, slot.describe())
            if not slot.shares_device:
                return self.executor.run(planned, slot).to_dict()
            with self._turns.shared(slot.cuda_device):
                line = self.executor.run(planned, slot)
            if not gpu_memory_ran_out(line.metrics.get("error"), line.verification_reason):
                return line.to_dict()
            return self._run_alone(planned, slot, line).to_dict()
        finally:
            self._free.put(slot)

    def _run_alone(self, planned: PlannedExperiment, slot: Slot, shared: ResultLine) -> ResultLine:
        """Run again alone on its GPU an experiment that ran out of its memory while sharing it."""
        log.warning("%s ran out of GPU memory while GPU %s was shared; it runs again alone on "
                    "it", planned.experiment_id, slot.cuda_device)
        with self._turns.alone(slot.cuda_device):
            line = self.executor.run(planned, dataclasses.replace(slot, shares_device=False))
        what = error_headline(shared.metrics.get("error") or shared.verification_reason or "")
        line.notes.append(f"ran out of GPU memory while GPU {slot.cuda_device} was shared with "
                          f"other experiments ({what}); run again alone on it")
        return line

    def skipped_line(self, planned: PlannedExperiment, reason: str) -> dict[str, Any]:
        return self.executor.skipped_line(planned, reason).to_dict()

    def cancel(self) -> None:
        self.executor.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
