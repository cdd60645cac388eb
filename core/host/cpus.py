"""Logical CPUs: Linux's CPU lists, and which CPUs share a physical core (SMT siblings).

Read by the parent, which gives each job whole physical cores (runner/plan/slots.py), and by
the child, which watches the siblings of its cores for contention (child/trust.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

#: Where Linux lists the logical CPUs that share a physical core with CPU N.
SIBLINGS_FILE = "/sys/devices/system/cpu/cpu{core}/topology/thread_siblings_list"


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """A Linux CPU list ("0,32", "0-3,8") as its CPUs."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            first, last = part.split("-")
            cpus.extend(range(int(first), int(last) + 1))
        elif part:
            cpus.append(int(part))
    return tuple(cpus)


def cpu_list(cpus: Sequence[int]) -> str:
    """CPUs as a Linux CPU list, runs joined: (0, 1, 2, 32, 33) as "0-2,32-33"."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def thread_siblings(core: int) -> tuple[int, ...]:
    """The logical CPUs that share `core`'s physical core (itself alone where Linux does not
    say)."""
    try:
        siblings = parse_cpu_list(Path(SIBLINGS_FILE.format(core=core)).read_text())
    except (OSError, ValueError):
        return (core,)
    return siblings if core in siblings else (core,)


def physical_cores(cores: Sequence[int],
                   siblings: Callable[[int], Sequence[int]] = thread_siblings,
                   ) -> list[tuple[int, ...]]:
    """`cores` grouped by physical core (SMT siblings together), ordered by lowest CPU."""
    wanted, groups, seen = set(cores), [], set()
    for core in sorted(wanted):
        if core in seen:
            continue
        group = tuple(sorted(wanted & set(siblings(core)) | {core}))
        seen.update(group)
        groups.append(group)
    return groups


def outside_siblings(cores: Sequence[int],
                     siblings: Callable[[int], Sequence[int]] = thread_siblings,
                     ) -> tuple[int, ...]:
    """The SMT siblings of `cores` that are not among them: CPUs whose load slows `cores`
    through the physical cores they share."""
    wanted = set(cores)
    return tuple(sorted({sibling for core in wanted for sibling in siblings(core)} - wanted))
