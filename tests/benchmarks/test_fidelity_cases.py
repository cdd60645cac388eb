"""benchmarks/fidelity_cases.py: the GPU comparison's cases cover both whole lists."""

from __future__ import annotations

import pytest

from benchmarks import fidelity_cases as cases

REFERENCE = cases.DEFAULT_REFERENCE
pytestmark = pytest.mark.skipif(not (REFERENCE / "timm_models_list.txt").exists(),
                                reason=f"the harness's lists are not beside the clone ({REFERENCE})")


def listed_names(name: str, separator: str | None) -> list[str]:
    return [line.split(separator)[0].strip() for line in (REFERENCE / name).read_text().splitlines()
            if line.strip()]


def test_every_offline_model_of_both_lists_in_inference_and_some_in_training(capsys):
    assert cases.main(["--training", "16"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.strip() and not line.startswith("#")]
    inference = {(suite, model) for suite, model, _, _, _, test in rows if test == "eval"}
    hub = [name for name in listed_names("huggingface_models_list.txt", ",") if "/" in name]
    assert {model for suite, model in inference if suite == "huggingface"} == set(
        listed_names("huggingface_models_list.txt", ",")) - set(hub)
    assert {model for suite, model in inference if suite == "timm"} == {
        name.split(".")[0] for name in listed_names("timm_models_list.txt", None)}
    training = [row for row in rows if row[5] == "train"]
    assert len(training) == 16 and {row[0] for row in training} == {"huggingface", "timm"}
    for suite, model, batch, precision, mode, test in rows:
        assert mode == "default"
        assert precision == ("amp" if suite == "timm" or test == "train" else "bf16")


def test_spread_picks_evenly_and_keeps_both_ends():
    assert cases.spread(list(range(10)), 4) == [0, 3, 6, 9]
    assert cases.spread([1, 2], 5) == [1, 2]
