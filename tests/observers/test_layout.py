"""Run folders inside a child's folder."""

from observers.layout import ir_file_stem, run_dir


def test_run_dir_is_created_inside_the_child_folder(tmp_path):
    assert run_dir(tmp_path, 3) == tmp_path / "run-3"
    assert (tmp_path / "run-3").is_dir()


def test_ir_file_names_carry_the_format():
    assert ir_file_stem("stablehlo") == "graphs.stablehlo.txt"
