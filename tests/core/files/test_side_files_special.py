"""Side files that are no files (issue 54, defect 10): a FIFO, a socket or a symbolic link loop
in a side file's place is set aside without blocking and without following it."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from core.files.cached_json import write_atomically, write_json_atomically
from core.files.side_files import (SET_ASIDE_SUFFIX, NotARegularFile, an_object,
                                   read_regular_file, read_side_file)

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
