import dataclasses
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


def test_a_line_lacking_a_field_reads_as_what_lines_before_it_measured():
    """Lines written before a field existed imply its value of that time (core.fields:
    implied), not today's default: a changed default never makes two experiments one."""
    line = {"model": {"suite_name": "builtin", "model_name": "mlp"},
            "experiment": {"accelerator": "cpu", "xla": None, "dynamo": "inductor",
                           "torch_xla2": None, "test": "eval"}}
    then = ExperimentConfig("cpu", None, "inductor", None, "eval", matmul_precision="highest",
                            fp16_bf16_reduction_math_sdp=False, optimizer=None)
    assert fingerprint_of_line(line) == fingerprint(MODEL, then) != fingerprint(MODEL, EXPERIMENT)


def test_every_identity_field_is_in_the_fingerprint_at_any_value():
    from core.fields import EXPERIMENT as SCOPE, fields_of

    identity = EXPERIMENT.identity()
    assert sorted(identity) == sorted(f.name for f in fields_of(SCOPE) if f.identity)
    assert identity["matmul_precision"] == "high" and identity["seed"] == 1234
    assert fingerprint(MODEL, EXPERIMENT) != fingerprint(
        MODEL, ExperimentConfig("cpu", None, "inductor", None, "eval", matmul_precision="highest"))


@pytest.mark.parametrize("line", [
    {"model": {"suite_name": "b", "model_name": "m"}, "experiment": "abc"},
    {"model": [], "experiment": {}},
    {"experiment": {"accelerator": "cpu"}},
])
def test_a_line_of_the_wrong_shape_has_no_fingerprint(line):
    assert fingerprint_of_line(line) is None


def test_the_seed_is_the_experiments_and_in_its_identity():
    seeded = ExperimentConfig("cpu", None, "inductor", None, "eval", seed=5)
    assert fingerprint(MODEL, seeded) != fingerprint(MODEL, EXPERIMENT)
    assert experiment_id(MODEL, seeded, "inductor").split("-")[-2] == "seed5"
    assert experiment_id(MODEL, seeded, "inductor") != experiment_id(MODEL, EXPERIMENT, "inductor")
    # Lines of version 1 kept the seed at the top level only.
    line = {"model": MODEL.to_dict(), "experiment": {
        k: v for k, v in EXPERIMENT.to_dict().items() if k != "seed"}}
    assert fingerprint_of_line(line) == fingerprint(MODEL, EXPERIMENT)
    assert fingerprint_of_line({**line, "seed": 1234}) == fingerprint(MODEL, EXPERIMENT)
    assert fingerprint_of_line({**line, "seed": 5}) == fingerprint(MODEL, seeded)
    assert fingerprint_of_line({**line, "seed": True}) is None
    assert fingerprint_of_line({**line, "seed": "5"}) is None


def test_a_line_records_its_version_seed_and_every_identity_field():
    from core.config import RunSettings
    from core.fields import SCHEMA_VERSION, identity_fields
    from core.schema import ResultLine, Status, VerificationCode

    for seed in (1234, 7, -(2**63), 2**63 - 1):
        experiment = ExperimentConfig("cpu", None, "inductor", None, "eval", seed=seed)
        line = ResultLine(MODEL, experiment, RunSettings(), Status.OK,
                          VerificationCode.VERIFIER_SKIPPED).to_dict()
        assert line["schema_version"] == SCHEMA_VERSION
        assert line["seed"] == line["experiment"]["seed"] == seed
        assert line["fingerprint"] == fingerprint_of_line(line) == fingerprint(MODEL, experiment)
        for spec in identity_fields("experiment"):
            assert spec.key in line["experiment"], spec.name
        for spec in identity_fields("model"):
            assert spec.key in line["model"], spec.name


@pytest.mark.parametrize("values, message", [
    ({"test": ["eval"]}, 'test must be a string, not ["eval"]'),
    ({"precision": "fp64"}, 'precision "fp64" is not one of: fp32, bf16, fp16, amp'),
    ({"batch_size": float("inf")}, "batch_size must be a finite integer, not Infinity"),
    ({"batch_size": 0}, "batch_size 0 must be at least 1"),
    ({"batch_size": 2.0}, "batch_size must be an integer, not 2.0"),
    ({"seed": 2**63}, "seed 9223372036854775808 must be at most 9223372036854775807"),
    ({"fullgraph": 1}, "fullgraph must be true or false, not 1"),
    ({"dynamo": "induc tor"}, "dynamo 'induc tor' is not a valid name"),
    ({"stack_options": {"a": 1}}, 'stack_options must map strings to strings, not {"a": 1}'),
])
def test_a_config_refuses_a_bad_value_naming_it(values, message):
    from core.fields import FieldError

    given = {"accelerator": "cpu", "xla": None, "dynamo": None, "torch_xla2": None,
             "test": "eval", **values}
    with pytest.raises(FieldError) as caught:
        ExperimentConfig(**given)
    assert str(caught.value) == message
    with pytest.raises(FieldError, match="reduced must be true or false, not \"false\""):
        ModelConfig("builtin", "mlp", reduced="false")


def test_a_field_where_it_does_not_apply_never_splits_an_experiment():
    # Planning sets such a field to its inapplicable value; a config written by hand that
    # leaves the default (an optimizer in eval, fullgraph without dynamo) is the same one.
    model = ModelConfig("builtin", "mlp")
    eval_run = ExperimentConfig("cpu", None, None, None, "eval")
    assert eval_run.optimizer == "harness"
    for same in (dataclasses.replace(eval_run, optimizer=None),
                 dataclasses.replace(eval_run, optimizer="sgd"),
                 dataclasses.replace(eval_run, fullgraph=True)):
        assert fingerprint(model, same) == fingerprint(model, eval_run)
    cuda_train = ExperimentConfig("cuda", None, "inductor", None, "train")
    assert fingerprint(model, cuda_train) != fingerprint(
        model, dataclasses.replace(cuda_train, optimizer=None))
    assert fingerprint(model, cuda_train) != fingerprint(
        model, dataclasses.replace(cuda_train, fullgraph=True))
