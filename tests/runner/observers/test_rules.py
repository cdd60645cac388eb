"""Which flag applies to which stack, and the child environment the flags need."""

from pathlib import Path

import pytest

from runner.config import ExperimentConfig, RunSettings
from runner.observers.rules import (
    append_xla_flag,
    inapplicable_notes,
    observability_environment,
    stack_family,
)

EAGER = ExperimentConfig("cpu", None, None, None, "eval")
INDUCTOR = ExperimentConfig("cpu", None, "inductor", None, "eval")
LAZY = ExperimentConfig("cpu", "PJRT", None, None, "eval")
OPENXLA = ExperimentConfig("cpu", "PJRT", "openxla", None, "eval")
TORCHAX = ExperimentConfig("cpu", None, None, "extract_jax", "eval")


@pytest.mark.parametrize("experiment, family", [
    (EAGER, "eager"), (INDUCTOR, "dynamo"), (LAZY, "xla_lazy"), (OPENXLA, "openxla"),
    (TORCHAX, "torchax"),
])
def test_stack_family(experiment, family):
    assert stack_family(experiment) == family


def test_no_flag_no_note():
    for experiment in (EAGER, INDUCTOR, LAZY, OPENXLA, TORCHAX):
        assert inapplicable_notes(experiment, RunSettings()) == []


def test_each_inapplicable_flag_gives_one_note_naming_it():
    settings = RunSettings(collect_dynamo_counters=True, dump_pytorch_xla_metrics=True,
                           dump_hlo=True, save_ir_format="hlo", profile_cuda_cpu=True)
    eager = inapplicable_notes(EAGER, settings)
    assert [note.split()[0] for note in eager] == [
        "--collect-dynamo-counters", "--dump-pytorch-xla-metrics", "--dump-hlo",
        "--save-ir-format=hlo"]
    assert all("eager stack" in note for note in eager)
    assert [n.split()[0] for n in inapplicable_notes(OPENXLA, settings)] == []
    assert [n.split()[0] for n in inapplicable_notes(LAZY, settings)] == [
        "--collect-dynamo-counters"]
    torchax = [n.split()[0] for n in inapplicable_notes(TORCHAX, settings)]
    assert torchax == ["--collect-dynamo-counters", "--profile-cuda-cpu",
                       "--dump-pytorch-xla-metrics"]


def test_torchax_saves_hlo_and_stablehlo_but_has_no_lazy_text():
    assert inapplicable_notes(TORCHAX, RunSettings(save_ir_format="stablehlo")) == []
    (note,) = inapplicable_notes(TORCHAX, RunSettings(save_ir_format="text"))
    assert "torchax" in note and "text" in note


def test_an_unknown_ir_format_is_refused_by_name():
    with pytest.raises(ValueError, match="'mlir'"):
        RunSettings(save_ir_format="mlir")


def test_dump_hlo_appends_to_existing_xla_flags(tmp_path):
    settings = RunSettings(dump_hlo=True)
    added = observability_environment(LAZY, settings, tmp_path, {"XLA_FLAGS": "--xla_foo=1"})
    assert added["XLA_FLAGS"] == f"--xla_foo=1 --xla_dump_to={tmp_path.resolve() / 'hlo'}"
    added = observability_environment(TORCHAX, settings, tmp_path, {})
    assert added["XLA_FLAGS"] == f"--xla_dump_to={tmp_path.resolve() / 'hlo'}"
    assert observability_environment(INDUCTOR, settings, tmp_path, {}) == {}


def test_ir_files_of_torch_xla_stacks_come_from_its_environment(tmp_path):
    added = observability_environment(OPENXLA, RunSettings(save_ir_format="stablehlo"),
                                      Path(tmp_path), {})
    assert added == {
        "XLA_SAVE_TENSORS_FILE": str(tmp_path.resolve() / "ir" / "graphs.stablehlo.txt"),
        "XLA_SAVE_TENSORS_FMT": "stablehlo",
    }
    # torchax writes its IR itself; eager has none.
    assert observability_environment(TORCHAX, RunSettings(save_ir_format="hlo"), tmp_path, {}) == {}
    assert observability_environment(EAGER, RunSettings(save_ir_format="hlo"), tmp_path, {}) == {}


def test_append_xla_flag():
    assert append_xla_flag(None, "--a") == "--a"
    assert append_xla_flag("", "--a") == "--a"
    assert append_xla_flag(" --b ", "--a") == "--b --a"
