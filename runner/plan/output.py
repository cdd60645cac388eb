"""Where the results go: --output-dirname and --output-basename, checked before anything runs.

An output folder that is a file, cannot be created or is not writable (a read-only or
immutable folder, /proc), and a basename that is empty, names a folder or leads outside
the output folder are refused up front with `OutputPathError`, naming the value, so no
measurement is made that could not be recorded.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path


class OutputPathError(ValueError):
    """An output folder or results file name the runner cannot use."""


@dataclass(frozen=True)
class OutputPaths:
    """The output folder and the results file in it (both absolute)."""

    folder: Path
    results: Path


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def output_paths(dirname: str, basename: str) -> OutputPaths:
    """Check the shape of the two values (nothing is created); OutputPathError if unusable."""
    flag = f"--output-basename {basename!r}"
    if not basename.strip() or basename.endswith(("/", os.sep)):
        raise OutputPathError(f"{flag} must name a file in --output-dirname")
    if "\x00" in basename or "\x00" in dirname:
        raise OutputPathError(f"{flag if chr(0) in basename else '--output-dirname'} "
                              "contains a NUL character")
    if Path(basename).is_absolute():
        raise OutputPathError(f"{flag} must be relative to --output-dirname")
    folder = Path(os.path.normpath(Path(os.path.expanduser(dirname or ".")).absolute()))
    results = Path(os.path.normpath(folder / basename))
    if results == folder or not str(results).startswith(str(folder).rstrip(os.sep) + os.sep):
        raise OutputPathError(f"{flag} leads outside --output-dirname {dirname!r}")
    try:
        if folder.exists() and not folder.is_dir():
            raise OutputPathError(f"--output-dirname {dirname!r} is not a folder")
        if results.is_dir():
            raise OutputPathError(f"{flag} names a folder")
        if results.is_symlink() and not results.exists():
            raise OutputPathError(f"results file {str(results)!r} is a link to "
                                  f"{os.readlink(results)!r}, which does not exist")
        if results.exists() and not stat.S_ISREG(results.stat().st_mode):
            raise OutputPathError(f"{flag} is not a regular file")
    except OSError as error:
        raise OutputPathError(f"--output-dirname {dirname!r} cannot be used: "
                              f"{_reason(error)}") from None
    return OutputPaths(folder, results)


def _missing_folders(paths: OutputPaths) -> list[Path]:
    """The folders on the way to the results file that do not exist yet, deepest first."""
    missing = []
    for folder in (paths.results.parent, *paths.results.parent.parents):
        if folder.exists() or folder.is_symlink():
            break
        missing.append(folder)
    return missing


def check_output(paths: OutputPaths, dirname: str) -> None:
    """Check that the output folder can be made and written, as `prepare_output` does, but
    leave nothing behind: the folders it had to make are removed again (a request refused
    after this check leaves no empty output folder)."""
    made = _missing_folders(paths)
    try:
        prepare_output(paths, dirname)
    finally:
        for folder in made:
            try:
                folder.rmdir()
            except OSError:  # not made here after all, or something was put in it
                break


def prepare_output(paths: OutputPaths, dirname: str) -> None:
    """Create the output folder and check that results can be written there."""
    for folder in dict.fromkeys((paths.folder, paths.results.parent)):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputPathError(
                f"--output-dirname {dirname!r} cannot be created: {_reason(error)}") from None
        if not folder.is_dir():
            raise OutputPathError(f"--output-dirname {dirname!r} is not a folder")
        try:
            with tempfile.TemporaryFile(dir=folder, prefix=".write-check-"):
                pass
        except OSError as error:
            raise OutputPathError(
                f"--output-dirname {dirname!r} is not writable: {_reason(error)}") from None
    if paths.results.exists():
        try:
            with open(paths.results, "ab"):
                pass
        except OSError as error:
            raise OutputPathError(
                f"results file {str(paths.results)!r} cannot be written: {_reason(error)}") from None
