"""benchmarks/stability/stability.py --compare: two results files of one sweep, side by side, and
their first processes alone."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.stability import stability

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "results_v1.jsonl"


def results_file(path: Path, medians: dict[str, list[float]],
                 eager: dict[str, list[float]] | None = None,
                 timing_core: str | None = None) -> Path:
    """Lines of the fixture's first experiment, one per model, with these process medians
    (and these paired eager ones)."""
    template = json.loads(FIXTURE.read_text().splitlines()[0])
    with path.open("w") as handle:
        for model, values in medians.items():
            line = json.loads(json.dumps(template))
            line["model"]["model_name"] = model
            line["experiment"]["processes"] = len(values)
            line["summary"]["processes"] = {"medians": values,
                                            "median": sorted(values)[len(values) // 2]}
            if eager is not None:
                line["summary"]["processes"]["eager_medians"] = eager[model]
            if timing_core is not None:
                line["summary"]["timing_core"] = timing_core
            handle.write(json.dumps(line) + "\n")
    return path


def test_compare_reads_two_files_and_shows_the_first_processes_too(tmp_path, capsys):
    first = results_file(tmp_path / "a.jsonl", {"mlp": [0.010, 0.010, 0.010],
                                                "cnn": [0.020, 0.020, 0.020]})
    second = results_file(tmp_path / "b.jsonl", {"mlp": [0.0105, 0.010, 0.010],
                                                 "cnn": [0.030, 0.0202, 0.0201]})
    assert stability.main_with(["--compare", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    whole, alone = out.split("their first processes alone")
    assert "+1.0%" in whole and "+0.0%" in whole  # cnn: 20.0 -> 20.2 ms, mlp equal
    assert "2 of 2 experiments agree within 3%" in whole
    assert "+50.0%" in alone and "+5.0%" in alone
    assert "0 of 2 experiments agree within 3%" in alone
    assert "eager runs paired" not in out  # these lines were not paired


def test_compare_shows_the_paired_eager_figures_apart(tmp_path, capsys):
    first = results_file(tmp_path / "a.jsonl", {"mlp": [0.010, 0.010, 0.010]},
                         eager={"mlp": [0.020, 0.021, 0.019]})
    second = results_file(tmp_path / "b.jsonl", {"mlp": [0.011, 0.011, 0.011]},
                          eager={"mlp": [0.020, 0.020, 0.020]})
    assert stability.main_with(["--compare", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    compiled, eager = out.split("the eager runs paired with them")
    assert "+10.0%" in compiled and "0 of 1 experiments agree within 3%" in compiled
    assert "+0.0%" in eager and "1 of 1 experiments agree within 3%" in eager


def with_digests(path: Path, digests: dict[str, dict]) -> Path:
    """The file's lines, each with these kernel digests (by model) where given."""
    lines = [json.loads(text) for text in path.read_text().splitlines()]
    for line in lines:
        found = digests.get(line["model"]["model_name"])
        if found is not None:
            line["summary"]["device_busy"] = {"ms": 1.0, "reason": None, "digests": found}
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_compare_says_whether_the_compiled_code_or_only_its_tuning_differs(tmp_path, capsys):
    medians = {"mlp": [0.010] * 3, "cnn": [0.020] * 3, "gru": [0.030] * 3, "rnn": [0.040] * 3}
    first = with_digests(results_file(tmp_path / "a.jsonl", medians), {
        "mlp": {"kernels": "k", "launches": "l"}, "cnn": {"kernels": "k", "launches": "l"},
        "gru": {"kernels": "k", "launches": "l"}})
    second = with_digests(results_file(tmp_path / "b.jsonl", medians), {
        "mlp": {"kernels": "k", "launches": "l"}, "cnn": {"kernels": "k", "launches": "m"},
        "gru": {"kernels": "j", "launches": "m"}, "rnn": {"kernels": "k", "launches": "l"}})
    assert stability.main_with(["--compare", str(first), str(second)]) == 0
    table = capsys.readouterr().out.split("their compiled code:")[1]
    rows = {line.split()[0]: line for line in table.splitlines()[3:] if line.strip()}
    assert set(rows) == {"mlp", "cnn", "gru"}  # rnn: digests on one side only
    assert rows["mlp"].endswith("the same launches")
    assert rows["cnn"].endswith("the same kernels tuned otherwise (other launch shapes)")
    assert rows["gru"].endswith("other kernels (the compiled code differs)")
    plain = results_file(tmp_path / "c.jsonl", medians)
    assert stability.main_with(["--compare", str(plain), str(plain)]) == 0
    assert "their compiled code" not in capsys.readouterr().out
    # Digests of a wrong shape, or lacking a kernels digest, count as none.
    odd = with_digests(results_file(tmp_path / "d.jsonl", medians), {
        "mlp": ["k", "l"], "cnn": {"kernels": None, "launches": "m"}})
    assert stability.main_with(["--compare", str(first), str(odd)]) == 0
    assert "their compiled code" not in capsys.readouterr().out


def test_compare_says_when_the_sweeps_timed_on_different_cores(tmp_path, capsys):
    first = results_file(tmp_path / "a.jsonl", {"mlp": [0.010]}, timing_core="fastest")
    second = results_file(tmp_path / "b.jsonl", {"mlp": [0.010]})  # before it was recorded
    assert stability.main_with(["--compare", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    assert "--timing-core=fastest)" in out
    assert "timed with --timing-core=fastest and any" in out
    same = results_file(tmp_path / "c.jsonl", {"mlp": [0.010]}, timing_core="fastest")
    assert stability.main_with(["--compare", str(first), str(same)]) == 0
    assert "timed with" not in capsys.readouterr().out


def test_lines_from_before_the_timing_core_was_recorded_say_it_by_their_picks():
    picked = {"summary": {"reference": {"during": {"host_ms": 0.6, "core": {"picks": []}}}}}
    unpicked = {"summary": {"reference": {"during": {"host_ms": 0.6}}}}
    assert stability.timing_core(picked) == "fastest"
    assert stability.timing_core(unpicked) == "any"
    assert stability.timing_core({"summary": {"timing_core": "any", **picked["summary"]}}) == "any"


def test_compare_names_a_missing_file(tmp_path):
    import pytest

    with pytest.raises(SystemExit, match="no results file at .*missing.jsonl"):
        stability.main_with(["--compare", str(tmp_path / "missing.jsonl"), str(tmp_path / "b")])


def with_pulses(path: Path, pulses_ms: dict[str, list[float]]) -> Path:
    """The file's lines with these host pulses read during each process's timed runs."""
    lines = [json.loads(text) for text in path.read_text().splitlines()]
    for line in lines:
        line["summary"]["reference_processes"] = [
            {"before": None, "after": None, "during": {"host_ms": value, "device": "cpu"}}
            for value in pulses_ms[line["model"]["model_name"]]]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_compare_shows_the_host_pulse_during_the_timed_runs(tmp_path, capsys):
    first = with_pulses(results_file(tmp_path / "a.jsonl", {"mlp": [0.010, 0.010, 0.010]}),
                        {"mlp": [1.0, 1.9, 1.0]})
    second = with_pulses(results_file(tmp_path / "b.jsonl", {"mlp": [0.014, 0.014, 0.010]}),
                         {"mlp": [1.8, 1.9, 1.0]})
    assert stability.main_with(["--compare", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    _, host = out.split("the host pulse during their timed runs")
    row = next(text for text in host.splitlines() if text.startswith("mlp"))
    assert row.split()[3:6] == ["1", "1.8", "+80.0%"]  # ms, the medians over processes
    assert "0 of 1 experiments agree within 3%" in host


def test_compare_shows_the_cpu_time_per_iteration_where_the_lines_have_it(tmp_path, capsys):
    files = []
    for name, milliseconds in (("a", 0.341), ("b", 0.355)):
        path = results_file(tmp_path / f"{name}.jsonl", {"mlp": [0.0005]})
        line = json.loads(path.read_text())
        line["summary"]["cpu_time_ms"] = milliseconds
        path.write_text(json.dumps(line) + "\n")
        files.append(str(path))
    assert stability.main_with(["--compare", *files]) == 0
    out = capsys.readouterr().out
    _, cpu = out.split("the timing thread's CPU time per iteration")
    row = next(text for text in cpu.splitlines() if text.startswith("mlp"))
    assert row.split()[3:6] == ["0.341", "0.355", "+4.1%"]
    assert "0 of 1 experiments agree within 3%" in cpu
    assert "in host pulses" not in out  # the lines have no pulses


def test_compare_shows_the_cpu_time_in_host_pulses_where_the_lines_have_it(tmp_path, capsys):
    """The second sweep ran on a core 1.7x slower: its CPU time moved, in pulses it held."""
    files = []
    for name, milliseconds, pulse in (("a", 0.400, 0.25), ("b", 0.680, 0.425)):
        path = results_file(tmp_path / f"{name}.jsonl", {"mlp": [0.0005]})
        line = json.loads(path.read_text())
        line["summary"]["cpu_time_ms"] = milliseconds
        line["summary"]["cpu_time"] = {"ms": milliseconds, "pulse_ms": pulse,
                                       "in_pulses": milliseconds / pulse}
        path.write_text(json.dumps(line) + "\n")
        files.append(str(path))
    assert stability.main_with(["--compare", *files]) == 0
    out = capsys.readouterr().out
    before, pulses = out.split("that CPU time in host pulses")
    _, cpu = before.split("the timing thread's CPU time per iteration")
    row = next(text for text in cpu.splitlines() if text.startswith("mlp"))
    assert row.split()[3:6] == ["0.4", "0.68", "+70.0%"]
    row = next(text for text in pulses.splitlines() if text.startswith("mlp"))
    assert row.split()[3:6] == ["1.6", "1.6", "+0.0%"]
    assert "first pulses" in pulses and "1 of 1 experiments agree within 3%" in pulses


def test_compare_leaves_the_cpu_time_out_where_no_line_has_it(tmp_path, capsys):
    first = results_file(tmp_path / "a.jsonl", {"mlp": [0.010]})
    second = results_file(tmp_path / "b.jsonl", {"mlp": [0.011]})
    assert stability.main_with(["--compare", str(first), str(second)]) == 0
    assert "CPU time per iteration" not in capsys.readouterr().out
