"""Is a point good, bad or inconclusive? Judged as `compare` judges, against both ends.

Each experiment of the point is compared with the good end and with the bad end by
`reports.analyse.compare.compare` (the same threshold, permutation test and unreliability
tests). Where the ends differ by a failure (the bad end fails, or its verifier's verdict
turned from PASS), a point is bad where it fails too and good where it runs, whatever its
figure. Where they differ by the figure, an experiment is bad where it regressed against the
good end and is neither better nor worse than the bad end; good where it is better than the
bad end and neither worse nor better than the good end; anything else (a figure beyond both
ends, half-way, within the noise, or a CPU time the core's own speed moved with nothing to
judge it by: compare's `core_moved`) is inconclusive. Only experiments whose ends differ
that way are judged.

On the CPU, where every line of an experiment (both ends and the point) holds the timing
thread's CPU time in host pulses (`summary.cpu_time.in_pulses`: each timed run's CPU time
over the CPU time of a fixed piece of work right after it), the latency metric is judged by
that figure, by the threshold alone (one figure a line): a shared host's cores run at two
speeds 1.5 to 2x apart and its processes differ besides, so that one process of a model read
1.75 to 3.40 ms of CPU time per iteration and a process of the same model 30% slower 2.31 to
4.51 ms, while in pulses they read 2.34 to 2.86 and 2.91 to 3.62 (docs/bisect.md). Neither
the wait for a core nor the core's speed moves it, so the flags of contention and the
machine's change of speed do not apply to it. Where the core ran at another speed in the
point's sweep than in an end's (the pulse moved by over `CORE_SPEED_BOUND`), the verdict is
provisional (`Judgement.by_pulses`); a point that lies within the middle third between the
ends (`HALF_WAY`) is inconclusive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

from core.files.bisect_log import BAD, GOOD, INCONCLUSIVE
from reports.analyse.compare import (CORE_SPEED_BOUND, DEFAULT_ALPHA, DEFAULT_THRESHOLD,
                                     FIXED, IMPROVED, NEWLY_FAILING, REGRESSED, UNRELIABLE,
                                     Change, compare)
from reports.read.load import ConfigKey, Record

POINT_FIELD = "point"
#: A point judged by its CPU time in host pulses is inconclusive between these fractions of
#: the way from the good end to the bad one (`_way`): in-pulses figures of one code moved by
#: up to 10% with the core's speed, and a bad commit read 42% of the way (docs/bisect.md).
HALF_WAY = (1 / 3, 2 / 3)


@dataclass(frozen=True)
class Metric:
    """A figure a bisection judges by: its value in a record (lower is better as judged),
    the repeats behind it (for the permutation test), and how it is shown."""

    name: str
    value: Callable[[Record], Optional[float]]
    samples: Callable[[Record], list]
    unit: str
    #: The value shown is the judged one inverted (speedup: higher is better).
    inverted: bool = False


def _inverse(value: Optional[float]) -> Optional[float]:
    return 1.0 / value if value else None


METRICS: dict[str, Metric] = {
    "latency": Metric("latency", lambda r: r.median_time, lambda r: list(r.per_iter_times), "s"),
    "speedup": Metric("speedup", lambda r: _inverse(r.paired_speedup), lambda r: [], "x",
                      inverted=True),
    "compile_time": Metric("compile_time", lambda r: r.compile_time, lambda r: [], "s"),
    "peak_memory": Metric("peak_memory",
                          lambda r: float(r.peak_memory) if r.peak_memory else None,
                          lambda r: [], "B"),
}


def point_of(record: Record) -> Optional[str]:
    """The bisection point of a record (its `point=` label part), or None."""
    for part in record.config.extras.split(" "):
        name, _, value = part.partition("=")
        if name == POINT_FIELD and value:
            return value
    return None


def experiment_of(record: Record) -> tuple:
    """What a record measured, less the point: the same experiment at every point."""
    values = record.config.as_dict()
    values["extras"] = " ".join(part for part in values.get("extras", "").split(" ")
                                if part and part.partition("=")[0] != POINT_FIELD)
    return (record.suite, record.model, ConfigKey(**values))


def experiment_label(record: Record) -> str:
    suite, model, config = experiment_of(record)
    return f"{suite}/{model} {config.label}"


@dataclass(frozen=True)
class Figure:
    """One experiment's figure at a point: the judged metric's value and interval."""

    experiment: str
    value: Optional[float]
    low: Optional[float] = None
    high: Optional[float] = None
    status: str = ""

    def as_json(self) -> dict:
        return {"experiment": self.experiment, "value": self.value, "low": self.low,
                "high": self.high, "status": self.status}


@dataclass
class Judgement:
    verdict: str
    reason: str
    figures: list[Figure] = field(default_factory=list)
    #: The verdict rests on a CPU time read in host pulses (compare's `in_pulses_ratio`: the
    #: core changed speed between the sweeps): under load that reading was off by up to 29%
    #: (docs/bisect.md), so one measurement does not settle it.
    by_pulses: bool = False
    #: Some experiment read beyond both ends (slower than the bad end, or faster than the
    #: good end): the ends' figures no longer stand for the host the point met.
    beyond_ends: bool = False


@dataclass(frozen=True)
class Judge:
    """How points are judged: the metric, compare's threshold and alpha, and whether lines
    flagged unreliable (contention, varying runs) are judged by the permutation test alone."""

    metric: Metric = METRICS["latency"]
    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    trust_flagged: bool = False

    def in_pulses(self, *sides: Sequence[Record]) -> frozenset:
        """The experiments judged by their CPU time in host pulses (module docstring): with
        the latency metric, those whose every line of every side has it."""
        if self.metric.name != "latency":
            return frozenset()
        # cpu_time: the line's CPU time is its work's (the CPU, one compute thread); a
        # CUDA line's launching thread has a CPU time in pulses too, but not the work's.
        per_side = [{hash(experiment_of(r)): bool(r.cpu_in_pulses and r.cpu_time)
                     for r in records} for records in sides]
        keys = set.intersection(*(set(side) for side in per_side)) if per_side else set()
        return frozenset(key for key in keys if all(side[key] for side in per_side))

    def _as_judged(self, records: Sequence[Record], in_pulses: frozenset = frozenset()
                   ) -> list[Record]:
        judged = []
        for record in records:
            key = hash(experiment_of(record))
            changes = {"key": key}
            if self.trust_flagged:
                changes["unreliable"] = False
            if record.passed and key in in_pulses:
                changes.update(median_time=record.cpu_in_pulses, per_iter_times=[],
                               unreliable=False, contended=False, host_bound=False,
                               slow_ratio=None, paired_speedup=None)
            elif record.passed:
                value = self.metric.value(record)
                if value is None:
                    continue  # no figure: the experiment is missing at this point
                changes.update(median_time=value, per_iter_times=self.metric.samples(record))
            judged.append(replace(record, **changes))
        return judged

    def figure(self, record: Record) -> Figure:
        value = self.metric.value(record) if record.passed else None
        low = high = None
        if value is not None and self.metric.name == "latency" and record.interval:
            low, high = record.interval.low, record.interval.high
        if self.metric.inverted and value:
            value = 1.0 / value
        status = "ok" if record.passed else (
            f"verification {record.verification_code}" if record.ran else f"status {record.status}")
        return Figure(experiment_label(record), value, low, high, status)

    def differing(self, good: Sequence[Record], bad: Sequence[Record]) -> list[Change]:
        """The experiments whose bad end is worse than their good end."""
        pulsed = self.in_pulses(good, bad)
        comparison = compare(self._as_judged(good, pulsed), self._as_judged(bad, pulsed),
                             threshold=self.threshold, alpha=self.alpha)
        return [c for c in comparison.changes if c.verdict in (REGRESSED, NEWLY_FAILING)]

    def judge(self, point: Sequence[Record], good: Sequence[Record],
              bad: Sequence[Record]) -> Judgement:
        """The point's verdict against both ends (GOOD, BAD or INCONCLUSIVE)."""
        figures = [self.figure(r) for r in point]
        #: How each watched experiment's ends differ: a failure (or a verdict that turned
        #: from PASS) is judged by whether the point fails, not by its figure.
        watched = {change.base.key: change.verdict for change in self.differing(good, bad)}
        if not watched:
            return Judgement(INCONCLUSIVE, "the ends do not differ", figures)
        pulsed = self.in_pulses(point, good, bad)
        new = self._as_judged(point, pulsed)
        against_good = {c.base.key: c for c in compare(
            self._as_judged(good, pulsed), new, threshold=self.threshold,
            alpha=self.alpha).changes}
        against_bad = {c.base.key: c for c in compare(
            self._as_judged(bad, pulsed), new, threshold=self.threshold,
            alpha=self.alpha).changes}
        verdicts, reasons = [], []
        by_pulses = beyond_ends = False
        for key in sorted(watched):
            to_good, to_bad = against_good.get(key), against_bad.get(key)
            if to_good is None or to_bad is None:
                verdicts.append(INCONCLUSIVE)
                reasons.append("no line with a figure at this point")
                continue
            name = experiment_label(to_good.new)
            said = _said_in_pulses if key in pulsed else _said
            if watched[key] == NEWLY_FAILING:
                if to_bad.verdict == FIXED:
                    verdicts.append(GOOD)
                    reasons.append(f"{name}: runs where the bad end fails ({_said(to_bad)})")
                elif to_good.verdict == NEWLY_FAILING:
                    verdicts.append(BAD)
                    reasons.append(f"{name}: {_said(to_good)} against the good end")
                else:
                    verdicts.append(INCONCLUSIVE)
                    reasons.append(f"{name}: {_said(to_good)} against the good end, "
                                   f"{_said(to_bad)} against the bad end")
                continue
            worse = to_good.verdict in (REGRESSED, NEWLY_FAILING)
            better = to_bad.verdict in (IMPROVED, FIXED)
            if any(c.core_moved and c.in_pulses_ratio is None and c.verdict == UNRELIABLE
                   for c in (to_good, to_bad)):
                # The core ran at another speed in the point's sweep than in an end's: its
                # CPU time moved with it, and says nothing of the code.
                verdicts.append(INCONCLUSIVE)
                reasons.append(f"{name}: the core's speed moved: {said(to_good)} against the "
                               f"good end, {said(to_bad)} against the bad end")
            elif to_bad.verdict == REGRESSED or to_good.verdict == IMPROVED:
                # Worse than both ends, or better than both: the host changed speed, or
                # another change is in the range; either way not this bisection's answer.
                verdicts.append(INCONCLUSIVE)
                beyond_ends = True
                reasons.append(f"{name}: beyond both ends: {said(to_good)} against the good "
                               f"end, {said(to_bad)} against the bad end")
            elif (worse or better) and key in pulsed and \
                    HALF_WAY[0] <= _way(to_good, to_bad) <= HALF_WAY[1]:
                # Judged by the threshold alone, a point can pass one end's test and fail the
                # other's while lying near the middle of a narrow round: a verdict needs it
                # nearer one end.
                verdicts.append(INCONCLUSIVE)
                reasons.append(f"{name}: half-way ({_way(to_good, to_bad):.0%} of the way from "
                               f"the good end to the bad): {said(to_good)} against the good "
                               f"end, {said(to_bad)} against the bad end")
            elif worse and not better:
                verdicts.append(BAD)
                reasons.append(f"{name}: {said(to_good)} against the good end")
                by_pulses |= self._core_moved(key, point, to_good, to_bad, pulsed)
            elif better and not worse:
                verdicts.append(GOOD)
                reasons.append(f"{name}: {said(to_bad)} against the bad end")
                by_pulses |= self._core_moved(key, point, to_good, to_bad, pulsed)
            else:
                verdicts.append(INCONCLUSIVE)
                reasons.append(f"{name}: {said(to_good)} against the good end, "
                               f"{said(to_bad)} against the bad end")
        if BAD in verdicts:
            verdict = BAD
        elif all(v == GOOD for v in verdicts):
            verdict = GOOD
        else:
            verdict = INCONCLUSIVE
        return Judgement(verdict, "; ".join(reasons), figures,
                         by_pulses=by_pulses and verdict != INCONCLUSIVE, beyond_ends=beyond_ends)

    @staticmethod
    def _core_moved(key: int, point: Sequence[Record], to_good: Change, to_bad: Change,
                    pulsed: frozenset) -> bool:
        """Whether a verdict rests on a CPU time in host pulses across a change of the core's
        speed: compare's (a contended line), or this judge's (`in_pulses`) where the pulse of
        the point's sweep and an end's differ by over CORE_SPEED_BOUND."""
        if key not in pulsed:
            return any(c.in_pulses_ratio is not None for c in (to_good, to_bad))
        mine = next((r.cpu_pulse for r in point if hash(experiment_of(r)) == key), None)
        theirs = [c.base.cpu_pulse for c in (to_good, to_bad)]
        return any(not (mine and other) or abs(mine / other - 1.0) > CORE_SPEED_BOUND
                   for other in theirs)


def _way(to_good: Change, to_bad: Change) -> float:
    """Where the point lies between the ends, on a log scale: 0 at the good end, 1 at the bad
    end (either way beyond them below 0 or above 1); 0.5 where the ends read alike."""
    from_good, from_bad = math.log(to_good.ratio), math.log(to_bad.ratio)
    span = from_good - from_bad
    return from_good / span if span > 0 else 0.5


def _said_in_pulses(change: Change) -> str:
    """A change judged by the CPU time in host pulses: its verdict and how far it moved."""
    text = change.verdict
    if change.ratio is not None:
        text += f" (CPU time in host pulses {change.ratio - 1.0:+.1%})"
    return text


def _said(change: Change) -> str:
    """A change as compare says it: its verdict, the ratio and the p-value or reason."""
    text = change.verdict
    if change.ratio is not None:
        text += f" ({change.ratio - 1.0:+.1%}"
        text += f", p={change.p_value:.3g})" if change.p_value is not None else ")"
    if change.reason:
        text += f" [{change.reason}]"
    return text
