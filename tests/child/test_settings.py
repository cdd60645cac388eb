"""The settings snapshot reads torch's switches as they are, in both spellings, and never
fails the line."""

from __future__ import annotations

import json
import os

import pytest
import torch

from child import settings as s


@pytest.fixture
def restored():
    """torch's switches that the tests change, put back afterwards."""
    precision = torch.get_float32_matmul_precision()
    benchmark, sdp_math = torch.backends.cudnn.benchmark, torch.backends.cuda.math_sdp_enabled()
    yield
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.benchmark = benchmark
    torch.backends.cuda.enable_math_sdp(sdp_math)


def test_the_snapshot_follows_the_switches_and_is_json(restored):
    torch.set_float32_matmul_precision("highest")
    before = s.settings_snapshot()
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.enable_math_sdp(False)
    after = s.settings_snapshot()
    assert before["float32_matmul_precision"] == "highest"
    assert after["float32_matmul_precision"] == "high"
    assert after["cudnn.benchmark"] is True and after["sdpa.math"] is False
    assert json.loads(json.dumps(after)) == after
    differing = {key for key, _, _ in s.setting_differences(before, after)}
    assert {"float32_matmul_precision", "cudnn.benchmark", "sdpa.math"} <= differing
    # The matmul precision in its newer spelling follows it (where torch has it).
    if "cuda.matmul.fp32_precision" in after:
        assert "cuda.matmul.fp32_precision" in differing


def test_grad_mode_and_autocast_are_read_inside_the_iterations_context():
    outside = s.settings_snapshot("cpu")
    inside = s.settings_snapshot("cpu", lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    assert outside["autocast.cpu.enabled"] is False and "autocast.cpu.dtype" not in outside
    assert inside["autocast.cpu.enabled"] is True
    assert inside["autocast.cpu.dtype"] == "torch.bfloat16"
    assert inside["autocast.cache_enabled"] is True
    assert s.settings_snapshot("cpu", torch.no_grad)["grad_enabled"] is False
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


def test_config_values_that_differ_from_their_defaults_and_compile_options():
    from torch._inductor import config

    with config.patch({"freezing": True, "max_autotune": config.max_autotune}):
        found = s.settings_snapshot()
        changed = s.changed_config(config, {"triton.cudagraphs": True, "epilogue_fusion":
                                            config._config["epilogue_fusion"].default})
    assert found["inductor.freezing"] is True
    # Set to its default value: not a difference.
    assert "inductor.max_autotune" not in found
    assert changed["triton.cudagraphs"] is True and changed["freezing"] is True
    assert "epilogue_fusion" not in changed
    assert "inductor.freezing" not in s.settings_snapshot()


def test_a_reading_that_fails_is_recorded_and_the_snapshot_goes_on(monkeypatch):
    def broken():
        raise RuntimeError("mixed legacy and new TF32 settings")

    monkeypatch.setattr(torch, "get_float32_matmul_precision", broken)
    found = s.settings_snapshot()
    assert found["float32_matmul_precision"].startswith("unreadable: RuntimeError: mixed")
    assert "num_threads" in found

    def failing_context():
        raise ValueError("no such device")

    assert "unreadable" in s.settings_snapshot("cpu", failing_context)["autocast"]


def test_allocator_and_thread_variables_are_recorded(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    found = s.settings_snapshot()
    assert found["env.PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert found["num_threads"] == torch.get_num_threads()
    assert found["cpu_affinity"]


def test_where_a_line_ran_is_not_a_difference():
    assert s.setting_differences({"cpu_affinity": [0], "a": 1}, {"cpu_affinity": [1], "a": 1}) == []
    assert s.setting_differences({"a": 1}, {"b": 2}) == [("a", 1, None), ("b", None, 2)]


def test_values_become_json():
    assert s.jsonable(torch.float16) == "torch.float16"
    assert s.jsonable({"x": {3, 1}}) == {"x": [1, 3]}
    assert s.jsonable(len) == "builtins.len"


# A results line records the settings its timing process timed under (docs/settings.md).
@pytest.mark.e2e
def test_the_line_holds_the_iterations_autocast_grad_mode_and_compile_options(run_cli):
    run = run_cli("--accelerator=cpu", "--xla=None", "--dynamo=inductor", "--test=eval",
                  "-k", "^mlp$", "--repeat=2", "--warmup=1", "--precision=amp", "--freezing")
    assert run.returncode == 0, run.stderr
    (line,) = run.lines()
    settings = line["environment"]["torch_settings"]
    # Read inside the context the timed iteration enters: no grad, autocast to bf16 (CPU).
    assert settings["grad_enabled"] is False
    assert settings["autocast.cpu.enabled"] is True
    assert settings["autocast.cpu.dtype"] == "torch.bfloat16"
    # The compile's own options, merged over inductor's global settings.
    assert settings["inductor.freezing"] is True
    assert settings["float32_matmul_precision"] == "high" and settings["num_threads"] == 1


@pytest.mark.e2e
def test_a_lines_settings_are_the_same_whether_its_workload_was_counted_or_cached(run_cli,
                                                                                tmp_path):
    # Counting the workload runs torch's decompositions, which import dynamo at their first
    # call: a fresh interpreter (spawned) that counted, and one that found the count cached,
    # time under the same settings (dynamo's, inductor's and functorch's among them).
    seed = str(1000 + int.from_bytes(os.urandom(4), "big"))  # a count no other run made
    lines = []
    for name in ("counted", "cached"):
        run = run_cli("--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval",
                      "-k", "^mlp$", "--repeat=1", "--warmup=1", f"--seed={seed}",
                      "--start-method=spawn", output_dir=tmp_path / name)
        assert run.returncode == 0, run.stderr
        (line,) = run.lines()
        lines.append(line)
    assert [line["workload"]["cached"] for line in lines] == [False, True]
    counted, cached = ({name: value for name, value in line["environment"]["torch_settings"].items()
                        if name not in s.PLACEMENT_KEYS} for line in lines)
    assert "dynamo.loaded" not in cached
    assert counted == cached
