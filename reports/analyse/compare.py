"""Compare two sets of results experiment by experiment, to gate changes in CI.

An experiment regressed when its median time per iteration grew by more than the
threshold (default 7%) and the growth is significant from the repeats (one-sided
permutation test, p <= alpha), or when it passed in BASE and fails in NEW. The run as a
whole regressed when the geometric mean of new/base medians grew by more than 1%.
With fewer than 2 repeats on either side there is no test and the threshold alone decides.

A change beyond the threshold is unreliable, not a regression or an improvement, when either
line is flagged (`summary.unreliable`), or when the lines' own figures show that the machine,
not the code, changed speed between them: the eager runs timed interleaved in the same child
(the paired speedup) moved the same way by more than the threshold, or the reference workload
did (`summary.slow_period.ratio`). On a shared CPU the whole host can be slower or faster in
one run than in the other while each line's runs stay steady, so that neither is flagged. The
geometric mean leaves them out, and a note says how many there are; with `count_unreliable`
(`--count-unreliable`) they are judged like any other change and counted.

Besides the time, every measured figure where less (or more) is better (core.measures:
`lower_is_better`; compile time, peak memory, TFLOP/s...) is compared for the experiments
that ran on both sides: those that moved by more than the threshold are listed, better or
worse, and never change the verdict.

Where both lines of a CUDA experiment hold the digests of the kernels one iteration launched
(`summary.device_busy.digests`), a change's note says when they differ: other kernels (the
compiled code differs), or the same kernels launched with other grids or blocks, which is the
compile's own tuning (each compile times the candidates again: a card-bound figure moved 6%
between two compiles so). The verdict stays the figure's.

On a host-bound line (`summary.host_bound`, either side: the host's launching, not the
device, set the time) the latency is the host's speed, which moves between runs by tens of
percent. There the gate judges the device's busy time per iteration instead (CUDA's kernels,
summed: `summary.device_busy_ms`), with the same threshold: the kernels took longer or
shorter, a regression or an improvement; a latency that moved beyond the threshold while the
busy time held is unreliable (the host's speed, or its own work, changed). A host-bound line
without the busy time on both sides keeps the latency's verdict, and the note says why.

On a contended CPU line (`summary.contended`, either side: other processes used the child's
cores during its timed runs) the latency holds the time the child waited for its core, and
the timing thread's CPU time per iteration (`summary.cpu_time_ms`: one compute thread that did
the process's work, child/trust.py) does not, though sharing a core with another process
raises it too (1 to 34% beside a spinning process, against 2.0 to 2.7x in the latency; more
beside processes that use memory: docs/timing.md). Where both lines have it, a flagged line
keeps its verdict (unreliable) with the CPU time's change in the note; where the flags are
trusted (no side flagged: the bisection's --trust-flagged) or counted (`count_unreliable`),
the CPU time decides the same way the busy time does. The core's own speed moves the CPU time
as much as the latency: a shared host's core runs at times 1.5 to 2x slower, for a second or
for minutes, with nothing else running in the machine. The host pulse read after each timed
run (child/reference.py) tells it: where both lines hold the timing thread's CPU time over it
(`summary.cpu_time.pulse_ms`) and it and the CPU time moved the same way beyond the threshold
and `CORE_SPEED_BOUND` (20%), the CPU time in pulses decides where the CPU time would
(`summary.cpu_time.in_pulses`: each run's CPU time over the pulse's right after it; across
two speeds it moved 4.5 to 10% where the CPU time moved 36 to 59%: docs/timing.md); else the
change is unreliable whatever the CPU time says (counted, with `count_unreliable`, by it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from core.figures import compiled_code_difference
from core.measures import Measure, compared_measures
from core.schema import error_headline
from reports.read.record import Record
from reports.stats import geomean, permutation_p_value

DEFAULT_THRESHOLD = 0.07
DEFAULT_GEOMEAN_THRESHOLD = 0.01
DEFAULT_ALPHA = 0.05
#: How far the host pulse's CPU time, and the CPU time per iteration with it, must move the
#: same way (or the threshold, if larger) to say that the core itself changed speed: the
#: speeds of a shared host's core are 1.5 to 2x apart, and the pulse's medians moved by up
#: to 12% within one speed, and once, alone, by 42% (docs/timing.md).
CORE_SPEED_BOUND = 0.2

REGRESSED = "regressed"
IMPROVED = "improved"
UNCHANGED = "unchanged"
NOISE = "within noise"
#: A change beyond the threshold where either side's timings were flagged (contention or
#: runs that vary too much, docs/timing.md): neither a regression nor an improvement.
UNRELIABLE = "unreliable"
NEWLY_FAILING = "newly failing"
FIXED = "fixed"
NOT_COMPARED = "not compared"


@dataclass
class Change:
    """One experiment held by both sides."""

    base: Record
    new: Record
    ratio: Optional[float] = None
    p_value: Optional[float] = None
    verdict: str = NOT_COMPARED
    reason: str = ""
    #: On a host-bound line with the device's busy time on both sides: new over base.
    busy_ratio: Optional[float] = None
    #: On a contended CPU line with the timing thread's CPU time on both sides: new over base.
    cpu_ratio: Optional[float] = None
    #: There, the timing thread's CPU time over the host pulse (`summary.cpu_time.pulse_ms`),
    #: new over base, where both lines have it; and whether it moved beyond the threshold:
    #: the core itself ran at another speed, which moves the CPU time too.
    pulse_ratio: Optional[float] = None
    core_moved: bool = False
    #: Where the core moved and both lines have it: the CPU time in pulses, new over base.
    in_pulses_ratio: Optional[float] = None

    @property
    def change(self) -> Optional[float]:
        """Relative change of the median time (+0.10 = 10% slower)."""
        return None if self.ratio is None else self.ratio - 1.0


@dataclass
class FigureChange:
    """A measured figure that moved beyond the threshold between BASE and NEW."""

    change: Change
    measure: Measure
    base: float
    new: float

    @property
    def ratio(self) -> Optional[float]:
        """NEW over BASE (None from zero)."""
        return self.new / self.base if self.base else None

    @property
    def better(self) -> bool:
        return (self.new < self.base) == bool(self.measure.lower_is_better)


def figure_changes(change: Change, threshold: float) -> list[FigureChange]:
    """The compared figures (core.measures) of an experiment that ran on both sides and
    moved by more than `threshold` (any move from zero)."""
    if not (change.base.ran and change.new.ran):
        return []
    moved = []
    for measure in compared_measures():
        base, new = change.base.figure(measure.name), change.new.figure(measure.name)
        if base is None or new is None or base == new:
            continue
        if base == 0 or abs(new / base - 1.0) > threshold:
            moved.append(FigureChange(change, measure, base, new))
    return moved


@dataclass
class Comparison:
    changes: list[Change]
    only_base: list[Record]
    only_new: list[Record]
    geomean_ratio: Optional[float]
    geomean_models: int
    threshold: float
    geomean_threshold: float
    alpha: float
    notes: list[str] = field(default_factory=list)
    #: The other figures that moved beyond the threshold (`figure_changes`).
    figures: list[FigureChange] = field(default_factory=list)

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.verdict in (REGRESSED, NEWLY_FAILING)]

    @property
    def improvements(self) -> list[Change]:
        return [c for c in self.changes if c.verdict in (IMPROVED, FIXED)]

    @property
    def geomean_regressed(self) -> bool:
        return self.geomean_ratio is not None and self.geomean_ratio > 1.0 + self.geomean_threshold

    @property
    def regressed(self) -> bool:
        return bool(self.regressions) or self.geomean_regressed

    @property
    def comparable(self) -> bool:
        """Whether anything could be judged: an experiment held by both sides that passed
        on both (a time to compare) or on one (newly failing, fixed)."""
        return any(c.verdict != NOT_COMPARED for c in self.changes)


def _same_way(moved: float, ratio: float, threshold: float) -> bool:
    """`moved` (a ratio) changed beyond the threshold in the direction of `ratio`."""
    return abs(moved - 1.0) > threshold and (moved - 1.0) * (ratio - 1.0) > 0


def machine_change(base: Record, new: Record, ratio: float, threshold: float) -> str:
    """Why the lines' own figures say the machine changed speed as much as the experiment
    did, or '' when they do not: eager timed interleaved in the same child (the time of
    eager's runs is the experiment's times its paired speedup) or the reference workload
    moved beyond the threshold the same way."""
    found = []
    if base.paired_speedup and new.paired_speedup:
        eager = ratio * new.paired_speedup / base.paired_speedup
        if _same_way(eager, ratio, threshold):
            found.append(f"eager timed in the same child {eager - 1.0:+.1%} too")
    if base.slow_ratio and new.slow_ratio:
        reference = new.slow_ratio / base.slow_ratio
        if _same_way(reference, ratio, threshold):
            found.append(f"the reference workload {reference - 1.0:+.1%} too")
    if not found:
        return ""
    return "the machine changed speed: " + "; ".join(found)


def _judge(change: Change, threshold: float, alpha: float, count_unreliable: bool = False) -> None:
    base, new = change.base, change.new
    if base.passed and not new.passed:
        change.verdict = NEWLY_FAILING
        change.reason = error_headline(new.error)[:160] if new.error.strip() else (
            "no valid time per iteration (status ok)" if new.status == "ok" and not new.ran
            else f"status {new.status}, verification {new.verification_code}"
        )
        return
    if not base.passed and new.passed:
        change.verdict = FIXED
        return
    if not (base.passed and new.passed):
        change.reason = "did not pass on either side"
        return
    change.ratio = new.median_time / base.median_time
    change.p_value = permutation_p_value(base.per_iter_times, new.per_iter_times)
    beyond = abs(change.ratio - 1.0) > threshold
    significant = change.p_value is None or change.p_value <= alpha
    if change.p_value is None:
        change.reason = "fewer than 2 repeats: threshold only"
    flagged = [side for side, record in (("base", base), ("new", new)) if record.unreliable]
    machine = machine_change(base, new, change.ratio, threshold)
    if not beyond:
        change.verdict = UNCHANGED
    elif count_unreliable and (flagged or machine):
        change.verdict = (REGRESSED if change.ratio > 1.0 else IMPROVED) if significant else NOISE
        change.reason = "counted although unreliable (--count-unreliable)"
    elif flagged:
        change.verdict = UNRELIABLE
        change.reason = "; ".join(
            f"{side}: {record.unreliable_reason or 'flagged unreliable'}"
            for side, record in (("base", base), ("new", new)) if record.unreliable)
    elif machine:
        change.verdict = UNRELIABLE
        change.reason = machine
    elif not significant:
        change.verdict = NOISE
    else:
        change.verdict = REGRESSED if change.ratio > 1.0 else IMPROVED
    if base.host_bound or new.host_bound:
        _judge_by_device_busy(change, threshold)
    elif base.contended or new.contended:
        _judge_by_cpu_time(change, threshold, decides=count_unreliable or not flagged,
                           counted=count_unreliable)
    _note_compiled_code(change)


def compiled_code_note(base: Record, new: Record) -> str:
    """What the two lines' kernel digests say of their compiled code (core/figures.py):
    other kernels, or the same kernels tuned otherwise; '' where they agree or a side lacks
    them."""
    return compiled_code_difference(
        {"kernels": base.kernels_digest, "launches": base.launches_digest},
        {"kernels": new.kernels_digest, "launches": new.launches_digest})


def _note_compiled_code(change: Change) -> None:
    # First: the console's note column shows a change's first 60 characters.
    note = compiled_code_note(change.base, change.new)
    if note:
        change.reason = f"{note}; {change.reason}" if change.reason else note


def _judge_by_device_busy(change: Change, threshold: float) -> None:
    """A host-bound line's verdict from the device's busy time per iteration, or the reason
    there is none (module docstring)."""
    base, new = change.base, change.new
    if not (base.device_busy and new.device_busy):
        missing = next(record for record in (base, new) if not record.device_busy)
        why = missing.device_busy_reason or "no device busy time in the line"
        note = f"host-bound: judged by its latency, which follows the host's speed ({why})"
        change.reason = f"{change.reason}; {note}" if change.reason else note
        return
    change.busy_ratio = new.device_busy / base.device_busy
    _judge_by_steady_figure(change, threshold, change.busy_ratio, "host-bound", "device busy time",
                            "the host's speed or its own work changed, not the device's")


def _judge_by_cpu_time(change: Change, threshold: float, decides: bool,
                       counted: bool = False) -> None:
    """A contended CPU line's timing thread's CPU time per iteration, where both lines have
    it: the verdict where it `decides` (no side flagged, or unreliable changes counted),
    else a note before the flag's reasons; unreliable, unless `counted`, where the host
    pulse's CPU time says the core itself changed speed (module docstring)."""
    base, new = change.base, change.new
    if not (base.cpu_time and new.cpu_time):
        return
    change.cpu_ratio = new.cpu_time / base.cpu_time
    if base.cpu_pulse and new.cpu_pulse:
        change.pulse_ratio = new.cpu_pulse / base.cpu_pulse
        bound = max(threshold, CORE_SPEED_BOUND)
        # A pulse that moved alone is the pulse's own noise (it is short: one run of a ms
        # or two can land in another moment of the host than the pulse after it).
        change.core_moved = _same_way(change.pulse_ratio, change.cpu_ratio, bound) and \
            abs(change.cpu_ratio - 1.0) > bound
    if change.core_moved and decides and base.cpu_in_pulses and new.cpu_in_pulses:
        change.in_pulses_ratio = new.cpu_in_pulses / base.cpu_in_pulses
        _judge_by_steady_figure(change, threshold, change.in_pulses_ratio,
                                f"contended, the core's speed {change.pulse_ratio - 1.0:+.1%}",
                                "CPU time over the host pulse's",
                                "other processes took its cores' time, or slowed them, not "
                                "its own work")
        change.reason += f", CPU time per iteration {change.cpu_ratio - 1.0:+.1%}"
        return
    if change.core_moved and not counted:
        note = (f"contended: CPU time per iteration {change.cpu_ratio - 1.0:+.1%} while the "
                f"core's own speed moved: its host pulse {change.pulse_ratio - 1.0:+.1%}")
        keep = change.reason if change.verdict == UNRELIABLE else ""
        change.verdict = UNRELIABLE
        change.reason = f"{note}; {keep}" if keep else note
        return
    if decides:
        _judge_by_steady_figure(change, threshold, change.cpu_ratio, "contended",
                                "CPU time per iteration",
                                "other processes took its cores' time, not its own work")
        return
    # First: the console's note column shows a change's first 60 characters.
    note = f"contended: CPU time per iteration {change.cpu_ratio - 1.0:+.1%}"
    change.reason = f"{note}; {change.reason}" if change.reason else note


def _judge_by_steady_figure(change: Change, threshold: float, ratio: float, where: str,
                            figure: str, latency_only: str) -> None:
    """The verdict by a figure the host does not move (`ratio`: new over base), the latency's
    move beside it; a latency beyond the threshold while the figure held is unreliable."""
    said = f"{figure} {ratio - 1.0:+.1%}"
    if abs(ratio - 1.0) > threshold:
        change.verdict = REGRESSED if ratio > 1.0 else IMPROVED
        change.reason = f"{where}: judged by its {said} (latency {change.change:+.1%})"
    elif abs(change.ratio - 1.0) > threshold:
        change.verdict = UNRELIABLE
        change.reason = f"{where}: latency {change.change:+.1%} while the {said}: {latency_only}"
    else:
        change.verdict = UNCHANGED
        change.reason = f"{where}: {said}"


def compare(
    base: list[Record],
    new: list[Record],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    geomean_threshold: float = DEFAULT_GEOMEAN_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    count_unreliable: bool = False,
) -> Comparison:
    """Match experiments by identity (`Record.key`: every identity field resolved, so lines
    of any version match) and judge each change; unreliable changes are left out of the
    geometric mean unless `count_unreliable`."""
    base_by = {r.key: r for r in base}
    new_by = {r.key: r for r in new}
    changes = []
    for fp, record in base_by.items():
        if fp in new_by:
            change = Change(base=record, new=new_by[fp])
            _judge(change, threshold, alpha, count_unreliable)
            changes.append(change)
    changes.sort(key=lambda c: (c.base.config, c.base.model_label))
    ratios = [c.ratio for c in changes if c.ratio is not None and c.verdict != UNRELIABLE]
    unreliable = sum(c.verdict == UNRELIABLE for c in changes)
    comparison = Comparison(
        changes=changes,
        only_base=[r for fp, r in base_by.items() if fp not in new_by],
        only_new=[r for fp, r in new_by.items() if fp not in base_by],
        geomean_ratio=geomean(ratios),
        geomean_models=len(ratios),
        threshold=threshold,
        geomean_threshold=geomean_threshold,
        alpha=alpha,
        figures=[moved for change in changes for moved in figure_changes(change, threshold)],
    )
    if not changes:
        comparison.notes.append("BASE and NEW hold no experiment in common")
    if unreliable:
        comparison.notes.append(f"{unreliable} unreliable change(s) left out of the verdict and the "
                                "geometric mean (--count-unreliable counts them)")
    return comparison
