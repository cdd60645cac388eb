"""Device time and host-bound iterations, with fake device timings (no CUDA)."""

from __future__ import annotations

import time

import pytest

from backends.base import DeviceTimer, PreparedModel
from core.config import RunSettings
from models.base import BenchmarkModel, ModelInputs
from core.host.host_bound import (HOST_BOUND_RATIO, HOST_SHARE_BOUND, LINE_BOUND, host_bound_summary,
                                  is_host_bound, judge_host_share)
from child.timing import HOST_CLOCK, measure


def test_an_iteration_is_host_bound_when_the_device_finished_as_the_host_queued_it():
    # The host queued for 9.5 ms and the device finished 0.5 ms later: it was waiting.
    assert is_host_bound(device_span=10e-3, enqueue=9.5e-3)
    # The host queued everything in 1 ms; the device then worked 9 ms more.
    assert not is_host_bound(device_span=10e-3, enqueue=1e-3)
    assert is_host_bound(1.0, HOST_BOUND_RATIO) and not is_host_bound(1.0, HOST_BOUND_RATIO * 0.99)
    assert not is_host_bound(0.0, 1.0)


def test_a_line_is_flagged_when_most_iterations_are_host_bound():
    spans = [10e-3] * 10
    mostly = host_bound_summary(spans, [9.8e-3] * 7 + [1e-3] * 3)
    assert mostly["host_bound"] is True and mostly["host_bound_fraction"] == pytest.approx(0.7)
    assert mostly["host_bound_iterations"] == 7 and mostly["host_bound_judged"] == 10
    few = host_bound_summary(spans, [9.8e-3] * 2 + [1e-3] * 8)
    assert few["host_bound"] is False and few["host_bound_fraction"] == pytest.approx(0.2)
    half = host_bound_summary(spans[:4], [9.8e-3] * 2 + [1e-3] * 2)
    assert half["host_bound_fraction"] == LINE_BOUND and half["host_bound"] is False
    assert host_bound_summary([], [])["host_bound_fraction"] is None


class ScriptedTimer(DeviceTimer):
    """Device spans as a fake device would report them: each iteration takes `device` s."""

    def __init__(self, device: float) -> None:
        self.device, self.count = device, 0

    def begin(self):
        self.count += 1

    def end(self):
        pass

    def span_seconds(self):
        count, self.count = self.count, 0
        return [self.device] * count

    def seconds(self):
        return sum(self.span_seconds())


class FakeCudaModel(PreparedModel):
    """Queuing an iteration takes the host `host` s; the device runs it in `device` s."""

    def __init__(self, host: float, device: float) -> None:
        self.host, self.device = host, device

    def inputs_to_device(self, inputs):
        return inputs

    def step(self, device_inputs):
        time.sleep(self.host)

    def sync_run(self, last_result):
        pass

    def device_timer(self):
        return ScriptedTimer(self.device)


def bench():
    return BenchmarkModel("fake", None, lambda seed: ModelInputs((seed,), {}), None, 1)


def test_a_model_the_host_holds_back_is_flagged_and_a_device_bound_one_is_not():
    settings = RunSettings(repeat=4, warmup=1, iterations_per_run=2)
    sleepy = measure(FakeCudaModel(host=0.02, device=0.0205), bench(), settings)
    summary = sleepy.summary()
    assert summary["host_bound"] is True and summary["host_bound_fraction"] == 1.0
    assert summary["host_bound_judged"] == 8
    busy = measure(FakeCudaModel(host=0.002, device=0.05), bench(), settings).summary()
    assert busy["host_bound"] is False and busy["host_bound_fraction"] == 0.0


def test_device_and_enqueue_time_are_recorded_next_to_the_wall_time():
    settings = RunSettings(repeat=3, warmup=1, iterations_per_run=2)
    timing = measure(FakeCudaModel(host=0.002, device=0.05), bench(), settings)
    metrics = timing.metrics()
    assert timing.clock == HOST_CLOCK  # the host clock still times the runs
    assert metrics["device_time"] == [None, 0.05, 0.05, 0.05]  # per iteration, cold run first
    assert all(0.002 <= t < 0.05 for t in metrics["enqueue_time"][1:])
    assert all(t < 0.05 for t in metrics["per_iter_time"][1:])  # the fake device is not waited for
    assert timing.summary()["median_device_time"] == 0.05


def test_no_device_timer_no_device_figures():
    class HostOnly(FakeCudaModel):
        def device_timer(self):
            return None

    timing = measure(HostOnly(host=0.001, device=0.0), bench(), RunSettings(repeat=2, warmup=1))
    assert "device_time" not in timing.metrics() and "host_bound" not in timing.summary()


def test_a_line_whose_card_idles_for_a_share_of_each_iteration_is_host_bound_too():
    """mobilevit_s bs2 with CUDA graphs on an H200: no iteration host-bound by its span, the
    card busy 0.58 ms of 1.05; vit_base_patch16_siglip_256 bs128: busy 14.51 ms of 15.65."""
    graphs = {"host_bound": False, "host_bound_fraction": 0.0, "device_busy_ms": 0.58}
    judge_host_share(graphs, 1.05e-3)
    assert graphs["host_share"] == pytest.approx(1 - 0.58 / 1.05)
    assert graphs["host_bound"] and graphs["host_bound_by"] == "host share"
    card = {"host_bound": False, "host_bound_fraction": 0.0, "device_busy_ms": 14.51}
    judge_host_share(card, 15.65e-3)
    assert card["host_share"] < HOST_SHARE_BOUND
    assert card["host_bound"] is False and "host_bound_by" not in card
    launches = {"host_bound": True, "host_bound_fraction": 1.0, "device_busy_ms": 1.9}
    judge_host_share(launches, 4.8e-3)
    assert launches["host_bound"] and launches["host_bound_by"] == "iterations"
    unknown = {"host_bound": False, "device_busy_ms": None}
    judge_host_share(unknown, 1e-3)
    assert unknown == {"host_bound": False, "device_busy_ms": None}
