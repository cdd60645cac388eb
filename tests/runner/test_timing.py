"""The timing loop's hooks run outside the timed regions (a fake stack, no torch)."""

import time

from backends.base import PreparedModel
from models.base import BenchmarkModel, ModelInputs
from core.config import RunSettings
from runner.timing import RunHooks, measure

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
