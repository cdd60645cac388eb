"""The engine's own steps: finding lines by ordinal, and the parse of one file."""

import random

import pytest

from reports import engine
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


def test_the_background_index_is_the_direct_one_and_hands_back_errors(tmp_path):
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b'{"a": 1}\n\n  \n{"b": 2}\n[1]')
    index = engine.BackgroundIndex(path).result()
    direct = engine.index_newlines(path)
    assert index.ends.tolist() == direct.ends.tolist() == [8, 9, 12, 21]
    assert index.suspects == direct.suspects == [9, 10]
    assert engine.lines_at(path, index, [0, 1, 2]) == {0: (1, b'{"a": 1}'), 1: (4, b'{"b": 2}'), 2: (5, b"[1]")}
    with pytest.raises(FileNotFoundError):
        engine.BackgroundIndex(tmp_path / "absent.jsonl").result()


def test_corrupted_lines_leave_the_other_rows_as_they_were(write_results):
    """The same lines with and without unreadable ones between them: the same records, and
    the unreadable ones reported with their line numbers (blank lines counted)."""
    from reports.load import load

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
