import pytest

from reports.errors import ReportError
from reports.load import load
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


def test_missing_file_and_folder_are_clear_errors(tmp_path):
    with pytest.raises(ReportError, match="missing.jsonl.*does not exist"):
        load([tmp_path / "missing.jsonl"])
    with pytest.raises(ReportError, match="is a folder"):
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
    assert {r.config for r in records} == {records[0].config} and records[0].config.batch_size == ""


def test_a_skipped_line_has_its_reason_not_the_skip_marker_as_error(write_results):
    line = craft_line("mlp", status="skipped")
    line["skip_reason"] = "not implemented for train"
    assert line["metrics"] == {"error": "SKIP"}
    (record,) = load([write_results([line])]).records
    assert record.error == "" and record.skip_reason == "not implemented for train"
