import subprocess
import sys

import pytest

from core.config import ExperimentConfig, ModelConfig, experiment_id, fingerprint, fingerprint_of_line

from tests.conftest import PROJECT_ROOT, cli_environment

MODEL = ModelConfig("builtin", "mlp")
EXPERIMENT = ExperimentConfig("cpu", None, "inductor", None, "eval")


@pytest.mark.e2e
def test_fingerprint_is_identical_in_another_process():
    code = (
        "from core.config import *; "
        "print(fingerprint(ModelConfig('builtin','mlp'), "
        "ExperimentConfig('cpu', None, 'inductor', None, 'eval')))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=cli_environment(), cwd=str(PROJECT_ROOT), check=True)
    assert other.stdout.strip() == fingerprint(MODEL, EXPERIMENT)


def test_fingerprint_changes_with_any_field():
    base = fingerprint(MODEL, EXPERIMENT)
    assert fingerprint(MODEL, ExperimentConfig("cpu", None, "inductor", None, "train")) != base
    assert fingerprint(ModelConfig("builtin", "cnn"), EXPERIMENT) != base
    flagged = ExperimentConfig("cpu", None, "inductor", None, "eval", xla_flags="--xla_foo")
    assert fingerprint(MODEL, flagged) != base


def test_round_trip_through_dicts():
    assert ExperimentConfig.from_dict(EXPERIMENT.to_dict()) == EXPERIMENT
    assert ModelConfig.from_dict(MODEL.to_dict()) == MODEL


def test_experiment_id_is_readable_and_path_safe():
    nasty = ModelConfig("builtin", "../../etc/passwd")
    identifier = experiment_id(nasty, EXPERIMENT, "inductor")
    assert "/" not in identifier and not identifier.startswith(".")
    assert "etc_passwd" in identifier
    assert experiment_id(MODEL, EXPERIMENT, "inductor").startswith("builtin-mlp-cpu-inductor-eval-fp32-")
    assert experiment_id(MODEL, EXPERIMENT, "inductor") != experiment_id(
        MODEL, ExperimentConfig("cpu", None, "inductor", None, "eval", xla_flags="x"), "inductor"
    )


def test_a_reduced_model_is_another_experiment():
    reduced = ModelConfig("builtin", "mlp", reduced=True)
    assert fingerprint(reduced, EXPERIMENT) != fingerprint(MODEL, EXPERIMENT)
    assert experiment_id(reduced, EXPERIMENT, "inductor") != experiment_id(MODEL, EXPERIMENT, "inductor")
    assert "reduced" in experiment_id(reduced, EXPERIMENT, "inductor")


def test_location_and_stack_name_are_not_identity():
    assert fingerprint(ModelConfig("torchbench", "x", torchbench_dir="/a"), EXPERIMENT) == \
        fingerprint(ModelConfig("torchbench", "x", torchbench_dir="/b"), EXPERIMENT)
    named = ExperimentConfig("cpu", None, "inductor", None, "eval", stack="dynamo")
    assert fingerprint(MODEL, named) == fingerprint(MODEL, EXPERIMENT)


def test_options_of_the_stack_are_identity_and_round_trip():
    perturbed = ExperimentConfig("cpu", None, "debug_perturb", None, "eval",
                                 stack_options=(("perturb_path", "[2]"),))
    plain = ExperimentConfig("cpu", None, "debug_perturb", None, "eval")
    assert fingerprint(MODEL, perturbed) != fingerprint(MODEL, plain)
    assert ExperimentConfig.from_dict(perturbed.to_dict()) == perturbed
    assert perturbed.to_dict()["stack_options"] == {"perturb_path": "[2]"}


def test_a_new_field_at_its_default_keeps_existing_fingerprints():
    line = {"model": {"suite_name": "builtin", "model_name": "mlp"},
            "experiment": {"accelerator": "cpu", "xla": None, "dynamo": "inductor",
                           "torch_xla2": None, "test": "eval"}}
    assert fingerprint_of_line(line) == fingerprint(MODEL, EXPERIMENT)


@pytest.mark.parametrize("line", [
    {"model": {"suite_name": "b", "model_name": "m"}, "experiment": "abc"},
    {"model": [], "experiment": {}},
    {"experiment": {"accelerator": "cpu"}},
])
def test_a_line_of_the_wrong_shape_has_no_fingerprint(line):
    assert fingerprint_of_line(line) is None


def test_the_seed_is_identity_and_the_default_seed_keeps_existing_fingerprints():
    import hashlib
    import json

    # The fingerprint a line of the default seed had before the seed was identity.
    before = hashlib.sha256(json.dumps(
        {"model": MODEL.identity(), "experiment": EXPERIMENT.identity()},
        sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert fingerprint(MODEL, EXPERIMENT) == fingerprint(MODEL, EXPERIMENT, 1234) == before
    assert fingerprint(MODEL, EXPERIMENT, 5) != before
    assert experiment_id(MODEL, EXPERIMENT, "inductor", 5).split("-")[-2] == "seed5"
    assert experiment_id(MODEL, EXPERIMENT, "inductor", 5) != experiment_id(MODEL, EXPERIMENT, "inductor")
    line = {"model": MODEL.to_dict(), "experiment": EXPERIMENT.to_dict()}
    assert fingerprint_of_line(line) == before
    assert fingerprint_of_line({**line, "seed": 1234}) == before
    assert fingerprint_of_line({**line, "seed": 5}) == fingerprint(MODEL, EXPERIMENT, 5)
    assert fingerprint_of_line({**line, "seed": True}) is None
    assert fingerprint_of_line({**line, "seed": "5"}) is None


def test_a_line_records_its_seed_and_its_fingerprint_follows_it():
    from core.config import RunSettings
    from core.schema import ResultLine, Status, VerificationCode

    for seed in (1234, 7, -(2**63), 2**63 - 1):
        line = ResultLine(MODEL, EXPERIMENT, RunSettings(seed=seed), Status.OK,
                          VerificationCode.VERIFIER_SKIPPED).to_dict()
        assert line["seed"] == seed
        assert line["fingerprint"] == fingerprint_of_line(line) == fingerprint(MODEL, EXPERIMENT, seed)
