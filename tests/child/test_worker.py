"""child/worker.py: where the child builds its model."""

from __future__ import annotations

import contextlib
import os
import sys
import dataclasses

import pytest
import torch

import backends
from core.config import ExperimentConfig
from core.contract import Role
from child.worker import build_device, size_compile_workers


def experiment(accelerator: str, dynamo=None, torch_xla2=None) -> ExperimentConfig:
    planned = ExperimentConfig(accelerator, None, dynamo, torch_xla2, "eval")
    return dataclasses.replace(planned, stack=backends.stack_for(planned).name)


@pytest.mark.parametrize("dynamo", [None, "inductor"])
def test_torch_stacks_on_cuda_build_on_the_device(dynamo):
    planned = experiment("cuda", dynamo)
    assert build_device(backends.get_stack(planned.stack), planned) == torch.device("cuda")


@pytest.mark.parametrize("accelerator, dynamo, torch_xla2", [
    ("cpu", "inductor", None),
    ("cpu", None, None),
    ("cuda", None, "torch_export"),
])
def test_other_children_build_on_the_cpu(accelerator, dynamo, torch_xla2):
    planned = experiment(accelerator, dynamo, torch_xla2)
    assert isinstance(build_device(backends.get_stack(planned.stack), planned),
                      contextlib.nullcontext)


def test_the_verification_child_builds_on_the_cpu_whatever_the_stack():
    planned = experiment("cuda", "inductor")
    assert isinstance(build_device(backends.get_stack(planned.stack), planned, Role.VERIFY),
                      contextlib.nullcontext)


def test_the_stack_starts_its_runtime_before_the_model_and_its_workload(monkeypatch, tmp_path):
    """The workload signature of a training experiment runs a backward; the autograd engine
    sizes its device queues at the first one, so XLA's device must exist before (an openxla
    training child on a fresh cache failed in its backward otherwise)."""
    import models
    from core.config import ModelConfig, RunSettings
    from core.contract import ChildResult, ChildSpec
    from child import worker

    calls: list[str] = []

    class Stack:
        name = "recording"
        capabilities = backends.get_stack("eager").capabilities

        def initialize_process(self, experiment):
            calls.append("initialize_process")

    class Bench:
        batch_size = 2
        nondeterministic_reason = None

    class Suite:
        def load(self, *args, **kwargs):
            calls.append("load")
            return Bench()

    from backends.runtimes import precision

    # run_child sets the process's numerics, threads and seed: not this test process's.
    monkeypatch.setattr(precision, "apply_numerics", lambda experiment: None)
    monkeypatch.setattr(torch, "set_num_threads", lambda count: None)
    monkeypatch.setattr(torch, "manual_seed", lambda seed: None)
    monkeypatch.setattr(backends, "get_stack", lambda name: Stack())
    monkeypatch.setattr(models, "get_suite", lambda *args, **kwargs: Suite())
    monkeypatch.setattr(worker, "workload_of", lambda *args: calls.append("workload") or {})
    monkeypatch.setattr(worker, "time_experiment", lambda *args: calls.append("time"))
    planned = experiment("cpu", None)
    spec = ChildSpec(ModelConfig("builtin", "mlp"), dataclasses.replace(planned, test="train"),
                     RunSettings(), Role.TIME, str(tmp_path))
    worker.run_child(spec, ChildResult())
    assert calls == ["initialize_process", "load", "workload", "time"]


@pytest.mark.parametrize("accelerator, timing_core, picks", [
    ("cuda", "fastest", True),
    ("cuda", "any", False),
    ("cpu", "fastest", False),  # the CPU's threads share the cores: no one thread is pinned
])
def test_the_timing_thread_gets_a_core_picker_on_cuda_only(tmp_path, monkeypatch, accelerator,
                                                           timing_core, picks):
    from core.config import ModelConfig, RunSettings
    from child import worker

    monkeypatch.setattr(worker.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    spec = worker.ChildSpec(ModelConfig("builtin", "mlp"), experiment(accelerator),
                            RunSettings(timing_core=timing_core), Role.TIME, str(tmp_path))
    picker = worker.core_picker(spec)
    assert (picker is not None) == picks
    if picks:
        assert picker.cores == (0, 1, 2, 3)
    monkeypatch.setattr(worker.os, "sched_getaffinity", lambda pid: {5})
    assert worker.core_picker(spec) is None  # one core: nothing to pick


def test_compile_workers_follow_the_childs_own_cores_and_none_where_caches_are_warm(
        monkeypatch):
    import torch._inductor.config as config

    # Restored after by torch's own patch: pytest's monkeypatch.setattr restores an attribute
    # that is not in the module's __dict__ by deleting it, which hides a torch config.
    before = config.compile_threads
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)  # and so is this
    with config.patch(compile_threads=before):
        # As a fork server's child: inductor was imported (and decided) before the child's pin.
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {4, 5, 6})
        config.compile_threads = 64
        size_compile_workers(warm_caches=False)
        assert config.compile_threads == 3
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(48)))
        size_compile_workers(warm_caches=False)
        assert config.compile_threads == 32  # inductor's own cap
        size_compile_workers(warm_caches=True)
        assert config.compile_threads == 1 and os.environ["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert config.compile_threads == before


def test_inductors_precompiled_headers_move_under_the_hosts_temporary_folder(monkeypatch,
                                                                             tmp_path):
    """Only an inductor child moves them, under the runner's own temporary folder with
    torch's own folder names; a torch without them (or keeping them elsewhere) is left as
    it is and the experiment goes on."""
    import types

    from core.config import ModelConfig, RunSettings
    from child import worker

    scratch = tmp_path / "scratch" / "torchinductor_someone"
    codecache = types.SimpleNamespace(
        _HEADER_DIR=str(scratch / "precompiled_headers"),
        _HEADER_LOCK_DIR=str(scratch / "precompiled_headers" / "locks"))
    monkeypatch.setitem(sys.modules, worker.INDUCTOR_CODE_CACHE, codecache)

    def spec(dynamo, host_temp_dir=str(tmp_path / "host")):
        return worker.ChildSpec(ModelConfig("builtin", "mlp"), experiment("cpu", dynamo),
                                RunSettings(), Role.TIME, str(tmp_path),
                                host_temp_dir=host_temp_dir)

    worker.keep_precompiled_headers_on_the_host(spec("aot_eager"))
    worker.keep_precompiled_headers_on_the_host(spec("inductor", host_temp_dir=None))
    assert codecache._HEADER_DIR == str(scratch / "precompiled_headers")
    worker.keep_precompiled_headers_on_the_host(spec("inductor"))
    headers = tmp_path / "host" / "torchinductor_someone" / "precompiled_headers"
    assert (codecache._HEADER_DIR, codecache._HEADER_LOCK_DIR) == (str(headers),
                                                                   str(headers / "locks"))
    without = types.SimpleNamespace()
    monkeypatch.setitem(sys.modules, worker.INDUCTOR_CODE_CACHE, without)
    worker.keep_precompiled_headers_on_the_host(spec("inductor"))
    assert vars(without) == {}


class _TimedOnCuda:
    """A prepared model whose stack offers a device timer (its work is on CUDA streams)."""

    def device_timer(self):
        return object()


class _NotOnStreams:
    def device_timer(self):
        return None


@pytest.mark.parametrize("accelerator, prepared, device_busy, probes", [
    ("cuda", _TimedOnCuda(), True, True),
    ("cuda", _TimedOnCuda(), False, False),  # --no-device-busy
    ("cuda", _NotOnStreams(), True, False),
    ("cpu", _NotOnStreams(), True, False),
])
def test_the_device_busy_probe_runs_on_cuda_streams_unless_turned_off(
        tmp_path, accelerator, prepared, device_busy, probes):
    from core.config import ModelConfig, RunSettings
    from child import worker
    from child.device_busy import measure_device_busy

    spec = worker.ChildSpec(ModelConfig("builtin", "mlp"), experiment(accelerator),
                            RunSettings(device_busy=device_busy), Role.TIME, str(tmp_path))
    assert (worker.busy_probe(spec, prepared) is measure_device_busy) == probes
