"""Run folders and the clearing of an earlier run's dumps."""

from runner.observers.layout import clear_dumps, run_dir


def test_run_dir_is_created_inside_the_experiment(tmp_path):
    assert run_dir(tmp_path, 3) == tmp_path / "run-3"
    assert (tmp_path / "run-3").is_dir()


def test_clear_dumps_removes_only_dump_folders(tmp_path):
    for name in ("run-0", "run-1", "hlo", "ir"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.txt").write_text("old")
    (tmp_path / "child.log").write_text("log")
    (tmp_path / "notes").mkdir()
    clear_dumps(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["child.log", "notes"]
    clear_dumps(tmp_path / "missing")  # nothing to clear is fine
