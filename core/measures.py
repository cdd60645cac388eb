"""The measured figures of an experiment, declared once.

Every figure the reports take from a results line, besides its identity, status and timed
runs, is one `Measure` of `MEASURES`: where the line holds it, its type and unit, how tables
print it and whether less of it is better. From this table come:

- what the reports' engine reads of each line and the SQL column it computes
  (`reports/read/sql.py`: the column is named as the figure);
- the field of the report's record (`reports.read.record.Record`), named as the figure;
- the CSV's column (`reports/render/render_csv.py`), the console and Markdown tables'
  column (`reports/render/tables.py`), the dashboard's data and its experiments table
  (`reports/analyse/dashboard.py`, `reports/render/dashboard.js` reads the page's `figures`);
- compare's table of other figures that changed (`reports/analyse/compare.py`), for each
  figure with `lower_is_better` set.

Adding a figure the child writes into the line's `summary` is one entry here (see
docs/architecture.md, "Where a figure goes"). The line's timed runs and their median are
not in the table: `core.figures` reads them, and the reports' engine computes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

#: How a figure's value prints in tables (`Measure.prints`); the renderers and the
#: dashboard's script each know every one of them.
TIME, BYTES, RATIO, PERCENT, SIGNIFICANT, GIGA, NUMBER, TEXT, FLAG = (
    "time", "bytes", "ratio", "percent", "significant", "giga", "number", "text", "flag")
PRINTS = (TIME, BYTES, RATIO, PERCENT, SIGNIFICANT, GIGA, NUMBER, TEXT, FLAG)


@dataclass(frozen=True)
class Measure:
    """One measured figure of an experiment."""

    #: The figure's one name: the record's field, the SQL column, and by default the CSV
    #: column and the dashboard's key.
    name: str
    #: Where the line holds it ("summary.throughput.tflops"), in the order read: the first
    #: usable value wins. Lines written before `summary` held a figure under `metrics`.
    paths: tuple[str, ...]
    #: float, int, str or bool. A number that is not finite (or not above zero, with
    #: `positive`) reads as missing, as does a value of the wrong type.
    kind: type = float
    #: Its unit: s, B (bytes), FLOP, TFLOP/s, x (a ratio), fraction, or '' for none.
    unit: str = ""
    #: Its column in the console, Markdown and dashboard tables; None: no column.
    header: Optional[str] = None
    #: How a value prints in those tables (one of PRINTS; by default text as it is, flags
    #: as yes, numbers with 4 significant digits); the CSV holds raw values.
    prints: str = ""
    #: Whether less is better (compare says which way a change went); None: neither.
    lower_is_better: Optional[bool] = None
    #: The CSV's column: '' for the figure's name, None for no column.
    csv: Optional[str] = ""
    #: The dashboard's key of the figure in each row: '' for the name, None for none (a
    #: short key keeps a page of a hundred thousand rows small).
    key: Optional[str] = ""
    #: Another figure printed after this one in its cell, in parentheses (TFLOP/s with
    #: its percent of peak), and what shows there when that one is missing.
    note: Optional[str] = None
    note_missing: str = ""
    #: A boolean figure: the tables and dashboard show this one only where that one holds.
    when: Optional[str] = None
    #: Only values above zero count.
    positive: bool = False
    #: Needed for every line (selection, the history), not only the lines a report shows.
    every_line: bool = False
    #: For a figure that is not one value of the line: a DuckDB expression over the
    #: columns before it and the paths read (typed by `reads`), instead of `paths`.
    sql: Optional[str] = None
    #: Paths read for `sql` beyond `paths`, with their DuckDB types.
    reads: tuple[tuple[str, str], ...] = ()
    help: str = ""

    def __post_init__(self) -> None:
        if not self.prints:
            object.__setattr__(self, "prints", TEXT if self.kind is str else FLAG if self.kind is bool else NUMBER)
        if self.prints not in PRINTS:
            raise ValueError(f"measured figure {self.name!r}: prints {self.prints!r} is none of {PRINTS}")
        if self.kind not in (float, int, str, bool):
            raise ValueError(f"measured figure {self.name!r}: kind {self.kind!r} is not float, int, str or bool")

    @property
    def csv_column(self) -> Optional[str]:
        return self.name if self.csv == "" else self.csv

    @property
    def data_key(self) -> Optional[str]:
        return self.name if self.key == "" else self.key

    @property
    def empty(self) -> Any:
        """What the record holds where the line has no value."""
        return "" if self.kind is str else False if self.kind is bool else None

    @property
    def compared(self) -> bool:
        return self.lower_is_better is not None and self.kind in (int, float)


def _figure(name: str) -> tuple[str, str]:
    """A whole-experiment figure: summary.NAME, else metrics.NAME (lines before summary)."""
    return (f"summary.{name}", f"metrics.{name}")


MEASURES: tuple[Measure, ...] = (
    Measure("cold_start_time", _figure("cold_start_time"), unit="s", header="cold start",
            prints=TIME, lower_is_better=True, csv="cold_start_time_s", key="cold", every_line=True,
            help="the first run: compilation and the first iteration"),
    Measure("compile_time", _figure("compile_time_s"), unit="s", header="compile", prints=TIME,
            lower_is_better=True, csv="compile_time_s", key="comp", every_line=True,
            sql="""COALESCE({value}, CASE WHEN cold_start_time IS NOT NULL THEN (CASE WHEN med IS NOT NULL
                   THEN greatest(0.0, cold_start_time - med) ELSE cold_start_time END) END)""",
            help="the line's own, else the cold start less the median iteration"),
    Measure("peak_memory", (), int, unit="B", header="peak memory", prints=BYTES, lower_is_better=True,
            csv="peak_memory_bytes", key="mem", note="memory_kind",
            sql="COALESCE(peak_dev, peak_host)",
            help="the device's peak, else the process's peak RSS (memory_kind says which)"),
    Measure("memory_kind", (), str, csv="memory_kind", key="mk",
            sql="CASE WHEN peak_dev IS NOT NULL THEN 'device' WHEN peak_host IS NOT NULL THEN 'host' END"),
    Measure("eager_peak_device_memory", ("summary.eager_peak_device_memory_bytes",), int, unit="B",
            positive=True, every_line=True, csv=None, key=None,
            help="eager's peak, timed in the same child (the memory compression's baseline)"),
    Measure("flops_per_iteration", ("workload.flops_per_iteration",), unit="FLOP", header="FLOP/iter",
            prints=GIGA, positive=True, every_line=True, key="fl"),
    Measure("unreliable", ("summary.unreliable",), bool, prints=FLAG, key="unrel",
            help="the timings were flagged (contention, runs that vary too much)"),
    Measure("unreliable_reason", (), str, csv=None, key=None,
            sql="COALESCE(array_to_string(summary.unreliable_reasons, '; '), summary.unreliable_reason, '')",
            reads=(("summary.unreliable_reasons", "VARCHAR[]"), ("summary.unreliable_reason", "VARCHAR"))),
    Measure("host_bound", ("summary.host_bound",), bool, csv=None, key=None),
    Measure("host_bound_fraction", ("summary.host_bound_fraction",), unit="fraction", prints=PERCENT,
            key="hb", when="host_bound",
            help="CUDA: the share of timed iterations with the device waiting for the host"),
    Measure("slow_ratio", ("summary.slow_period.ratio",), unit="x", prints=RATIO, key="slow",
            help="how much slower than this host's usual figure the reference workload ran"),
    Measure("process_spread", ("summary.processes.spread",), unit="fraction", prints=PERCENT, key=None,
            help="(max - min) / median of the timing processes' medians"),
    Measure("tflops", ("summary.throughput.tflops",), unit="TFLOP/s", header="TFLOP/s (% peak)",
            prints=SIGNIFICANT, lower_is_better=False, key="tf", note="peak_fraction",
            note_missing="no peak", positive=True,
            sql=("COALESCE({value}, (CASE WHEN isfinite(flops_per_iteration / med) AND "
                 "flops_per_iteration / med > 0 THEN flops_per_iteration / med / 1e12 END))"),
            help="achieved: the line's own, else its FLOPs over its median"),
    Measure("peak_fraction", ("summary.throughput.fraction_of_peak",), unit="fraction", prints=PERCENT,
            csv="fraction_of_peak", key="pk", help="of the device's peak for the precision used"),
    Measure("peak_note", ("summary.throughput.no_peak_reason",), str, csv=None, key="pkn",
            help="why there is no percent of peak"),
    Measure("device_busy", ("summary.device_busy_ms",), unit="s", header="device busy/iter",
            prints=TIME, lower_is_better=True, csv="device_busy_s", key="db", positive=True,
            sql="{value} / 1e3",
            help="CUDA: the device's busy time per iteration, its kernels' time summed (the "
                 "line holds ms): a figure the host's speed does not move"),
    Measure("device_busy_reason", ("summary.device_busy.reason",), str, csv=None, key=None,
            help="why a line has no device busy time"),
    Measure("kernels_digest", ("summary.device_busy.digests.kernels",), str, csv=None,
            key=None, help="CUDA: a digest of the kernels one iteration launched (names, "
                           "counts): the same compiled code gives the same"),
    Measure("launches_digest", ("summary.device_busy.digests.launches",), str, csv=None,
            key=None, help="CUDA: the same with each launch's grid and block: it moves where "
                           "the compile's tuning kept another configuration for a kernel"),
    Measure("at_low_pulse", ("summary.pulse_states.at_low_pulse.median_per_iter_time",),
            unit="s", prints=TIME, lower_is_better=True, csv="at_low_pulse_s", key="alp",
            positive=True,
            help="host-bound lines: the figure with each timed run scaled to the host's low "
                 "pulse (core/host/host_state.py), as if the host ran at its fast speed "
                 "throughout: a figure the host's two states do not move"),
    Measure("cpu_time", ("summary.cpu_time_ms",), unit="s", prints=TIME, lower_is_better=True,
            csv="cpu_time_s", key="ct", positive=True, sql="{value} / 1e3",
            help="CPU: the timing thread's CPU time per iteration where that thread did the "
                 "process's work (the line holds ms): a figure other processes on its cores "
                 "do not move"),
    Measure("cpu_pulse", ("summary.cpu_time.pulse_ms",), unit="s", positive=True, csv=None,
            key=None, sql="{value} / 1e3",
            help="CPU: the timing thread's CPU time over the host pulse after each timed run "
                 "(a fixed piece of work; the line holds ms): the core's own speed, which the "
                 "CPU time per iteration follows"),
    Measure("cpu_in_pulses", ("summary.cpu_time.in_pulses",), unit="x", positive=True,
            csv=None, key=None,
            help="CPU: the timing thread's CPU time per iteration over its CPU time for the "
                 "host pulse after the run (median over runs): the work in units of the "
                 "core's own speed"),
    Measure("cpu_time_reason", ("summary.cpu_time.reason",), str, csv=None, key=None,
            help="why a line has no CPU time per iteration"),
    Measure("contended", ("summary.contended",), bool, csv=None, key=None,
            help="other processes used the child's cores during the timed runs"),
    Measure("paired_speedup", ("summary.paired_speedup.speedup", "summary.paired_speedup.median"),
            unit="x", positive=True, every_line=True, csv=None, key=None,
            help="eager timed interleaved in the same child over this stack"),
    Measure("paired_p_value", ("summary.paired_speedup.p_value",), csv=None, key=None),
    Measure("paired_method", ("summary.paired_speedup.method",), str, csv=None, key=None),
    Measure("graph_count", _figure("dynamo_graph_count"), csv=None, key=None),
    Measure("unique_graphs", _figure("dynamo_unique_graphs"), csv=None, key=None),
    Measure("graph_breaks", _figure("dynamo_graph_breaks"), csv=None, key=None),
    Measure("unique_graph_breaks", (), int, csv=None, key=None,
            sql=("COALESCE(cardinality(summary.dynamo_graph_break_reasons), "
                 "cardinality(metrics.dynamo_graph_break_reasons))"),
            reads=(("summary.dynamo_graph_break_reasons", "MAP(VARCHAR, VARCHAR)"),
                   ("metrics.dynamo_graph_break_reasons", "MAP(VARCHAR, VARCHAR)"))),
    Measure("calls_captured", ("summary.calls_captured", "summary.dynamo_counters.stats.calls_captured",
                               "metrics.calls_captured", "metrics.dynamo_counters.stats.calls_captured"),
            csv=None, key=None),
)


def measures() -> tuple[Measure, ...]:
    """Every measured figure, in the order the record, the CSV and the tables hold them."""
    return MEASURES


def measure_named(name: str) -> Measure:
    for measure in MEASURES:
        if measure.name == name:
            return measure
    raise KeyError(f"no measured figure {name!r}")


def shown_measures() -> tuple[Measure, ...]:
    """The figures with a column in the console, Markdown and dashboard tables."""
    return tuple(m for m in MEASURES if m.header is not None)


def compared_measures() -> tuple[Measure, ...]:
    """The figures compare judges: those where less (or more) is better."""
    return tuple(m for m in MEASURES if m.compared)
