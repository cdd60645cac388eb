"""Dispatchers: where the sweep sends a claimed experiment to be run.

The sweep (runner/run/sweep.py) claims, skips and records in its own thread; a dispatcher only
runs experiments and hands back their lines as futures. `LocalDispatcher` runs one
experiment per slot (runner/plan/slots.py) on this machine; the Ray dispatcher
(runner/run/ray_dispatch.py) runs them as tasks of a Ray cluster.
"""

from __future__ import annotations

import logging
import queue
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, Sequence

from runner.run.executor import ExperimentExecutor
from runner.plan.matrix import PlannedExperiment
from runner.plan.slots import Slot

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


class LocalDispatcher:
    """One experiment per slot at a time, each in the isolated children of the executor."""

    def __init__(self, executor: ExperimentExecutor, slots: Sequence[Slot]) -> None:
        if not slots:
            raise ValueError("a dispatcher needs at least one slot")
        self.executor = executor
        self.slots = list(slots)
        self.capacity = len(self.slots)
        self._free: "queue.SimpleQueue[Slot]" = queue.SimpleQueue()
        for slot in self.slots:
            self._free.put(slot)
        self._pool = ThreadPoolExecutor(max_workers=self.capacity, thread_name_prefix="experiment")

    def submit(self, planned: PlannedExperiment) -> "Future[dict[str, Any]]":
        return self._pool.submit(self._run, planned)

    def _run(self, planned: PlannedExperiment) -> dict[str, Any]:
        slot = self._free.get()
        try:
            log.debug("%s runs on slot %d (%s)", planned.experiment_id, slot.index, slot.describe())
            return self.executor.run(planned, slot).to_dict()
        finally:
            self._free.put(slot)

    def skipped_line(self, planned: PlannedExperiment, reason: str) -> dict[str, Any]:
        return self.executor.skipped_line(planned, reason).to_dict()

    def cancel(self) -> None:
        self.executor.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
