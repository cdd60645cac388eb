"""The layout of models/: suites/<suite>.py and builders/<suite>.py in pairs, and no cycles.

A builder never imports its suite (nor any suite), not even lazily or under TYPE_CHECKING;
suite and spec modules import no torch, timm or transformers at module level.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[2] / "models"
HEAVY = ("torch", "timm", "transformers")
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def module_files(folder: str) -> dict[str, Path]:
    return {p.stem: p for p in sorted((MODELS / folder).glob("*.py")) if not p.stem.startswith("_")}


def imports(path: Path, package: str) -> list[tuple[str, bool]]:
    """(module, at module level) for every import in the file; `from a import b` gives a.b."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, top) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                found.append((base, top))
                found.extend((f"{base}.{alias.name}", top) for alias in child.names)
            visit(child, top and not isinstance(child, FUNCTIONS))

    visit(ast.parse(path.read_text(encoding="utf-8")), True)
    return found


def test_every_suite_has_a_builder_and_every_builder_a_suite():
    assert set(module_files("suites")) == set(module_files("builders"))
    assert set(module_files("specs")) <= set(module_files("suites"))


@pytest.mark.parametrize("name", sorted(module_files("builders")))
def test_a_builder_never_imports_a_suite_module(name):
    imported = [m for m, _ in imports(module_files("builders")[name], "models.builders")]
    assert not [m for m in imported if m == "models.suites" or m.startswith("models.suites.")]


@pytest.mark.parametrize("folder", ["suites", "specs"])
def test_suite_and_spec_modules_import_no_heavy_library_at_module_level(folder):
    for name, path in module_files(folder).items():
        top_level = [m for m, top in imports(path, f"models.{folder}") if top]
        assert not [m for m in top_level if m.split(".")[0] in HEAVY], name
        assert not [m for m in top_level if m.startswith("models.builders")], name


def test_spec_modules_import_neither_suites_nor_builders():
    for name, path in module_files("specs").items():
        imported = [m for m, _ in imports(path, "models.specs")]
        assert not [m for m in imported if m.startswith(("models.suites", "models.builders"))], name


def test_import_graph_has_no_builder_to_suite_chain_and_no_cycle():
    """With grimp: chains through other modules count too (lazy imports included)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("models", cache_dir=None)
    assert not graph.chain_exists(
        importer="models.builders", imported="models.suites", as_packages=True
    )
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported != importer and graph.chain_exists(importer=imported, imported=importer):
                cycles.append((importer, imported))
    assert cycles == []


def test_no_module_reads_the_environment():
    """The runner reads environment settings and passes them to get_suite."""
    for path in sorted(MODELS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not names & {"environ", "getenv", "environb"}, path.relative_to(MODELS.parent)
