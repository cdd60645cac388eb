"""The timing loop's hooks run outside the timed regions (a fake stack, no torch)."""

import time

import pytest

from backends.base import DeviceTimer, PreparedModel
from models.base import BenchmarkModel, ModelInputs
from core.config import RunSettings
from core.schema import timed_values
from child.timing import CUDA_EVENTS_CLOCK, HOST_CLOCK, RunHooks, measure, paired_speedup

STEP_SECONDS = 0.01
HOOK_SECONDS = 0.2


class CountingModel(PreparedModel):
    def __init__(self):
        self.steps = 0
        self.events = []

    def inputs_to_device(self, inputs):
        return inputs

    def step(self, device_inputs):
        time.sleep(STEP_SECONDS)
        self.steps += 1
        return self.steps

    def sync_run(self, last_result):
        self.events.append(("sync", last_result))

    def start_background_work(self):
        self.events.append(("background", self.steps))

    def settle(self):
        self.events.append(("settle", self.steps))

    def begin_timed_run(self):
        self.events.append(("begin",))
        self.steps_at_begin = self.steps

    def end_timed_run(self):
        return {"steps_in_run": self.steps - self.steps_at_begin}


class SlowHooks(RunHooks):
    def __init__(self, prepared):
        self.prepared = prepared
        self.calls = []

    def before_timed_run(self, index):
        self.calls.append(("before", index))
        time.sleep(HOOK_SECONDS)

    def after_timed_run(self, index):
        self.calls.append(("after", index))
        time.sleep(HOOK_SECONDS)

    def timed_run_output(self, index, result):
        self.calls.append(("output", index, result))

    def after_timed_runs(self, run_once, device_inputs):
        steps = self.prepared.steps
        self.calls.append(("profiled", run_once(), len(device_inputs)))
        assert self.prepared.steps == steps + 2  # one more run of iterations_per_run


def bench():
    return BenchmarkModel("fake", None, lambda seed: ModelInputs((seed,), {}), None, 1)


def test_hooks_are_called_in_order_and_never_timed():
    prepared = CountingModel()
    hooks = SlowHooks(prepared)
    settings = RunSettings(repeat=3, warmup=1, iterations_per_run=2)
    timing = measure(prepared, bench(), settings, hooks)
    assert hooks.calls == [("before", 0), ("after", 0), ("output", 0, 3),
                           ("before", 1), ("after", 1), ("output", 1, 5),
                           ("before", 2), ("after", 2), ("output", 2, 7), ("profiled", 9, 1)]
    assert len(timing.total_time) == 3
    assert all(t < HOOK_SECONDS for t in timing.total_time)
    assert timing.last_result == 7  # the profiled run does not replace the timed result


def test_the_model_settles_once_after_the_warm_up_before_the_first_timed_run():
    prepared = CountingModel()
    measure(prepared, bench(), RunSettings(repeat=2, warmup=3, iterations_per_run=2))
    names = [event[0] for event in prepared.events]
    assert names.count("settle") == 1
    settled = names.index("settle")
    assert prepared.events[settled] == ("settle", 3)  # after the 3 warm-up iterations
    assert prepared.events[settled + 1] == ("begin",)  # before the first timed run


class StepsAtWatch:
    """A card watch that notes how many steps the model had made when it started and stopped."""

    def __init__(self, prepared):
        self.prepared, self.marks = prepared, []

    def start(self):
        self.marks.append(("start", self.prepared.steps))

    def stop(self):
        self.marks.append(("stop", self.prepared.steps))


def test_the_card_is_watched_over_the_timed_runs_only():
    prepared = CountingModel()
    card = StepsAtWatch(prepared)
    measure(prepared, bench(), RunSettings(repeat=3, warmup=2, iterations_per_run=2),
            device_watch=card)
    assert card.marks == [("start", 2), ("stop", 2 + 3 * 2)]


def test_the_host_pulse_is_read_after_each_timed_run_and_never_timed():
    prepared = CountingModel()
    steps_at_pulse = []

    def pulse():
        steps_at_pulse.append(prepared.steps)
        time.sleep(HOOK_SECONDS)
        return 1.5

    timing = measure(prepared, bench(), RunSettings(repeat=3, warmup=1, iterations_per_run=2),
                     pulse=pulse)
    assert timing.host_pulses == [1.5, 1.5, 1.5]
    assert steps_at_pulse == [1 + 2, 1 + 4, 1 + 6]  # after each timed run's iterations
    assert all(t < HOOK_SECONDS for t in timing.total_time)
    assert measure(CountingModel(), bench(), RunSettings(repeat=2, warmup=0)).host_pulses == []


def test_measure_without_hooks():
    timing = measure(CountingModel(), bench(), RunSettings(repeat=2, warmup=0))
    assert len(timing.per_iter_time) == 2 and timing.warmup_times == []


class SleepingModel(PreparedModel):
    """A fake stack whose iterations take `seconds`; records the order of its steps."""

    def __init__(self, name, seconds, log):
        self.name, self.seconds, self.log = name, seconds, log

    def inputs_to_device(self, inputs):
        return inputs

    def step(self, device_inputs):
        time.sleep(self.seconds)
        self.log.append(self.name)
        return self.name

    def sync_run(self, last_result):
        pass


def test_paired_timing_interleaves_eager_and_the_stack():
    log = []
    eager, compiled = SleepingModel("eager", 0.02, log), SleepingModel("compiled", 0.01, log)
    settings = RunSettings(repeat=4, warmup=2)
    timing = measure(compiled, bench(), settings, reference=eager)
    # The reference warms up first, then the stack (its first warm-up is the cold start),
    # then the timed runs alternate: A B A B ...
    assert log[:4] == ["eager", "eager", "compiled", "compiled"]
    assert log[4:] == ["eager", "compiled"] * 4
    metrics, summary = timing.metrics(), timing.summary()
    # Every per-run list starts with the cold-start run, then the 4 timed runs.
    assert summary["cold_start_entries"] == 1
    assert len(metrics["eager_per_iter_time"]) == len(metrics["per_iter_time"]) == 5
    assert len(metrics["paired_speedup"]) == 5
    paired = summary["paired_speedup"]
    assert paired["method"] == "paired" and paired["pairs"] == 4
    assert 1.5 < paired["speedup"] < 2.5 and 1.5 < paired["median_of_pairs"] < 2.5
    # Whether 4 slept pairs read significant depends on the host's jitter (one late wake-up
    # on a loaded machine gave 0.24); what the p-value says is tested on given times below.
    assert 0 <= paired["p_value"] <= 1
    assert summary["cold_start_time"] == timing.warmup_times[0]


def test_the_p_value_tells_a_clear_difference_from_none():
    eager = [0.020, 0.021, 0.019, 0.020]
    assert paired_speedup(eager, [0.010, 0.0105, 0.0095, 0.010])["p_value"] < 0.001
    assert paired_speedup(eager, [0.0205, 0.0195, 0.020, 0.0201])["p_value"] > 0.5


def test_paired_speedup_is_the_ratio_of_medians_as_the_harness_reports_it():
    result = paired_speedup([2.0, 2.0, 8.0], [1.0, 4.0, 1.0])
    assert result["speedup"] == 2.0 / 1.0
    assert result["median_of_pairs"] == 2.0


def line_of(timing):
    return {"metrics": timing.metrics(), "summary": timing.summary()}


def test_the_cold_start_run_leads_every_per_run_list():
    prepared = CountingModel()
    settings = RunSettings(repeat=3, warmup=2, iterations_per_run=2)
    timing = measure(prepared, bench(), settings)
    metrics, summary = timing.metrics(), timing.summary()
    # The first two warm-up iterations form the cold-start run, as PyTorch/XLA's first run.
    assert metrics["total_time"][0] == pytest.approx(sum(timing.warmup_times))
    assert metrics["per_iter_time"][0] == pytest.approx(sum(timing.warmup_times) / 2)
    assert metrics["total_time"][1:] == timing.total_time and len(metrics["total_time"]) == 4
    assert metrics["steps_in_run"] == [2, 2, 2, 2]  # the stack's metrics of the cold run too
    assert summary["cold_start_entries"] == 1 and summary["timing_clock"] == HOST_CLOCK
    assert summary["cold_start_time"] == timing.warmup_times[0]
    assert timed_values(line_of(timing), "per_iter_time") == timing.per_iter_time


def test_a_short_warmup_is_a_shorter_cold_run_and_none_is_no_cold_run():
    timing = measure(CountingModel(), bench(), RunSettings(repeat=2, warmup=1, iterations_per_run=3))
    assert timing.metrics()["per_iter_time"][0] == pytest.approx(timing.warmup_times[0])
    assert timing.metrics()["steps_in_run"] == [1, 3, 3]
    timing = measure(CountingModel(), bench(), RunSettings(repeat=2, warmup=0))
    assert timing.metrics()["total_time"] == timing.total_time
    assert timing.summary()["cold_start_entries"] == 0 and "cold_start_time" not in timing.summary()
    assert timed_values(line_of(timing), "total_time") == timing.total_time


class FakeTimer(DeviceTimer):
    def __init__(self):
        self.spans = 0

    def begin(self):
        self.spans += 1

    def end(self):
        pass

    def seconds(self):
        spans, self.spans = self.spans, 0
        return 0.5 * spans


class TimedModel(CountingModel):
    def device_timer(self):
        return FakeTimer()


def test_pure_wall_time_uses_the_device_timer_where_there_is_one():
    settings = RunSettings(repeat=2, warmup=1, iterations_per_run=2, pure_wall_time=True)
    timing = measure(TimedModel(), bench(), settings)
    assert timing.total_time == [1.0, 1.0] and timing.per_iter_time == [0.5, 0.5]
    assert timing.clock == CUDA_EVENTS_CLOCK
    assert timing.metrics()["total_time"][0] == pytest.approx(timing.warmup_times[0])
    host = measure(CountingModel(), bench(), settings)
    assert host.clock == HOST_CLOCK and host.total_time[0] < 0.5


class RecordingPicker:
    """A core picker that records what it is asked; a pulse above `slow_above` reads slow."""

    def __init__(self, prepared, slow_above=float("inf")):
        self.prepared = prepared
        self.slow_above = slow_above
        self.calls = []

    def pick(self):
        self.calls.append(("pick", self.prepared.steps))
        self.background_started_at_first_pick = getattr(
            self, "background_started_at_first_pick",
            ("background", 0) in self.prepared.events)

    def slowed(self, pulse_ms):
        return pulse_ms > self.slow_above

    def follow(self, pulse_ms):
        self.calls.append(("follow", self.prepared.steps, pulse_ms))
        if self.slowed(pulse_ms):
            self.pick()

    def release(self):
        self.calls.append(("release", self.prepared.steps))


def test_the_core_is_picked_for_the_cold_start_and_the_timed_runs_and_given_back_after():
    prepared = CountingModel()
    picker = RecordingPicker(prepared)
    measure(prepared, bench(), RunSettings(repeat=2, warmup=1, iterations_per_run=2),
            pulse=lambda: 0.5, core_picker=picker)
    # Before the cold start (0 steps), again before the timed runs, a pulse after each run.
    assert picker.calls == [("pick", 0), ("pick", 1), ("follow", 1 + 2, 0.5),
                            ("follow", 1 + 4, 0.5), ("release", 1 + 4)]
    assert picker.background_started_at_first_pick  # the compile workers got every core


def test_without_a_core_picker_no_background_work_is_started_early():
    prepared = CountingModel()
    measure(prepared, bench(), RunSettings(repeat=1, warmup=1))
    assert not any(event[0] == "background" for event in prepared.events)


class RunCountingHooks(RunHooks):
    def __init__(self):
        self.before = []

    def before_timed_run(self, index):
        self.before.append(index)


def test_a_run_after_which_the_core_read_slow_is_run_again_on_a_new_core():
    prepared = CountingModel()
    picker = RecordingPicker(prepared, slow_above=1.0)
    # Pulses in order: after run 0 (slow: run again), after the retry, after run 1.
    pulses = iter([2.0, 0.6, 0.7])
    hooks = RunCountingHooks()
    timing = measure(prepared, bench(), RunSettings(repeat=2, warmup=0), hooks,
                     pulse=lambda: next(pulses), core_picker=picker)
    assert len(timing.total_time) == 2 and len(timing.redone_per_iter_time) == 1
    assert timing.host_pulses == [0.6, 0.7]  # the kept runs' pulses
    assert prepared.steps == 3 and hooks.before == [0, 1]
    # the cold start's, the timed runs' first, and the move
    assert [call[0] for call in picker.calls].count("pick") == 3
    assert timing.summary()["redone_runs"]["count"] == 1
    assert timing.summary()["timing_core"] == "fastest"
    assert measure(CountingModel(), bench(), RunSettings(repeat=1, warmup=0)).summary()[
        "timing_core"] == "any"


def test_runs_are_run_again_at_most_repeat_times_in_all():
    prepared = CountingModel()
    timing = measure(prepared, bench(), RunSettings(repeat=3, warmup=0),
                     pulse=lambda: 5.0, core_picker=RecordingPicker(prepared, slow_above=1.0))
    assert len(timing.total_time) == 3 and len(timing.redone_per_iter_time) == 3
    assert prepared.steps == 6


class StepsAtHostWatch:
    """A host-state watch that notes the model's steps at each reading."""

    def __init__(self, prepared):
        self.prepared, self.marks = prepared, []

    def begin(self):
        self.marks.append(("begin", self.prepared.steps))

    def end(self):
        self.marks.append(("end", self.prepared.steps))
        return {"cpu_start": 1, "cpu_end": 2 if self.prepared.steps == 3 else 1,
                "freq_mhz": 1000.0 * self.prepared.steps}


def test_the_host_state_is_read_around_each_kept_run_outside_its_timing():
    prepared = CountingModel()
    watch = StepsAtHostWatch(prepared)
    pulses = iter([2.0, 0.6, 0.7])  # the first run is slow and run again
    timing = measure(prepared, bench(), RunSettings(repeat=2, warmup=0), pulse=lambda: next(pulses),
                     core_picker=RecordingPicker(prepared, slow_above=1.0), host_watch=watch)
    assert watch.marks == [("begin", 0), ("end", 1), ("begin", 1), ("end", 2),
                           ("begin", 2), ("end", 3)]
    summary = timing.summary()
    assert summary["host_windows"]["freq_mhz"] == [2000.0, 3000.0]  # the redone run left out
    assert summary["host_windows"]["migrations"] == [None, None]
    assert summary["host_state"]["runs"] == 2 and summary["host_state"]["moved_share"] == 0.5
    assert "host_state" not in measure(CountingModel(), bench(),
                                       RunSettings(repeat=1, warmup=0)).summary()
