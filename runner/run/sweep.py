"""Run a plan: one child per experiment, one line per experiment, its progress shown
(runner/run/record/progress.py: a bar on a terminal, a log line per experiment elsewhere).

Several runners may share the results file: each experiment is claimed first
(runner/run/record/claims.py), skipped when the results hold it already, waited for when another
live runner runs it, and taken over when that runner is gone. A runner ends when every
experiment of its plan is recorded, by itself or by others.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

from core.schema import Status, error_headline, stack_label_of
from models.base import Suite
from runner.run.record.claims import Claims, ClaimStatus, claim_key_of
from runner.run.dispatch.local import Dispatcher
from runner.run.record.slow_periods import READ_INTERVAL_S, FastStateWait, fast_bound_of
from runner.run.record.lines import strict_line
from runner.run.record.progress import Progress
from runner.plan.matrix import Plan, PlannedExperiment

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    """The lines this sweep wrote, in order, and what other runners did meanwhile."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    #: Experiments of the plan that other runners recorded while this one ran.
    recorded_elsewhere: int = 0
    #: Lines left out because another runner recorded the experiment first.
    left_out: int = 0
    #: Claims of runners that were gone, taken over by this one.
    taken_over: int = 0


def run_plan(
    plan: Plan,
    suite: Suite,
    dispatcher: Dispatcher,
    claims: Claims,
    report: SweepReport,
    show_progress: bool = True,
    no_skip: bool = False,
    durations: Optional[Mapping[str, float]] = None,
    remeasure_slow: int = 0,
    slow_wait_s: float = 0.0,
) -> SweepReport:
    """Run every planned experiment no other runner records, up to the dispatcher's capacity
    at a time, appending each line as soon as it exists.

    Experiments start longest first by `durations` (seconds per experiment key, from
    earlier runs; see `expected_durations`), those never timed before the others.
    `report` is filled as lines are written, so a caller that catches KeyboardInterrupt
    still knows what was finished.
    `show_progress` False shows no progress at all (--no-progress).

    With `remeasure_slow`, an experiment whose line says it was measured in a slow period
    (`summary.slow_period.flagged`) goes to the end of the queue, its claim kept, and runs
    again, up to that many times (`Remeasures`), once the host reads fast or after
    `slow_wait_s` seconds (runner/run/record/slow_periods.py: `FastStateWait`).
    """
    pending = longest_first(plan.experiments, durations or {})
    in_flight: dict[Future, PlannedExperiment] = {}
    remeasures = Remeasures(remeasure_slow, slow_wait_s)
    waiting_told = False
    with claims, Progress(len(pending), enabled=show_progress) as progress:
        try:
            while pending or in_flight:
                busy, waiting = [], []
                while pending and len(in_flight) < dispatcher.capacity:
                    planned = pending.pop(0)
                    if remeasures.holds(planned):  # claimed already: measured again
                        if not remeasures.ready(planned):  # the host is not fast yet
                            waiting.append(planned)
                            continue
                        in_flight[dispatcher.submit(planned)] = planned
                        continue
                    status, _ = claims.claim(planned.fingerprint, key_of(planned))
                    if status is ClaimStatus.BUSY:
                        busy.append(planned)
                        continue
                    written = len(report.lines)
                    if status is ClaimStatus.CLAIMED:
                        future = _start(planned, suite, dispatcher, claims, report, no_skip)
                        if future is not None:
                            in_flight[future] = planned
                            progress.started(describe(planned))
                            continue
                    progress.finished(describe(planned), report.lines[-1]
                                      if len(report.lines) > written else None)
                dispatcher.set_backlog(len(pending))
                if waiting and not in_flight:
                    time.sleep(remeasures.seconds_to_next_read())
                if in_flight:
                    done, _ = wait(in_flight, return_when=FIRST_COMPLETED,
                                   timeout=remeasures.seconds_to_next_read() if waiting else None)
                    for future in done:
                        planned = in_flight.pop(future)
                        line = remeasures.line_to_record(planned, future.result())
                        if line is None:
                            pending.append(planned)
                            continue
                        written = len(report.lines)
                        _record(planned, line, claims, report)
                        progress.finished(describe(planned),
                                          line if len(report.lines) > written else None)
                if busy and not waiting_told:
                    log.info("%d experiment(s) are being run by other runners; waiting for "
                             "them", len(busy))
                    waiting_told = True
                if busy and not pending and not in_flight and not waiting:
                    claims.wait()
                pending = busy + pending + waiting
        except BaseException:
            dispatcher.cancel()
            raise
        finally:
            dispatcher.close()
            for future, planned in in_flight.items():
                _record_if_finished(planned, future, claims, report, remeasures)
            for planned, line in remeasures.held_lines(in_flight.values()):
                _record(planned, line, claims, report)
    report.recorded_elsewhere = claims.counts.recorded_elsewhere
    report.left_out = claims.counts.left_out
    report.taken_over = claims.counts.taken_over
    return report


def _start(planned: PlannedExperiment, suite: Suite, dispatcher: Dispatcher, claims: Claims,
           report: SweepReport, no_skip: bool) -> Optional[Future]:
    """Dispatch a claimed experiment, or record its skipped line (then None)."""
    try:
        reason = None if no_skip else suite.skip_reason(
            planned.model.model_name, planned.experiment.test, precision=planned.experiment.precision)
        if not reason:
            return dispatcher.submit(planned)
        line = dispatcher.skipped_line(planned, reason)
    except BaseException:
        claims.release(key_of(planned))
        raise
    _record(planned, line, claims, report)
    return None


def _record(planned: PlannedExperiment, line: dict[str, Any], claims: Claims,
            report: SweepReport) -> None:
    line = strict_line(line)
    try:
        written = claims.record(planned.fingerprint, line, key_of(planned))
    finally:
        claims.release(key_of(planned))
    if not written:
        return
    report.lines.append(line)
    if line["status"] == Status.FAILED.value:
        log.warning("%s failed: %s", describe(planned),
                    error_headline(line["metrics"].get("error", "")) or "no reason given")


def _record_if_finished(planned: PlannedExperiment, future: Future, claims: Claims,
                        report: SweepReport, remeasures: Optional["Remeasures"] = None) -> None:
    """After a stop: keep the line of an experiment that finished meanwhile (or the line
    held for it while it was measured again); release the claim of one that did not."""
    if future.done() and not future.cancelled() and future.exception() is None:
        line = future.result()
        if remeasures is not None:
            line = remeasures.final_line(planned, line)
        _record(planned, line, claims, report)
    elif remeasures is not None and remeasures.holds(planned):
        _record(planned, remeasures.final_line(planned, None), claims, report)
    else:
        claims.release(key_of(planned))


def slow_ratio(line: Mapping[str, Any]) -> Optional[float]:
    """The slow-period ratio of a flagged line (runner/run/record/slow_periods.py), else None."""
    verdict = (line.get("summary") or {}).get("slow_period")
    if isinstance(verdict, dict) and verdict.get("flagged"):
        ratio = verdict.get("ratio")
        return float(ratio) if isinstance(ratio, (int, float)) else float("inf")
    return None


class Remeasures:
    """Experiments measured again because their line was flagged as slow (--remeasure-slow).

    The flagged line is held (its claim kept) while the experiment waits at the end of the
    queue, and, with `wait_s`, until the host reads fast (`FastStateWait`, for a line that
    carries its fast bound). The line recorded is the first one not flagged, else, once the
    attempts are spent, the least slow; it lists every earlier attempt's ratio
    (`summary.slow_period.earlier_ratios`) and what each wait before an attempt found
    (`summary.slow_period.fast_state_waits`)."""

    def __init__(self, attempts: int, wait_s: float = 0.0,
                 new_wait: Optional[Callable[[float, float], FastStateWait]] = None) -> None:
        self.attempts = attempts
        self.wait_s = wait_s
        self.new_wait = new_wait or FastStateWait
        self._held: dict[str, tuple[PlannedExperiment, list[dict[str, Any]]]] = {}
        self._waits: dict[str, FastStateWait] = {}
        self._waited: dict[str, list[dict[str, Any]]] = {}

    def holds(self, planned: PlannedExperiment) -> bool:
        return planned.fingerprint in self._held

    def ready(self, planned: PlannedExperiment) -> bool:
        """Whether a held experiment may be submitted again now (its wait, if any, is over)."""
        waiting = self._waits.get(planned.fingerprint)
        if waiting is None:
            return True
        if not waiting.ready():
            return False
        record = self._waits.pop(planned.fingerprint).record()
        self._waited.setdefault(planned.fingerprint, []).append(record)
        log.info("%s: %s after %.0f s; measuring it again", describe(planned),
                 "the host reads fast" if record["reached"] else "the host did not read fast",
                 record["waited_s"])
        return True

    def seconds_to_next_read(self) -> float:
        """Until the next read of the host pulse of any wait (READ_INTERVAL_S without one)."""
        return min((each.seconds_to_next_read() for each in self._waits.values()),
                   default=READ_INTERVAL_S)

    def line_to_record(self, planned: PlannedExperiment,
                       line: dict[str, Any]) -> Optional[dict[str, Any]]:
        """The line to record now, or None when the experiment is to be measured again."""
        earlier = self._held.get(planned.fingerprint, (planned, []))[1]
        ratio = slow_ratio(line)
        if ratio is not None and len(earlier) < self.attempts:
            self._held[planned.fingerprint] = (planned, [*earlier, line])
            bound = fast_bound_of(line)
            if self.wait_s > 0 and bound is not None:
                self._waits[planned.fingerprint] = self.new_wait(bound, self.wait_s)
            log.info("%s was measured in a slow period (%.2fx); it will be measured again",
                     describe(planned), ratio)
            return None
        return self.final_line(planned, line)

    def final_line(self, planned: PlannedExperiment,
                   line: Optional[dict[str, Any]]) -> dict[str, Any]:
        """The line kept of the held ones and `line`: the first not flagged, else the least
        slow; with the earlier attempts' ratios."""
        attempts = [*self._held.pop(planned.fingerprint, (planned, []))[1], *([line] if line else [])]
        chosen = min(attempts, key=lambda each: slow_ratio(each) or 0.0)
        waits = self._waited.pop(planned.fingerprint, [])
        self._waits.pop(planned.fingerprint, None)
        if len(attempts) > 1 or waits:
            verdict = chosen.setdefault("summary", {}).setdefault("slow_period", {})
            verdict["earlier_ratios"] = [slow_ratio(each) for each in attempts if each is not chosen]
            if waits:
                verdict["fast_state_waits"] = waits
        return chosen

    def held_lines(self, running: Iterable[PlannedExperiment]
                   ) -> list[tuple[PlannedExperiment, dict[str, Any]]]:
        """After a stop: the held lines of experiments not running now, to be recorded."""
        busy = {planned.fingerprint for planned in running}
        waiting = [planned for fingerprint, (planned, _) in list(self._held.items())
                   if fingerprint not in busy]
        return [(planned, self.final_line(planned, None)) for planned in waiting]


def duration_key(model_name: str, stack_label: str, experiment: Mapping[str, Any]) -> str:
    """What makes two experiments take about as long: model, stack, test, precision,
    accelerator and batch size."""
    return "|".join(str(part) for part in (
        model_name, stack_label, experiment.get("test"), experiment.get("precision"),
        experiment.get("accelerator"), experiment.get("batch_size")))


def planned_duration_key(planned: PlannedExperiment) -> str:
    return duration_key(planned.model.model_name, planned.label, planned.experiment.to_dict())


def expected_durations(lines: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The median wall time of each experiment key in earlier lines (skipped ones left out)."""
    seen: dict[str, list[float]] = {}
    for line in lines:
        summary, model, experiment = (_object(line, part) for part in ("summary", "model",
                                                                       "experiment"))
        wall = summary.get("wall_time")
        if line.get("status") == Status.SKIPPED.value or not isinstance(wall, (int, float)):
            continue
        key = duration_key(str(model.get("model_name", "")), stack_label_of(line), experiment)
        seen.setdefault(key, []).append(float(wall))
    return {key: statistics.median(walls) for key, walls in seen.items()}


def _object(line: Mapping[str, Any], part: str) -> Mapping[str, Any]:
    """The line's `part` where it is a JSON object, else {} (hand-written lines)."""
    value = line.get(part)
    return value if isinstance(value, dict) else {}


def longest_first(experiments: Iterable[PlannedExperiment],
                  durations: Mapping[str, float]) -> list[PlannedExperiment]:
    """Never-timed experiments first, training ones before inference ones (a training
    iteration runs the forward, the backward and the optimizer, and compiles two graphs),
    then the others, longest first: the longest-processing-time rule, which keeps every
    slot busy until the end."""
    def order(planned: PlannedExperiment) -> tuple[float, bool]:
        known = durations.get(planned_duration_key(planned))
        if known is None:  # never timed: as if infinitely long, training first
            return -math.inf, planned.experiment.test != "train"
        return -known, False

    return sorted(experiments, key=order)  # stable: ties stay in plan order


def key_of(planned: PlannedExperiment) -> str:
    """The key of the experiment's claim (runner/run/record/claims.py: `claim_key`)."""
    return claim_key_of(planned.model, planned.experiment)


def describe(planned: PlannedExperiment) -> str:
    experiment = planned.experiment
    text = f"{planned.model.model_name} {experiment.accelerator} {planned.label} {experiment.test}"
    if experiment.precision != "fp32":
        text += f" {experiment.precision}"
    return text
