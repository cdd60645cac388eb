"""benchmarks/table_inputs.py: a compact table reads back as the fidelity.sh folders it was
made from, run by run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import table_inputs
from benchmarks.table_inputs import Runs, compact, open_run, unpack

HARNESS = "dev,name,batch_size,speedup,abs_latency,unique_graphs,graph_breaks\n"
METRICS = "dev,name,batch_size,_compile.compile_inner,bytecode_tracing\n"


def a_line(model: str, median: float) -> dict:
    return {"model": {"model_name": model}, "experiment": {"test": "eval"}, "status": "ok",
            "summary": {"processes": {"medians": [median]}, "cpu_processes": [{"busy": 1}],
                        "host_windows": {"steal": [0.0, 0.1]}, "host_state": {"runs": 2}},
            "metrics": {"per_iter_time": [median, median], "error": None}}


def fidelity_folder(folder: Path, model: str, median: float, latency: str) -> None:
    """What fidelity.sh leaves: our results file, the harness's two CSVs, two walls."""
    (folder / "ours").mkdir(parents=True)
    (folder / "ours" / "results.jsonl").write_text(json.dumps(a_line(model, median)) + "\n")
    stem = f"peer-timm-{model}-bs8-amp-default-eval"
    (folder / f"{stem}.csv").write_text(HARNESS + f"cuda,{model},8,1.5,{latency},1,0\n")
    (folder / f"{stem}_compilation_metrics.csv").write_text(METRICS + f"cuda,{model},8,12.5,3\n")
    (folder / f"{stem}.wall").write_text("100.5 130.25\n")
    (folder / "ours-lanes.wall").write_text("100 200 2 6\n")


@pytest.fixture
def source(tmp_path: Path) -> Path:
    fidelity_folder(tmp_path / "source", "resnet18", 0.01, "4.5")
    fidelity_folder(tmp_path / "source" / "again" / "run1", "resnet50", 0.02, "9.5")
    return tmp_path / "source"


def test_each_run_of_a_compact_table_reads_as_its_folder(source, tmp_path):
    table = tmp_path / "table"
    compact(source, table)
    assert sorted(path.name for path in table.iterdir()) == ["harness.csv", "ours.jsonl.gz",
                                                             "walls.csv"]
    for part in ("", "again/run1"):
        raw, kept = open_run(source / part), open_run(table / part)
        assert [line["model"] for line in kept.lines()] == [line["model"] for line in raw.lines()]
        assert kept.walls == raw.walls
        for stem, rows in raw.csvs.items():
            if stem.endswith("_compilation_metrics"):
                # Of the compile-times CSV only the compile time is kept.
                assert kept.harness_rows(stem) == [
                    {"name": row["name"], "_compile.compile_inner": row["_compile.compile_inner"]}
                    for row in rows]
            else:
                assert kept.harness_rows(stem) == rows
    # The table's own run sees the runs under it only when asked, in the folders' order.
    assert len(open_run(table).lines()) == 1
    assert [line["model"]["model_name"] for line in open_run(table).lines(below=True)] == [
        line["model"]["model_name"] for line in open_run(source).lines(below=True)] == [
        "resnet50", "resnet18"]
    # The timed runs one by one and the per-process readings are left out; figures stay.
    line = open_run(table / "again" / "run1").lines()[0]
    assert line["metrics"] == {"error": None}
    assert "cpu_processes" not in line["summary"] and "host_windows" not in line["summary"]
    assert line["summary"]["processes"]["medians"] == [0.02]
    assert line["summary"]["host_state"] == {"runs": 2}


def test_an_unknown_run_is_named_with_the_runs_the_table_holds(source, tmp_path):
    compact(source, tmp_path / "table")
    with pytest.raises(FileNotFoundError, match="'again/run1'"):
        Runs().open(tmp_path / "table" / "again" / "run9")
    assert not table_inputs.exists(tmp_path / "nowhere")
    assert table_inputs.exists(tmp_path / "table" / "again")


def test_a_run_unpacked_is_an_out_dir_again(source, tmp_path, capsys):
    compact(source, tmp_path / "table")
    unpack(open_run(tmp_path / "table" / "again" / "run1"), tmp_path / "out")
    again = open_run(tmp_path / "out")
    assert again.lines()[0]["model"]["model_name"] == "resnet50"
    assert again.harness_rows("peer-timm-resnet50-bs8-amp-default-eval")[0]["abs_latency"] == "9.5"
    assert again.walls["ours-lanes"] == "100 200 2 6"
    assert table_inputs.main(["lines", str(tmp_path / "table" / "again" / "run1")]) == 0
    printed = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert [line["model"]["model_name"] for line in printed] == ["resnet50"]
    assert "table_part" not in printed[0]


def test_runs_added_to_a_table_leave_its_runs_as_they_were(source, tmp_path, capsys):
    table = tmp_path / "table"
    compact(source, table)
    # A run kept otherwise than compact keeps it (its timed runs one by one) stays so.
    kept = table_inputs.Table.read(table)
    kept.lines[0]["metrics"]["per_iter_time"] = [0.02, 0.02]
    columns = list(dict.fromkeys(key for row in kept.harness for key in row))
    table_inputs._write(table, kept.lines, columns, kept.harness, kept.walls)
    more = tmp_path / "more"
    fidelity_folder(more / "later", "vit_small", 0.03, "12.5")
    assert table_inputs.main(["add", str(more), str(table)]) == 0
    assert "added 'later'" in capsys.readouterr().out
    assert open_run(table / "again" / "run1").lines()[0]["metrics"]["per_iter_time"] == [
        0.02, 0.02]
    later = open_run(table / "later")
    assert later.lines()[0]["metrics"] == {"error": None}
    assert later.harness_rows("peer-timm-vit_small-bs8-amp-default-eval")[0]["abs_latency"] == \
        "12.5"
    assert later.walls["ours-lanes"] == "100 200 2 6"
    assert open_run(table).harness_rows("peer-timm-resnet18-bs8-amp-default-eval")[0][
        "abs_latency"] == "4.5"
    # The same runs again are refused by name, and the table is left as it was.
    before = (table / "ours.jsonl.gz").read_bytes()
    with pytest.raises(SystemExit):
        table_inputs.main(["add", str(more), str(table)])
    refused = capsys.readouterr().err
    assert "'later'" in refused and "already" in refused
    assert (table / "ours.jsonl.gz").read_bytes() == before
