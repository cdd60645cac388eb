"""benchmarks/tables: each kept folder rebuilds the table that docs/fidelity.md publishes.

The command is read from the folder's README (its fenced block: `NAME=value` lines, then
the `python benchmarks/fidelity_table.py ...` call) and run in this process; the table it
prints, its rows and its counts, must stand in the document as they are.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from benchmarks import fidelity_table

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "benchmarks" / "tables"
FIDELITY_DOC = ROOT / "docs" / "fidelity.md"
#: Each kept folder whose table a document publishes, with that document: the drawn cases
#: in docs/fidelity.md, the whole lists in their folder's README (the doc gives its counts).
PUBLISHED = {"2026-11-28-h200x4-drawn-seed7301": FIDELITY_DOC,
             "2026-11-28-h200x4-lockstep-seed7301": FIDELITY_DOC,
             "2026-11-28-h200x4-whole-lists": TABLES / "2026-11-28-h200x4-whole-lists" / "README.md"}


def readme_command(folder: Path) -> list[str]:
    """The fidelity_table.py arguments of the README's fenced command, variables expanded."""
    block = re.search(r"```\n(.*?)```", (folder / "README.md").read_text(), re.S)
    assert block, f"{folder}/README.md has no fenced command"
    variables: dict[str, str] = {}
    command = block.group(1).replace("\\\n", " ")
    for text in command.splitlines():
        assignment = re.fullmatch(r"(\w+)=(\S+)", text.strip())
        if assignment:
            variables[assignment.group(1)] = re.sub(
                r"\$(\w+)", lambda name: variables[name.group(1)], assignment.group(2))
        elif text.strip():
            words = shlex.split(re.sub(r"\$(\w+)", lambda name: variables[name.group(1)], text))
            assert words[:2] == ["python", "benchmarks/fidelity_table.py"], words[:2]
            return words[2:]
    raise AssertionError(f"{folder}/README.md: no fidelity_table.py call")


def table_lines(text: str) -> list[str]:
    """The Markdown table rows and the counted lines ("N of M rows ...") of a text, each
    stripped of indentation, in order."""
    lines = [line.strip() for line in text.splitlines()]
    return [line for line in lines
            if line.startswith("|") or re.match(r"\d+ of \d+ rows", line)]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_kept_folder_prints_the_published_table(name, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    arguments = fidelity_table.parse_arguments(readme_command(TABLES / name))
    assert fidelity_table.main(arguments.out, arguments.cases, arguments.harness_again,
                               arguments.ours_again, arguments.also) == 0
    printed = table_lines(capsys.readouterr().out)
    assert len([line for line in printed if line.startswith("| ")]) > 2
    document = table_lines(PUBLISHED[name].read_text())
    assert any(document[start:start + len(printed)] == printed
               for start in range(len(document))), f"{PUBLISHED[name]} lacks the table as printed"


def test_every_kept_folder_is_text_with_a_readme():
    for folder in (path for path in TABLES.iterdir() if path.is_dir()):
        assert (folder / "README.md").is_file(), folder
        for path in folder.rglob("*"):
            if path.is_file():
                # .wall: a case's start and end, two numbers (benchmarks/fidelity.sh)
                assert path.suffix in {".md", ".txt", ".csv", ".jsonl", ".wall"}, path
                path.read_text()  # text, not an archive
