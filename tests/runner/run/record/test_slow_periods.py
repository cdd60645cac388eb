"""Slow periods (runner/run/record/slow_periods.py, runner/run/sweep.py's Remeasures), with fake
reference readings, and the wait for the fast state with a fake pulse and clock: no process is
started."""

from __future__ import annotations

import functools

import pytest

from core.config import ExperimentConfig, ModelConfig
from core.figures import median_time
from core.host.host_bound import judge_host_share
from runner.plan.matrix import PlannedExperiment
from runner.run.record.slow_periods import (FAST_READS, MIN_HISTORY, PULSES_PER_READ, READ_INTERVAL_S,
                                            SLOW_BOUND, FastStateWait, ReferenceHistory,
                                            fast_bound_of, judge, readings_of)
from runner.run.sweep import Remeasures, slow_ratio

USUAL = {"launch_us": 4.0, "kernel_ms": 0.2}


def reading(launch_us: float, kernel_ms: float) -> dict:
    return {"launch_us": launch_us, "kernel_ms": kernel_ms, "device": "cpu"}


def summary(*pairs: tuple[dict, dict]) -> dict:
    """A line's summary with the reference read before and after each process."""
    if len(pairs) == 1:
        return {"reference": {"before": pairs[0][0], "after": pairs[0][1]}}
    return {"reference_processes": [{"before": b, "after": a} for b, a in pairs]}


def test_a_quiet_process_is_not_flagged_and_a_slow_one_is_with_its_ratio():
    quiet = judge([[reading(4.2, 0.21), reading(4.4, 0.19)]], USUAL)
    assert not quiet.flagged and quiet.ratio == pytest.approx(1.05)
    slow = judge([[reading(7.2, 0.2), reading(7.0, 0.21)]], USUAL)
    assert slow.flagged and slow.ratio == pytest.approx(1.75) and slow.figure == "launch_us"
    assert "1.75x" in slow.reason and "launch loop" in slow.reason
    kernel = judge([[reading(4.0, 0.5), reading(4.0, 0.6)]], USUAL)
    assert kernel.flagged and kernel.ratio == pytest.approx(2.5) and kernel.figure == "kernel_ms"


def test_one_slow_reading_of_a_process_is_noise_not_a_slow_period():
    # Slow before the timed runs, quiet after: not a period over the process.
    assert not judge([[reading(9.0, 0.6), reading(4.1, 0.2)]], USUAL).flagged


def test_the_median_process_decides():
    one_slow = [[reading(9.0, 0.2)] * 2, [reading(4.0, 0.2)] * 2, [reading(4.1, 0.2)] * 2]
    assert judge(one_slow, USUAL).ratio == pytest.approx(4.1 / 4.0)
    most_slow = [[reading(9.0, 0.2)] * 2, [reading(8.0, 0.2)] * 2, [reading(4.1, 0.2)] * 2]
    assert judge(most_slow, USUAL).flagged and judge(most_slow, USUAL).ratio == pytest.approx(2.0)


def test_the_bound_is_strict_and_documented():
    at_bound = judge([[reading(4.0 * SLOW_BOUND, 0.2)]], USUAL)
    assert not at_bound.flagged
    assert judge([[reading(4.0 * SLOW_BOUND * 1.01, 0.2)]], USUAL).flagged


def test_without_a_usual_figure_nothing_is_flagged_and_it_says_why():
    verdict = judge([[reading(100.0, 100.0)]], {"launch_us": None, "kernel_ms": None})
    assert not verdict.flagged and verdict.ratio is None and "no usual figure" in verdict.reason
    assert judge([], USUAL).reason == "no reference was measured"


def test_every_process_reading_counts():
    found = readings_of(summary((reading(1, 1), reading(2, 2)), (reading(3, 3), None)))
    assert [r["launch_us"] for r in found] == [1, 2, 3]
    assert readings_of({}) == []


def test_the_usual_figure_is_the_median_of_this_hosts_readings(tmp_path):
    history = ReferenceHistory(tmp_path)
    assert history.usual("cpu", "EPYC") == {"launch_us": None, "kernel_ms": None,
                                            "host_ms": None}
    history.add("cpu", "EPYC", [reading(4.0, 0.2)] * (MIN_HISTORY - 1) + [reading(10.0, 1.0)])
    assert history.usual("cpu", "EPYC") == {"launch_us": 4.0, "kernel_ms": 0.2, "host_ms": None}
    # Per device model: another one has no history.
    assert history.usual("cpu", "Xeon")["launch_us"] is None


def test_a_line_is_judged_then_its_readings_kept(tmp_path):
    history = ReferenceHistory(tmp_path)
    history.add("cpu", "EPYC", [reading(4.0, 0.2)] * MIN_HISTORY)
    slow = summary((reading(9.0, 0.2), reading(8.0, 0.2)))
    slow["unreliable_reasons"] = ["the timed runs vary"]
    history.judge_summary(slow, "EPYC")
    assert slow["slow_period"]["flagged"] and slow["slow_period"]["ratio"] == pytest.approx(2.0)
    assert slow["unreliable"] is True
    assert slow["unreliable_reasons"][0] == "the timed runs vary"
    assert slow["unreliable_reasons"][1].startswith("slow period: the reference")
    quiet = summary((reading(4.1, 0.2), reading(4.0, 0.21)))
    history.judge_summary(quiet, "EPYC")
    assert quiet["slow_period"]["flagged"] is False and "unreliable" not in quiet


@pytest.mark.parametrize("content", [
    '{"launch_us": 5}', '{"launch_us": [["a", 1]]}', '{"launch_us": [[1, 2, 3]]}',
    '{"launch_us": [[1, "x"]]}', '{"launch_us": [[1, NaN]]}', '{"launch_us": [[1, -4]]}',
    '[1]', '{"launch_us": [[1, 4]], "launch_us": []}', 'not json',
])
def test_a_history_of_the_wrong_shape_is_set_aside_and_the_line_judged_with_a_warning(
        tmp_path, content):
    # Issue 43, defect 2: these crashed the runner after measuring, and every later run.
    history = ReferenceHistory(tmp_path)
    history.add("cpu", "EPYC", [reading(4.0, 0.2)])
    path = next(tmp_path.glob("*.json"))
    path.write_text(content)
    line_summary = summary((reading(4.0, 0.2), reading(4.0, 0.2)))
    warnings = history.judge_summary(line_summary, "EPYC")
    assert len(warnings) == 1 and str(path) in warnings[0] and "set aside" in warnings[0]
    assert line_summary["slow_period"]["ratio"] is None  # no usual figure yet: rebuilt
    assert path.with_name(path.name + ".unreadable").read_text() == content
    # Rebuilt from this line's readings, read without a word.
    assert history.judge_summary(summary((reading(4.0, 0.2), reading(4.0, 0.2))), "EPYC") == []
    assert history.usual("cpu", "EPYC")["launch_us"] == 4.0  # the two lines' 4 readings


def test_readings_stamped_in_the_future_never_count_and_age_out(tmp_path):
    # After the clock was set back, readings stamped "later" never aged out: one run was
    # flagged 17,420x slow against them.
    import json
    import time

    history = ReferenceHistory(tmp_path)
    history.add("cpu", "EPYC", [reading(4.0, 0.2)])
    path = next(tmp_path.glob("*.json"))
    future = time.time() + 30 * 24 * 3600
    path.write_text(json.dumps({"launch_us": [[future, 0.001]] * 10,
                                "kernel_ms": [[future, 0.0001]] * 10}))
    line_summary = summary((reading(4.0, 0.2), reading(4.0, 0.2)))
    assert history.judge_summary(line_summary, "EPYC") == []
    assert line_summary["slow_period"]["flagged"] is False
    assert line_summary["slow_period"]["ratio"] is None
    kept = json.loads(path.read_text())
    assert all(stamp < future for stamp, _ in kept["launch_us"]) and len(kept["launch_us"]) == 2


def test_a_figure_of_zero_or_below_makes_no_ratio():
    assert judge([[reading(4.0, 0.2)]], {"launch_us": 0.0, "kernel_ms": -1.0}).ratio is None
    verdict = judge([[{"launch_us": float("nan"), "kernel_ms": 0.2}]], USUAL)
    assert verdict.ratio == pytest.approx(1.0) and verdict.figure == "kernel_ms"


def pulses(host_ms: float) -> dict:
    return {"host_ms": host_ms, "pulses_ms": [host_ms] * 3, "device": "cpu"}


def test_the_host_pulse_during_the_timed_runs_flags_a_process_its_readings_around_missed(tmp_path):
    # Quiet before and after, slow while the model was timed: the pulses say so.
    history = ReferenceHistory(tmp_path)
    history.add("cpu", "EPYC", [{**reading(4.0, 0.2), "host_ms": 1.0}] * MIN_HISTORY)
    line_summary = {"reference_processes": [
        {"before": reading(4.0, 0.2), "after": reading(4.1, 0.2), "during": pulses(1.9)},
        {"before": reading(4.0, 0.2), "after": reading(4.0, 0.2), "during": pulses(1.8)},
        {"before": reading(4.0, 0.2), "after": reading(4.0, 0.2), "during": pulses(1.0)}]}
    assert [r.get("host_ms") for r in readings_of(line_summary)] == [None, None, 1.9] + \
        [None, None, 1.8, None, None, 1.0]
    history.judge_summary(line_summary, "EPYC")
    verdict = line_summary["slow_period"]
    assert verdict["flagged"] and verdict["figure"] == "host_ms"
    assert verdict["ratio"] == pytest.approx(1.8)
    assert "host pulse during the timed runs" in line_summary["unreliable_reasons"][0]
    # The pulses joined the host's history: its usual figure now counts them.
    assert history.usual("cpu", "EPYC")["host_ms"] == pytest.approx(1.0)
    quiet = {"reference": {"before": reading(4.0, 0.2), "after": None, "during": pulses(1.1)}}
    history.judge_summary(quiet, "EPYC")
    assert quiet["slow_period"]["flagged"] is False
    assert quiet["slow_period"]["ratio"] == pytest.approx(1.1)


def pulsed_line(pulses_per_process: list[list[float]], device: str = "cuda") -> tuple[dict, dict]:
    """(metrics, summary) of a line whose processes read these pulses after their runs, each
    run as slow as its pulse."""
    times = [pulse / 100 for pulses in pulses_per_process for pulse in pulses]
    owners = [index for index, pulses in enumerate(pulses_per_process, 1) for _ in pulses]
    metrics = {"per_iter_time": [1.0, *times], "process": [1, *owners]}
    references = [{"before": {**reading(4.0, 0.2), "device": device}, "after": None,
                   "during": {"host_ms": sorted(p)[len(p) // 2], "pulses_ms": p, "device": device}}
                  for p in pulses_per_process]
    return metrics, {"cold_start_entries": 1, "reference_processes": references}


def test_a_line_timed_mostly_after_slow_pulses_is_flagged_against_the_hosts_fast_state(
        tmp_path):
    history = ReferenceHistory(tmp_path)
    # The host's history knows a fast state (0.6 ms), though its median pulse drifted slow.
    history.add("cuda", "H200", [{**reading(4.0, 0.2), "host_ms": ms}
                                 for ms in (0.6, 0.62, 1.1, 1.1, 1.2, 1.1, 1.15)])
    assert history.usual("cuda", "H200")["host_ms"] == pytest.approx(1.1)
    metrics, slow = pulsed_line([[1.1, 1.2, 0.6, 1.1], [1.1, 1.2, 1.15, 1.1]])
    history.judge_summary(slow, "H200", metrics)
    verdict = slow["slow_period"]
    # By the median pulse (about 1.1 against 1.1) nothing was slow...
    assert verdict["ratio"] < SLOW_BOUND
    # ...but 7 of its 8 runs followed a pulse over 1.25 x 0.6 ms.
    assert slow["pulse_states"]["low_from"] == "host"
    assert verdict["flagged"] and verdict["slow_share"] == pytest.approx(7 / 8)
    assert slow["unreliable"] and "88% of the timed runs followed a slow host pulse" in \
        slow["unreliable_reasons"][0]
    assert slow_ratio({"summary": slow}) is not None  # --remeasure-slow measures it again
    # Half fast: not flagged.
    metrics, mixed = pulsed_line([[1.1, 0.6, 0.6, 1.1], [0.6, 1.2, 0.61, 1.1]])
    history.judge_summary(mixed, "H200", metrics)
    assert mixed["slow_period"]["flagged"] is False and "slow_share" not in mixed["slow_period"]
    assert mixed["pulse_states"]["slow"]["share"] == 0.5
    # On the CPU the pulses also read the timed work's contention: the states are kept,
    # nothing is flagged by them.
    history.add("cpu", "EPYC", [{**reading(4.0, 0.2), "host_ms": ms}
                                for ms in (0.6, 0.62, 1.1, 1.1, 1.2, 1.1, 1.15)])
    metrics, cpu_line = pulsed_line([[1.1, 1.2, 0.6, 1.1], [1.1, 1.2, 1.15, 1.1]], device="cpu")
    history.judge_summary(cpu_line, "EPYC", metrics)
    assert cpu_line["pulse_states"]["slow"]["share"] == pytest.approx(7 / 8)
    assert cpu_line["pulse_states"]["low_from"] == "host"
    assert cpu_line["slow_period"]["flagged"] is False and "slow_share" not in cpu_line["slow_period"]


def test_a_line_the_card_sets_is_not_flagged_by_the_hosts_slow_pulses(tmp_path):
    """The same slow pulses, on a line whose card was busy for most of each iteration: the
    host's speed does not move its figure, so it is not flagged (nor measured again); busy
    for under 80% (host-bound by the host's share, as the runner judges it first), it is."""
    history = ReferenceHistory(tmp_path)
    history.add("cuda", "H200", [{**reading(4.0, 0.2), "host_ms": ms}
                                 for ms in (0.6, 0.62, 1.1, 1.1, 1.2, 1.1, 1.15)])
    flagged = {}
    for busy_share in (0.92, 0.45):
        metrics, line = pulsed_line([[1.1, 1.2, 0.6, 1.1], [1.1, 1.2, 1.15, 1.1]])
        latency = median_time({"summary": line, "metrics": metrics})
        line["device_busy_ms"] = busy_share * latency * 1e3
        judge_host_share(line, latency)
        history.judge_summary(line, "H200", metrics)
        assert line["host_share"] == pytest.approx(1 - busy_share)
        assert line["pulse_states"]["slow"]["share"] == pytest.approx(7 / 8)
        flagged[busy_share] = line["slow_period"]["flagged"]
    assert flagged == {0.92: False, 0.45: True}


def test_without_the_hosts_fast_state_a_slow_share_flags_nothing(tmp_path):
    # A fresh host: the bound comes from the line's own pulses, which cannot tell a line
    # timed wholly in a slow period.
    history = ReferenceHistory(tmp_path)
    metrics, slow = pulsed_line([[1.0, 1.3, 1.4, 1.5], [1.6, 1.7, 1.8, 1.9]])
    history.judge_summary(slow, "H200", metrics)
    assert slow["pulse_states"]["low_from"] == "line"
    assert slow["pulse_states"]["slow"]["share"] == pytest.approx(7 / 8)
    assert slow["slow_period"]["flagged"] is False


def planned(name: str = "mlp") -> PlannedExperiment:
    model = ModelConfig("builtin", name)
    experiment = ExperimentConfig(accelerator="cpu", xla=None, dynamo=None, torch_xla2=None,
                                  test="eval", stack="eager")
    return PlannedExperiment(model, experiment, "eager")


def line(ratio: float | None) -> dict:
    flagged = ratio is not None and ratio > SLOW_BOUND
    return {"summary": {"slow_period": {"ratio": ratio, "flagged": flagged}}}


def test_a_slow_line_is_measured_again_and_the_quiet_one_kept():
    remeasures = Remeasures(2)
    experiment = planned()
    assert remeasures.line_to_record(experiment, line(1.8)) is None
    assert remeasures.holds(experiment)
    kept = remeasures.line_to_record(experiment, line(1.02))
    assert slow_ratio(kept) is None
    assert kept["summary"]["slow_period"]["earlier_ratios"] == [1.8]
    assert not remeasures.holds(experiment)


def test_after_the_attempts_the_least_slow_line_is_kept():
    remeasures = Remeasures(2)
    experiment = planned()
    assert remeasures.line_to_record(experiment, line(1.8)) is None
    assert remeasures.line_to_record(experiment, line(1.5)) is None
    kept = remeasures.line_to_record(experiment, line(2.0))
    assert kept["summary"]["slow_period"]["ratio"] == 1.5
    assert kept["summary"]["slow_period"]["earlier_ratios"] == [1.8, 2.0]


def test_without_the_option_a_slow_line_is_recorded_at_once():
    flagged = line(3.0)
    assert Remeasures(0).line_to_record(planned(), flagged) is flagged


def test_after_a_stop_a_held_line_is_still_recorded():
    remeasures = Remeasures(1)
    waiting, running = planned("mlp"), planned("cnn")
    remeasures.line_to_record(waiting, line(1.8))
    remeasures.line_to_record(running, line(1.9))
    held = remeasures.held_lines([running])
    assert [(p.model.model_name, slow_ratio(l)) for p, l in held] == [("mlp", 1.8)]


class FakeDispatcher:
    """Answers each experiment at once with the next of its scripted lines."""

    capacity = 1

    def __init__(self, script: dict[str, list[dict]]) -> None:
        self.script = script
        self.submitted: list[str] = []

    def submit(self, planned):
        from concurrent.futures import Future

        self.submitted.append(planned.model.model_name)
        future: Future = Future()
        answer = dict(self.script[planned.model.model_name].pop(0))
        answer.update(model={"model_name": planned.model.model_name}, status="ok",
                      experiment_id=planned.model.model_name)
        future.set_result(answer)
        return future

    def set_backlog(self, count: int) -> None:
        pass

    def cancel(self) -> None:
        pass

    def close(self) -> None:
        pass


class NoSkips:
    def skip_reason(self, name, test, precision=None):
        return None


def test_the_sweep_measures_a_slow_experiment_again_after_the_others(tmp_path):
    from core.config import RunSettings
    from core.files.results_file import ResultsFile, read_results
    from runner.plan.matrix import Plan
    from runner.run.record.claims import Claims, RunnerIdentity
    from runner.run.sweep import SweepReport, run_plan

    slow, other = planned("mlp"), planned("cnn")
    dispatcher = FakeDispatcher({"mlp": [line(2.0), line(1.0)], "cnn": [line(1.0)]})
    results = ResultsFile(tmp_path / "results.jsonl")
    claims = Claims(results, RunSettings(), RunnerIdentity.of_this_process("run"))
    plan = Plan(experiments=[slow, other])
    run_plan(plan, NoSkips(), dispatcher, claims, SweepReport(), show_progress=False,
             remeasure_slow=1)
    assert dispatcher.submitted == ["mlp", "cnn", "mlp"]
    lines = read_results(results.path).lines
    assert [l["model"]["model_name"] for l in lines] == ["cnn", "mlp"]
    assert lines[1]["summary"]["slow_period"] == {"ratio": 1.0, "flagged": False,
                                                  "earlier_ratios": [2.0]}


class FakeHost:
    """A clock that moves only when told, and a pulse that reads the next scripted value
    (each read takes PULSES_PER_READ pulses: the scripted value is their least)."""

    def __init__(self, pulses: list[float]) -> None:
        self.now = 100.0
        self.pulses = list(pulses)
        self.taken = 0

    def clock(self) -> float:
        return self.now

    def pulse(self) -> float:
        self.taken += 1
        value = self.pulses[0]
        if self.taken % PULSES_PER_READ == 0:
            self.pulses.pop(0)
        return value

    def wait(self, bound_ms: float, limit_s: float) -> FastStateWait:
        return FastStateWait(bound_ms, limit_s, pulse=self.pulse, clock=self.clock)


def test_the_host_is_fast_after_reads_in_a_row_within_the_bound_and_a_slow_one_starts_over():
    host = FakeHost([0.5, 0.5, 1.4, 0.6, 0.5, 0.6])
    waiting = host.wait(0.75, 60)
    answers = []
    for _ in range(6):
        answers.append(waiting.ready())
        assert waiting.ready() is answers[-1]  # no second read before the interval has passed
        host.now += READ_INTERVAL_S
    assert FAST_READS == 3 and answers == [False, False, False, False, False, True]
    assert host.taken == 6 * PULSES_PER_READ
    record = waiting.record()
    assert record["reached"] and record["reads"] == 6 and record["last_pulse_ms"] == 0.6
    assert record["waited_s"] == pytest.approx(6 * READ_INTERVAL_S)


def test_a_host_that_stays_slow_is_measured_again_once_the_wait_is_spent():
    host = FakeHost([2.0] * 20)
    waiting = host.wait(0.75, 5)
    while not waiting.ready():
        host.now += waiting.seconds_to_next_read() or READ_INTERVAL_S
    record = waiting.record()
    assert not record["reached"] and record["waited_s"] == pytest.approx(5.0)
    assert record["reads"] == 6 and record["fast_bound_ms"] == 0.75 and record["limit_s"] == 5


@pytest.mark.parametrize("states, bound", [
    ({"fast_bound_ms": 0.8}, 0.8), ({"fast_bound_ms": 0}, None), ({"fast_bound_ms": True}, None),
    ({"fast_bound_ms": "1"}, None), ({}, None), (None, None), ("x", None)])
def test_the_bound_is_the_lines_own_fast_bound_where_it_is_a_time(states, bound):
    assert fast_bound_of({"summary": {"pulse_states": states}}) == bound


def slow_line(bound: float | None = 0.75) -> dict:
    summary = {"slow_period": {"ratio": 1.6, "flagged": True}}
    if bound is not None:
        summary["pulse_states"] = {"fast_bound_ms": bound}
    return {"summary": summary}


def test_the_sweep_submits_a_slow_experiment_again_only_once_the_host_reads_fast(
        tmp_path, monkeypatch):
    from core.config import RunSettings
    from core.files.results_file import ResultsFile, read_results
    from runner.plan.matrix import Plan
    from runner.run import sweep
    from runner.run.record.claims import Claims, RunnerIdentity

    host = FakeHost([1.5, 1.4, 0.6, 0.7, 0.6])
    sleeps = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        host.now += max(seconds, 0.01)

    monkeypatch.setattr(sweep, "FastStateWait",
                        functools.partial(FastStateWait, pulse=host.pulse, clock=host.clock))
    monkeypatch.setattr(sweep.time, "sleep", sleep)
    dispatcher = FakeDispatcher({"mlp": [slow_line(), line(1.0)]})
    results = ResultsFile(tmp_path / "results.jsonl")
    claims = Claims(results, RunSettings(), RunnerIdentity.of_this_process("run"))
    sweep.run_plan(Plan(experiments=[planned("mlp")]), NoSkips(), dispatcher, claims,
                   sweep.SweepReport(), show_progress=False, remeasure_slow=1, slow_wait_s=60)
    assert dispatcher.submitted == ["mlp", "mlp"]
    assert sum(sleeps) == pytest.approx(4 * READ_INTERVAL_S)  # 5 reads, a second apart
    [kept] = read_results(results.path).lines
    [wait] = kept["summary"]["slow_period"]["fast_state_waits"]
    assert wait["reached"] and wait["reads"] == 5 and wait["last_pulse_ms"] == 0.6
    assert kept["summary"]["slow_period"]["earlier_ratios"] == [1.6]


def test_without_a_wait_or_a_bound_the_slow_experiment_is_submitted_again_at_once():
    from runner.run.sweep import Remeasures

    host = FakeHost([5.0] * 10)
    for wait_s, flagged in ((0.0, slow_line()), (60.0, slow_line(bound=None))):
        remeasures = Remeasures(1, wait_s, new_wait=host.wait)
        experiment = planned()
        assert remeasures.line_to_record(experiment, flagged) is None
        assert remeasures.ready(experiment) and host.taken == 0
    held = Remeasures(1, 60.0, new_wait=host.wait)
    held.line_to_record(planned(), slow_line())
    assert not held.ready(planned()) and host.taken == PULSES_PER_READ
