"""benchmarks/tables: each kept folder rebuilds the table that docs/fidelity.md publishes.

The command is read from the folder's README (its fenced block: `NAME=value` lines, then
the `python -m benchmarks.fidelity_table ...` call) and run in this process; the table it
prints, its rows and its counts, must stand in the document as they are.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import shlex
from pathlib import Path

import pytest

from benchmarks import fidelity_table

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "benchmarks" / "tables"
FIDELITY_DOC = ROOT / "docs" / "fidelity.md"
#: The kept folders whose tables docs/fidelity.md publishes: each README holds its table as
#: printed, and the document its counts.
PUBLISHED = ("2026-11-28-h200x4-drawn-seed7301", "2026-11-28-h200x4-lockstep-seed7301",
             "2026-11-28-h200x4-whole-lists")


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
            assert words[:3] == ["python", "-m", "benchmarks.fidelity_table"], words[:3]
            return words[3:]
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
    readme = TABLES / name / "README.md"
    document = table_lines(readme.read_text())
    assert any(document[start:start + len(printed)] == printed
               for start in range(len(document))), f"{readme} lacks the table as printed"
    counts = [line for line in printed if not line.startswith("|")]
    assert counts[0] in table_lines(FIDELITY_DOC.read_text()), f"{FIDELITY_DOC} lacks {counts[0]}"


#: What a kept folder may hold (benchmarks/tables/README.md).
KEPT = {"README.md", "ours.jsonl.gz", "harness.csv", "walls.csv", "cases.txt"}


def test_every_kept_folder_holds_its_readme_and_its_compact_inputs():
    for folder in (path for path in TABLES.iterdir() if path.is_dir()):
        assert (folder / "README.md").is_file(), folder
        names = {path.relative_to(folder).as_posix() for path in folder.rglob("*")}
        assert names <= KEPT, (folder, names - KEPT)
        with gzip.open(folder / "ours.jsonl.gz", "rt") as handle:
            lines = [json.loads(text) for text in handle]
        assert lines and all("table_part" in line and "summary" in line for line in lines)
        with (folder / "harness.csv").open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert rows and {"part", "case", "kind", "name"} <= set(rows[0])
