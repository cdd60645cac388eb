"""core/host/import_folders.py: which folders of an import path can change what was imported."""

from __future__ import annotations

from core.host.import_folders import (plain_folders, provided_names, shadowing,
                                      top_level_modules)


def test_a_folder_provides_its_packages_modules_and_extensions_by_their_top_level_names(tmp_path):
    (tmp_path / "package").mkdir()
    (tmp_path / "module.py").write_text("")
    (tmp_path / "extension.cpython-311-x86_64-linux-gnu.so").write_text("")
    assert provided_names(tmp_path) >= {"package", "module", "extension"}
    assert provided_names(tmp_path / "missing") == set()


def test_only_folders_without_distributions_are_plain_and_only_a_held_name_shadows(tmp_path):
    tree, site, checkout = (tmp_path / name for name in ("tree", "site", "checkout"))
    (tree / "mymodel").mkdir(parents=True)
    (site / "six-1.16.0.dist-info").mkdir(parents=True)
    (checkout / "torch").mkdir(parents=True)
    folders = [str(tree), str(site), str(checkout)]
    assert plain_folders(folders) == [str(tree), str(checkout)]
    imported = top_level_modules(["torch", "torch._dynamo", "os.path", "json"])
    assert imported == ["json", "os", "torch"]
    assert shadowing(plain_folders(folders), imported) == [str(checkout)]
