"""The inputs of a published table: a fidelity.sh output folder, or a part of a compact table.

benchmarks/fidelity/fidelity.sh writes, under its OUT_DIR, our results file (`ours/results.jsonl`),
the harness's CSVs (`peer-<case>.csv` and `peer-<case>_compilation_metrics.csv`) and each
run's start and end (`*.wall`). A table kept in the repository (benchmarks/tables/NAME) holds
the same inputs of all its runs in three files, each row naming the run (`part`: the folder
it came from, relative to the table, "" for the table's own):

    ours.jsonl.gz   our results lines, each with `table_part`; without the timed runs one by
                    one (`metrics.*` lists, the host's readings per timed run
                    `summary.host_windows`) and the per-process CPU and card readings
                    (`summary.cpu_processes`, `summary.gpu_processes`), which no table reads
    harness.csv     the harness's rows: part, case (the CSV's name less `peer-`), kind
                    (`_compilation_metrics` for the compile-times CSV), then its columns
    walls.csv       part, name (the .wall file's name), the file's words

A path names a run either way: an OUT_DIR, or TABLE/PART (`benchmarks/tables/X/cost1`, which
is no folder on disk). `open_run` tells them apart; the table tools read through it.

    python -m benchmarks.table_inputs compact SOURCE_DIR TABLE_DIR   # fidelity.sh folders -> table
    python -m benchmarks.table_inputs add SOURCE_DIR TABLE_DIR       # more runs, the others kept
    python -m benchmarks.table_inputs lines TABLE/PART > results.jsonl   # a part's lines, as a results file
    python -m benchmarks.table_inputs parts TABLE_DIR                 # the runs a table holds
    python -m benchmarks.table_inputs unpack TABLE/PART OUT_DIR       # a run as fidelity.sh left it
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from core.files.results_file import read_results

OURS = "ours.jsonl.gz"
HARNESS = "harness.csv"
WALLS = "walls.csv"
#: Where fidelity.sh writes our results under its OUT_DIR.
OUR_RESULTS = Path("ours") / "results.jsonl"
#: The key naming a line's run in a compact table (removed by `lines`).
PART_KEY = "table_part"
#: The companion CSV of the harness's compile times, and the one column of it kept.
METRICS_KIND = "_compilation_metrics"
COMPILE_COLUMN = "_compile.compile_inner"
#: The per-process and per-timed-run readings no table reads, dropped from a compact
#: table's lines (the host's summary of its windows, `summary.host_state`, stays).
DROPPED_SUMMARY = ("cpu_processes", "gpu_processes", "host_windows")


@dataclass
class Run:
    """One run's inputs: our lines, the harness's CSV rows by file, and the .wall files."""

    name: str
    #: Our lines of this run's folder, and of it with the folders under it (in path order).
    own_lines: list[dict[str, Any]] = field(default_factory=list)
    all_lines: list[dict[str, Any]] = field(default_factory=list)
    #: The harness's CSVs: file stem (`peer-<case>` or `peer-<case>_compilation_metrics`) -> rows.
    csvs: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    #: .wall files: stem -> their text.
    walls: dict[str, str] = field(default_factory=dict)
    #: Whether our results file is there (a run of the harness alone has none).
    has_results: bool = False

    def lines(self, below: bool = False) -> list[dict[str, Any]]:
        """Our lines of this run (with `below`, of the runs in the folders under it too)."""
        return self.all_lines if below else self.own_lines

    def harness_rows(self, stem: str) -> Optional[list[dict[str, str]]]:
        """The rows of the harness's CSV `stem` (no `.csv`), or None where there is none."""
        return self.csvs.get(stem)


# ---- reading -----------------------------------------------------------------------------

def _raw_run(folder: Path) -> Run:
    """A fidelity.sh OUT_DIR as it is on disk."""
    results = folder / OUR_RESULTS
    run = Run(str(folder), has_results=results.is_file())
    for path in sorted(folder.glob(f"**/{OUR_RESULTS}")):
        lines = read_results(path).lines
        run.all_lines += lines
        if path == results:
            run.own_lines = lines
    for path in sorted(folder.glob("peer-*.csv")):
        with path.open(newline="") as handle:
            run.csvs[path.stem] = list(csv.DictReader(handle))
    run.walls = {path.stem: " ".join(path.read_text().split())
                 for path in sorted(folder.glob("*.wall"))}
    return run


@dataclass
class Table:
    """A compact table: every run's inputs, read once."""

    root: Path
    lines: list[dict[str, Any]]
    harness: list[dict[str, str]]
    walls: list[dict[str, str]]

    @classmethod
    def read(cls, root: Path) -> "Table":
        ours = root / OURS
        lines = []
        if ours.is_file():
            with gzip.open(ours, "rt", encoding="utf-8") as handle:
                lines = [json.loads(text) for text in handle if text.strip()]
        return cls(root, lines, _read_csv(root / HARNESS), _read_csv(root / WALLS))

    def parts(self) -> list[str]:
        """The runs the table holds, in order."""
        found = [line.get(PART_KEY, "") for line in self.lines]
        found += [row["part"] for row in self.harness] + [row["part"] for row in self.walls]
        return list(dict.fromkeys(found))

    def run(self, part: str) -> Run:
        """The run `part` ("" for the table's own), as fidelity.sh left it."""
        inside = (lambda name: name.startswith(part + "/")) if part else (lambda name: name != "")
        if part and part not in self.parts() and not any(map(inside, self.parts())):
            raise FileNotFoundError(
                f"{self.root} holds no run {part!r}; its runs: "
                + ", ".join(repr(name) for name in self.parts()))
        run = Run(f"{self.root}/{part}" if part else str(self.root))
        for line in self.lines:
            name = line.get(PART_KEY, "")
            if name == part:
                run.own_lines.append(line)
                run.has_results = True
            if name == part or inside(name):
                run.all_lines.append(line)
        for row in self.harness:
            if row["part"] == part:
                stem = f"peer-{row['case']}{row['kind']}"
                run.csvs.setdefault(stem, []).append(
                    {key: value for key, value in row.items()
                     if key not in ("part", "case", "kind") and value != ""})
        run.walls = {row["name"]: row["words"] for row in self.walls if row["part"] == part}
        return run


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def is_table(folder: Path) -> bool:
    """Whether `folder` is a compact table (holds its files)."""
    return any((folder / name).is_file() for name in (OURS, HARNESS, WALLS))


class Runs:
    """Opens runs by path, reading each compact table once."""

    def __init__(self) -> None:
        self._tables: dict[Path, Table] = {}

    def table(self, root: Path) -> Table:
        key = root.resolve()
        if key not in self._tables:
            self._tables[key] = Table.read(root)
        return self._tables[key]

    def open(self, path: Path) -> Run:
        """The run at `path`: a compact table's own, a fidelity.sh OUT_DIR, or TABLE/PART."""
        path = Path(path)
        if is_table(path):
            run = self.table(path).run("")
        elif path.is_dir():
            run = _raw_run(path)
        else:
            table = next((parent for parent in path.parents if is_table(parent)), None)
            if table is None:
                raise FileNotFoundError(f"no such folder, nor a run of a table: {path}")
            run = self.table(table).run(path.relative_to(table).as_posix())
        run.name = str(path)
        return run


def open_run(path: Path) -> Run:
    """The run at `path` (see `Runs.open`)."""
    return Runs().open(path)


def exists(path: Path, runs: Optional[Runs] = None) -> bool:
    """Whether `path` names a run (a folder, or a part of a table)."""
    try:
        (runs or Runs()).open(path)
    except FileNotFoundError:
        return False
    return True


# ---- writing -----------------------------------------------------------------------------

def compact_line(line: dict[str, Any], part: str) -> dict[str, Any]:
    """The line as a compact table keeps it, named for its run."""
    kept = dict(line)
    if isinstance(kept.get("metrics"), dict):
        kept["metrics"] = {key: value for key, value in kept["metrics"].items()
                           if not isinstance(value, list)}
    if isinstance(kept.get("summary"), dict):
        kept["summary"] = {key: value for key, value in kept["summary"].items()
                           if key not in DROPPED_SUMMARY}
    kept[PART_KEY] = part
    return kept


def _part_of(folder: Path, source: Path) -> str:
    relative = folder.relative_to(source).as_posix()
    return "" if relative == "." else relative


def _gathered(source: Path) -> tuple[list[dict[str, Any]], list[str], list[dict[str, str]],
                                      list[dict[str, str]]]:
    """The compact inputs of the fidelity.sh folders under `source`: our lines, the harness's
    columns and rows, the walls."""
    lines = []
    for results in sorted(source.glob(f"**/{OUR_RESULTS}")):
        part = _part_of(results.parent.parent, source)
        lines += [compact_line(line, part) for line in read_results(results).lines]
    rows, columns = [], ["part", "case", "kind"]
    for path in sorted(source.glob("**/peer-*.csv")):
        kind = METRICS_KIND if path.stem.endswith(METRICS_KIND) else ""
        case = path.stem.removeprefix("peer-").removesuffix(kind) if kind else \
            path.stem.removeprefix("peer-")
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                if kind:
                    row = {key: row.get(key, "") for key in ("name", COMPILE_COLUMN)}
                row = {key: value for key, value in row.items() if key is not None}
                columns += [key for key in row if key not in columns]
                rows.append({"part": _part_of(path.parent, source), "case": case, "kind": kind,
                             **row})
    walls = [{"part": _part_of(path.parent, source), "name": path.stem,
              "words": " ".join(path.read_text().split())}
             for path in sorted(source.glob("**/*.wall"))]
    return lines, columns, rows, walls


def _write(table: Path, lines: list[dict[str, Any]], columns: list[str],
           rows: list[dict[str, str]], walls: list[dict[str, str]]) -> None:
    table.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    with open(table / OURS, "wb") as raw, gzip.GzipFile(
            filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as handle:
        handle.write(text.encode("utf-8"))
    _write_csv(table / HARNESS, columns, rows)
    if walls:
        _write_csv(table / WALLS, ["part", "name", "words"], walls)


def compact(source: Path, table: Path) -> None:
    """Write the compact table `table` from the fidelity.sh folders under `source`."""
    _write(table, *_gathered(source))


def add(source: Path, table: Path) -> list[str]:
    """Add the fidelity.sh folders under `source` to the compact table `table` as runs of
    their own, leaving its runs as they are (what each kept; compacting them again could
    drop more): the runs added. Raises ValueError where `table` holds one of them already."""
    kept = Table.read(table)
    lines, columns, rows, walls = _gathered(source)
    added = list(dict.fromkeys([line[PART_KEY] for line in lines]
                               + [row["part"] for row in rows + walls]))
    clash = [part for part in added if part in kept.parts()]
    if clash:
        raise ValueError(f"{table} holds {', '.join(map(repr, clash))} already: name the "
                         "new runs' folders otherwise")
    old_columns = ["part", "case", "kind"] + [key for row in kept.harness for key in row]
    merged = list(dict.fromkeys(old_columns + columns))
    _write(table, kept.lines + lines, merged, kept.harness + rows, kept.walls + walls)
    return added


def _write_csv(path: Path, columns: list[str], rows: Iterable[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def unpack(run: Run, folder: Path) -> None:
    """Write `run` out as fidelity.sh leaves an OUT_DIR: our results file, the harness's CSVs
    (with the columns kept) and the .wall files."""
    folder.mkdir(parents=True, exist_ok=True)
    if run.has_results:
        (folder / OUR_RESULTS).parent.mkdir(exist_ok=True)
        (folder / OUR_RESULTS).write_text(lines_text(run))
    for stem, rows in run.csvs.items():
        columns = list(dict.fromkeys(key for row in rows for key in row))
        _write_csv(folder / f"{stem}.csv", columns, rows)
    for name, words in run.walls.items():
        (folder / f"{name}.wall").write_text(words + "\n")


def lines_text(run: Run, below: bool = False) -> str:
    """The run's lines as a results file holds them (without `table_part`)."""
    out = io.StringIO()
    for line in run.lines(below):
        out.write(json.dumps({key: value for key, value in line.items() if key != PART_KEY})
                  + "\n")
    return out.getvalue()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("compact", help="write a compact table from fidelity.sh folders")
    make.add_argument("source", type=Path)
    make.add_argument("table", type=Path)
    more = commands.add_parser("add", help="add fidelity.sh folders to a compact table")
    more.add_argument("source", type=Path)
    more.add_argument("table", type=Path)
    show = commands.add_parser("lines", help="a run's lines, as a results file")
    show.add_argument("run", type=Path)
    show.add_argument("--below", action="store_true", help="with the runs under it")
    listed = commands.add_parser("parts", help="the runs a table holds")
    listed.add_argument("table", type=Path)
    out = commands.add_parser("unpack", help="a run, written out as fidelity.sh leaves an OUT_DIR")
    out.add_argument("run", type=Path)
    out.add_argument("out", type=Path)
    options = parser.parse_args(argv)
    try:
        if options.command == "compact":
            if not options.source.is_dir():
                parser.error(f"no such folder: {options.source}")
            compact(options.source, options.table)
        elif options.command == "add":
            if not options.source.is_dir():
                parser.error(f"no such folder: {options.source}")
            if not is_table(options.table):
                parser.error(f"not a compact table: {options.table}")
            for part in add(options.source, options.table):
                print(f"added {part!r}")
        elif options.command == "lines":
            sys.stdout.write(lines_text(open_run(options.run), options.below))
        elif options.command == "unpack":
            unpack(open_run(options.run), options.out)
        else:
            if not is_table(options.table):
                parser.error(f"not a compact table: {options.table}")
            print("\n".join(repr(part) for part in Table.read(options.table).parts()))
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
