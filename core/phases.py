"""Where a child's time goes: a few clock readings between its steps (the child marks them,
the parent adds its view).

The child records, in `summary.phases`, when its `main` began (`started_at`, seconds since
the epoch, so the parent can tell how long the child took to start) and the seconds each
step took: the set-up (imports, seeds, the stack's process start), building the model, the
workload count, preparing the model on its stack, the reference workload around the timed
runs, the measuring itself (warm-up with its compile, timed runs, pulses and the idle probe)
and what follows until the result is written. A reading costs well under a microsecond; the
record is a few hundred bytes of the line. `benchmarks/cost/sweep_cost.py` prints them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

#: Digits kept for each duration: a tenth of a millisecond.
DIGITS = 4


@dataclass
class Phases:
    """Seconds per named step, in the order they were marked; `mark(name)` closes the step
    that began at the previous mark (or at creation)."""

    started_at: float = field(default_factory=time.time)
    seconds: dict[str, float] = field(default_factory=dict)
    _last: float = field(default_factory=time.perf_counter, repr=False)

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self._last
        self._last = now

    def skip(self) -> None:
        """Start the next step now, counting the time since the last mark to no step."""
        self._last = time.perf_counter()

    def to_dict(self) -> dict[str, Any]:
        return {"started_at": self.started_at,
                **{name: round(value, DIGITS) for name, value in self.seconds.items()}}
