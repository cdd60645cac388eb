"""The observer registry: flags, which stack each applies to, and the child environment."""

import argparse
from pathlib import Path

import pytest

import backends
from core.config import ExperimentConfig, RunSettings
import observers
from observers import inapplicable_notes, observability_environment
from observers.hlo_dump import append_xla_flag

EAGER = ExperimentConfig("cpu", None, None, None, "eval")
INDUCTOR = ExperimentConfig("cpu", None, "inductor", None, "eval")
LAZY = ExperimentConfig("cpu", "PJRT", None, None, "eval")
OPENXLA = ExperimentConfig("cpu", "PJRT", "openxla", None, "eval")
TORCHAX = ExperimentConfig("cpu", None, None, "extract_jax", "eval")


def stack(experiment):
    return backends.stack_for(experiment)


def settings(**observe):
    return RunSettings(observe=observe)


def test_every_observer_flag_is_declared_once_and_parsed():
    options = [flag.option for o in observers.all_observers() for flag in o.flags]
    assert len(options) == len(set(options))
    assert {"--collect-dynamo-counters", "--dump-dynamo-counters", "--profile-cuda-cpu",
            "--profile-cuda-cpu-individual-ops", "--dump-pytorch-profiles",
            "--dump-pytorch-xla-metrics", "--dump-hlo", "--save-ir-format", "--profile-xla",
            "--profile-xla-duration-ms", "--save-output", "--collect-full-output"} == set(options)
    parser = argparse.ArgumentParser()
    observers.add_flags(parser.add_argument_group("observe"))
    args = parser.parse_args(["--dump-hlo", "--save-ir-format", "stablehlo"])
    assert observers.options_from(args) == {"dump_hlo": True, "save_ir_format": "stablehlo"}
    args = parser.parse_args(["--profile-xla", "--profile-xla-duration-ms=250"])
    assert observers.options_from(args) == {"profile_xla": True, "profile_xla_duration_ms": 250}
    for wrong in (["--save-ir-format", "mlir"], ["--profile-xla-duration-ms", "0"],
                  ["--profile-xla-duration-ms", "soon"]):
        with pytest.raises(SystemExit):
            parser.parse_args(wrong)


def test_profile_xla_applies_to_xla_stacks_and_save_output_to_all():
    asked = settings(profile_xla=True, profile_xla_duration_ms=100, save_output=True)
    for experiment in (LAZY, OPENXLA, TORCHAX):
        assert inapplicable_notes(stack(experiment), asked) == []
    (note,) = inapplicable_notes(stack(INDUCTOR), asked)
    assert note.startswith("--profile-xla does not apply to the dynamo stack")
    duration_only = settings(profile_xla_duration_ms=100)
    assert [o.name for o in observers.all_observers() if o.requested(duration_only)] == [
        "dynamo_counters"]


@pytest.mark.parametrize("experiment, name", [
    (EAGER, "eager"), (INDUCTOR, "dynamo"), (LAZY, "xla_lazy"), (OPENXLA, "openxla"),
    (TORCHAX, "torchax"),
])
def test_the_registry_picks_one_stack(experiment, name):
    assert stack(experiment).name == name


def test_no_flag_no_note():
    for experiment in (EAGER, INDUCTOR, LAZY, OPENXLA, TORCHAX):
        assert inapplicable_notes(stack(experiment), RunSettings()) == []


def test_each_inapplicable_flag_gives_one_note_naming_it():
    asked = settings(collect_dynamo_counters=True, dump_pytorch_xla_metrics=True,
                     dump_hlo=True, save_ir_format="hlo", profile_cuda_cpu=True)
    eager = inapplicable_notes(stack(EAGER), asked)
    assert [note.split()[0] for note in eager] == [
        "--collect-dynamo-counters", "--dump-pytorch-xla-metrics", "--dump-hlo",
        "--save-ir-format=hlo"]
    assert all("eager stack" in note for note in eager)
    assert [n.split()[0] for n in inapplicable_notes(stack(OPENXLA), asked)] == []
    assert [n.split()[0] for n in inapplicable_notes(stack(LAZY), asked)] == [
        "--collect-dynamo-counters"]
    torchax = [n.split()[0] for n in inapplicable_notes(stack(TORCHAX), asked)]
    assert torchax == ["--collect-dynamo-counters", "--profile-cuda-cpu",
                       "--dump-pytorch-xla-metrics"]


def test_torchax_saves_hlo_and_stablehlo_but_has_no_lazy_text():
    assert inapplicable_notes(stack(TORCHAX), settings(save_ir_format="stablehlo")) == []
    (note,) = inapplicable_notes(stack(TORCHAX), settings(save_ir_format="text"))
    assert "torchax" in note and "text" in note


def test_dump_hlo_appends_to_existing_xla_flags(tmp_path):
    asked = settings(dump_hlo=True)
    added = observability_environment(stack(LAZY), asked, tmp_path, {"XLA_FLAGS": "--xla_foo=1"})
    assert added["XLA_FLAGS"] == f"--xla_foo=1 --xla_dump_to={tmp_path.resolve() / 'hlo'}"
    added = observability_environment(stack(TORCHAX), asked, tmp_path, {})
    assert added["XLA_FLAGS"] == f"--xla_dump_to={tmp_path.resolve() / 'hlo'}"
    assert observability_environment(stack(INDUCTOR), asked, tmp_path, {}) == {}


def test_ir_files_of_torch_xla_stacks_come_from_its_environment(tmp_path):
    added = observability_environment(stack(OPENXLA), settings(save_ir_format="stablehlo"),
                                      Path(tmp_path), {})
    assert added == {
        "XLA_SAVE_TENSORS_FILE": str(tmp_path.resolve() / "ir" / "graphs.stablehlo.txt"),
        "XLA_SAVE_TENSORS_FMT": "stablehlo",
    }
    # torchax writes its IR itself; eager has none.
    assert observability_environment(stack(TORCHAX), settings(save_ir_format="hlo"), tmp_path, {}) == {}
    assert observability_environment(stack(EAGER), settings(save_ir_format="hlo"), tmp_path, {}) == {}


def test_append_xla_flag():
    assert append_xla_flag(None, "--a") == "--a"
    assert append_xla_flag("", "--a") == "--a"
    assert append_xla_flag(" --b ", "--a") == "--b --a"
