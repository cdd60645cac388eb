"""The reports' configuration columns, read from the field table (core.columns)."""

from core import fields
from core.columns import (LABELS_COLUMN, STACK_COLUMN, baseline_values, config_columns, label_of,
                          shown_columns, work_fields)


def test_the_columns_are_the_tables_column_fields_the_stack_and_the_labels():
    names = [column.name for column in config_columns()]
    assert names == ["accelerator", STACK_COLUMN, "test", "precision", "xla_flags", LABELS_COLUMN, "mode"]
    columns = {column.name: column for column in config_columns()}
    assert {f.name for f in columns[STACK_COLUMN].fields} == {"xla", "dynamo", "torch_xla2"}
    assert set(columns[LABELS_COLUMN].fields) == set(fields.reported_fields())
    assert (columns["accelerator"].missing, columns["precision"].missing) == ("?", "fp32")
    assert columns["mode"].blanks == ("", "default") and columns["mode"].shown("") == "default"
    assert [c.name for c in shown_columns()][-3:] == ["mode", "xla_flags", LABELS_COLUMN]


def test_a_label_and_a_baseline_from_the_tables_baseline_shares():
    values = {"accelerator": "cuda", "stack": "inductor", "test": "eval", "precision": "bf16",
              "xla_flags": "--x=1", "extras": "fullgraph=True seed=7", "mode": "cudagraphs"}
    assert label_of(values) == "cuda inductor eval bf16 mode=cudagraphs flags=--x=1 fullgraph=True seed=7"
    # The baseline shares the numerics (the seed), not the compiler's switches, mode or flags.
    assert baseline_values(values, "eager") == {
        "accelerator": "cuda", "stack": "eager", "test": "eval", "precision": "bf16",
        "xla_flags": "", "extras": "seed=7", "mode": ""}


def test_the_fields_that_change_the_work_key_the_workload_signature():
    assert {f.name for f in work_fields()} == {
        "suite_name", "model_name", "reduced", "accelerator", "test", "precision", "amp_dtype",
        "seed", "optimizer"}
