"""The engine's own steps: finding lines by ordinal, and the parse of one file."""

import random

import pytest

from reports import engine


def _reference(data: bytes, ordinals):
    """What locate_lines must find, spelled out: the non-blank lines numbered in order."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the file ends with a newline
    nonblank = [(number, text) for number, text in enumerate(lines, 1) if text.strip()]
    return {o: nonblank[o] for o in ordinals if o < len(nonblank)}, data.count(b"\n")


PIECES = [b'{"a": 1}', b"", b"  ", b"\t", b"\r", b"\x0b \x0c", b' {"b": 2}', b"\t[1]", b"not json",
          b'{"c": "' + b"z" * 40 + b'"}\r', b"{}"]


@pytest.mark.parametrize("block", [1 << 24, 8, 9, 16, 23])
def test_locate_lines_numbers_lines_as_the_reader_counts_rows(tmp_path, monkeypatch, block):
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
        assert engine.locate_lines(path, wanted, count_all=True) == (expected, newlines), data
        assert engine.locate_lines(path, wanted)[0] == expected, data


def test_locate_lines_reads_nothing_when_nothing_is_wanted(tmp_path):
    assert engine.locate_lines(tmp_path / "absent.jsonl", []) == ({}, 0)
