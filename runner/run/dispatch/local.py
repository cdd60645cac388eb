"""Dispatchers: where the sweep sends a claimed experiment to be run.

The sweep (runner/run/sweep.py) claims, skips and records in its own thread; a dispatcher only
runs experiments and hands back their lines as futures. `LocalDispatcher` runs one
experiment per slot (runner/plan/slots.py) on this machine; the Ray dispatcher
(runner/run/dispatch/ray_cluster.py) runs them as tasks of a Ray cluster.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Protocol, Sequence

from core.schema import ResultLine, error_headline
from runner.run.executor import ExperimentExecutor
from runner.plan.matrix import PlannedExperiment
from runner.plan.slots import Slot
from runner.run.process.oom import gpu_memory_ran_out

log = logging.getLogger(__name__)


class Dispatcher(Protocol):
    """Runs experiments, at most `capacity` at a time; each future gives a line (a dict)."""

    capacity: int

    def submit(self, planned: PlannedExperiment) -> "Future[dict[str, Any]]": ...

    def skipped_line(self, planned: PlannedExperiment, reason: str) -> dict[str, Any]:
        """The line of an experiment its suite says cannot run (made without a child)."""

    def set_backlog(self, count: int) -> None:
        """Tell how many experiments the sweep still has to submit (0: it has submitted all
        it can; idle capacity may then help the experiments still running)."""

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

    def reserved(self, gpu: str) -> bool:
        """Whether an experiment runs, or waits to run, alone on `gpu`."""
        with self._changed:
            return gpu in self._alone

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


class SlotPool:
    """The free slots of a dispatcher, taken by experiments one each, and lent at the end
    of a sweep.

    Once the sweep has submitted every experiment it has (`set_backlog(0)`) and none waits
    for a slot, a free slot that shares a GPU with a running experiment's slot is lent to it
    for its later timing processes (`borrow`), which then run two at a time, taking turns on
    the card through its gate as any two experiments of the GPU do. Without it the last
    experiment's later processes run one after the other while its GPU's other slots idle.
    Only slots of one GPU lend to each other: a CPU experiment's figure depends on the cores
    it gets, so its processes stay on its own."""

    def __init__(self, slots: Sequence[Slot], turns: GpuTurns,
                 poll_seconds: float = 1.0) -> None:
        self._free = list(slots)
        self._turns = turns
        self._poll_seconds = poll_seconds
        self._changed = threading.Condition()
        self._awaited = 0  # experiments submitted that do not hold a slot yet
        self._backlog: Optional[int] = None  # unknown until the sweep tells

    def expect(self) -> None:
        """Count an experiment that will take a slot (called as it is submitted, so that
        no slot is lent between its submission and its start)."""
        with self._changed:
            self._awaited += 1

    def take(self) -> Slot:
        """A free slot for an experiment counted by `expect` (waits for one)."""
        with self._changed:
            self._changed.wait_for(lambda: bool(self._free))
            self._awaited -= 1
            self._changed.notify_all()  # with none awaited, a borrower may take the rest
            return self._free.pop(0)

    def put(self, slot: Slot) -> None:
        """Give back a slot taken or borrowed."""
        with self._changed:
            self._free.append(slot)
            self._changed.notify_all()

    def set_backlog(self, count: int) -> None:
        with self._changed:
            self._backlog = count
            self._changed.notify_all()

    def borrow(self, like: Slot, wanted: Callable[[], bool]) -> Optional[Slot]:
        """A free slot of `like`'s GPU, once one is free and nothing else needs it; None
        as soon as `wanted()` is false (checked at least every poll period)."""
        if not like.shares_device or like.cuda_device is None:
            return None
        with self._changed:
            while wanted():
                slot = self._lendable(like)
                if slot is not None:
                    self._free.remove(slot)
                    return slot
                self._changed.wait(self._poll_seconds)
        return None

    def wake(self) -> None:
        """Have every `borrow` check its `wanted()` now."""
        with self._changed:
            self._changed.notify_all()

    def _lendable(self, like: Slot) -> Optional[Slot]:
        if self._backlog != 0 or self._awaited or self._turns.reserved(like.cuda_device):
            return None
        return next((slot for slot in self._free if slot.shares_device
                     and slot.cuda_device == like.cuda_device), None)


class LocalDispatcher:
    """One experiment per slot at a time, each in the isolated children of the executor.

    An experiment that runs out of GPU memory on a GPU it shares with other slots runs
    again alone on it (`GpuTurns`), and its line says so in its notes: sharing a GPU must
    never fail an experiment that would run on the GPU alone. At the sweep's end, idle
    slots of a GPU run later timing processes of its running experiments (`SlotPool`)."""

    def __init__(self, executor: ExperimentExecutor, slots: Sequence[Slot]) -> None:
        if not slots:
            raise ValueError("a dispatcher needs at least one slot")
        self.executor = executor
        self.slots = list(slots)
        self.capacity = len(self.slots)
        self._turns = GpuTurns()
        self._slot_pool = SlotPool(self.slots, self._turns)
        self._pool = ThreadPoolExecutor(max_workers=self.capacity, thread_name_prefix="experiment")

    def submit(self, planned: PlannedExperiment) -> "Future[dict[str, Any]]":
        self._slot_pool.expect()
        return self._pool.submit(self._run, planned)

    def set_backlog(self, count: int) -> None:
        self._slot_pool.set_backlog(count)

    def _run(self, planned: PlannedExperiment) -> dict[str, Any]:
        slot = self._slot_pool.take()
        try:
            log.debug("%s runs on slot %d (%s)", planned.experiment_id, slot.index, slot.describe())
            if not slot.shares_device:
                return self.executor.run(planned, slot).to_dict()
            with self._turns.shared(slot.cuda_device):
                line = self.executor.run(planned, slot, lender=self._slot_pool)
            if not gpu_memory_ran_out(line.metrics.get("error"), line.verification_reason):
                return line.to_dict()
            return self._run_alone(planned, slot, line).to_dict()
        finally:
            self._slot_pool.put(slot)

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
