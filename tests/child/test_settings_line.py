"""A results line records the settings its timing process timed under (docs/settings.md)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)


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
