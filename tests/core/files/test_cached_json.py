"""Cache files written whole or not at all."""

from __future__ import annotations

import json

import pytest

from core.files.cached_json import write_json_atomically


def test_the_file_is_replaced_whole_and_no_temporary_file_stays(tmp_path):
    path = tmp_path / "host" / "answer.json"
    write_json_atomically(path, {"a": 1})
    write_json_atomically(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["answer.json"]


def test_a_value_json_cannot_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "answer.json"
    write_json_atomically(path, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomically(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["answer.json"]
