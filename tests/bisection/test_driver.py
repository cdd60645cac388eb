"""The bisection's driver and judge against a simulated measurer (tests/bisection/simulated.py):
the rounds a search takes, noise that never names a wrong point, skips, failures, resume."""

import dataclasses
import math

import pytest

from bisection.driver import Bisection, BisectError, Point, Settings
from bisection.judge import Judge
from bisection.search import rounds_bound
from core.files.bisect_log import ANSWER, MEASURED, ROUND, VERDICT, read_entries
from tests.bisection.simulated import SimulatedMeasurer, record

POINTS = [Point(f"c{i:02d}", f"c{i:02d}") for i in range(24)]
FIRST_BAD = 13


def slower_from(first_bad, factor=1.3, base=1e-3):
    return lambda index: base * (factor if index >= first_bad else 1.0)


def bisect(tmp_path, measurer, jobs=1, judge=None, points=POINTS, remeasure=1, name="log"):
    bisection = Bisection(points, measurer, judge or Judge(threshold=0.1),
                          tmp_path / f"{name}.bisect.log", Settings(jobs=jobs, remeasure=remeasure),
                          "commits")
    return bisection.run()


@pytest.mark.parametrize("jobs", [1, 3])
def test_finds_the_slower_commit_within_the_bound(tmp_path, jobs):
    measurer = SimulatedMeasurer(POINTS, slower_from(FIRST_BAD), noise=0.02)
    outcome = bisect(tmp_path, measurer, jobs=jobs)
    assert outcome.answer.exact
    assert POINTS[outcome.answer.first_bad].label == "c13"
    assert POINTS[outcome.answer.last_good].label == "c12"
    assert outcome.rounds <= math.ceil(math.log2(24)) + 2
    assert outcome.rounds <= rounds_bound(24, jobs)
    # Several points at once are measured with both ends beside them, at the same time.
    assert all(len(batch) <= (jobs + 2 if jobs > 1 else 2) for batch in measurer.batches)
    assert len(measurer.measured) == len(set(measurer.measured))


@pytest.mark.parametrize("seed", range(20))
def test_noise_never_names_a_wrong_commit(tmp_path, seed):
    """10% noise on every timing: the answer is the commit, or inconclusive (skipped points
    between), never another commit."""
    measurer = SimulatedMeasurer(POINTS, slower_from(FIRST_BAD), seed=seed, noise=0.10)
    outcome = bisect(tmp_path, measurer, jobs=1 + seed % 3)
    answer = outcome.answer
    assert answer is not None, outcome.problem
    candidates = {POINTS[i].label for i in (*answer.skipped_between, answer.first_bad)}
    assert "c13" in candidates
    if answer.exact:
        assert POINTS[answer.first_bad].label == "c13"


def test_a_commit_that_starts_failing_is_bad(tmp_path):
    measurer = SimulatedMeasurer(POINTS[:8], lambda i: None if i >= 5 else 1e-3)
    outcome = bisect(tmp_path, measurer, points=POINTS[:8])
    assert POINTS[outcome.answer.first_bad].label == "c05"
    assert "newly failing" in outcome.reasons["c05"] or outcome.verdicts["c05"] == "bad"


def test_a_commit_whose_setup_fails_is_skipped_and_the_answer_says_so(tmp_path):
    points = POINTS[:5]
    measurer = SimulatedMeasurer(points, slower_from(3), setup_fails={"c02": "--setup exited with 1"})
    outcome = bisect(tmp_path, measurer, points=points)
    assert outcome.verdicts["c02"] == "skipped"
    assert "setup failed" in outcome.reasons["c02"]
    answer = outcome.answer
    assert points[answer.first_bad].label == "c03"
    entries = read_entries(tmp_path / "log.bisect.log")
    assert any(e["event"] == "setup" and e["point"] == "c02" for e in entries)


def test_an_inconclusive_point_is_measured_again_with_more_processes_then_skipped(tmp_path):
    points = POINTS[:3]
    # The middle point sits halfway: neither like the good end nor like the bad one.
    measurer = SimulatedMeasurer(points, lambda i: [1e-3, 1.15e-3, 1.3e-3][i], noise=0.0)
    outcome = bisect(tmp_path, measurer, points=points, remeasure=1)
    assert measurer.measured.count(("c01", 0)) == 1 and measurer.measured.count(("c01", 1)) == 1
    assert outcome.verdicts["c01"] == "skipped"
    assert "inconclusive after 2 measurement(s)" in outcome.reasons["c01"]
    assert not outcome.answer.exact


def test_ends_that_do_not_differ_give_no_answer(tmp_path):
    measurer = SimulatedMeasurer(POINTS[:4], lambda i: 1e-3)
    outcome = bisect(tmp_path, measurer, points=POINTS[:4])
    assert outcome.answer is None
    assert "do not differ" in outcome.problem
    # Measured once more each (with more processes) before giving up.
    assert sorted(measurer.measured) == [("c00", 0), ("c00", 1), ("c03", 0), ("c03", 1)]


class Stop(SimulatedMeasurer):
    """Raises KeyboardInterrupt at the n-th measure call (after measuring that batch, as a
    sweep stopped after its lines were written would)."""

    def __init__(self, *args, stop_at, **kwargs):
        super().__init__(*args, **kwargs)
        self.stop_at = stop_at

    def _batch(self, batch):
        failed = super()._batch(batch)
        if len(self.batches) == self.stop_at:
            raise KeyboardInterrupt
        return failed


def test_resume_after_ctrl_c_measures_no_point_twice(tmp_path):
    first = Stop(POINTS, slower_from(FIRST_BAD), stop_at=3)
    with pytest.raises(KeyboardInterrupt):
        bisect(tmp_path, first)
    second = SimulatedMeasurer(POINTS, slower_from(FIRST_BAD))
    second._records = dict(first._records)  # the results file keeps the lines
    outcome = bisect(tmp_path, second)
    assert POINTS[outcome.answer.first_bad].label == "c13"
    # The batch stopped mid-way was measured (its lines are in the results) but not logged:
    # only the points never measured are measured by the second run.
    assert not set(first.measured[:-1]) & set(second.measured)
    entries = read_entries(tmp_path / "log.bisect.log")
    measured = [(e["point"], e["attempt"]) for e in entries if e["event"] == MEASURED]
    assert len(measured) == len(set(measured))
    assert [e["event"] for e in entries].count(ANSWER) == 1
    assert max(e["round"] for e in entries if e["event"] == ROUND) <= 7


def test_the_log_of_another_bisection_is_refused(tmp_path):
    bisect(tmp_path, SimulatedMeasurer(POINTS[:4], slower_from(2)), points=POINTS[:4])
    with pytest.raises(BisectError, match="another bisection"):
        bisect(tmp_path, SimulatedMeasurer(POINTS[:5], slower_from(2)), points=POINTS[:5])


def test_every_verdict_is_logged_with_its_figure(tmp_path):
    bisect(tmp_path, SimulatedMeasurer(POINTS[:4], slower_from(2)), points=POINTS[:4])
    verdicts = [e for e in read_entries(tmp_path / "log.bisect.log") if e["event"] == VERDICT]
    assert {e["point"] for e in verdicts} >= {"c00", "c03"}
    assert all(e["figures"] and e["figures"][0]["value"] > 0 for e in verdicts)


def test_a_point_slower_than_both_ends_is_not_bad(tmp_path):
    """A host that slowed down while one point ran makes it slower than the bad end too:
    inconclusive (then skipped), never named the first bad commit."""
    points = POINTS[:3]
    measurer = SimulatedMeasurer(points, lambda i: [1e-3, 1.6e-3, 1.3e-3][i])
    outcome = bisect(tmp_path, measurer, points=points)
    assert outcome.verdicts["c01"] == "skipped"
    assert "beyond both ends" in outcome.reasons["c01"]
    assert not outcome.answer.exact


class DriftingHost(SimulatedMeasurer):
    """A host whose speed moves between measurements (`speeds`, one per batch of sweeps, the
    last one holding): every line of it is flagged unreliable, as a loaded host's are."""

    def __init__(self, *args, speeds=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.speeds = list(speeds)

    def _batch(self, batch):
        speed = self.speeds[min(len(self.batches), len(self.speeds) - 1)]
        before = dict(self._records)
        failed = super()._batch(batch)
        for label, records in self._records.items():
            if before.get(label) is not records:
                self._records[label] = [dataclasses.replace(
                    r, unreliable=True, median_time=r.median_time * speed,
                    per_iter_times=[t * speed for t in r.per_iter_times]) for r in records]
        return failed


#: The host slows down by 1.6x once the ends are measured, then speeds up by 1.4x and back.
DRIFT = (1.0, 1.0, 1.6, 1.6, 1.6, 1.15, 1.15, 1.15, 1.6, 1.6, 1.6, 1.0, 1.0, 1.0, 1.6)


@pytest.mark.parametrize("jobs", [1, 3])
def test_a_drifting_host_is_met_by_ends_measured_beside_each_round(tmp_path, jobs):
    """Judged against ends measured before the drift, every point after it looked 1.6x slower
    than the good end and the search named a commit before the change. With flagged lines
    the ends are measured again beside each round's points (one job: a batch before, one
    after; several: with them, in one batch)."""
    measurer = DriftingHost(POINTS, slower_from(FIRST_BAD), noise=0.01, speeds=DRIFT)
    outcome = bisect(tmp_path, measurer, jobs=jobs,
                     judge=Judge(threshold=0.1, trust_flagged=True))
    answer = outcome.answer
    assert answer is not None, outcome.problem
    assert POINTS[answer.first_bad].label == "c13", outcome.reasons
    assert all(FIRST_BAD - 3 <= i < FIRST_BAD for i in (answer.last_good, *answer.skipped_between))
    entries = read_entries(tmp_path / "log.bisect.log")
    rounds = [e for e in entries if e["event"] == ROUND]
    assert all("ends_attempt" in e for e in rounds[1:])  # every round after the ends'
    ends = [(e["point"], e["attempt"]) for e in entries
            if e["event"] == MEASURED and e["point"] in ("c00", "c23")]
    assert len(ends) == len(set(ends)) >= 2 * len(rounds)
    assert len(measurer.measured) == len(set(measurer.measured))


def unflagged(measurer):
    """The measurer's lines, none flagged unreliable (a host whose drift no flag caught)."""
    records = measurer.records
    measurer.records = lambda: {label: [dataclasses.replace(r, unreliable=False) for r in rs]
                                for label, rs in records().items()}
    return measurer


def test_a_quiet_host_measures_the_ends_once(tmp_path):
    """Lines not flagged and no point beyond both ends: the ends are measured once, and the
    rounds measure their points alone."""
    measurer = SimulatedMeasurer(POINTS, slower_from(FIRST_BAD), noise=0.01)
    outcome = bisect(tmp_path, measurer)
    assert POINTS[outcome.answer.first_bad].label == "c13"
    rounds = [e for e in read_entries(tmp_path / "log.bisect.log") if e["event"] == ROUND]
    assert not any("ends_attempt" in e for e in rounds)
    assert [label for label, _ in measurer.measured].count("c00") == 1


def test_without_flags_a_drift_is_met_once_a_point_reads_beyond_both_ends(tmp_path):
    """The same drift on lines that are not flagged: the first point measured after the host
    slowed down reads slower than the bad end too; from then on the ends are measured beside
    each round's points, and the answer is c13. Judged against the ends of the start, the
    search named a commit before the change."""
    measurer = unflagged(DriftingHost(POINTS, slower_from(FIRST_BAD), noise=0.01, speeds=DRIFT))
    outcome = bisect(tmp_path, measurer, judge=Judge(threshold=0.1, trust_flagged=True))
    assert outcome.answer is not None, outcome.problem
    assert POINTS[outcome.answer.first_bad].label == "c13", outcome.reasons
    entries = read_entries(tmp_path / "log.bisect.log")
    assert any(e.get("beyond_ends") for e in entries if e["event"] == VERDICT)
    rounds = [e for e in entries if e["event"] == ROUND]
    assert "ends_attempt" in rounds[-1]
    assert len(measurer.measured) == len(set(measurer.measured))


def test_ends_measured_in_a_slow_period_are_measured_again_beside_the_points(tmp_path):
    """Both ends measured while the host ran 1.35x slow (a slow period, or a bisection
    resumed minutes later on a faster host), every point after them on the fast host: the
    points read faster than the good end, and the first bad commit faster than the bad end
    by 26%, which judged it good and named the bad end itself (seen in a quiet bisection of
    the suite). Once a point reads beyond both ends, the ends are measured beside it."""
    measurer = unflagged(DriftingHost(POINTS, slower_from(FIRST_BAD), noise=0.01,
                                      speeds=(1.35, 1.0)))
    outcome = bisect(tmp_path, measurer, judge=Judge(threshold=0.1, trust_flagged=True))
    assert outcome.answer is not None, outcome.problem
    assert POINTS[outcome.answer.first_bad].label == "c13", outcome.reasons
    assert POINTS[outcome.answer.last_good].label == "c12", outcome.reasons


def test_ends_found_stale_stay_measured_beside_the_points_after_a_resume(tmp_path):
    """The verdict that read beyond both ends is in the log: a bisection resumed after
    Ctrl-C goes on measuring the ends beside its points."""

    class StopDrifting(DriftingHost):
        def _batch(self, batch):
            failed = super()._batch(batch)
            if len(self.batches) == 3:  # the ends, a point beyond them, the good end again
                raise KeyboardInterrupt
            return failed

    first = unflagged(StopDrifting(POINTS, slower_from(FIRST_BAD), noise=0.01,
                                   speeds=(1.35, 1.0)))
    with pytest.raises(KeyboardInterrupt):
        bisect(tmp_path, first, judge=Judge(threshold=0.1, trust_flagged=True))
    second = unflagged(SimulatedMeasurer(POINTS, slower_from(FIRST_BAD), noise=0.01))
    second._records = dict(first._records)
    outcome = bisect(tmp_path, second, judge=Judge(threshold=0.1, trust_flagged=True))
    assert POINTS[outcome.answer.first_bad].label == "c13", outcome.reasons
    rounds = [e for e in read_entries(tmp_path / "log.bisect.log") if e["event"] == ROUND]
    assert all("ends_attempt" in e for e in rounds[2:])
    assert ("c00", 0) not in second.measured


def test_a_contended_point_is_judged_by_its_timing_threads_cpu_time():
    """Other processes on its cores made the point's latency twice the bad end's: judged by
    its latency it lies beyond both ends (inconclusive); with the flags trusted
    (--trust-flagged), its CPU time per iteration, which the wait does not hold, tells it
    apart (reports/analyse/compare.py)."""
    def line(label, latency, cpu, contended):
        times = [latency * (1.0 + 0.01 * (i % 3 - 1)) for i in range(10)]
        return dataclasses.replace(record(label, times), contended=contended,
                                   unreliable=contended, cpu_time=cpu)

    good, bad = [line("c00", 1.0e-3, 0.98e-3, False)], [line("c23", 1.3e-3, 1.27e-3, False)]
    flagged = Judge(threshold=0.1).judge([line("c13", 2.6e-3, 1.28e-3, True)], good, bad)
    assert flagged.verdict == "inconclusive", flagged.reason
    judge = Judge(threshold=0.1, trust_flagged=True)
    slow = judge.judge([line("c13", 2.6e-3, 1.28e-3, True)], good, bad)
    assert slow.verdict == "bad", slow.reason
    assert "contended: judged by its CPU time per iteration +30.6% (latency +160.0%)" in slow.reason
    quick = judge.judge([line("c12", 2.0e-3, 0.99e-3, True)], good, bad)
    assert quick.verdict == "good", quick.reason
    # Without the CPU time (more than one compute thread) the wait decides: inconclusive.
    unknown = judge.judge([line("c12", 2.0e-3, None, True)], good, bad)
    assert unknown.verdict == "inconclusive", unknown.reason


def test_a_point_timed_on_a_slower_core_is_judged_in_host_pulses():
    """The core ran 1.7x slower through the point's sweep than through the ends' (another
    tenant on the physical core): its CPU time per iteration moved as much as its latency,
    and alone would call a good point bad. The host pulse read after each run moved with
    it: the CPU time in pulses tells the point apart. Without that figure (lines written
    before it) the point is inconclusive."""
    def line(label, cpu, pulse, in_pulses=True):
        times = [cpu * (1.0 + 0.01 * (i % 3 - 1)) for i in range(10)]
        return dataclasses.replace(record(label, times), contended=True, unreliable=False,
                                   cpu_time=cpu, cpu_pulse=pulse,
                                   cpu_in_pulses=cpu / pulse if in_pulses else None)

    good, bad = [line("c00", 1.0e-3, 0.5e-3)], [line("c23", 1.3e-3, 0.5e-3)]
    judge = Judge(threshold=0.1, trust_flagged=True)
    slow_good = judge.judge([line("c12", 1.7e-3, 0.85e-3)], good, bad)
    assert slow_good.verdict == "good", slow_good.reason
    assert "improved (CPU time in host pulses -23.1%) against the bad end" in slow_good.reason
    assert slow_good.by_pulses  # the core's speed moved: provisional
    slow_bad = judge.judge([line("c13", 2.21e-3, 0.85e-3)], good, bad)
    assert slow_bad.verdict == "bad", slow_bad.reason
    unknown = judge.judge([line("c12", 1.7e-3, 0.85e-3, in_pulses=False)], good, bad)
    assert unknown.verdict == "inconclusive", unknown.reason
    assert "the core's speed moved" in unknown.reason


def test_on_the_cpu_the_latency_is_judged_by_the_cpu_time_in_host_pulses():
    """Figures of the 24-commit test model on a 2-core VM, one process a line: the good end's
    process ran on a slow core and the bad end's on a fast one, so that by its latency the
    bad end (30% more work) is the faster. In host pulses the ends differ, and each point
    lies by its work, whatever its core's speed and whatever the flags of contention say.
    A verdict across a change of the core's speed is provisional; one within it stands."""
    def line(label, latency, pulse, in_pulses, contended=False):
        times = [latency * (1.0 + 0.01 * (i % 3 - 1)) for i in range(10)]
        return dataclasses.replace(record(label, times), contended=contended,
                                   unreliable=contended, cpu_time=latency, cpu_pulse=pulse,
                                   cpu_in_pulses=in_pulses)

    good, bad = [line("c00", 3.34e-3, 1.25e-3, 2.44)], [line("c23", 2.31e-3, 0.76e-3, 3.22)]
    judge = Judge(threshold=0.1)
    by_latency = judge.differing([dataclasses.replace(good[0], cpu_in_pulses=None)],
                                 [dataclasses.replace(bad[0], cpu_in_pulses=None)])
    assert by_latency == []  # the bad end read faster
    assert len(judge.differing(good, bad)) == 1
    bad_point = judge.judge([line("c13", 2.40e-3, 0.77e-3, 3.10, contended=True)], good, bad)
    assert bad_point.verdict == "bad", bad_point.reason
    assert "regressed (CPU time in host pulses +27.0%) against the good end" in bad_point.reason
    assert bad_point.by_pulses  # its pulse is the bad end's, not the good end's
    good_point = judge.judge([line("c12", 3.40e-3, 1.25e-3, 2.50)], good, bad)
    assert good_point.verdict == "good", good_point.reason
    assert good_point.by_pulses  # against the bad end, its core ran at another speed
    steady = judge.judge([line("c12", 2.35e-3, 0.8e-3, 2.50)], [line("c00", 2.3e-3, 0.8e-3, 2.44)],
                         [line("c23", 3.0e-3, 0.82e-3, 3.22)])
    assert steady.verdict == "good" and not steady.by_pulses, steady.reason
    # A bad commit of a test run here, on a slow core: +8.8% against the good end, -11.0%
    # against the bad: the threshold alone would call it good; it lies 42% of the way.
    near = judge.judge([line("c17", 3.6e-3, 1.235e-3, 2.906)], [line("c00", 3.2e-3, 1.2e-3, 2.672)],
                       [line("c23", 2.6e-3, 0.78e-3, 3.266)])
    assert near.verdict == "inconclusive", near.reason
    assert "half-way (42% of the way from the good end to the bad)" in near.reason
    # A line without the figure (an older line), or whose CPU time is not its work's (on
    # CUDA, or with several compute threads: no cpu_time): the latency.
    for point in (line("c13", 2.40e-3, 0.77e-3, None),
                  dataclasses.replace(line("c13", 2.40e-3, 0.77e-3, 3.10), cpu_time=None)):
        assert "CPU time in host pulses" not in judge.judge([point], good, bad).reason


class CrowdedHost(SimulatedMeasurer):
    """A host whose sweeps slow one another: each line's times grow by `per_neighbour` for
    every other sweep of its batch (a 2-core machine running three sweeps at once)."""

    per_neighbour = 0.25

    def _batch(self, batch):
        before = dict(self._records)
        failed = super()._batch(batch)
        factor = 1.0 + self.per_neighbour * (len(batch) - 1)
        for label, records in self._records.items():
            if before.get(label) is not records:
                self._records[label] = [dataclasses.replace(
                    r, median_time=r.median_time * factor,
                    per_iter_times=[t * factor for t in r.per_iter_times]) for r in records]
        return failed


def test_points_measured_at_once_are_judged_against_ends_measured_with_them(tmp_path):
    """Three points at once on a host that two sweeps already fill: each point ran 1.5x slower
    than alone, the ends, measured two at once, 1.25x. Judged against those ends every point
    looks 20% slower than the good end, and within the noise of the bad end. Measured in one
    batch with the round's points, the ends meet the same crowd."""
    measurer = CrowdedHost(POINTS, slower_from(FIRST_BAD), noise=0.01)
    outcome = bisect(tmp_path, measurer, jobs=3)
    assert POINTS[outcome.answer.first_bad].label == "c13", outcome.reasons
    assert outcome.answer.exact
    rounds = measurer.batches[1:]
    assert rounds and all(batch[0] == "c00" and batch[-1] == "c23" for batch in rounds)
    assert len(measurer.measured) == len(set(measurer.measured))


class ContendedHost(SimulatedMeasurer):
    """Every line contended (judged by its CPU time, flags trusted), with the host pulse's
    CPU time; `slow` maps a point's measurement to (the core's slowdown, how much more its
    CPU time grew than the pulse's), as a slower core and the processes beside it did."""

    def __init__(self, *args, slow=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.slow = dict(slow or {})

    def _batch(self, batch):
        failed = super()._batch(batch)
        for point, _, attempt in batch:
            core, beside = self.slow.get((point.label, attempt), (1.0, 1.0))
            records = []
            for r in self._records.get(point.label, []):
                cpu = r.median_time * core * beside if r.median_time else None
                records.append(dataclasses.replace(
                    r, contended=True, unreliable=False, cpu_time=cpu, cpu_pulse=0.5e-3 * core,
                    cpu_in_pulses=cpu / (0.5e-3 * core) if cpu else None))
            self._records[point.label] = records
        return failed


def test_a_verdict_in_host_pulses_stands_only_when_a_measurement_again_gives_it(tmp_path):
    """c12's first measurement ran on a core 1.6x slower, and the processes beside it moved
    its CPU time 30% more than its pulse: in pulses it read like the bad end. Measured again
    it read as the good end: the two disagree, and c12 is skipped, not named. Verdicts of
    lines on a core that kept its speed stand at once."""
    measurer = ContendedHost(POINTS, slower_from(FIRST_BAD), noise=0.01,
                             slow={("c12", 0): (1.6, 1.3)})
    outcome = bisect(tmp_path, measurer, judge=Judge(threshold=0.1, trust_flagged=True))
    assert outcome.verdicts["c12"] == "skipped", outcome.reasons["c12"]
    assert "the measurements disagree: bad in host pulses, then good" in outcome.reasons["c12"]
    answer = outcome.answer
    assert POINTS[answer.first_bad].label == "c13" and [
        POINTS[i].label for i in answer.skipped_between] == ["c12"]
    provisional = [e["point"] for e in read_entries(tmp_path / "log.bisect.log")
                   if e["event"] == VERDICT and "provisional" in e]
    assert provisional == ["c12"]
    once = [label for label, verdict in outcome.verdicts.items()
            if verdict in ("good", "bad") and label not in ("c00", "c23")]
    assert once and all((label, 1) not in measurer.measured for label in once)


def test_a_provisional_verdict_measured_again_inconclusive_is_measured_a_third_time(tmp_path):
    """c12 read good in host pulses on a core 1.6x slower (provisional), then half-way between
    the ends beside processes that moved its CPU time 15% (inconclusive: it neither confirms
    nor contradicts), then good again: the verdict stands, and the search does not lose a
    round to a skip."""
    measurer = ContendedHost(POINTS, slower_from(FIRST_BAD), noise=0.01,
                             slow={("c12", 0): (1.6, 1.0), ("c12", 1): (1.0, 1.15)})
    outcome = bisect(tmp_path, measurer, judge=Judge(threshold=0.1, trust_flagged=True))
    assert outcome.verdicts["c12"] == "good", outcome.reasons["c12"]
    assert [attempt for label, attempt in measurer.measured if label == "c12"] == [0, 1, 2]
    assert POINTS[outcome.answer.first_bad].label == "c13" and outcome.answer.exact
    reasons = [e.get("reason", "") for e in read_entries(tmp_path / "log.bisect.log")
               if e["event"] == VERDICT and e["point"] == "c12"]
    assert "not yet confirmed: good in host pulses, then inconclusive" in reasons[1], reasons


def test_a_provisional_verdict_survives_ctrl_c_and_resume(tmp_path):
    """Stopped after a point's first measurement (a provisional verdict in the log), the
    same command measures it again and holds it to the verdict it gave first."""
    class Stopping(ContendedHost):
        """Stopped in the third batch: the ends', c11's first (read like the bad end), then
        c11's measurement again."""

        def _batch(self, batch):
            failed = super()._batch(batch)
            if len(self.batches) == 3:
                raise KeyboardInterrupt
            return failed

    stopping = Stopping(POINTS, slower_from(FIRST_BAD), noise=0.01,
                        slow={("c11", 0): (1.6, 1.3)})
    with pytest.raises(KeyboardInterrupt):
        bisect(tmp_path, stopping, judge=Judge(threshold=0.1, trust_flagged=True))
    entries = read_entries(tmp_path / "log.bisect.log")
    assert any(e["event"] == VERDICT and e.get("provisional") == "bad" and e["point"] == "c11"
               for e in entries)
    resumed = ContendedHost(POINTS, slower_from(FIRST_BAD), noise=0.01)
    resumed._records = dict(stopping._records)
    outcome = bisect(tmp_path, resumed, judge=Judge(threshold=0.1, trust_flagged=True))
    assert outcome.verdicts["c11"] == "skipped", outcome.reasons["c11"]
    assert ("c11", 0) not in resumed.measured  # its first measurement is not made again
