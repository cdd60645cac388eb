"""The report's record of one experiment: what a results line says, read once.

`Record` is the one type the reports read a line into (as `core.schema.ResultLine` is the
one that writes it): the line's place, identity, status and timed runs (`RecordBase`), and
one field per measured figure of `core.measures`, named as the figure, made from that
table. `ConfigKey` is its configuration (core.columns).
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from functools import lru_cache, total_ordering
from typing import Any, Iterator, Optional

from core.columns import baseline_values, config_columns, label_of
from core.measures import measures
from core.schema import VERIFICATION_FAILED, Status, VerificationCode
from reports.stats import Interval, median_interval

#: Codes with a verdict on the stack's output (the others: not verified).
VERDICT_CODES = frozenset({VerificationCode.PASS.value, *VERIFICATION_FAILED})


@total_ordering
class ConfigKey:
    """What groups experiments into one configuration (a column of the dashboard): the
    value of every configuration column (core.columns.config_columns), as named pairs in
    the columns' order, which is also how configurations sort.

    Made from values in the columns' order and/or by name (`ConfigKey("cpu", "inductor",
    "eval", "fp32", mode="cudagraphs")`); a column not given holds its default. Each
    column's value reads as an attribute (`key.stack`, `key.mode`).

    The batch size is not part of it: it is the model's (the line's batch size used), shown
    per experiment and matched against the baseline's.
    """

    __slots__ = ("values", "_label")

    def __init__(self, *values: str, **named: str) -> None:
        columns = config_columns()
        if len(values) == len(columns) and not named:
            found = tuple(values)
        else:
            if len(values) > len(columns):
                raise TypeError(f"ConfigKey takes at most {len(columns)} values, not {len(values)}")
            given = dict(zip((column.name for column in columns), values))
            unknown = set(named) - set(_column_index())
            if unknown or set(named) & set(given):
                raise TypeError(f"ConfigKey: unknown or repeated column(s) "
                                f"{sorted(unknown or set(named) & set(given))}")
            given.update(named)
            found = tuple(str(given.get(column.name, column.default)) for column in columns)
        object.__setattr__(self, "values", found)
        object.__setattr__(self, "_label", None)

    def __getattr__(self, name: str) -> str:
        index = _column_index().get(name)
        if index is None:
            raise AttributeError(f"ConfigKey has no column {name!r}")
        return self.values[index]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ConfigKey is immutable")

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """(column, value) in the columns' order."""
        return tuple(zip(_column_index(), self.values))

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.pairs)

    def as_dict(self) -> dict[str, str]:
        return dict(zip(_column_index(), self.values))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigKey) and self.values == other.values

    def __lt__(self, other: "ConfigKey") -> bool:
        if not isinstance(other, ConfigKey):
            return NotImplemented
        return self.values < other.values

    def __hash__(self) -> int:
        return hash(self.values)

    def __repr__(self) -> str:
        return "ConfigKey(" + ", ".join(f"{name}={value!r}" for name, value in self.pairs) + ")"

    def __reduce__(self):
        return (_config_key, (self.pairs,))

    @property
    def label(self) -> str:
        """Readable name, e.g. 'cpu inductor eval fp32' (+ mode, flags, extras)."""
        if self._label is None:
            object.__setattr__(self, "_label", label_of(self.as_dict()))
        return self._label

    def baseline_key(self, baseline_stack: str) -> "ConfigKey":
        """The key of the configuration this one is compared against (core.columns): the
        baseline's stack, and what of this one the baseline shares."""
        return _baseline_key(self, baseline_stack)

    def is_baseline(self, baseline_stack: str) -> bool:
        """Whether this is a baseline configuration (its own baseline)."""
        return self == self.baseline_key(baseline_stack)


@lru_cache(maxsize=None)
def _column_index() -> dict[str, int]:
    """Each configuration column's place in ConfigKey.values."""
    return {column.name: index for index, column in enumerate(config_columns())}


# Each column reads as an attribute (a name ConfigKey already has reads through __getattr__).
for _name, _index in _column_index().items():
    if not hasattr(ConfigKey, _name):
        setattr(ConfigKey, _name, property(lambda self, at=_index: self.values[at],
                                           doc=f"The {_name} column's value."))


@lru_cache(maxsize=4096)
def _baseline_key(key: ConfigKey, baseline_stack: str) -> ConfigKey:
    return ConfigKey(**baseline_values(key.as_dict(), baseline_stack))


def _config_key(pairs: tuple[tuple[str, str], ...]) -> ConfigKey:
    return ConfigKey(**dict(pairs))


@dataclass
class RecordBase:
    """What every line has: its place, identity, status and timed runs."""

    suite: str
    model: str
    config: ConfigKey
    fingerprint: str
    status: str
    verification_code: str
    run_id: str
    timestamp: float
    per_iter_times: list[float] = field(default_factory=list)
    median_time: Optional[float] = None
    interval: Optional[Interval] = None
    error: str = ""
    skip_reason: str = ""
    accelerator_model: str = ""
    batch_size: Optional[int] = None
    #: The experiment's identity in the reports: every identity field resolved (lines of
    #: any version), from reports.read.sql.
    key: int = 0
    #: The line's id in the engine's `lines` (file index * ID_STRIDE + ordinal).
    line_id: Optional[int] = None

    @property
    def model_label(self) -> str:
        return f"{self.suite}/{self.model}" if self.suite else self.model

    @property
    def ran(self) -> bool:
        """The experiment ran to the end and has timings."""
        return self.status == Status.OK and self.median_time is not None and self.median_time > 0

    @property
    def verification_failed(self) -> bool:
        return self.verification_code in VERIFICATION_FAILED

    @property
    def passed(self) -> bool:
        """Ran, and was not found wrong by the verifier (if the verifier ran)."""
        return self.ran and not self.verification_failed

    @property
    def verified(self) -> bool:
        """Ran and the verifier gave a verdict (PASS, FAIL or EXCEPTION_RAISED)."""
        return self.status == Status.OK and self.verification_code in VERDICT_CODES

    @property
    def accurate(self) -> bool:
        """Passes the HUD's accuracy check: ran, verified, PASS."""
        return self.status == Status.OK and self.verification_code == VerificationCode.PASS

    def figure(self, name: str) -> Any:
        """The value of measured figure `name` (core.measures)."""
        return getattr(self, name)


def _python_type(kind: type) -> Any:
    return kind if kind in (str, bool) else Optional[kind]


#: One experiment (model x configuration) as the report sees it: `RecordBase` and a field
#: per measured figure (core.measures), None (text: '', flags: False) where the line has none.
Record = make_dataclass(
    "Record", [(m.name, _python_type(m.kind), field(default=m.empty)) for m in measures()],
    bases=(RecordBase,), namespace={"__module__": __name__,
                                    "__doc__": "One experiment (model x configuration) as the report sees it."})

#: The line's columns a record is made from after its configuration's: (column, base field).
_BASE_COLUMNS = (
    ("suite", "suite"), ("model", "model"), ("fp", "fingerprint"), ("key", "key"),
    ("status", "status"), ("code", "verification_code"), ("run", "run_id"), ("fin", "timestamp"),
    ("times", None), ("med", "median_time"), ("error", "error"), ("skip_reason", "skip_reason"),
    ("accel_model", "accelerator_model"), ("bs", "batch_size"), ("id", "line_id"), ("n_times", None),
)


def record_columns() -> list[str]:
    """The columns of the lines a record is made from, in `record_from_row`'s order: the
    configuration's (core.columns), the line's own, then every measured figure's."""
    return ([column.name for column in config_columns()] + [name for name, _ in _BASE_COLUMNS]
            + [m.name for m in measures()])


def record_from_row(row: tuple) -> "Record":
    """A record from a row of `record_columns()`."""
    width = len(config_columns())
    config = ConfigKey(*row[:width])
    base = dict(zip((name for name, _ in _BASE_COLUMNS), row[width:width + len(_BASE_COLUMNS)]))
    figures = dict(zip((m.name for m in measures()), row[width + len(_BASE_COLUMNS):]))
    for m in measures():
        if figures[m.name] is None:
            figures[m.name] = m.empty
    times = list(base["times"] or [])
    given = {attribute: base[name] for name, attribute in _BASE_COLUMNS if attribute is not None}
    return Record(config=config, per_iter_times=times, interval=median_interval(times), **given, **figures)
