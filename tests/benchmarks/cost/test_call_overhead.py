"""benchmarks/cost/call_overhead.py: the two calls it times return what the model computes, and
its flags are checked."""

from __future__ import annotations

import pytest
import torch

from benchmarks.cost import call_overhead


@pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier) dynamo may start a process
def test_both_calls_return_the_models_output_and_a_row_is_printed(capsys, probed_compiler):
    module_step, our_step = call_overhead.callables("builtin", "cnn", 2)
    expected, ours = module_step(), our_step()
    assert expected.shape == ours.shape == (2, 10)
    torch.testing.assert_close(ours, expected)
    assert call_overhead.main(["--model", "builtin:mlp", "--calls", "5", "--rounds", "1"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("| builtin:mlp"))
    module_us, step_us, ratio = (float(cell) for cell in row.strip("| ").split(" | ")[1:])
    assert module_us > 0 and step_us > 0
    # The cells are rounded to 0.1 µs and the ratio to 0.01, from the unrounded figures.
    rounding = module_us / step_us * (0.05 / module_us + 0.05 / step_us) + 0.005
    assert ratio == pytest.approx(module_us / step_us, abs=rounding + 1e-9)


@pytest.mark.e2e
def test_a_model_that_cannot_be_built_is_named_with_a_non_zero_exit(capsys):
    assert call_overhead.main(["--model", "builtin:nope", "--calls", "1", "--rounds", "1"]) == 1
    assert "| builtin:nope | failed:" in capsys.readouterr().out


def test_a_malformed_model_flag_is_named(capsys):
    with pytest.raises(SystemExit) as exited:
        call_overhead.main(["--model", "convnextv2_nano"])
    assert exited.value.code == 2
    assert "'convnextv2_nano'" in capsys.readouterr().err
