"""The engine's own steps: finding lines by ordinal, and the parse of one file."""

import json
import random

import pytest

from reports.read import engine, sql
from tests.reports.conftest import craft_line


def _reference(data: bytes, ordinals):
    """What lines_at must find, spelled out: the non-blank lines numbered in order."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the file ends with a newline
    nonblank = [(number, text) for number, text in enumerate(lines, 1) if text.strip()]
    return {o: nonblank[o] for o in ordinals if o < len(nonblank)}, data.count(b"\n")


PIECES = [b'{"a": 1}', b"", b"  ", b"\t", b"\r", b"\x0b \x0c", b' {"b": 2}', b"\t[1]", b"not json",
          b'{"c": "' + b"z" * 40 + b'"}\r', b"{}"]


@pytest.mark.parametrize("block", [1 << 24, 8, 9, 16, 23])
def test_lines_are_numbered_as_the_reader_counts_rows(tmp_path, monkeypatch, block):
    monkeypatch.setattr(engine, "_BLOCK", block)
    rng = random.Random(block)
    path = tmp_path / "lines.jsonl"
    for _ in range(150):
        data = b"\n".join(rng.choice(PIECES) for _ in range(rng.randint(0, 25)))
        if rng.random() < 0.5:
            data += b"\n"
        path.write_bytes(data)
        nonblank = sum(1 for text in data.split(b"\n") if text.strip())
        wanted = rng.sample(range(nonblank + 2), rng.randint(0, nonblank + 2))
        expected, newlines = _reference(data, wanted)
        index = engine.index_newlines(path)
        assert (engine.lines_at(path, index, wanted), index.lines) == (expected, newlines), data


def test_the_newline_index_finds_lines_stops_when_told_and_raises_for_a_missing_file(tmp_path):
    import threading

    path = tmp_path / "lines.jsonl"
    path.write_bytes(b'{"a": 1}\n\n  \n{"b": 2}\n[1]')
    index = engine.index_newlines(path)
    assert index.ends.tolist() == [8, 9, 12, 21]
    assert index.suspects == [9, 10]
    assert engine.lines_at(path, index, [0, 1, 2]) == {0: (1, b'{"a": 1}'), 1: (4, b'{"b": 2}'), 2: (5, b"[1]")}
    stopped = threading.Event()
    stopped.set()
    assert engine.index_newlines(path, stopped).lines == 0
    with pytest.raises(FileNotFoundError):
        engine.index_newlines(tmp_path / "absent.jsonl")


def test_corrupted_lines_leave_the_other_rows_as_they_were(write_results):
    """The same lines with and without unreadable ones between them: the same records, and
    the unreadable ones reported with their line numbers (blank lines counted)."""
    from reports.read.load import load

    good = [craft_line(model, stack, times=[t, t * 1.1], run_id=f"run-{n}", timestamp=float(n))
            for n in range(3) for t, model in ((1.0, "mlp"), (2.0, "cnn")) for stack in ("eager", "inductor")]
    noisy = []
    for n, line in enumerate(good):
        noisy.append(line)
        if n % 4 == 1:
            noisy += ['{"model": {"model_name": "cut sho', "", "   "]
    clean, dirty = load([write_results(good)]), load([write_results(noisy)])

    def rows(loaded):
        return [(r.model, r.config, r.run_id, r.per_iter_times, r.median_time) for r in loaded.records]

    assert rows(dirty) == rows(clean) and len(rows(clean)) == 4
    assert [r.run_id for r in dirty.runs] == [r.run_id for r in clean.runs]
    assert not clean.bad_lines
    assert [b.lineno for b in dirty.bad_lines] == [3, 10, 17]
    assert dirty.total_lines == clean.total_lines + 3


def _records(loaded):
    return [tuple(sorted(vars(r).items(), key=lambda kv: kv[0])) for r in loaded.records]


def test_details_read_again_for_the_selected_lines_match_a_full_read(write_results, tmp_path):
    """Without the cache only the lines' own columns are kept for every line; a selected
    line's details (times, error, dynamo figures, paired speedup, flags...) are parsed
    again from its text. They are those of a read keeping every column (the cache)."""
    from reports.read.load import load

    lines = []
    for night in range(3):
        for model, t in (("mlp", 1.0), ("cnn", 2.0)):
            for stack in ("eager", "inductor"):
                line = craft_line(model, stack, times=[t, t * 1.1, t * 0.9], run_id=f"night-{night}",
                                  timestamp=100.0 * night, peak_host=1000 + night, cold_start=t * 5)
                line["summary"] = {"dynamo_graph_count": 2, "dynamo_graph_break_reasons": {"a": 1, "b": 2},
                                   "calls_captured": 7, "unreliable": night == 2,
                                   "unreliable_reasons": ["busy"],
                                   "paired_speedup": {"speedup": 1.5, "p_value": 0.01, "method": "paired"}}
                lines.append(line)
        lines.append(craft_line("cnn", "inductor", status="failed", error="Traceback\nRuntimeError: boom",
                                run_id=f"night-{night}", timestamp=100.0 * night + 1))
        lines += ["", '{"cut": ', "  "]
    lines.append(craft_line("mlp", "inductor", code="PASS", run_id="verify", timestamp=1000.0))  # lends its code
    path = write_results(lines)
    for run in (None, "night-1", "verify"):
        uncached = load([path], run=run)
        cached = load([path], run=run, cache_dir=tmp_path / "cache")
        warm = load([path], run=run, cache_dir=tmp_path / "cache")
        assert _records(uncached) == _records(cached) == _records(warm)
        assert uncached.records
    latest = {(r.model, r.config.stack): r for r in load([path]).records}
    assert latest["cnn", "inductor"].error == "RuntimeError: boom"
    assert latest["mlp", "inductor"].verification_code == "PASS" and latest["mlp", "inductor"].unreliable
    assert latest["mlp", "inductor"].per_iter_times == [1.0, 1.1, 0.9]
    assert (latest["mlp", "eager"].graph_count, latest["mlp", "eager"].unique_graph_breaks) == (2, 2)
    assert (latest["mlp", "eager"].paired_p_value, latest["mlp", "eager"].paired_method) == (0.01, "paired")


def test_a_file_rewritten_while_it_is_read_is_an_error_not_wrong_details(write_results):
    from reports.read.columnar import Engine
    from reports.errors import ReportError
    from reports.read.load import load

    path = write_results([craft_line("mlp", times=[1.0]), craft_line("cnn", times=[2.0])])
    with Engine(None) as engine:
        engine.add([path])
        path.write_text("\n".join(json.dumps(craft_line(m, times=[3.0])) for m in ("cnn", "mlp")) + "\n")
        with pytest.raises(ReportError, match="changed while it was read"):
            load([path], engine=engine)


def test_a_file_of_unreadable_lines_only_loads_nothing(write_results):
    from reports.read.load import load

    loaded = load([write_results(['{"cut', "[1]", '{"hello": 1}'])])
    assert loaded.records == [] and [b.lineno for b in loaded.bad_lines] == [1, 2]
    assert len(loaded.unusable) == 1


def test_odd_values_in_detail_fields_leave_the_line_columns_as_a_full_read_has_them(tmp_path):
    """A read without the details leaves fields out of `metrics` and `summary`; a value of
    the wrong type there must not change what is read of the line itself."""
    base = craft_line("mlp", "inductor", times=[1.0, 2.0], cold_start=3.0, peak_device=10)
    base["summary"] = {"cold_start_time": 4.0, "paired_speedup": {"speedup": 2.0}}
    lines = [json.dumps(base)]
    odd = [5, "x", [1, 2], {"a": 1}, None, True, {"a": {"b": [1]}}, [{"a": 1}]]
    for path in sql.DETAIL_READ:
        for value in odd:
            line = json.loads(json.dumps(base))
            *parents, leaf = path.split(".")
            node = line
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = value
            lines.append(json.dumps(line))
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(lines) + "\n")
    con = engine.connect(tmp_path)
    try:
        engine.scan_into(con, path, "with_details")
        engine.scan_into(con, path, "without", details=False)
        columns = ", ".join(("kind",) + engine.LINE_COLUMNS)
        full = con.execute(f"SELECT {columns} FROM with_details ORDER BY rowid").fetchall()
        slim = con.execute(f"SELECT {columns} FROM without ORDER BY rowid").fetchall()
    finally:
        con.close()
    assert len(full) == len(lines) and full == slim
    assert {row[0] for row in full} == {0}


def test_settings_are_read_only_where_a_command_names_them(write_results, report_cache):
    """report and score read a file without the cache leaving its lines' settings unread
    (compare reads them); the rows are the same either way, and the cache always keeps them."""
    from reports.analyse.settings_diff import settings_values
    from reports.read.columnar import Engine
    from reports.read.load import load

    lines = [craft_line(model, times=[1.0, 2.0]) for model in ("mlp", "cnn")]
    for n, line in enumerate(lines):
        line["environment"] = {"torch_settings": {"num_threads": n}}
    path = write_results([*lines, {"environment": {"torch_settings": {"num_threads": 7}}}, "{cut"])
    with Engine(settings=False) as bare, Engine(settings=True) as full, Engine(report_cache, settings=False) as cached:
        (without,), (read,), (kept,) = bare.add([path]), full.add([path]), cached.add([path])
        assert without.settings is None
        assert read.settings == kept.settings and settings_values([read])[1] == 3  # the nameless line's too
        with pytest.raises(ValueError, match="read without its settings"):
            settings_values([without])
        assert load([path], engine=bare).records == load([path], engine=full).records
        assert [b.lineno for b in without.bad_lines] == [b.lineno for b in read.bad_lines] == [4]
        assert without.unusable == read.unusable == [3]
