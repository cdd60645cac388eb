"""The field table (core/fields.py): one entry per field, from which the configs, the flags,
the config JSON and a line's identity come."""

import dataclasses

import pytest

from core.config import ExperimentConfig, ModelConfig, line_identity
from core.fields import (
    EXPERIMENT,
    FIELDS,
    MODEL,
    REPORTED,
    SCHEMA_VERSION,
    UNVERSIONED,
    FieldError,
    fields_of,
    flagged_fields,
    parse_config,
)
from runner.plan.parser import build_parser


def test_the_configs_fields_are_the_tables_entries_in_order():
    assert [f.name for f in dataclasses.fields(ModelConfig)] == [f.name for f in fields_of(MODEL)]
    assert [f.name for f in dataclasses.fields(ExperimentConfig)] == [
        f.name for f in fields_of(EXPERIMENT)]
    assert len({spec.name for spec in FIELDS}) == len(FIELDS)


def test_every_flagged_field_is_a_flag_of_the_parser_with_the_tables_help():
    parser = build_parser()
    actions = {option: action for action in parser._actions for option in action.option_strings}
    for spec in flagged_fields():
        action = actions[spec.flags[0]]
        assert action.dest == spec.name
        assert spec.help in action.help
        if spec.dimension:
            assert action.help.startswith("(repeatable)")
        else:
            assert action.default == spec.default


def test_a_flag_takes_its_type_choices_and_range_from_the_table(capsys):
    parser = build_parser()
    args = parser.parse_args(["--batch-size=4", "--batch-size=None", "--optimizer=none",
                              "--xla=None", "--dynamo=aot_eager", "--seed=-3",
                              "--disable-fp16-bf16-reduction-math-sdp"])
    assert args.batch_size == [4, None] and args.optimizer is None and args.xla == [None]
    assert args.dynamo == ["aot_eager"] and args.seed == -3
    assert args.fp16_bf16_reduction_math_sdp is False
    assert parser.parse_args([]).fp16_bf16_reduction_math_sdp is True
    for bad, message in (("--amp-dtype=fp8", 'amp_dtype "fp8" is not one of: None, bf16, fp16'),
                         ("--batch-size=two", "argument --batch-size: 'two' is not an integer"),
                         ("--xla=XRT", "XRT was removed")):
        with pytest.raises(SystemExit) as stopped:
            parser.parse_args([bad])
        assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_fields_since_this_version_imply_their_value_for_older_lines():
    newer = [spec for spec in FIELDS if spec.since > UNVERSIONED]
    assert {spec.name for spec in newer} >= {"seed", "freezing"}
    assert all(spec.since <= SCHEMA_VERSION for spec in FIELDS)
    line = {"model": {"suite_name": "builtin", "model_name": "mlp"},
            "experiment": {"accelerator": "cpu", "xla": None, "dynamo": "inductor",
                           "torch_xla2": None, "test": "eval", "seed": 5,
                           "stack_options": {"b": "2", "a": "1"}}}
    identity = line_identity(line)
    assert identity["experiment"]["freezing"] is False  # what was measured before it existed
    assert identity["experiment"]["matmul_precision"] == "highest"  # not today's default
    assert identity["experiment"]["seed"] == 5
    assert list(identity["experiment"]["stack_options"]) == ["a", "b"]
    assert "torchbench_dir" not in identity["model"] and "stack" not in identity["experiment"]


def test_a_config_json_is_checked_by_the_table():
    assert parse_config(EXPERIMENT, {"accelerator": "cpu", "xla": None, "dynamo": None,
                                     "torch_xla2": None, "test": "eval", "seed": 2},
                        "--experiment-config")["seed"] == 2
    with pytest.raises(FieldError, match="--experiment-config: unknown key"):
        parse_config(EXPERIMENT, {"accelerator": "cpu", "colour": 1}, "--experiment-config")
    with pytest.raises(FieldError, match="--experiment-config: test must be given"):
        parse_config(EXPERIMENT, {"accelerator": "cpu", "xla": None, "dynamo": None,
                                  "torch_xla2": None}, "--experiment-config")
    with pytest.raises(FieldError, match="must be a JSON object, not list"):
        parse_config(MODEL, [], "--model-config")


def test_what_the_reports_label_is_every_identity_switch():
    labelled = {spec.name for spec in REPORTED}
    assert {"fullgraph", "fp16_bf16_reduction_math_sdp", "stack_options", "seed",
            "matmul_precision", "freezing", "reduced"} <= labelled
    assert not {"accelerator", "test", "precision", "batch_size", "stack"} & labelled
