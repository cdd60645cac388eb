"""Side files are untrusted input: read with a declared shape, set aside when they do not fit."""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from core.files.cached_json import write_atomically, write_json_atomically
from core.files.side_files import (SET_ASIDE_SUFFIX, NotARegularFile, ShapeError, a_number,
                                   an_object, read_regular_file, read_side_file)


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


# Side files that are no files (issue 54, defect 10): a FIFO, a socket or a symbolic link loop
# in a side file's place is set aside without blocking and without following it.

#: Reading a side file takes microseconds; a read still blocked after this hangs.
HANG_SECONDS = 5.0


def unblock(path: Path) -> None:
    """Open a FIFO for writing and close it, so that a reader blocked on it returns."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def read_within_time(path: Path):
    """read_side_file(path) in a thread: its result, or a failure if it blocks."""
    found = {}
    reader = threading.Thread(target=lambda: found.update(
        read=read_side_file(path, lambda data: an_object(data, "the file"), "the side file")),
        daemon=True)
    reader.start()
    reader.join(HANG_SECONDS)
    if reader.is_alive():
        unblock(path.with_name(path.name + SET_ASIDE_SUFFIX))
        unblock(path)
        reader.join(HANG_SECONDS)
        pytest.fail(f"reading {path.name} blocked for {HANG_SECONDS} s")
    return found["read"]


def test_a_fifo_is_set_aside_without_blocking(tmp_path):
    path = tmp_path / "side.json"
    os.mkfifo(path)
    read = read_within_time(path)
    assert read.value is None and "a FIFO, not a regular file" in read.warning
    assert "set aside" in read.warning
    assert not path.exists() and stat.S_ISFIFO(
        os.lstat(path.with_name(path.name + SET_ASIDE_SUFFIX)).st_mode)
    write_json_atomically(path, {"a": 1})  # rebuilt
    assert read_within_time(path).value == {"a": 1}


def test_a_symbolic_link_loop_is_set_aside_not_followed(tmp_path):
    path = tmp_path / "side.json"
    path.symlink_to(path.name)  # points at itself
    read = read_within_time(path)
    assert read.value is None and "symbolic link that loops" in read.warning
    assert os.readlink(path.with_name(path.name + SET_ASIDE_SUFFIX)) == path.name
    two = tmp_path / "a.json"
    two.symlink_to("b.json")
    (tmp_path / "b.json").symlink_to("a.json")
    assert "loops" in read_within_time(two).warning


def test_a_socket_is_no_side_file(tmp_path):
    path = tmp_path / "side.json"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
        with pytest.raises(NotARegularFile, match="a socket"):
            read_regular_file(path, 100)


def test_a_link_to_a_good_file_is_read_and_a_write_replaces_a_fifo_or_a_loop(tmp_path):
    target = tmp_path / "real.json"
    target.write_text(json.dumps({"a": 2}))
    path = tmp_path / "side.json"
    path.symlink_to(target)
    assert read_within_time(path).value == {"a": 2}
    for odd in ("fifo", "loop"):
        place = tmp_path / f"{odd}.json"
        os.mkfifo(place) if odd == "fifo" else place.symlink_to(place.name)
        writer = threading.Thread(target=write_atomically, args=(place, b"{}"), daemon=True)
        writer.start()
        writer.join(HANG_SECONDS)
        assert not writer.is_alive(), f"writing over a {odd} blocked"
        assert place.read_text() == "{}"
