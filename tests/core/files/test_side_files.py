"""Side files are untrusted input: read with a declared shape, set aside when they do not fit."""

from __future__ import annotations

import json
import logging

import pytest

from core.files.side_files import (SET_ASIDE_SUFFIX, ShapeError, a_number, an_object,
                                      read_side_file)


def numbers(data):
    return {key: a_number(value, key) for key, value in an_object(data, "the file").items()}


def test_a_file_that_fits_is_read_and_an_absent_one_is_none(tmp_path):
    path = tmp_path / "side.json"
    assert read_side_file(path, numbers, "the side file").value is None
    path.write_text('{"a": 1, "b": 2.5}')
    read = read_side_file(path, numbers, "the side file")
    assert read.value == {"a": 1.0, "b": 2.5} and read.warning is None
    assert path.exists()


@pytest.mark.parametrize("content, reason", [
    ("not json", "Expecting value"),
    ("[1, 2]", "the file is list, not a JSON object"),
    ('{"a": "x"}', "a is str, not a number"),
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('{"a": 1, "a": 2}', "the key 'a' is given twice"),
    ("[" * 100000, "nested too deeply"),
    (b"\xff\xfe{}", "can't decode"),
])
def test_a_file_that_does_not_fit_is_set_aside_with_a_warning_naming_it(tmp_path, caplog,
                                                                         content, reason):
    path = tmp_path / "side.json"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    with caplog.at_level(logging.WARNING):
        read = read_side_file(path, numbers, "the side file")
    assert read.value is None
    assert str(path) in read.warning and reason in read.warning and "set aside" in read.warning
    assert read.warning in caplog.text
    assert not path.exists()
    aside = path.with_name(path.name + SET_ASIDE_SUFFIX)
    assert aside.read_bytes() == (content if isinstance(content, bytes) else content.encode())
    # Rebuilt: the next read finds no file, and a new one is read as usual.
    assert read_side_file(path, numbers, "the side file").warning is None
    path.write_text(json.dumps({"a": 1}))
    assert read_side_file(path, numbers, "the side file").value == {"a": 1.0}


def test_a_file_too_large_or_a_folder_is_set_aside(tmp_path):
    path = tmp_path / "side.json"
    path.write_text(json.dumps({"a": 1, "pad": 0}) + " " * 100)
    assert "larger than 50 bytes" in read_side_file(path, numbers, "it", max_bytes=50).warning
    path.mkdir()
    assert "a folder" in read_side_file(path, numbers, "it").warning
    assert not path.exists()


def test_constants_can_be_left_to_the_shape(tmp_path):
    path = tmp_path / "side.json"
    path.write_text('{"a": NaN}')
    read = read_side_file(path, lambda data: data, "it", constants=True)
    assert read.warning is None and read.value["a"] != read.value["a"]


def test_shape_errors_are_value_errors():
    assert issubclass(ShapeError, ValueError)
