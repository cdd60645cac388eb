import pytest

from core.files.results_file import append_line
from reports.analyse.compare import NOISE, REGRESSED, compare
from reports.errors import ReportError
from reports.read.load import load
from tests.reports.conftest import STACKS, craft_line


def test_the_configuration_carries_the_stack_label_the_line_records(write_results):
    path = write_results([craft_line("mlp", stack, times=[1.0]) for stack in STACKS])
    assert sorted(r.config.stack for r in load([path]).records) == sorted(STACKS)


def test_lines_older_than_the_stack_label_show_their_raw_values(write_results):
    old = craft_line("mlp", "PJRT+openxla", times=[1.0])
    del old["stack_label"]
    path = write_results([old])
    assert [r.config.stack for r in load([path]).records] == ["PJRT+openxla"]


def test_latest_run_wins_by_default(write_results):
    path = write_results([
        craft_line("mlp", times=[1.0, 1.0], run_id="old", timestamp=100.0),
        craft_line("mlp", times=[2.0, 2.0], run_id="new", timestamp=200.0),
        craft_line("cnn", times=[3.0, 3.0], run_id="old", timestamp=101.0),
    ])
    loaded = load([path])
    by_model = {r.model: r for r in loaded.records}
    assert by_model["mlp"].median_time == 2.0 and by_model["mlp"].run_id == "new"
    # cnn only ran in the old run: still reported.
    assert by_model["cnn"].run_id == "old"
    assert loaded.superseded == 1
    assert [r.run_id for r in loaded.runs] == ["old", "new"]


def test_a_later_verify_only_line_lends_its_code_to_the_timed_line(write_results):
    path = write_results([
        craft_line("mlp", "inductor", times=[2.0, 4.0], run_id="timed", timestamp=100.0),
        craft_line("mlp", "inductor", code="FAIL", run_id="verified", timestamp=200.0),
    ])
    (record,) = load([path]).records
    assert record.median_time == 3.0
    assert record.verification_code == "FAIL"


def test_run_selects_one_run_by_id_prefix_or_latest(write_results):
    path = write_results([
        craft_line("mlp", times=[1.0], run_id="2024-a", timestamp=100.0),
        craft_line("cnn", times=[3.0], run_id="2024-a", timestamp=101.0),
        craft_line("mlp", times=[2.0], run_id="2025-b", timestamp=200.0),
    ])
    old = load([path], run="2024-a")
    assert sorted(r.model for r in old.records) == ["cnn", "mlp"]
    assert {r.model: r.median_time for r in old.records}["mlp"] == 1.0
    assert [r.model for r in load([path], run="2025").records] == ["mlp"]
    assert [r.run_id for r in load([path], run="latest").records] == ["2025-b"]


def test_bad_run_names_the_value_and_known_runs(write_results):
    path = write_results([craft_line("mlp", times=[1.0], run_id="abc")])
    with pytest.raises(ReportError, match="'nope'.*abc"):
        load([path], run="nope")


def test_corrupted_lines_are_skipped_with_line_numbers(write_results):
    path = write_results([
        craft_line("mlp", times=[1.0]),
        '{"model": {"suite_name": "builtin", "model_na',
        "[1, 2, 3]",
        craft_line("cnn", times=[2.0]),
    ])
    loaded = load([path])
    assert sorted(r.model for r in loaded.records) == ["cnn", "mlp"]
    assert [b.lineno for b in loaded.bad_lines] == [2, 3]
    assert loaded.total_lines == 4


def test_odd_lines_never_break_loading(write_results):
    weird = craft_line("mlp", times=None, extra_metrics={"per_iter_time": ["x", None], "cold_start_time": "soon"})
    weird["unknown_key"] = {"nested": [1, 2]}
    weird["experiment"]["future_field"] = 3
    no_metrics = craft_line("cnn")
    del no_metrics["metrics"]
    no_status = craft_line("transformer_block", times=[1.0])
    del no_status["status"], no_status["verification_code"], no_status["fingerprint"]
    path = write_results([weird, no_metrics, no_status, {"model": "not a dict"}, {"hello": 1}])
    loaded = load([path])
    by_model = {r.model: r for r in loaded.records}
    assert by_model["mlp"].median_time is None and by_model["mlp"].cold_start_time is None
    assert not by_model["mlp"].ran
    assert by_model["cnn"].median_time is None
    assert by_model["transformer_block"].ran
    assert by_model["transformer_block"].fingerprint  # recomputed from model and experiment
    assert len(loaded.unusable) == 2


def test_memory_prefers_device_and_compile_time_subtracts_median(write_results):
    path = write_results([
        craft_line("mlp", times=[0.1, 0.3, 0.2], cold_start=5.0, peak_host=100, peak_device=50),
        craft_line("cnn", times=[0.1], peak_host=70),
        craft_line("transformer_block", cold_start=4.0),
    ])
    by_model = {r.model: r for r in load([path]).records}
    assert (by_model["mlp"].peak_memory, by_model["mlp"].memory_kind) == (50, "device")
    assert by_model["mlp"].compile_time == pytest.approx(5.0 - 0.2)
    assert (by_model["cnn"].peak_memory, by_model["cnn"].memory_kind) == (70, "host")
    assert by_model["transformer_block"].compile_time == 4.0


def test_several_files_are_merged(write_results):
    a = write_results([craft_line("mlp", times=[1.0], timestamp=1.0)])
    b = write_results([craft_line("mlp", times=[2.0], timestamp=2.0), craft_line("cnn", times=[1.0])])
    loaded = load([a, b])
    assert {r.model: r.median_time for r in loaded.records} == {"mlp": 2.0, "cnn": 1.0}


def test_missing_file_and_empty_folder_are_clear_errors(tmp_path):
    with pytest.raises(ReportError, match="missing.jsonl.*does not exist"):
        load([tmp_path / "missing.jsonl"])
    with pytest.raises(ReportError, match="holds no"):
        load([tmp_path])


def test_the_cold_start_entry_of_the_per_run_lists_stays_out_of_the_steady_state(write_results):
    # The runner writes the cold-start run first in the per-run lists, for PyTorch/XLA's
    # tools (which read compile time from it); the steady state must not see it.
    line = craft_line("mlp", "inductor", times=[9.0, 1.0, 2.0, 3.0], cold_start=9.0)
    line["summary"]["cold_start_entries"] = 1
    (record,) = load([write_results([line])]).records
    assert record.per_iter_times == [1.0, 2.0, 3.0] and record.median_time == 2.0
    assert record.compile_time == 7.0


def test_the_used_batch_size_does_not_split_a_configuration(write_results):
    # experiment.batch_size is the batch size used (it differs by model); the configuration
    # is grouped by the requested one, as before.
    mlp, cnn = craft_line("mlp", times=[1.0]), craft_line("cnn", times=[1.0])
    mlp["experiment"]["batch_size"], cnn["experiment"]["batch_size"] = 16, 8
    records = load([write_results([mlp, cnn])]).records
    assert {r.config for r in records} == {records[0].config}


def test_a_skipped_line_has_its_reason_not_the_skip_marker_as_error(write_results):
    line = craft_line("mlp", status="skipped")
    line["skip_reason"] = "not implemented for train"
    assert line["metrics"] == {"error": "SKIP"}
    (record,) = load([write_results([line])]).records
    assert record.error == "" and record.skip_reason == "not implemented for train"


def test_a_folder_stands_for_every_results_file_under_it(write_results, tmp_path):
    nightly = tmp_path / "nightly"
    (nightly / "b").mkdir(parents=True)
    write_results([craft_line("mlp", times=[1.0], run_id="n1", timestamp=1.0)], name="nightly/n1.jsonl")
    write_results([craft_line("mlp", times=[2.0], run_id="n2", timestamp=2.0)], name="nightly/b/n2.jsonl")
    (nightly / "notes.txt").write_text("not results")
    loaded = load([nightly])
    assert [r.run_id for r in loaded.runs] == ["n1", "n2"]
    assert [r.median_time for r in loaded.records] == [2.0]
    # A file given twice (itself and through its folder) is read once.
    assert load([nightly, nightly / "n1.jsonl"]).total_lines == 2


def test_one_file_holding_many_runs_groups_them_by_run_id_and_date(write_results):
    lines = [craft_line(m, times=[float(i + 1)], run_id=f"night-{i}", timestamp=86400.0 * i + 3600)
             for i in range(3) for m in ("mlp", "cnn")]
    loaded = load([write_results(lines)])
    assert [(r.run_id, r.lines) for r in loaded.runs] == [("night-0", 2), ("night-1", 2), ("night-2", 2)]
    assert loaded.runs[1].label == "night-1 (1970-01-02 01:00)"
    assert {r.median_time for r in loaded.records} == {3.0}
    assert {r.median_time for r in load([write_results(lines)], run="night-1").records} == {2.0}


def test_new_layout_reads_summary_first_and_lists_per_run(write_results):
    """Issue 13's line: figures in `summary`, per-run lists under `metrics`, mode, finished_at."""
    line = craft_line("mlp", "inductor", times=[0.2, 0.4, 0.3], code="PASS", batch_size=16)
    line["metrics"]["cold_start_time"] = [9.0]  # a per-run list now: not a figure
    line["summary"] = {"cold_start_time": 5.0, "peak_device_memory_bytes": 2048, "compile_time_s": 4.5,
                       "dynamo_unique_graphs": 2, "dynamo_graph_breaks": 1,
                       "dynamo_graph_break_reasons": {"data dependent": 1},
                       "paired_speedup": {"method": "paired", "speedup": 1.8, "p_value": 0.01},
                       "unreliable": True, "unreliable_reasons": ["others used 40% of the CPUs"]}
    line["experiment"]["mode"] = "max-autotune"
    line["finished_at"] = line["timestamp"] + 60
    skip = craft_line("cnn", "inductor", status="skipped")
    skip["metrics"] = {"error": "SKIP"}
    del skip["status"]
    (record, skipped) = sorted(load([write_results([line, skip])]).records, key=lambda r: r.model, reverse=True)
    assert record.cold_start_time == 5.0 and record.compile_time == 4.5
    assert (record.peak_memory, record.memory_kind) == (2048, "device")
    assert record.config.mode == "max-autotune" and "mode=max-autotune" in record.config.label
    assert record.batch_size == 16
    assert (record.unique_graphs, record.graph_breaks, record.unique_graph_breaks) == (2, 1, 1)
    assert (record.paired_speedup, record.paired_p_value, record.paired_method) == (1.8, 0.01, "paired")
    assert record.unreliable and "40%" in record.unreliable_reason
    assert record.timestamp == line["timestamp"] + 60
    assert skipped.status == "skipped"


def test_the_inductor_mode_separates_experiments(write_results):
    """Lines of one model and stack differing only by mode are two experiments, even where
    the stored fingerprint (older runners) does not tell them apart."""
    lines = []
    for mode, t in (("default", 1.0), ("cudagraphs", 0.5)):
        line = craft_line("mlp", "inductor", times=[t], run_id="r", timestamp=1.0)
        line["experiment"]["mode"] = mode
        lines.append(line)
    loaded = load([write_results(lines)])
    assert sorted((r.config.label, r.median_time) for r in loaded.records) == [
        ("cpu inductor eval fp32", 1.0), ("cpu inductor eval fp32 mode=cudagraphs", 0.5)]


def test_wrong_types_read_as_missing(write_results):
    line = craft_line("mlp", times=[1.0, 2.0, 3.0])
    line["metrics"]["per_iter_time"] = [1.0, "fast", None, 3.0]
    line["metrics"]["cold_start_time"] = {"not": "a number"}
    line["timestamp"] = "yesterday"
    line["finished_at"] = "today"
    line["experiment"]["precision"] = None
    line["summary"] = ["not", "an", "object"]
    (record,) = load([write_results([line])]).records
    assert record.median_time == 2.0 and record.per_iter_times == [1.0, 3.0]
    assert record.cold_start_time is None and record.timestamp == 0.0
    assert record.config.precision == "fp32"


def test_the_cache_reads_only_what_was_appended(write_results, tmp_path, report_cache):
    from reports.read.columnar import Engine

    path = write_results([craft_line("mlp", times=[1.0], run_id="a", timestamp=1.0),
                          "{broken"])
    with Engine(report_cache) as engine:
        (scan,) = engine.add([path])
        assert not scan.from_cache and [b.lineno for b in scan.bad_lines] == [2]
    with Engine(report_cache) as engine:
        (scan,) = engine.add([path])
        assert scan.from_cache and [b.lineno for b in scan.bad_lines] == [2]
    with open(path, "a", encoding="utf-8") as raw:
        raw.write("\n\n[1]\n")
    append_line(path, craft_line("cnn", times=[2.0], run_id="b", timestamp=2.0))
    loaded = load([path], cache_dir=report_cache)
    assert [b.lineno for b in loaded.bad_lines] == [2, 5]
    assert [r.run_id for r in loaded.runs] == ["a", "b"]
    assert sorted(r.model for r in loaded.records) == ["cnn", "mlp"]
    # An unterminated last line (a writer at work) is reported, and read again next time.
    with open(path, "a", encoding="utf-8") as raw:
        raw.write('{"model": {"model_name": "half')
    assert [b.lineno for b in load([path], cache_dir=report_cache).bad_lines] == [2, 5, 7]
    # A file replaced by another is parsed again from scratch.
    path.unlink()
    write_results([craft_line("transformer_block", times=[3.0])], name=path.name)
    fresh = load([path], cache_dir=report_cache)
    assert [r.model for r in fresh.records] == ["transformer_block"] and not fresh.bad_lines


# Reports read any line (issue 23, items 5 and 6): read it, or skip it with its number and why.

@pytest.mark.parametrize("cached", [False, True])
def test_a_line_over_duckdbs_object_size_is_read(write_results, report_cache, cached):
    big = craft_line("cnn", times=[2.0])
    big["pad"] = "x" * (34 * 2**20)  # over twice DuckDB's 16 MiB: an error even when ignoring them
    path = write_results([craft_line("mlp", times=[1.0]), big, craft_line("transformer_block", times=[3.0])])
    loaded = load([path], cache_dir=report_cache if cached else None)
    assert sorted(r.model for r in loaded.records) == ["cnn", "mlp", "transformer_block"]
    assert loaded.bad_lines == []


def test_a_line_over_the_reports_limit_is_skipped_with_its_number(write_results, monkeypatch):
    from reports.read import engine

    monkeypatch.setattr(engine, "MAX_LINE_BYTES", 20 * 2**20)
    big = craft_line("cnn", times=[2.0])
    big["pad"] = "x" * (34 * 2**20)
    path = write_results([craft_line("mlp", times=[1.0]), big, craft_line("transformer_block", times=[3.0])])
    loaded = load([path])
    assert sorted(r.model for r in loaded.records) == ["mlp", "transformer_block"]
    assert [(b.lineno, b.reason) for b in loaded.bad_lines] == [(2, f"longer than {20 * 2**20} bytes")]


@pytest.mark.parametrize("deep", [
    "[" * 5000 + "]" * 5000,  # not an object, nested
    '{"a":' * 5000 + "1" + "}" * 5000,  # an object, nested
    '{"model": {"suite_name": "builtin", "model_name": "x"}, "deep": ' + "[" * 5000 + "]" * 5000 + "}",
])
@pytest.mark.parametrize("position", ["middle", "last"])
def test_a_line_nested_5000_deep_is_read_or_skipped_with_its_number(write_results, deep, position):
    lines = [craft_line("mlp", times=[1.0]), deep] + ([craft_line("cnn", times=[2.0])] if position == "middle" else [])
    loaded = load([write_results(lines)])
    assert "mlp" in [r.model for r in loaded.records]
    skipped = [(b.lineno, b.reason) for b in loaded.bad_lines] + [(n, "unusable") for n in
                                                                   [int(u.split(" line ")[1].split()[0]) for u in loaded.unusable]]
    assert [n for n, _ in skipped] == [2], skipped


def test_flops_per_iteration_give_the_achieved_rate(write_results):
    """The line's workload.flops_per_iteration over the median time per iteration; lines
    without a count (older ones) show none."""
    counted = craft_line("mlp", times=[0.1, 0.4, 0.2])
    counted["workload"] = {"flops_per_iteration": 6e12, "parameters": {"count": 3}}
    path = write_results([counted, craft_line("cnn", times=[0.1])])
    by_model = {r.model: r for r in load([path]).records}
    assert by_model["mlp"].flops_per_iteration == 6e12
    assert by_model["mlp"].tflops == pytest.approx(6e12 / 0.2 / 1e12)
    assert by_model["cnn"].flops_per_iteration is None and by_model["cnn"].tflops is None


@pytest.mark.parametrize("case, told", [
    ("every experiment in the last run", True),
    ("one experiment only in an earlier run", True),
    ("the last run only verified one", False),
    ("--run names a run", True),
])
def test_the_newest_runs_records_are_told_from_the_latest_ones_only_where_the_same(
        write_results, case, told):
    """`Loaded.newest_records` spares the report selecting the newest run again (its latest
    changes): only where that selection would give the same records."""
    from reports.read.columnar import Engine
    from reports.read.load import select_records

    lines = [craft_line("mlp", times=[1.0, 2.0], run_id="a", timestamp=1.0),
             craft_line("cnn", times=[3.0, 4.0], run_id="a", timestamp=2.0),
             craft_line("mlp", times=[1.5, 2.5], run_id="b", timestamp=10.0)]
    if case != "one experiment only in an earlier run":
        lines.append(craft_line("cnn", times=[5.0, 6.0], run_id="b", timestamp=11.0))
    if case == "the last run only verified one":
        lines.append(craft_line("cnn", code="FAIL", run_id="c", timestamp=20.0))
        lines.append(craft_line("mlp", times=[1.0, 1.0], run_id="c", timestamp=21.0))
    path = write_results(lines)
    with Engine() as engine:
        loaded = load([path], run="a" if case.startswith("--run") else None, engine=engine)
        assert (loaded.newest_records is not None) is told
        alone, _ = select_records(engine, loaded.files, loaded.run or loaded.runs[-1].run_id)
        if told:
            assert loaded.newest_records == alone and alone
        else:
            assert alone != [r for r in loaded.records if r.run_id == "c"]  # the lent code


# Reports take an experiment's timing processes as its samples (docs/timing.md).
def _line(times, medians=None, **kwargs):
    extra = {"processes": {"count": len(medians), "medians": medians}} if medians else None
    return craft_line("mlp", "inductor", times=times, extra_metrics=extra, **kwargs)


def test_the_median_and_interval_come_from_the_processes(write_results):
    # The timed runs say 1.0, but three processes gave 2.0, 3.0 and 4.0.
    path = write_results([_line([1.0] * 12, medians=[2.0, 3.0, 4.0])])
    record = load([path]).records[0]
    assert record.per_iter_times == [2.0, 3.0, 4.0]
    assert record.median_time == 3.0
    assert (record.interval.low, record.interval.high) == (2.0, 4.0)


def test_one_process_keeps_the_timed_runs_as_samples(write_results):
    path = write_results([_line([1.0, 2.0, 3.0], medians=[2.0])])
    assert load([path]).records[0].per_iter_times == [1.0, 2.0, 3.0]


def test_compare_tests_processes_not_iterations(write_results):
    # Iterations alone would make a 10% shift certain (20 runs a side, no overlap); the
    # processes, which overlap, say it is within noise.
    base = write_results([_line([1.0 + i * 1e-4 for i in range(20)], medians=[0.9, 1.0, 1.1])])
    new = write_results([_line([1.1 + i * 1e-4 for i in range(20)], medians=[1.0, 1.1, 1.2])])
    change = compare(load([base]).records, load([new]).records).changes[0]
    assert change.ratio == pytest.approx(1.1)
    assert change.verdict == NOISE
    iterations_only = compare(
        load([write_results([_line([1.0 + i * 1e-4 for i in range(20)])])]).records,
        load([write_results([_line([1.1 + i * 1e-4 for i in range(20)])])]).records).changes[0]
    assert iterations_only.verdict == REGRESSED
