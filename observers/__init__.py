"""The observer registry: every module here that exposes `OBSERVER` is a plug-in.

Observers add what is collected besides the timings (dynamo counters, profiles, XLA
metrics, HLO and IR dumps). Adding one is adding a module with its `OBSERVER` (and tests);
the CLI flags, the notes for stacks it does not apply to and the child environment follow.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Mapping

from core.plugins import discover
from observers.base import Observer

PACKAGE = "observers"


def all_observers() -> tuple[Observer, ...]:
    """Every observer plug-in, in their declared order."""
    found = [o for o in discover(PACKAGE, "OBSERVER").values() if isinstance(o, Observer)]
    return tuple(sorted(found, key=lambda o: (o.order, o.name)))


def add_flags(group: argparse._ArgumentGroup) -> None:
    """Add every observer's flags to an argparse group."""
    for observer in all_observers():
        for flag in observer.flags:
            if flag.choices:
                group.add_argument(flag.option, dest=flag.name, choices=flag.choices,
                                   help=flag.help)
            elif flag.value_type is not None:
                group.add_argument(flag.option, dest=flag.name, type=flag.value_type,
                                   metavar=flag.metavar, help=flag.help)
            else:
                group.add_argument(flag.option, dest=flag.name, action="store_true",
                                   help=flag.help)


def options_from(args: argparse.Namespace) -> dict[str, Any]:
    """The observability options the user gave (for RunSettings.observe)."""
    options = {}
    for observer in all_observers():
        for flag in observer.flags:
            value = getattr(args, flag.name, None)
            if value:
                options[flag.name] = value
    return options


def observability_environment(stack, settings, folder: Path,
                              environment: Mapping[str, str]) -> dict[str, str]:
    """What the timing child's environment gains from the requested, applicable observers."""
    added: dict[str, str] = {}
    for observer in all_observers():
        if observer.requested(settings) and observer.applies(stack, settings):
            added.update(observer.child_environment(stack, settings, Path(folder),
                                                    {**environment, **added}))
    return added


def inapplicable_notes(stack, settings) -> list[str]:
    """One note per requested flag that does not apply to `stack`."""
    return [note for observer in all_observers() if observer.requested(settings)
            for note in observer.inapplicable_notes(stack, settings)]
