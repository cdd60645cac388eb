"""The search over an ordered range of points (k-section), apart from measuring them.

Point 0 is the good end and the last point the bad end. Each round measures up to k points
of the range still open, spread evenly, so that a round cuts it into k + 1 parts; a point
judged neither good nor bad (after measuring it again) is skipped, as `git bisect skip`
skips, and the search goes on around it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from core.files.bisect_log import BAD, GOOD, SKIPPED


def rounds_bound(count: int, k: int) -> int:
    """The rounds a search over `count` points with k at once takes without skips, the
    ends' own round included: 1 + ceil(log(interior + 1) / log(k + 1))."""
    interior = max(count - 2, 0)
    return 1 + (math.ceil(math.log(interior + 1) / math.log(k + 1) - 1e-9) if interior else 0)


@dataclass
class Answer:
    """Where the search ended: the last good and first bad point (indices), the skipped
    points between them, and whether a good point was found above a bad one."""

    last_good: int
    first_bad: int
    skipped_between: list[int]
    contradictions: list[int] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        """The first bad point is known exactly (nothing skipped between)."""
        return not self.skipped_between


@dataclass
class Search:
    """The verdicts known so far over `count` points; the ends are GOOD and BAD."""

    count: int
    verdicts: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.count < 2:
            raise ValueError("a bisection needs at least two points: a good one and a bad one")
        self.verdicts.setdefault(0, GOOD)
        self.verdicts.setdefault(self.count - 1, BAD)

    def record(self, index: int, verdict: str) -> None:
        if verdict not in (GOOD, BAD, SKIPPED):
            raise ValueError(f"a point is good, bad or skipped, not {verdict!r}")
        self.verdicts[index] = verdict

    def bounds(self) -> tuple[int, int]:
        """(last good, first bad): the first bad point, and the last good one below it."""
        first_bad = min(i for i, v in self.verdicts.items() if v == BAD)
        last_good = max(i for i, v in self.verdicts.items() if v == GOOD and i < first_bad)
        return last_good, first_bad

    def open_points(self) -> list[int]:
        """The points between the bounds not judged yet."""
        low, high = self.bounds()
        return [i for i in range(low + 1, high) if i not in self.verdicts]

    def next_points(self, k: int) -> list[int]:
        """Up to k open points that split the open range into k + 1 even parts."""
        candidates = self.open_points()
        if not candidates:
            return []
        low, high = self.bounds()
        chosen: list[int] = []
        for part in range(1, min(k, len(candidates)) + 1):
            target = low + (high - low) * part / (min(k, len(candidates)) + 1)
            free = [c for c in candidates if c not in chosen]
            chosen.append(min(free, key=lambda c: (abs(c - target), c)))
        return sorted(chosen)

    @property
    def done(self) -> bool:
        return not self.open_points()

    def answer(self) -> Optional[Answer]:
        if not self.done:
            return None
        low, high = self.bounds()
        return Answer(low, high, [i for i in range(low + 1, high)
                                  if self.verdicts.get(i) == SKIPPED],
                      sorted(i for i, v in self.verdicts.items() if v == GOOD and i > high))
