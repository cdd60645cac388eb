"""A bisection from its ends to its answer: measure, judge, log every step, resume.

The driver knows nothing of git or environments: a `Measurer` measures points (each a
sweep of its own) and hands back their records; the `Judge` says good, bad or
inconclusive; the bisect log (core/files/bisect_log.py) holds every step, and a driver
started on a log of the same bisection goes on from it without measuring a point again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence

from core.files.bisect_log import (ANSWER, BAD, GOOD, INCONCLUSIVE, LOG_FORMAT_VERSION,
                                   MEASURED, ROUND, SETUP, SKIPPED, START, VERDICT,
                                   append_entry, read_entries)
from bisection.judge import Judge, Judgement
from bisection.search import Answer, Search
from reports.read.load import Record

log = logging.getLogger(__name__)


class BisectError(RuntimeError):
    """A bisection that cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class Point:
    """One point of the range: `label` is what its lines carry (a short commit hash, or
    name==version), `ref` what makes it (the full hash, the version)."""

    label: str
    ref: str
    title: str = ""


class Measurer(Protocol):
    def measure(self, points: Sequence[Point], processes: Optional[int],
                attempt: int) -> dict[str, str]:
        """Measure the points (at once where it can); the reason for each that could not
        be set up. `attempt` 0 is a point's first measurement; each later one measures it
        again, and its lines supersede the earlier ones."""

    def measure_at_once(self, batch: Sequence[tuple[Point, Optional[int], int]]
                        ) -> dict[str, str]:
        """Measure each (point, processes, attempt) of `batch` at the same time, however
        many points are measured at once otherwise: whatever the host does while they run,
        it does to all of them. The reason for each that could not be set up."""

    def records(self) -> dict[str, list[Record]]:
        """Each point's latest records, by label."""


#: Timing processes of a point's first measurement where the command does not say: the
#: runner's default on a GPU, and on a CPU too, where the runner's is one. On a shared CPU
#: host one process of a model read 1.75 to 3.40 ms of CPU time per iteration, another of
#: the same code another (docs/bisect.md); the median of three holds better.
POINT_PROCESSES = 3


@dataclass(frozen=True)
class Settings:
    """How the search runs: points at once, timing processes (None: the runner's default),
    and how often an inconclusive point is measured again (each time with twice the
    processes) before it is skipped."""

    jobs: int = 1
    processes: Optional[int] = None
    remeasure: int = 1

    def processes_for(self, attempt: int) -> Optional[int]:
        """The timing processes of a point's `attempt`-th measurement. A line of several
        processes holds one figure a process for the permutation test, so a measurement
        again has at least 6: fewer could not reach significance (4 against 4 at best
        p = 1/70, with one overlap 0.057)."""
        if attempt == 0:
            return self.processes
        return max(self.processes or 3, 3) * 2 ** attempt


@dataclass
class Outcome:
    points: list[Point]
    answer: Optional[Answer]
    verdicts: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    judgements: dict[str, Judgement] = field(default_factory=dict)
    rounds: int = 0
    #: Why there is no answer (the ends do not differ), else ''.
    problem: str = ""


class Bisection:
    """One bisection over `points` (the good end first, the bad end last)."""

    def __init__(self, points: Sequence[Point], measurer: Measurer, judge: Judge,
                 log_file: Path, settings: Settings, kind: str,
                 say: Callable[[str], None] = lambda text: None) -> None:
        if len({p.label for p in points}) != len(points):
            raise BisectError("two points of the range have the same label")
        self.points = list(points)
        self.index = {p.label: i for i, p in enumerate(self.points)}
        self.measurer, self.judge, self.log_file = measurer, judge, log_file
        self.settings, self.kind, self.say = settings, kind, say
        self.search = Search(len(self.points))
        self.outcome = Outcome(self.points, None)
        self.measured: set[tuple[str, int]] = set()
        self.setup_failed: dict[str, str] = {}
        self.finished_rounds = 0
        self.records: dict[str, list[Record]] = {}
        #: The measurement (attempt) of the ends made beside each round's points, by round.
        self.ends_beside: dict[int, int] = {}
        #: A point read beyond both ends: the host moved since they were measured, so from
        #: then on every round measures them beside its points.
        self.ends_stale = False
        #: A verdict judged by the CPU time in host pulses, by point, until a measurement
        #: again confirms it (`_settled`).
        self.provisional: dict[str, str] = {}

    # The log.
    def _start_entry(self) -> dict:
        return {"event": START, "version": LOG_FORMAT_VERSION, "kind": self.kind,
                "points": [p.label for p in self.points],
                "refs": [p.ref for p in self.points],
                "titles": [p.title for p in self.points],
                "metric": self.judge.metric.name, "threshold": self.judge.threshold}

    def _write(self, entry: dict) -> None:
        append_entry(self.log_file, entry)

    def _replay(self) -> None:
        entries = read_entries(self.log_file)
        start = self._start_entry()
        starts = [e for e in entries if e["event"] == START]
        if not starts:
            self._write(start)
            return
        mine = {k: start[k] for k in ("kind", "points", "metric", "threshold")}
        theirs = {k: starts[0].get(k) for k in mine}
        if mine != theirs:
            raise BisectError(
                f"{self.log_file} is the log of another bisection ({theirs['kind']} "
                f"{_span(theirs['points'])}, metric {theirs['metric']}, threshold "
                f"{theirs['threshold']}); give another --output-dirname, or remove it to "
                "start afresh")
        rounds: dict[int, list[str]] = {}
        for entry in entries:
            label = entry.get("point")
            if entry["event"] == MEASURED and label in self.index:
                self.measured.add((label, int(entry.get("attempt", 0))))
            elif entry["event"] == SETUP and label in self.index:
                self.setup_failed[label] = entry.get("reason", "")
            elif entry["event"] == ROUND:
                rounds[int(entry["round"])] = list(entry.get("points", []))
                if entry.get("ends_attempt") is not None:
                    self.ends_beside[int(entry["round"])] = int(entry["ends_attempt"])
            elif entry["event"] == VERDICT and label in self.index:
                verdict = entry.get("verdict")
                self.ends_stale |= bool(entry.get("beyond_ends"))
                self.outcome.reasons[label] = entry.get("reason", "")
                if entry.get("provisional") in (GOOD, BAD):
                    self.provisional[label] = entry["provisional"]
                if verdict in (GOOD, BAD, SKIPPED):
                    self.outcome.verdicts[label] = verdict
                    if 0 < self.index[label] < len(self.points) - 1:
                        self.search.record(self.index[label], verdict)
        self.finished_rounds = sum(
            1 for labels in rounds.values()
            if all(label in self.outcome.verdicts for label in labels))
        self.outcome.rounds = len(rounds)
        if entries:
            self.say(f"resuming from {self.log_file}: {len(self.outcome.verdicts)} point(s) "
                     f"judged, {len(self.measured)} measurement(s) done")

    # Measuring and judging.
    def _todo(self, points: Sequence[Point], attempt: int) -> list[Point]:
        return [p for p in points
                if (p.label, attempt) not in self.measured and p.label not in self.setup_failed]

    def _measure(self, points: Sequence[Point], attempt: int,
                 processes: Optional[int] = None, beside: bool = False) -> None:
        todo = self._todo(points, attempt)
        if not todo:
            return
        if not beside:
            processes = self.settings.processes_for(attempt)
        self.say(("measuring the ends again beside the round's points:" if beside else
                  "measuring again" if attempt else "measuring") + " "
                 + ", ".join(p.label for p in todo)
                 + (f" with {processes} processes" if attempt and not beside else ""))
        failed = self.measurer.measure(todo, processes, attempt)
        self._record_measured([(point, processes, attempt) for point in todo], failed)

    def _measure_at_once(self, points: Sequence[Point], attempt: int, ends_attempt: int) -> None:
        """The round's points and both ends, all at the same time (`measure_at_once`)."""
        good, bad = self.points[0], self.points[-1]
        # The ends with the points' processes: as long a sweep, spread over the same time.
        processes = self.settings.processes_for(attempt)
        batch = [(end, processes, ends_attempt) for end in self._todo([good], ends_attempt)]
        batch += [(point, processes, attempt) for point in self._todo(points, attempt)]
        batch += [(end, processes, ends_attempt) for end in self._todo([bad], ends_attempt)]
        if not batch:
            return
        self.say("measuring at once, the ends beside the round's points: "
                 + ", ".join(point.label for point, _, _ in batch)
                 + (f" with {processes} processes" if attempt else ""))
        self._record_measured(batch, self.measurer.measure_at_once(batch))

    def _record_measured(self, batch: Sequence[tuple[Point, Optional[int], int]],
                         failed: dict[str, str]) -> None:
        for point, processes, attempt in batch:
            if point.label in failed:
                self.setup_failed[point.label] = failed[point.label]
                self._write({"event": SETUP, "point": point.label, "reason": failed[point.label]})
            else:
                self.measured.add((point.label, attempt))
                self._write({"event": MEASURED, "point": point.label, "attempt": attempt,
                             "processes": processes})

    def _verdict(self, point: Point, judgement: Judgement, round_number: int,
                 attempt: int, provisional: Optional[str] = None) -> None:
        self.outcome.judgements[point.label] = judgement
        self.outcome.reasons[point.label] = judgement.reason
        if judgement.verdict in (GOOD, BAD, SKIPPED):
            self.outcome.verdicts[point.label] = judgement.verdict
        entry = {"event": VERDICT, "point": point.label, "round": round_number,
                 "attempt": attempt, "verdict": judgement.verdict, "reason": judgement.reason,
                 "figures": [f.as_json() for f in judgement.figures]}
        if judgement.beyond_ends:
            entry["beyond_ends"] = self.ends_stale = True
        if provisional is not None:
            self.provisional[point.label] = entry["provisional"] = provisional
        self._write(entry)
        self.say(f"  {point.label}: {judgement.verdict} ({judgement.reason})")

    def _ends(self) -> bool:
        """Measure and check the ends; False (with the problem set) where they do not differ."""
        good, bad = self.points[0], self.points[-1]
        if self.outcome.verdicts.get(good.label) == GOOD and \
                self.outcome.verdicts.get(bad.label) == BAD:
            self.records = self.measurer.records()
            return True
        round_number = self.finished_rounds + 1
        self._write({"event": ROUND, "round": round_number, "points": [good.label, bad.label]})
        self.outcome.rounds = max(self.outcome.rounds, round_number)
        for attempt in range(self.settings.remeasure + 1):
            # Ends that do not differ are measured again, as an inconclusive point is.
            self._measure([good, bad], attempt)
            for end in (good, bad):
                if end.label in self.setup_failed:
                    raise BisectError(f"the {'good' if end is good else 'bad'} end {end.label} "
                                      f"could not be set up: {self.setup_failed[end.label]}")
            self.records = self.measurer.records()
            good_records = self.records.get(good.label, [])
            bad_records = self.records.get(bad.label, [])
            if not good_records or not bad_records:
                missing = good.label if not good_records else bad.label
                raise BisectError(f"the sweep of {missing} recorded no line: see its log in "
                                  "the bisection's folder")
            differing = self.judge.differing(good_records, bad_records)
            if differing:
                break
        if not differing:
            self.outcome.problem = (
                f"the ends do not differ: no experiment is worse at {bad.label} than at "
                f"{good.label} by more than the threshold ({self.judge.threshold:.0%}) with "
                "significance, nor newly failing; nothing to bisect (measure the ends again, "
                "or lower --threshold)")
            self._verdict(good, Judgement(INCONCLUSIVE, self.outcome.problem,
                                          [self.judge.figure(r) for r in good_records]),
                          round_number, 0)
            self._verdict(bad, Judgement(INCONCLUSIVE, self.outcome.problem,
                                         [self.judge.figure(r) for r in bad_records]),
                          round_number, 0)
            return False
        reasons = "; ".join(f"{c.new.model} {c.verdict}"
                            + (f" {c.ratio - 1.0:+.1%}" if c.ratio is not None else "")
                            for c in differing)
        self._verdict(good, Judgement(GOOD, "the good end",
                                      [self.judge.figure(r) for r in good_records]),
                      round_number, 0)
        self._verdict(bad, Judgement(BAD, f"the bad end: {reasons}",
                                     [self.judge.figure(r) for r in bad_records]),
                      round_number, 0)
        self.finished_rounds = round_number
        return True

    def _ends_flagged(self) -> bool:
        """Whether the ends' latest lines say the host's speed moves (flagged unreliable:
        contention, runs that vary): a point is then judged against ends measured beside it,
        not minutes before it."""
        return any(record.unreliable for end in (self.points[0], self.points[-1])
                   for record in self.records.get(end.label, []))

    def _next_end_attempt(self) -> int:
        ends = {self.points[0].label, self.points[-1].label}
        return 1 + max((attempt for label, attempt in self.measured if label in ends),
                       default=-1)

    def _measure_with_ends(self, points: Sequence[Point], attempt: int,
                           ends_attempt: Optional[int]) -> None:
        """Measure the points; with `ends_attempt`, the ends too, as measurement
        `ends_attempt` of each, at the sweep's own processes: with --jobs over 1, the points
        and both ends at the same time (sweeps measured side by side load the host for one
        another); with one job, the good end just before the point and the bad end just
        after."""
        good, bad = self.points[0], self.points[-1]
        if ends_attempt is not None and self.settings.jobs > 1:
            self._measure_at_once(points, attempt, ends_attempt)
            return
        # The ends with the points' processes: as long a sweep, spread over as much time.
        processes = self.settings.processes_for(attempt)
        if ends_attempt is not None:
            self._measure([good], ends_attempt, processes, beside=True)
        self._measure(points, attempt)
        if ends_attempt is not None:
            self._measure([bad], ends_attempt, processes, beside=True)

    def _judge(self, point: Point) -> Judgement:
        if point.label in self.setup_failed:
            return Judgement(SKIPPED, f"setup failed: {self.setup_failed[point.label]}")
        records = self.records.get(point.label, [])
        return self.judge.judge(records, self.records[self.points[0].label],
                                self.records[self.points[-1].label])

    def _round(self, chosen: list[int]) -> None:
        round_number = self.finished_rounds + 1
        points = [self.points[i] for i in chosen]
        ends_attempt = self.ends_beside.get(round_number)
        if ends_attempt is None and (self._ends_flagged() or self.settings.jobs > 1
                                     or self.ends_stale):
            # Points measured at once load the host for one another as the ends, measured
            # before them, were not loaded: the ends are measured with them. So are they
            # once a point read beyond both ends.
            ends_attempt = self._next_end_attempt()
        entry = {"event": ROUND, "round": round_number, "points": [p.label for p in points]}
        if ends_attempt is not None:
            self.ends_beside[round_number] = entry["ends_attempt"] = ends_attempt
        self._write(entry)
        self.outcome.rounds = max(self.outcome.rounds, round_number)
        self.say(f"round {round_number}: " + ", ".join(p.label for p in points))
        pending = points
        attempt = 0
        while pending:
            if attempt and ends_attempt is None and self.ends_stale:
                # The round's first measurement read beyond both ends: its points are
                # measured again beside the ends from now on (logged for a resume).
                ends_attempt = self._next_end_attempt()
                self.ends_beside[round_number] = ends_attempt
                self._write({**entry, "ends_attempt": ends_attempt})
            elif attempt and ends_attempt is not None:
                ends_attempt = self._next_end_attempt()
            self._measure_with_ends(pending, attempt, ends_attempt)
            self.records = self.measurer.records()
            still = []
            for point in pending:
                judgement, disagree = self._settled(point, self._judge(point))
                # Confirming a provisional verdict takes a measurement of its own: an
                # inconclusive one is measured again as the budget allows, as any other.
                budget = self.settings.remeasure + int(point.label in self.provisional)
                if judgement.verdict in (GOOD, BAD) and judgement.by_pulses and \
                        point.label not in self.provisional and attempt < self.settings.remeasure:
                    self._verdict(point, Judgement(
                        INCONCLUSIVE, f"{judgement.verdict} in host pulses, to be confirmed by "
                        f"a measurement again: {judgement.reason}", judgement.figures),
                        round_number, attempt, provisional=judgement.verdict)
                    still.append(point)
                    continue
                if judgement.verdict == INCONCLUSIVE and attempt < budget and not disagree:
                    self._verdict(point, judgement, round_number, attempt)
                    still.append(point)
                    continue
                if judgement.verdict == INCONCLUSIVE:
                    judgement = Judgement(SKIPPED, f"inconclusive after {attempt + 1} "
                                          f"measurement(s): {judgement.reason}",
                                          judgement.figures)
                self._verdict(point, judgement, round_number, attempt)
                self.search.record(self.index[point.label], judgement.verdict)
            pending = still
            attempt += 1
        self.finished_rounds = round_number

    def _settled(self, point: Point, judgement: Judgement) -> tuple[Judgement, bool]:
        """A point judged in host pulses once before: the same verdict again stands; the
        other one leaves it inconclusive for good (the measurements disagree: True); none
        leaves it inconclusive, to be measured again while the budget lasts."""
        earlier = self.provisional.get(point.label)
        if earlier is None or judgement.verdict == earlier:
            return judgement, False
        if judgement.verdict == INCONCLUSIVE:
            return Judgement(INCONCLUSIVE, f"not yet confirmed: {earlier} in host pulses, then "
                             f"inconclusive ({judgement.reason})", judgement.figures), False
        return Judgement(INCONCLUSIVE, f"the measurements disagree: {earlier} in host pulses, "
                         f"then {judgement.verdict} ({judgement.reason})", judgement.figures), True

    def run(self) -> Outcome:
        """Bisect to the end (or to a KeyboardInterrupt: the log holds every step so far)."""
        self._replay()
        if not self._ends():
            self._write({"event": ANSWER, "first_bad": None, "last_good": None,
                         "skipped_between": [], "problem": self.outcome.problem})
            return self.outcome
        while not self.search.done:
            self._round(self.search.next_points(self.settings.jobs))
        answer = self.search.answer()
        self.outcome.answer = answer
        self._write({"event": ANSWER, "first_bad": self.points[answer.first_bad].label,
                     "last_good": self.points[answer.last_good].label,
                     "skipped_between": [self.points[i].label for i in answer.skipped_between],
                     "contradictions": [self.points[i].label for i in answer.contradictions],
                     "rounds": self.outcome.rounds, "problem": ""})
        return self.outcome


def _span(labels: Sequence[str]) -> str:
    return f"{labels[0]}..{labels[-1]}" if labels else "(none)"
