"""A measurer that makes records instead of running sweeps: each point's per-iteration times
drawn from a seeded generator, with the point's true figure and a relative noise."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from bisection.driver import Point
from reports.read.load import ConfigKey, Record
from reports.stats import median_interval


def record(label: str, times: Sequence[float], *, status: str = "ok",
           code: str = "VERIFIER_SKIPPED", model: str = "launches") -> Record:
    """A line of the builtin suite's `model` at point `label`, as the reports read it."""
    times = list(times)
    ran = status == "ok" and bool(times)
    return Record(
        suite="builtin", model=model,
        config=ConfigKey(accelerator="cpu", stack="eager", test="eval", precision="fp32",
                         extras=f"point={label}"),
        fingerprint=f"{model}-{label}", status=status, verification_code=code, run_id="run",
        timestamp=0.0, per_iter_times=times,
        median_time=statistics.median(times) if ran else None,
        interval=median_interval(times) if ran else None)


@dataclass
class SimulatedMeasurer:
    """Per point: `truth(index)` is its time per iteration (None: the experiment fails);
    each measurement draws `repeats` times per process with Gaussian noise of `noise`
    (relative). Counts every measurement, so a test can tell none ran twice."""

    points: Sequence[Point]
    truth: Callable[[int], Optional[float]]
    seed: int = 0
    noise: float = 0.0
    repeats: int = 10
    setup_fails: dict[str, str] = field(default_factory=dict)
    measured: list[tuple[str, int]] = field(default_factory=list)
    batches: list[list[str]] = field(default_factory=list)
    _records: dict[str, list[Record]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)
        self.index = {p.label: i for i, p in enumerate(self.points)}

    def measure(self, points, processes, attempt):
        return self._batch([(point, processes, attempt) for point in points])

    def measure_at_once(self, batch):
        return self._batch(batch)

    def _batch(self, batch):
        """One batch of sweeps run side by side: each (point, processes, attempt) measured."""
        self.batches.append([point.label for point, _, _ in batch])
        failed = {}
        for point, processes, attempt in batch:
            if point.label in self.setup_fails:
                failed[point.label] = self.setup_fails[point.label]
                continue
            self.measured.append((point.label, attempt))
            true = self.truth(self.index[point.label])
            if true is None:
                self._records[point.label] = [record(point.label, [], status="failed")]
                continue
            samples = self.repeats * (processes or 1)
            times = [true * max(0.05, self.random.gauss(1.0, self.noise)) for _ in range(samples)]
            self._records[point.label] = [record(point.label, times)]
        return failed

    def records(self):
        return dict(self._records)
