"""The configuration columns of the reports, read from the field table (core.fields).

A configuration (a column of the dashboard, a row of the summaries, a group of the history)
is the experiments that share every configuration column's value. The columns come from the
table, and nowhere else:

- every identity field with `report=COLUMN` is a column of its own, named as the field;
- the fields with `report=STACK` (xla, dynamo, torch_xla2) make one column, `stack`: the
  stack's label (inductor, PJRT+openxla, eager);
- the fields with `report=LABEL` make one column, `extras`: their `name=value` parts where
  a value is not the default (fullgraph=True seed=7).

A field's column is bare (its value alone: cpu, eval, fp32) when the field always has a
value from a closed set (a required field, or one with choices and a default); otherwise
it reads blank at its default and shows as `name=value` where set (mode=cudagraphs).

The baseline a configuration is compared against (`baseline_values`) has the baseline's
stack, and, of every other column, the configuration's value where the field says the
baseline shares it (`baseline_shares`: numerics do), else the column's default.

Everything that groups or shows a configuration is generated from `config_columns()`: the
reports' SQL (reports/read/engine.py), `ConfigKey` and the records (reports/read/load.py),
the history's groups, the CSV's headers and the dashboard's filters.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from core import fields as table

STACK_COLUMN = "stack"
LABELS_COLUMN = "extras"


@dataclass(frozen=True)
class ConfigColumn:
    """One column of a configuration in the reports."""

    name: str
    #: The fields it shows: one field, the stack's parts, or the label fields.
    fields: tuple[table.Field, ...]
    #: Shown as its value alone (cpu, eval); else as `label=value` where not blank.
    bare: bool = False
    #: The name of `label=value`.
    label: str = ""
    #: What a line without the value reads as ('' for a column shown only where set).
    missing: str = ""
    #: Values that read as the default, which is blank ('') for a column shown where set.
    blanks: tuple[str, ...] = ()
    #: How tables show a blank value (inductor's mode: "default").
    shown_default: str = ""
    #: Whether a configuration's baseline has its value (else the default).
    baseline_shares: bool = True
    #: The values are a closed set (shown before free-form ones).
    closed: bool = False

    @property
    def default(self) -> str:
        """The value of the column at its field's default."""
        return self.missing if self.bare else ""

    def shown(self, value: str) -> str:
        """A value as tables show it (a blank one as the column names its default)."""
        return value or self.shown_default

    def part(self, value: str) -> str:
        """The value as a configuration's label shows it ('' where not shown)."""
        if self.bare or self.name == LABELS_COLUMN:
            return value
        return f"{self.label}={value}" if value else ""


def text(value: Any) -> str:
    """A field's value as a column holds it (booleans as True/False, None as '')."""
    return "" if value is None else str(value)


def _field_column(spec: table.Field) -> ConfigColumn:
    closed = spec.choices is not None or spec.kind is bool
    bare = spec.required or (spec.choices is not None and spec.default is not None)
    missing = "?" if spec.required else text(spec.implied_value)
    if bare:
        blanks: tuple[str, ...] = ()
    else:
        # A line without the value measured its implied value: blank where that is the default.
        blanks = tuple(dict.fromkeys(("", text(spec.default),
                                      *((spec.report_default,) if spec.report_default else ()))))
        missing = "" if missing in blanks else missing
    return ConfigColumn(spec.name, (spec,), bare=bare, label=spec.report_name or spec.name,
                        missing=missing, blanks=blanks, shown_default=spec.report_default or "",
                        baseline_shares=spec.baseline_shares, closed=closed)


@lru_cache(maxsize=None)
def config_columns() -> tuple[ConfigColumn, ...]:
    """The configuration columns, in the order configurations sort by: the table's order
    (of the experiment's fields), the stack where its first part stands, the label fields
    where the first of them stands."""
    columns: list[ConfigColumn] = []
    stack = tuple(f for f in table.FIELDS if f.identity and f.report == table.STACK)
    labels = table.reported_fields()
    for spec in table.fields_of(table.EXPERIMENT):
        placed = {column.name for column in columns}
        if not spec.identity:
            continue
        if spec.report == table.COLUMN:
            columns.append(_field_column(spec))
        elif spec.report == table.STACK and STACK_COLUMN not in placed:
            columns.append(ConfigColumn(STACK_COLUMN, stack, bare=True, missing="?", closed=True))
        elif spec.report == table.LABEL and LABELS_COLUMN not in placed:
            columns.append(ConfigColumn(LABELS_COLUMN, labels))
    return tuple(columns)


@lru_cache(maxsize=None)
def shown_columns() -> tuple[ConfigColumn, ...]:
    """The columns in the order labels and tables show them: the bare ones, then the
    others with a closed set of values, then the free-form ones, then the label fields."""
    columns = config_columns()

    def rank(column: ConfigColumn) -> int:
        if column.bare:
            return 0
        if column.name == LABELS_COLUMN:
            return 3
        return 1 if column.closed else 2

    return tuple(sorted(columns, key=rank))


def label_of(values: Mapping[str, str]) -> str:
    """A configuration's readable name: 'cpu inductor eval fp32 mode=cudagraphs'."""
    parts = (column.part(values.get(column.name, column.default)) for column in shown_columns())
    return " ".join(part for part in parts if part)


@lru_cache(maxsize=None)
def not_shared_labels() -> frozenset[str]:
    """The label fields whose value a configuration's baseline does not share."""
    return frozenset(spec.name for spec in table.reported_fields() if not spec.baseline_shares)


def baseline_values(values: Mapping[str, str], baseline_stack: str) -> dict[str, str]:
    """The column values of the configuration that `values` is compared against: the
    baseline's stack; of the label fields, the parts the baseline shares; of every other
    column, the value where the baseline shares it, else the column's default."""
    others = not_shared_labels()
    found: dict[str, str] = {}
    for column in config_columns():
        value = values.get(column.name, column.default)
        if column.name == STACK_COLUMN:
            found[column.name] = baseline_stack
        elif column.name == LABELS_COLUMN:
            found[column.name] = " ".join(part for part in value.split(" ")
                                          if part.split("=", 1)[0] not in others)
        else:
            found[column.name] = value if column.baseline_shares else column.default
    return found


@lru_cache(maxsize=None)
def work_fields() -> tuple[table.Field, ...]:
    """The fields that change the work an experiment does (its workload signature)."""
    return tuple(f for f in table.FIELDS if f.changes_work)
