"""The timing loop's hooks run outside the timed regions (a fake stack, no torch)."""

import time

from backends.base import PreparedModel
from models.base import BenchmarkModel, ModelInputs
from core.config import RunSettings
from runner.timing import RunHooks, measure, paired_speedup

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

    def begin_timed_run(self):
        self.events.append(("begin",))


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
    assert hooks.calls == [("before", 0), ("after", 0), ("before", 1), ("after", 1),
                           ("before", 2), ("after", 2), ("profiled", 9, 1)]
    assert len(timing.total_time) == 3
    assert all(t < HOOK_SECONDS for t in timing.total_time)
    assert timing.last_result == 7  # the profiled run does not replace the timed result


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
    assert len(metrics["eager_per_iter_time"]) == len(metrics["per_iter_time"]) == 4
    assert len(metrics["paired_speedup"]) == 4
    paired = summary["paired_speedup"]
    assert paired["method"] == "paired" and paired["pairs"] == 4
    assert 1.5 < paired["speedup"] < 2.5 and 1.5 < paired["median_of_pairs"] < 2.5
    assert 0 <= paired["p_value"] < 0.05
    assert summary["cold_start_time"] == timing.warmup_times[0]


def test_paired_speedup_is_the_ratio_of_medians_as_the_harness_reports_it():
    result = paired_speedup([2.0, 2.0, 8.0], [1.0, 4.0, 1.0])
    assert result["speedup"] == 2.0 / 1.0
    assert result["median_of_pairs"] == 2.0
