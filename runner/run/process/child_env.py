"""What a child gets from the runner: its folder, its environment (variables, compile caches,
the stack's and the observers' settings, its slot's GPU) and its cores."""

from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, Optional

import backends
from core.config import RunSettings
from core.contract import Role
from observers import observability_environment
from runner.plan.matrix import PlannedExperiment
from runner.plan.slots import Slot
from runner.run.process.guard import PROJECT_ROOT, ProcessGuard

log = logging.getLogger(__name__)


#: The runner's own variables never reach a child: it reads its spec, nothing else.
RUNNER_VARIABLE_PREFIX = "EXPERIMENT_RUNNER_"

#: Variables of the runner's environment that never reach a child. PYTHONWARNINGS: a
#: warnings filter is the user's shell, not the experiment, and "error" turned third-party
#: deprecation warnings (torch's TF32 one, at every experiment's start) into failures of
#: every experiment; the child keeps Python's default filters (child/host_failures.py counts
#: a warning raised as an error, set any other way, as the host's failure).
NOT_PASSED = frozenset({"PYTHONWARNINGS"})

OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}


def child_folder(output_dir: Path, run_id: str, planned: PlannedExperiment, role: Role) -> Path:
    """The child's own folder, absolute: <experiment id>/<run id>/<role> in the output folder
    (itself resolved; nothing below it is: `make_own_folder` makes the parts real folders)."""
    return Path(os.path.realpath(output_dir)) / planned.experiment_id / run_id / role.value


#: The suffix of whatever stood where a child's folder goes and was no folder of its own.
MOVED_ASIDE_SUFFIX = ".moved-aside"


def make_own_folder(output_dir: Path, folder: Path) -> list[str]:
    """Make `folder` (inside `output_dir`) with every part below the output folder a real
    folder, so that a child writes only inside the output folder: a symbolic link in the
    place of one (to a folder elsewhere, or a loop, which `Path.resolve` cannot even
    follow) or a file is moved aside (renamed `<name>.moved-aside`; a link's target is left
    as it is) and a folder made in its place. Returns what was moved, for the line's notes;
    OSError when the folder cannot be made."""
    root = Path(os.path.realpath(output_dir))
    notes = []
    current = root
    for part in folder.relative_to(root).parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break  # the rest is made below
        if stat.S_ISDIR(mode):
            continue
        what = (f"a symbolic link (to {os.readlink(current)!r})" if stat.S_ISLNK(mode)
                else "a file, not a folder")
        aside = _free_name(current.with_name(current.name + MOVED_ASIDE_SUFFIX))
        os.rename(current, aside)
        notes.append(f"{current} was {what}; it was moved aside as {aside.name} and a folder "
                     "made in its place: a child writes only inside the output folder")
        log.warning("%s", notes[-1])
    folder.mkdir(parents=True, exist_ok=True)
    return notes


def _free_name(path: Path) -> Path:
    candidate, counter = path, 1
    while os.path.lexists(candidate):
        counter += 1
        candidate = path.with_name(f"{path.name}-{counter}")
    return candidate


def gate_path(device: str) -> Path:
    """The lock file of a GPU (as CUDA_VISIBLE_DEVICES names it) through which every CUDA
    child of this user's runners on this host takes turns on it (child/device_gate.py)."""
    folder = Path(tempfile.gettempdir()) / f"experiment-runner-{os.getuid()}" / "gpu-gates"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', device)}.gate"


def child_cores(slot: Optional[Slot], cpu_set: tuple[int, ...]) -> tuple[int, ...]:
    """The cores a child is pinned to: its slot's, else `cpu_set`, else this process's CPU set."""
    if slot is not None and slot.cpu_set:
        return slot.cpu_set
    return cpu_set or tuple(sorted(os.sched_getaffinity(0)))


def child_environment(planned: PlannedExperiment, role: Role, folder: Path, scratch: Path,
                      settings: RunSettings, guard: Optional[ProcessGuard] = None,
                      slot: Optional[Slot] = None,
                      host_variables: Mapping[str, str] = MappingProxyType({})) -> dict[str, str]:
    """The runner's environment less its own variables (and NOT_PASSED), plus what the probe established for
    the host (`host_variables`; the user's own value of one wins) and what the stack (and,
    for timing, the observers) declare."""
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(RUNNER_VARIABLE_PREFIX) and name not in NOT_PASSED}
    for name, value in host_variables.items():
        environment.setdefault(name, value)
    environment.update(OFFLINE_ENVIRONMENT)
    python_path = [str(PROJECT_ROOT)]
    if environment.get("PYTHONPATH"):
        python_path.append(environment["PYTHONPATH"])
    environment["PYTHONPATH"] = os.pathsep.join(python_path)
    # A fresh compile cache per experiment keeps cold-start latency honest, unless the
    # user keeps one across experiments (--compile-cache).
    caches = Path(settings.compile_cache) if settings.compile_cache else scratch
    environment["TORCHINDUCTOR_CACHE_DIR"] = str(caches / "inductor")
    environment["TRITON_CACHE_DIR"] = str(caches / "triton")
    # Temporary files (torch makes a folder at import) in the runner's scratch root, the
    # folder of every child's scratch: removed with it however the runner ends (a fork
    # server killed with its runner cannot remove its own). One value per runner, so that
    # the fork servers' environment stays the same for every child.
    environment["TMPDIR"] = str(scratch.parent)
    if guard is not None:
        environment.update(guard.environment())
    stack = backends.get_stack(planned.experiment.stack)
    environment.update(stack.child_environment(planned.experiment))
    if slot is not None:
        environment.update(slot.environment())
    if role is Role.TIME:
        environment.update(observability_environment(stack, settings, folder, environment))
    return environment
