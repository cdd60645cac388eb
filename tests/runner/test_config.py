import subprocess
import sys

from runner.config import ExperimentConfig, ModelConfig, experiment_id, fingerprint

from tests.conftest import PROJECT_ROOT, cli_environment

MODEL = ModelConfig("builtin", "mlp")
EXPERIMENT = ExperimentConfig("cpu", None, "inductor", None, "eval")


def test_fingerprint_is_identical_in_another_process():
    code = (
        "from runner.config import *; "
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
    identifier = experiment_id(nasty, EXPERIMENT)
    assert "/" not in identifier and not identifier.startswith(".")
    assert "etc_passwd" in identifier
    assert experiment_id(MODEL, EXPERIMENT).startswith("builtin-mlp-cpu-inductor-eval-fp32-")
    assert experiment_id(MODEL, EXPERIMENT) != experiment_id(
        MODEL, ExperimentConfig("cpu", None, "inductor", None, "eval", xla_flags="x")
    )
