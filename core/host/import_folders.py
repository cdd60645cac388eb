"""Which folders of an import path can change what a process has already imported.

A process that imported some modules is unchanged by a folder added to its import path
when the folder holds none of those modules' top-level names and no installed
distribution: every name it imported resolves as before. A git worktree of a model's
repository that `experiment-runner bisect` puts on PYTHONPATH, say, changes the model the
children import, not torch. The probe's cached answer (runner/plan/probe.py) and the
server pool's templates (runner/run/process/forkserver_pool.py) are keyed without such
*plain* folders, so that the points of a bisection share them; a folder that does hold a
name they imported (a checkout of torch, say) keys them apart.
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

#: The metadata of an installed distribution (a folder of them is never plain).
DISTRIBUTION_SUFFIXES = (".dist-info", ".egg-info", ".egg-link")


def provided_names(folder: str) -> set[str]:
    """The top-level names `folder` could give an import: its entries' names up to their
    first dot (a package, a namespace folder, a module's .py, .pyc or extension). Empty
    where the folder cannot be listed."""
    try:
        with os.scandir(folder or ".") as entries:
            return {entry.name.split(".", 1)[0] for entry in entries}
    except OSError:
        return set()


def holds_distributions(folder: str) -> bool:
    try:
        with os.scandir(folder or ".") as entries:
            return any(entry.name.endswith(DISTRIBUTION_SUFFIXES) for entry in entries)
    except OSError:
        return False


def plain_folders(folders: Iterable[str]) -> list[str]:
    """The folders among `folders` that hold no installed distribution (candidates to key
    without), in order."""
    return [folder for folder in folders if not holds_distributions(folder)]


def shadowing(folders: Sequence[str], imported: Iterable[str]) -> list[str]:
    """The folders among `folders` that hold one of the top-level names `imported`."""
    names = set(imported)
    return [folder for folder in folders if provided_names(folder) & names]


def top_level_modules(module_names: Iterable[str]) -> list[str]:
    """The top-level names of `module_names` (sys.modules' keys, say), sorted."""
    return sorted({name.split(".", 1)[0] for name in module_names})
